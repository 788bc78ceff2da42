"""Which conditions hold for a table and which events its poll tells: the rules, in one place.

    conditions = table_conditions(target, snap, problem=None, error=None, last_maintenance={})
    events = transitions.events(conditions)  # Warning when one goes bad, Normal when it heals

Every message is scrubbed of secrets. The named values (types, statuses, reasons) are
resources/conditions.py's.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from deltakeeper.delta import features
from deltakeeper.delta.errors import (
    CatalogOwnedError,
    DeltaError,
    InvalidInputError,
    NotADeltaTableError,
    StorageUnreachableError,
    UnsupportedProtocolError,
)
from deltakeeper.delta.snapshot import SnapshotHeader
from deltakeeper.maintenance import record
from deltakeeper.maintenance.operations.outcome import Outcome, Result
from deltakeeper.maintenance.operations.outcome import RunField as R
from deltakeeper.maintenance.operations.registry import spec_of
from deltakeeper.maintenance.policy import PolicyError
from deltakeeper.resources.conditions import ConditionStatus, ConditionType, EventType, Reason
from deltakeeper.runtime.credentials import SCRUBBER
from deltakeeper.runtime.model import Condition, Event, Problem, Target

TRUE, FALSE, UNKNOWN = ConditionStatus.TRUE, ConditionStatus.FALSE, ConditionStatus.UNKNOWN
NORMAL, WARNING = EventType.NORMAL, EventType.WARNING
READY, REACHABLE, SUPPORTED, DEGRADED = (
    ConditionType.READY,
    ConditionType.STORAGE_REACHABLE,
    ConditionType.PROTOCOL_SUPPORTED,
    ConditionType.DEGRADED,
)
_NOT_CHECKED = "not checked: an earlier problem stops the poll"
_ANSWERS = "the table's store answers"


def table_conditions(
    target: Target,
    snap: SnapshotHeader | None,
    problem: Problem | None,
    error: BaseException | None,
    last_maintenance: Mapping[str, Mapping[str, Any]],
    staged: int | None = None,
) -> list[Condition]:
    """The four conditions, from what blocked the poll (if anything) and what maintenance did.
    `staged`: a catalog-managed table's staged commits newer than `snap` (Ready says them)."""
    reach = Condition(REACHABLE, UNKNOWN, Reason.NOT_CHECKED, _NOT_CHECKED)
    proto = Condition(SUPPORTED, UNKNOWN, Reason.NOT_CHECKED, _NOT_CHECKED)
    ready: Condition | None = None
    if problem is not None:
        ready = Condition(READY, FALSE, problem.reason, SCRUBBER.scrub(problem.message))
    elif error is not None:
        reach, proto, ready = _failed_poll(error, reach, proto)
    else:
        reach = Condition(REACHABLE, TRUE, Reason.REACHABLE, _ANSWERS)
    if snap is not None:
        refused = features.refusal(snap.protocol, "status")
        if refused:
            proto = Condition(SUPPORTED, FALSE, Reason.UNSUPPORTED_FEATURES, refused)
            ready = Condition(READY, FALSE, Reason.UNSUPPORTED_FEATURES, refused)
        else:
            p = snap.protocol
            known = f"reader v{p.min_reader_version}, writer v{p.min_writer_version}: all known"
            proto = Condition(SUPPORTED, TRUE, Reason.SUPPORTED, known)
    if ready is None:
        ready = _watching(target, snap, staged)
    return [ready, reach, proto, degraded(target, last_maintenance)]


def _failed_poll(
    error: BaseException, reach: Condition, proto: Condition
) -> tuple[Condition, Condition, Condition]:
    reason, message = classify(error)
    if isinstance(error, StorageUnreachableError):
        reach = Condition(REACHABLE, FALSE, reason, message)
    elif isinstance(error, (InvalidInputError, PolicyError)) and not isinstance(
        error, NotADeltaTableError
    ):
        pass  # a spec problem found before any request: the store was not asked
    else:
        reach = Condition(REACHABLE, TRUE, Reason.REACHABLE, _ANSWERS)
    if isinstance(error, UnsupportedProtocolError):
        proto = Condition(SUPPORTED, FALSE, reason, message)
    return reach, proto, Condition(READY, FALSE, reason, message)


