"""One watched table: observe it, run the maintenance that is due, describe the result.

This is the body of the watch loop that the operator (k8s/) and standalone mode share; it knows
nothing of Kubernetes. `TableWatcher.observe` and `.maintain` block on storage, so the loop runs
them off its event loop. What they return is plain data: the status fields of DESIGN.md,
conditions, events and the maintenance outcomes. Every message is scrubbed of secrets.
"""

from __future__ import annotations

import enum
import logging
from collections import Counter
from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from typing import Any

from deltakeeper.delta import features
from deltakeeper.delta.errors import (
    CorruptLogError,
    DeltaError,
    InvalidCredentialsError,
    InvalidInputError,
    NotADeltaTableError,
    StorageUnreachableError,
    UnsupportedProtocolError,
)
from deltakeeper.delta.snapshot import Snapshot
from deltakeeper.delta.summary import summarize
from deltakeeper.delta.table import Table, open_table
from deltakeeper.maintenance import executor, planner, schedule
from deltakeeper.maintenance.compaction_plan import CompactionPlan
from deltakeeper.maintenance.executor import Compactor, Result
from deltakeeper.maintenance.policy import (
    COMPACTION_DEADLINE_MS,
    POLL_INTERVAL_MS,
    SMALL_FILE_BYTES,
    Policy,
    PolicyError,
    effective,
)
from deltakeeper.runtime.credentials import SCRUBBER
from deltakeeper.runtime.jobs import JobTracker
from deltakeeper.units import format_bytes, rfc3339

log = logging.getLogger("deltakeeper.watcher")

CONDITIONS = ("Ready", "StorageReachable", "ProtocolSupported", "Degraded")


@dataclass(frozen=True)
class Problem:
    """Why a table's spec cannot be acted on at all (no storage is touched)."""

    reason: str  # InvalidSpec | SecretNotFound | PolicyNotFound ...
    message: str


@dataclass(frozen=True)
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


class ConditionStatus(enum.StrEnum):
    TRUE = "True"
    FALSE = "False"
    UNKNOWN = "Unknown"


@dataclass(frozen=True)
class Condition:
    type: str
    status: ConditionStatus
    reason: str
    message: str


@dataclass(frozen=True)
class Event:
    type: str  # Normal | Warning
    reason: str
    message: str


@dataclass
class Observation:
    """What one poll saw and did."""

    status: dict[str, Any]
    conditions: list[Condition]
    events: list[Event] = field(default_factory=list)
    outcomes: list[executor.Outcome] = field(default_factory=list)
    requests: Counter[str] = field(default_factory=Counter)
    checkpoint_written_ms: int | None = None
    due: tuple[str, ...] = ()  # operations worth planning now; `maintain` runs them
    compaction_jobs: dict[str, int] = field(default_factory=dict)  # state -> jobs

    @property
    def ready(self) -> bool:
        return any(c.type == "Ready" and c.status == ConditionStatus.TRUE for c in self.conditions)


