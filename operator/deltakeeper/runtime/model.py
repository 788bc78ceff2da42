"""The daemon's plain data: what a table is to be kept as (`Target`), what one poll saw and did
(`Observation`), and the conditions and events it reports, with every condition type and
reason as a named value. Logic lives elsewhere: watcher.py fills these in, conditions.py says
which conditions and events hold, status.py turns them into the status users read.

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
from deltakeeper.maintenance.policy import POLL_INTERVAL_MS, SMALL_FILE_BYTES
from deltakeeper.runtime.health import Health


class ConditionType(enum.StrEnum):
    READY = "Ready"
    STORAGE_REACHABLE = "StorageReachable"
    PROTOCOL_SUPPORTED = "ProtocolSupported"
    DEGRADED = "Degraded"  # the odd one: True is the bad state
    TABLE_FOUND = "TableFound"  # a DeltaLake's table: did the lake's last good scan find it


# What every DeltaTable's status carries, in this order.
TABLE_CONDITIONS = (
    ConditionType.READY,
    ConditionType.STORAGE_REACHABLE,
    ConditionType.PROTOCOL_SUPPORTED,
    ConditionType.DEGRADED,
)


class ConditionStatus(enum.StrEnum):
    TRUE = "True"
    FALSE = "False"
    UNKNOWN = "Unknown"


class EventType(enum.StrEnum):
    NORMAL = "Normal"
    WARNING = "Warning"


class Reason(enum.StrEnum):
    """Every reason a condition or an event gives (`kubectl describe` shows them)."""

    # A table the poll can read.
    WATCHING = "Watching"
    SUSPENDED = "Suspended"
    REACHABLE = "Reachable"
    SUPPORTED = "Supported"
    NOT_CHECKED = "NotChecked"  # an earlier problem stopped the poll
    AS_EXPECTED = "AsExpected"
    # A spec that cannot be acted on (no storage is touched).
    INVALID_SPEC = "InvalidSpec"
    POLICY_NOT_FOUND = "PolicyNotFound"
    SECRET_NOT_FOUND = "SecretNotFound"
    SECRET_UNREADABLE = "SecretUnreadable"
    INVALID_SECRET = "InvalidSecret"
    INVALID_POLICY = "InvalidPolicy"
    # A table the poll cannot read.
    STORAGE_UNREACHABLE = "StorageUnreachable"
    NOT_A_DELTA_TABLE = "NotADeltaTable"
    UNSUPPORTED_PROTOCOL = "UnsupportedProtocol"
    UNSUPPORTED_FEATURES = "UnsupportedFeatures"
    CORRUPT_LOG = "CorruptLog"
    ERROR = "Error"  # anything else: a bug, named by its exception
    # Degraded: maintenance ran into trouble, or the user should look.
    MAINTENANCE_FAILED = "MaintenanceFailed"
    MAINTENANCE_REFUSED = "MaintenanceRefused"
    DUPLICATE_URI = "DuplicateUri"
    POLICY_WARNING = "PolicyWarning"
    POLLS_STALLED = "PollsStalled"  # no poll finished in STALL_INTERVALS poll intervals
    # Events of maintenance done.
    CHECKPOINTED = "Checkpointed"
    CHECKPOINT_REPAIRED = "CheckpointRepaired"
    COMPACTION_STARTED = "CompactionStarted"
    SPARK_JOB_STARTED = "SparkJobStarted"  # a checkpoint or vacuum on Spark
    COMPACTED = "Compacted"
    LOG_CLEANED = "LogCleaned"
    VACUUMED = "Vacuumed"
    VACUUM_DRY_RUN = "VacuumDryRun"
    STATS_COMPUTED = "StatsComputed"
    LOG_COMPACTED = "LogCompacted"
    MANIFESTS_WRITTEN = "ManifestsWritten"
    # DeltaLakes and their tables.
    SCANNED = "Scanned"
    LISTED = "Listed"
    SCAN_FAILED = "ScanFailed"
    APPLY_FAILED = "ApplyFailed"
    FOUND = "Found"
    NOT_FOUND = "NotFound"
    TABLE_FOUND = "TableFound"
    TABLE_GONE = "TableGone"


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
    vacuum_schedule: str | None = None
    vacuum_dry_run: bool = False
    policy_name: str | None = None
    problem: Problem | None = None
    warnings: tuple[str, ...] = ()  # acted on, but the user should look (Degraded)
    duplicates: tuple[str, ...] = ()  # other resources ("ns/name") naming the same table

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
    reason: Reason
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

    @property
    def ready(self) -> bool:
        return any(
            c.type is ConditionType.READY and c.status is ConditionStatus.TRUE
            for c in self.conditions
        )