def _watching(target: Target, snap: SnapshotHeader | None, staged: int | None) -> Condition:
    msg = f"watching version {snap.version}" if snap is not None else "watching"
    managed = features.catalog_managed(snap.protocol) if snap is not None else None
    if managed is not None:
        msg += (
            f", the newest published commit; the table is catalog-managed ({managed}) and its "
            f"catalog may have ratified newer ones ({staged or 0} staged commits are newer)"
        )
    if target.suspend:
        suspended = f"{msg}; maintenance suspended by spec.suspend"
        return Condition(READY, TRUE, Reason.SUSPENDED, suspended)
    return Condition(READY, TRUE, Reason.WATCHING, msg)


def degraded(target: Target, last_maintenance: Mapping[str, Mapping[str, Any]]) -> Condition:
    """From the latest run of each operation, not this poll's: a refused vacuum stays a
    problem until a later vacuum succeeds. A catalog-managed table's operations that its
    catalog owns are refused on every run by design: no problem, Degraded stays False with
    the reason CatalogOwned (the table is as it should be; nothing to fix here)."""
    owned = [op for op, e in last_maintenance.items() if catalog_owned(e)]
    failed = [
        (op, e)
        for op, e in last_maintenance.items()
        if e.get(R.RESULT) in (Result.FAILED, Result.REFUSED) and not catalog_owned(e)
    ]
    if failed:
        op, e = failed[0]
        failure = e[R.RESULT] == Result.FAILED
        reason = Reason.MAINTENANCE_FAILED if failure else Reason.MAINTENANCE_REFUSED
        return Condition(DEGRADED, TRUE, reason, f"{op} {e['result']}: {e.get('message')}")
    if target.duplicates:
        message = (
            f"{', '.join(target.duplicates)} also name{'s' if len(target.duplicates) == 1 else ''}"
            f" {SCRUBBER.scrub(target.uri)}: one table maintained by several resources; "
            "delete all but one"
        )
        return Condition(DEGRADED, TRUE, Reason.DUPLICATE_URI, message)
    if target.warnings:
        warning = SCRUBBER.scrub("; ".join(target.warnings))
        return Condition(DEGRADED, TRUE, Reason.POLICY_WARNING, warning)
    if owned:
        message = (
            f"no maintenance problems; the table is catalog-managed, and {', '.join(owned)} "
            "left to its catalog (refused, nothing deleted or written; name an operation in "
            "catalog.allowedOperations if the catalog permits it)"
        )
        return Condition(DEGRADED, FALSE, Reason.CATALOG_OWNED, message)
    return Condition(DEGRADED, FALSE, Reason.AS_EXPECTED, "no maintenance problems")


def catalog_owned(entry: Mapping[str, Any]) -> bool:
    """Whether a lastMaintenance entry is a run refused because a catalog owns the work."""
    return entry.get(R.RESULT) == Result.REFUSED and entry.get(R.REASON) == Reason.CATALOG_OWNED


def stalled(conditions: list[Condition], since_ms: int, interval_s: float) -> list[Condition]:
    """`conditions` with Degraded saying that no poll has finished for `since_ms`: a table
    whose loop is stuck (a store that hangs, an overloaded daemon, a long maintenance)."""
    message = (
        f"no poll has finished for {since_ms // 1000} s (poll interval {interval_s:g} s): a "
        "store that does not answer, a long maintenance run, or more tables than the daemon "
        "keeps up with; the other conditions are as of the last poll"
    )
    mark = Condition(DEGRADED, TRUE, Reason.POLLS_STALLED, message)
    return [mark if c.type is DEGRADED else c for c in conditions]


_UNREACHABLE = "check the endpoint, network and credentials"
# What to do, by reason: the hint a failed poll's message gets.
_HINTS = {
    Reason.STORAGE_UNREACHABLE: _UNREACHABLE,
    Reason.NOT_A_DELTA_TABLE: "check spec.uri points at a table's root",
    Reason.UNSUPPORTED_PROTOCOL: "upgrade deltakeeper to maintain this table",
    Reason.CORRUPT_LOG: "the log needs a repair; nothing is written meanwhile",
    Reason.INVALID_SECRET: "fix the credentials in spec.storage",
    Reason.INVALID_SPEC: "fix the DeltaTable's spec",
    Reason.INVALID_POLICY: "fix the retention settings or the table's properties",
    Reason.CATALOG_OWNED: "the table's catalog owns this work",
}