class TableWatcher:
    """The state kept between polls of one table; not thread-safe (one poll at a time)."""

    def __init__(
        self,
        watched_since_ms: int,
        last_maintenance: Mapping[str, Any] | None = None,
        compactor: Compactor | None = None,  # None: compaction is never planned here
    ):
        self.watched_since_ms = watched_since_ms
        self.last_maintenance: dict[str, dict[str, Any]] = dict(last_maintenance or {})
        self.compactions = JobTracker(compactor, self.last_maintenance.get("compaction"))
        self.last_run_ms = {
            op: int(entry["timeMs"])
            for op, entry in self.last_maintenance.items()
            if isinstance(entry, dict) and isinstance(entry.get("timeMs"), int)
        }
        self._opened: tuple[str, str] | None = None
        self._table: Table | None = None
        self._snap: Snapshot | None = None
        self._summary: dict[str, Any] = {}
        self._conditions: dict[str, Condition] = {}
        self._requests_seen: Counter[str] = Counter()
        self._policy: Policy | None = None
        self._target: Target | None = None
        self._last: Observation | None = None  # the last full observation, for quiet polls

    # -- observe ------------------------------------------------------------------------------
    def observe(self, target: Target, now_ms: int) -> Observation:
        """Read the table's log position (one listing when nothing changed) and its health."""
        same_target, self._target = target is self._target, target
        if target.problem is not None:
            self._snap = self._last = None
            return self._result(target, now_ms, problem=target.problem)
        try:
            table = self._open(target, same_target)
            self._adopt(target)
            finished = self.compactions.check(table, now_ms)  # before the refresh: its commit
            changed = self._refresh(table)
            if changed or not same_target or self._policy is None:
                self._policy = effective(self._snap.metadata.configuration, **target.settings)  # type: ignore[union-attr]
        except Exception as e:  # store clients raise their own types; each becomes a condition
            if not isinstance(e, (DeltaError, PolicyError, OSError)):
                log.warning("%s/%s: unexpected %s", *target.key, type(e).__name__, exc_info=True)
            self._snap = self._last = None
            return self._result(target, now_ms, error=e)
        if finished is not None:
            obs = self._finished(target, finished, now_ms)
        elif same_target and not changed and self._last is not None:
            obs = self._quiet(now_ms)
        else:
            obs = self._result(target, now_ms)
        if obs.ready and not target.suspend and not self._snap.unsupported_features:  # type: ignore[union-attr]
            try:
                obs.due = schedule.operations_to_plan(
                    now_ms, self.last_run_ms, changed, target.vacuum_schedule, self.watched_since_ms
                )
            except ValueError as e:  # a schedule croniter cannot step through
                self._last = None
                return self._result(target, now_ms, error=PolicyError(f"vacuum.schedule: {e}"))
            obs.due = self._with_compaction(obs.due, now_ms)
        return obs

    def _adopt(self, target: Target) -> None:
        """Follow a job left running by an earlier operator; if the jobs cannot be listed
        now, the next poll looks again (and no second job starts meanwhile: the launcher
        refuses while one runs)."""
        if self.compactions.adopted:
            return
        deadline_ms = target.settings.get("compaction_deadline_ms") or COMPACTION_DEADLINE_MS
        try:
            self.compactions.adopt(target.key, deadline_ms / 1000)
        except Exception as e:
            log.warning(
                "%s/%s: cannot look for a running compaction job yet (%s)",
                *target.key,
                SCRUBBER.scrub(f"{type(e).__name__}: {e}"),
            )

    def _with_compaction(self, due: tuple[str, ...], now_ms: int) -> tuple[str, ...]:
        """`due` with compaction after the checkpoint, when a job may start now."""
        assert self._policy is not None and self._snap is not None
        if not self.compactions.due(now_ms, self._policy.compaction, self._snap.version):
            return due
        after = 1 if due[:1] == ("checkpoint",) else 0
        return (*due[:after], "compaction", *due[after:])

    def _finished(self, target: Target, outcome: executor.Outcome, now_ms: int) -> Observation:
        """A poll that saw the table's compaction job end: recorded, evented, published."""
        outcome.message = SCRUBBER.scrub(outcome.message)
        assert self._snap is not None
        self._record([outcome], self._snap.version, now_ms)
        obs = self._result(target, now_ms, outcomes=[outcome])
        obs.events = _merged(_outcome_events([outcome]), obs.events)
        obs.outcomes = [outcome]
        return obs

    def _quiet(self, now_ms: int) -> Observation:
        """The last observation again, for a table whose log did not move: the cheap path."""
        last = self._last
        assert last is not None
        status = {**last.status, "lastPoll": rfc3339(now_ms)}
        return Observation(
            status,
            last.conditions,
            [],
            [],
            self._new_requests(),
            last.checkpoint_written_ms,
            compaction_jobs=self.compactions.jobs(),
        )

    def _open(self, target: Target, same_target: bool) -> Table:
        if same_target and self._table is not None:
            return self._table
        opened = (target.uri, repr(sorted(target.storage_options.items())))
        if self._table is None or self._opened != opened:
            self._table, self._snap, self._opened = None, None, None
            self._table = open_table(target.uri, dict(target.storage_options))
            self._opened = opened
            self._requests_seen = Counter()
        return self._table

    def _refresh(self, table: Table) -> bool:
        """Update the snapshot when the log moved on (reading only new commits when it can);
        True when it did (or on the first poll)."""
        if self._snap is None:
            self._snap = table.snapshot()
        elif table.moved_on(self._snap):
            self._snap = table.update(self._snap)
        else:
            return False
        self._summary = {}
        return True

    # -- maintain -----------------------------------------------------------------------------
    def maintain(self, target: Target, obs: Observation, now_ms: int) -> Observation:
        """Plan the operations `obs.due` and run what is due; returns a fresh observation."""
        table, snap = self._table, self._snap
        if not obs.due or table is None or snap is None:
            return obs
        outcomes = self._run(target, table, snap, obs.due, now_ms)
        ran = {o.operation for o in outcomes if o.result is Result.DONE}
        if "checkpoint" in ran and "cleanup" not in ran:
            # A new checkpoint is what lets cleanup drop the commits before it.
            outcomes += self._run(target, table, snap, ("cleanup",), now_ms)
        self._record(outcomes, snap.version, now_ms)
        if any(o.result is Result.DONE for o in outcomes):
            self._snap, self._summary = table.snapshot(), {}
        fresh = self._result(target, now_ms, outcomes=outcomes)
        fresh.events = _merged(_outcome_events(outcomes), fresh.events)
        fresh.outcomes = outcomes  # `obs` was reported already: its requests are not added
        return fresh

    def _run(
        self, target: Target, table: Table, snap: Snapshot, ops: tuple[str, ...], now_ms: int
    ) -> list[executor.Outcome]:
        try:
            assert self._policy is not None  # set by the observe() that found `ops` due
            plan = planner.plan(table, snap, self._policy, now_ms, ops)
        except Exception as e:  # reported as failed steps, never raised
            message = SCRUBBER.scrub(f"{type(e).__name__}: {e}")
            return [executor.Outcome(op, Result.FAILED, message) for op in ops]
        if plan.refusal:
            refused = UnsupportedProtocolError(plan.refusal)
            return [executor.Outcome(op, Result.REFUSED, plan.refusal, error=refused) for op in ops]
        dry = [s for s in plan.steps if s.operation == "vacuum" and target.vacuum_dry_run]
        wet = [s for s in plan.steps if s not in dry]
        report = executor.execute(
            table, replace(plan, steps=wet), compactor=self._compactor(target)
        )
        outcomes = list(report.outcomes)
        self._track(plan, outcomes, now_ms)
        if dry:
            failed = report.failed is not None
            outcomes += executor.execute(table, replace(plan, steps=dry), dry_run=True).outcomes
            if failed:
                outcomes[-1] = executor.Outcome(
                    "vacuum", Result.SKIPPED_AFTER_FAILURE, executor.AFTER_FAILURE
                )
        for o in outcomes:
            o.message = SCRUBBER.scrub(o.message)
        return outcomes

    def _compactor(self, target: Target) -> Compactor | None:
        """The daemon's compactor with this table's storage options."""
        shared = self.compactions.compactor
        if shared is None:
            return None
        return replace(shared, storage_options=dict(target.storage_options), owner=target.key)

    def _track(self, plan: planner.Plan, outcomes: list[executor.Outcome], now_ms: int) -> None:
        step = next((s for s in plan.steps if s.operation == "compaction"), None)
        outcome = next((o for o in outcomes if o.operation == "compaction"), None)
        if step is None or outcome is None:
            return
        detail = step.detail if isinstance(step.detail, CompactionPlan) else None
        self.compactions.planned(plan.version, outcome, detail, now_ms)

    def _record(self, outcomes: list[executor.Outcome], version: int, now_ms: int) -> None:
        for o in outcomes:
            if o.result is Result.SKIPPED_AFTER_FAILURE or o.result is Result.STARTED:
                continue  # a started job is recorded when it ends
            if o.result is Result.FAILED:
                self.last_run_ms.pop(o.operation, None)  # retried at the next poll
            else:
                self.last_run_ms[o.operation] = now_ms
            if o.result is Result.SKIPPED:
                continue  # looked, nothing due: the status keeps the last real run
            self.last_maintenance[o.operation] = {
                "time": rfc3339(now_ms),
                "timeMs": now_ms,
                "result": o.result,
                "version": o.checkpoint_version if o.checkpoint_version is not None else version,
                "deletedFiles": o.deleted_files,
                "deletedBytes": o.deleted_bytes,
                "seconds": round(o.seconds, 3),
                "message": o.message,
                **_rewritten(o),
            }

    # -- describe -----------------------------------------------------------------------------
    def _result(
        self,
        target: Target,
        now_ms: int,
        problem: Problem | None = None,
        error: BaseException | None = None,
        outcomes: list[executor.Outcome] | None = None,
    ) -> Observation:
        conditions = _conditions(target, self._snap, problem, error, self.last_maintenance)
        events = self._transitions(conditions)
        status: dict[str, Any] = {"lastPoll": rfc3339(now_ms), "policy": target.policy_name}
        written = None
        if self._snap is not None and self._table is not None:
            status.update(self._status_numbers(self._table, self._snap, target.small_file_bytes))
            if self._policy is not None:
                status["retention"] = self._policy.retention_json()
            cp = self._snap.segment.checkpoint
            written = cp.files[0].info.mtime_ms if cp else None
        status["lastMaintenance"] = {
            op: {k: v for k, v in entry.items() if k != "timeMs"}
            for op, entry in self.last_maintenance.items()
        }
        jobs = self.compactions.status()
        if jobs is not None:
            status["compaction"] = jobs
        obs = Observation(status, conditions, events, [], self._new_requests(), written)
        obs.compaction_jobs = self.compactions.jobs()
        self._last = obs if problem is None and error is None else None
        return obs

    def _status_numbers(self, table: Table, snap: Snapshot, small: int) -> dict[str, Any]:
        if not self._summary or self._summary.get("_small") != small:
            s = summarize(table, snap, small)
            self._summary = {
                "_small": small,
                "version": s["version"],
                "lastCommitTime": rfc3339(s["timestamp"]) if s["timestamp"] else None,
                "lastCheckpointVersion": s["lastCheckpointVersion"],
                "commitsSinceCheckpoint": s["commitsSinceCheckpoint"],
                "logFiles": s["logFiles"],
                "logBytes": s["logBytes"],
                "files": s["numFiles"],
                "bytes": s["sizeBytes"],
                "smallFiles": s["smallFiles"],
                "tombstones": s["numTombstones"],
            }
        return {k: v for k, v in self._summary.items() if not k.startswith("_")}

    def _new_requests(self) -> Counter[str]:
        if self._table is None:
            return Counter()
        total = Counter(self._table.storage.requests)
        new = total - self._requests_seen
        self._requests_seen = total
        return new

    def _transitions(self, conditions: list[Condition]) -> list[Event]:
        """Events for conditions that changed: Warning when one goes bad, Normal when it heals."""
        events: list[Event] = []
        for c in conditions:
            before = self._conditions.get(c.type)
            self._conditions[c.type] = c
            if before is not None and (before.status, before.reason) == (c.status, c.reason):
                continue
            bad = (c.type == "Degraded") == (c.status == ConditionStatus.TRUE)
            if any(e.reason == c.reason for e in events):
                continue  # Ready and StorageReachable often fail for one reason: one event
            if bad and c.status != ConditionStatus.UNKNOWN:
                events.append(Event("Warning", c.reason, c.message))
            elif before is not None and c.status == _healthy(c.type):
                events.append(Event("Normal", c.reason, c.message))
        return events


