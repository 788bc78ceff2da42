"""The daemon's plain data: what a table is to be kept as (`Target`), what one poll saw and did
(`Observation`), and the conditions and events it reports (their types and reasons are the
named values of resources/conditions.py). Logic lives elsewhere: watcher.py fills these in,
conditions.py says which conditions and events hold, status.py turns them into the status users
read.

    target = Target("lake", "events", "s3://lake/events", poll_interval_s=30)
    obs = watcher.observe(target, now_ms)
    ready = obs.ready  # the Ready condition is True
"""

from __future__ import annotations

import enum
from collections import Counter
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from deltakeeper.maintenance.operations import Operation
from deltakeeper.maintenance.operations.outcome import Outcome
from deltakeeper.maintenance.policy import POLL_INTERVAL_MS, RESYNC_INTERVAL_MS, SMALL_FILE_BYTES
from deltakeeper.resources.conditions import ConditionStatus, ConditionType, EventType, Reason
from deltakeeper.runtime.health import Health


class ScanResult(enum.StrEnum):
    """How a DeltaLake's scan ended."""

    OK = "ok"
    UNREACHABLE = "unreachable"  # the store did not answer or refused the listing
    INVALID = "invalid"  # the lake cannot be scanned as written (URI, credentials)


@dataclass(frozen=True, slots=True)
class Problem:
    """Why a table's spec cannot be acted on at all (no storage is touched)."""

    reason: Reason
    message: str


@dataclass(frozen=True, slots=True)
class Target:
    """A table as its resource (and the policy selecting it) asks it to be kept."""

    namespace: str
    name: str
    uri: str
    generation: int = 1
    storage_options: Mapping[str, Any] = field(default_factory=dict, repr=False)
    settings: Mapping[str, Any] = field(default_factory=dict)  # policy.SETTINGS, layered
    small_file_bytes: int = SMALL_FILE_BYTES
    poll_interval_s: float = POLL_INTERVAL_MS / 1000
    suspend: bool = False
    policy_name: str | None = None
    problem: Problem | None = None
    warnings: tuple[str, ...] = ()  # acted on, but the user should look (Degraded)
    duplicates: tuple[str, ...] = ()  # other resources ("ns/name") naming the same table
    # spec.events: the source whose storage events wake the table (runtime/events.py); None:
    # polled every poll_interval_s only. With a live source, polled every resync_interval_s.
    events_source: str | None = None
    resync_interval_s: float = RESYNC_INTERVAL_MS / 1000

    @property
    def key(self) -> tuple[str, str]:
        return (self.namespace, self.name)


@dataclass(frozen=True, slots=True)
class Condition:
    type: ConditionType
    status: ConditionStatus
    reason: Reason
    message: str


@dataclass(frozen=True, slots=True)
class Event:
    type: EventType
    reason: Reason | str  # a str: an operation's own (its spec's done_reason)
    message: str


@dataclass(slots=True)
class Observation:
    """What one poll saw and did: the pieces of the table's status (status.build puts them
    together), its conditions and events, and what the metrics count."""

    polled_ms: int
    conditions: list[Condition]
    events: list[Event] = field(default_factory=list)
    outcomes: list[Outcome] = field(default_factory=list)
    requests: Counter[str] = field(default_factory=Counter)
    # status.counts(): the numbers read from the table's log; empty when it could not be read
    counts: Mapping[str, Any] = field(default_factory=dict)
    retention: Mapping[str, Any] | None = None  # Policy.retention_json(), once known
    health: Health | None = None  # once the table was read
    last_maintenance: Mapping[str, Mapping[str, Any]] = field(default_factory=dict)
    compaction: Mapping[str, Any] | None = None  # the job tracker's status, where it compacts
    checkpoint_written_ms: int | None = None
    checkpoint_bytes: int | None = None  # the newest checkpoint's files, as listed
    checkpoint_loads_all: bool = False  # the checkpoint step loads every file (writeChecksum)
    due: tuple[Operation, ...] = ()  # operations worth planning now; `maintain` runs them
    compaction_jobs: dict[str, int] = field(default_factory=dict)  # state -> jobs
    quiet: bool = False  # the log did not move: the last observation again (a new poll time)
    # the status's `events` (runtime/events.py), on tables with spec.events
    storage_events: Mapping[str, Any] | None = None

    @property
    def ready(self) -> bool:
        return any(
            c.type is ConditionType.READY and c.status is ConditionStatus.TRUE
            for c in self.conditions
        )