def _reason_of(error: BaseException) -> Reason:
    """The reason a failed poll gives: the library's errors carry theirs (delta/errors.py)."""
    if isinstance(error, DeltaError):
        return Reason(error.reason)
    if isinstance(error, PolicyError):
        return Reason.INVALID_POLICY
    if isinstance(error, OSError):
        return Reason.STORAGE_UNREACHABLE
    return Reason.ERROR


def classify(error: BaseException) -> tuple[Reason, str]:
    """The reason an error gives a failed poll, and its message with a hint what to do."""
    reason = _reason_of(error)
    if reason not in _HINTS:
        return Reason.ERROR, SCRUBBER.scrub(f"{type(error).__name__}: {error}")
    text = str(error)
    # Storage errors already say what to check; do not say it twice.
    return reason, SCRUBBER.scrub(text if "check" in text else f"{text}; {_HINTS[reason]}")


def healthy(kind: ConditionType) -> ConditionStatus:
    """The status of a condition of this type when all is well (Degraded is the odd one)."""
    return FALSE if kind is DEGRADED else TRUE


class Transitions:
    """Events for conditions that changed since the last poll: Warning when one goes bad,
    Normal when it heals. Not thread-safe (one poll at a time)."""

    def __init__(self) -> None:
        self.last: dict[ConditionType, Condition] = {}

    def events(self, conditions: list[Condition]) -> list[Event]:
        events: list[Event] = []
        for c in conditions:
            before = self.last.get(c.type)
            self.last[c.type] = c
            if before is not None and (before.status, before.reason) == (c.status, c.reason):
                continue
            bad = (c.type is DEGRADED) == (c.status is TRUE)
            if any(e.reason == c.reason for e in events):
                continue  # Ready and StorageReachable often fail for one reason: one event
            if bad and c.status is not UNKNOWN:
                events.append(Event(WARNING, c.reason, c.message))
            elif before is not None and c.status is healthy(c.type):
                events.append(Event(NORMAL, c.reason, c.message))
        return events


def merged(done: list[Event], transitions: list[Event]) -> list[Event]:
    """The outcomes' events, then the condition changes they did not already say."""
    said = {(e.type, e.reason) for e in done}
    return [*done, *(e for e in transitions if (e.type, e.reason) not in said)]


def outcome_events(outcomes: list[Outcome]) -> list[Event]:
    events = []
    for o in outcomes:
        spec = spec_of(o.operation)
        if o.result is Result.STARTED:
            events.append(Event(NORMAL, spec.started_reason, f"{o.operation}: {o.message}"))
        warned = spec.warning(o) if o.result is Result.DONE else None
        if warned is not None:
            events.append(Event(WARNING, *warned))
        if o.result is Result.DONE:
            # A Spark job's message names the engine and why: it is the event's.
            said = o.message if record.on_spark(o) else spec.done_message(o)
            events.append(Event(NORMAL, spec.done_reason, f"{said} in {o.seconds:.1f}s"))
        elif o.result is Result.DRY_RUN and spec.dry_run_event is not None:
            reason, message = spec.dry_run_event(o)
            events.append(Event(NORMAL, reason, message))
        elif o.result is Result.REFUSED and isinstance(o.error, CatalogOwnedError):
            continue  # by design, every run: Degraded's reason CatalogOwned says it once
        elif o.result in (Result.FAILED, Result.REFUSED):
            failed = o.result is Result.FAILED
            reason = Reason.MAINTENANCE_FAILED if failed else Reason.MAINTENANCE_REFUSED
            events.append(Event(WARNING, reason, f"{o.operation}: {o.message}"))
    return events


def table_found(lake: str, path: str, found: bool, kept: str = "") -> Condition:
    """A lake's table's TableFound condition; `kept` says what became of a table not found."""
    if found:
        message = f"the last scan of DeltaLake {lake} found {path}"
        return Condition(ConditionType.TABLE_FOUND, TRUE, Reason.FOUND, message)
    message = f"the last scan of DeltaLake {lake} did not find {path}; {kept}".rstrip("; ")
    return Condition(ConditionType.TABLE_FOUND, FALSE, Reason.NOT_FOUND, message)