def _healthy(kind: str) -> ConditionStatus:
    """The status of a condition of this type when all is well (Degraded is the odd one)."""
    return ConditionStatus.FALSE if kind == "Degraded" else ConditionStatus.TRUE


def _conditions(
    target: Target,
    snap: Snapshot | None,
    problem: Problem | None,
    error: BaseException | None,
    last_maintenance: Mapping[str, Mapping[str, Any]],
) -> list[Condition]:
    """The four conditions, from what blocked the poll (if anything) and what maintenance did."""
    unknown = "not checked: an earlier problem stops the poll"
    reach = Condition("StorageReachable", ConditionStatus.UNKNOWN, "NotChecked", unknown)
    proto = Condition("ProtocolSupported", ConditionStatus.UNKNOWN, "NotChecked", unknown)
    ready: Condition | None = None
    if problem is not None:
        ready = Condition(
            "Ready", ConditionStatus.FALSE, problem.reason, SCRUBBER.scrub(problem.message)
        )
    elif error is not None:
        reason, message = _classify(error)
        if isinstance(error, StorageUnreachableError):
            reach = Condition("StorageReachable", ConditionStatus.FALSE, reason, message)
        elif isinstance(error, (InvalidInputError, PolicyError)) and not isinstance(
            error, NotADeltaTableError
        ):
            pass  # a spec problem found before any request: the store was not asked
        else:
            reach = Condition(
                "StorageReachable", ConditionStatus.TRUE, "Reachable", "the table's store answers"
            )
        if isinstance(error, UnsupportedProtocolError):
            proto = Condition("ProtocolSupported", ConditionStatus.FALSE, reason, message)
        ready = Condition("Ready", ConditionStatus.FALSE, reason, message)
    else:
        reach = Condition(
            "StorageReachable", ConditionStatus.TRUE, "Reachable", "the table's store answers"
        )
    if snap is not None:
        refused = features.refusal(snap.protocol, "status")
        if refused:
            proto = Condition(
                "ProtocolSupported", ConditionStatus.FALSE, "UnsupportedFeatures", refused
            )
            ready = Condition("Ready", ConditionStatus.FALSE, "UnsupportedFeatures", refused)
        else:
            p = snap.protocol
            proto = Condition(
                "ProtocolSupported",
                ConditionStatus.TRUE,
                "Supported",
                f"reader v{p.min_reader_version}, writer v{p.min_writer_version}: all known",
            )
    if ready is None:
        msg = f"watching version {snap.version}" if snap is not None else "watching"
        if target.suspend:
            ready = Condition(
                "Ready",
                ConditionStatus.TRUE,
                "Suspended",
                f"{msg}; maintenance suspended by spec.suspend",
            )
        else:
            ready = Condition("Ready", ConditionStatus.TRUE, "Watching", msg)
    # The latest run of each operation, not this poll's: a refused vacuum stays a problem
    # until a later vacuum succeeds.
    failed = [
        (op, e) for op, e in last_maintenance.items() if e.get("result") in ("failed", "refused")
    ]
    if failed:
        op, e = failed[0]
        reason = "MaintenanceFailed" if e["result"] == "failed" else "MaintenanceRefused"
        degraded = Condition(
            "Degraded", ConditionStatus.TRUE, reason, f"{op} {e['result']}: {e.get('message')}"
        )
    elif target.duplicates:
        message = (
            f"{', '.join(target.duplicates)} also name{'s' if len(target.duplicates) == 1 else ''}"
            f" {SCRUBBER.scrub(target.uri)}: one table maintained by several resources; "
            "delete all but one"
        )
        degraded = Condition("Degraded", ConditionStatus.TRUE, "DuplicateUri", message)
    elif target.warnings:
        degraded = Condition(
            "Degraded",
            ConditionStatus.TRUE,
            "PolicyWarning",
            SCRUBBER.scrub("; ".join(target.warnings)),
        )
    else:
        degraded = Condition(
            "Degraded", ConditionStatus.FALSE, "AsExpected", "no maintenance problems"
        )
    return [ready, reach, proto, degraded]


_REASONS = (
    (StorageUnreachableError, "StorageUnreachable", "check the endpoint, network and credentials"),
    (NotADeltaTableError, "NotADeltaTable", "check spec.uri points at a table's root"),
    (UnsupportedProtocolError, "UnsupportedProtocol", "upgrade deltakeeper to maintain this table"),
    (CorruptLogError, "CorruptLog", "the log needs a repair; nothing is written meanwhile"),
    (InvalidCredentialsError, "InvalidSecret", "fix the credentials in spec.storage"),
    (InvalidInputError, "InvalidSpec", "fix the DeltaTable's spec"),
    (PolicyError, "InvalidPolicy", "fix the retention settings or the table's properties"),
    (OSError, "StorageUnreachable", "check the endpoint, network and credentials"),
)


def _classify(error: BaseException) -> tuple[str, str]:
    for cls, reason, hint in _REASONS:
        if isinstance(error, cls):
            text = str(error)
            # Storage errors already say what to check; do not say it twice.
            return reason, SCRUBBER.scrub(text if "check" in text else f"{text}; {hint}")
    return "Error", SCRUBBER.scrub(f"{type(error).__name__}: {error}")


def _merged(done: list[Event], transitions: list[Event]) -> list[Event]:
    """The outcomes' events, then the condition changes they did not already say."""
    said = {(e.type, e.reason) for e in done}
    return [*done, *(e for e in transitions if (e.type, e.reason) not in said)]


def _rewritten(o: executor.Outcome) -> dict[str, Any]:
    """A compaction's files and bytes removed and added, as its commits in the log show."""
    if o.compacted is None:
        return {}
    c = o.compacted.to_json()
    return {k: c[k] for k in ("jobId", "filesRemoved", "filesAdded", "bytesRemoved", "bytesAdded")}


def _outcome_events(outcomes: list[executor.Outcome]) -> list[Event]:
    events = []
    for o in outcomes:
        if o.result is Result.STARTED:
            events.append(Event("Normal", "CompactionStarted", o.message))
        if o.result is Result.DONE and o.repaired:
            events.append(Event("Warning", "CheckpointRepaired", o.message))
        if o.result is Result.DONE:
            events.append(Event("Normal", *_done(o)))
        elif o.result is Result.DRY_RUN and o.operation == "vacuum":
            events.append(
                Event("Normal", "VacuumDryRun", f"vacuum would delete {len(o.files)} files")
            )
        elif o.result in (Result.FAILED, Result.REFUSED):
            reason = "MaintenanceFailed" if o.result is Result.FAILED else "MaintenanceRefused"
            events.append(Event("Warning", reason, f"{o.operation}: {o.message}"))
    return events


def _done(o: executor.Outcome) -> tuple[str, str]:
    took = f"in {o.seconds:.1f}s"
    if o.operation == "checkpoint":
        return "Checkpointed", f"wrote the checkpoint at version {o.checkpoint_version} {took}"
    if o.operation == "compaction":
        return "Compacted", f"job {o.job_id}: {o.message} {took}"
    size = format_bytes(o.deleted_bytes)
    if o.operation == "cleanup":
        return "LogCleaned", f"deleted {o.deleted_files} expired log files ({size}) {took}"
    return "Vacuumed", f"deleted {o.deleted_files} unreferenced data files ({size}) {took}"
