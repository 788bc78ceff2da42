"""One watched table's state machine: observe it, run the maintenance that is due, describe it.

The body of the watch loop that the operator (k8s/) and standalone mode share; no Kubernetes
here. `observe` and `maintain` block on storage, so the fleet runs them off its event loop.

    watcher = TableWatcher(watched_since_ms=now_ms)
    obs = watcher.observe(target, now_ms)        # one listing when nothing changed
    if obs.due:
        obs = watcher.maintain(target, obs, now_ms)

What they return is an Observation (model.py); conditions.py says which conditions and events
hold, status.py turns it into the status. Every message is scrubbed of secrets.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import functools
import logging
import random
from collections import Counter
from collections.abc import Callable, Mapping
from dataclasses import dataclass, replace
from typing import Any

import pyarrow as pa

from deltakeeper.delta import features, schema
from deltakeeper.delta.errors import DeltaError, UnsupportedProtocolError
from deltakeeper.delta.held import (
    HeldSnapshot,
    read_commits_streamed,
    read_streamed,
    update_held,
)
from deltakeeper.delta.snapshot import Snapshot
from deltakeeper.delta.stats import compute
from deltakeeper.delta.summary import log_listing, staged_commits, summarize
from deltakeeper.delta.table import Table, open_table
from deltakeeper.delta.vacuum.info import InfoStatus, LastVacuumInfo
from deltakeeper.delta.vacuum.modes import Mode
from deltakeeper.maintenance import executor, memory, planner, record, schedule
from deltakeeper.maintenance.compaction_plan import CompactionPlan
from deltakeeper.maintenance.operations import Cadence, Operation
from deltakeeper.maintenance.operations import checkpoint as checkpoint_op
from deltakeeper.maintenance.operations import vacuum as vacuum_op
from deltakeeper.maintenance.operations.outcome import Compactor, Outcome, Result, RunField
from deltakeeper.maintenance.operations.registry import REGISTRY, WRITERS, asked
from deltakeeper.maintenance.operations.steps import Plan
from deltakeeper.maintenance.policy import (
    COMPACTION_DEADLINE_MS,
    LOOK_AGAIN_SPREAD_MS,
    Policy,
    PolicyError,
    effective,
    shared,
)
from deltakeeper.runtime import conditions, health, status
from deltakeeper.runtime.credentials import SCRUBBER
from deltakeeper.runtime.health import Health
from deltakeeper.runtime.jobs import JobTracker
from deltakeeper.runtime.model import Observation, Problem, Target
from deltakeeper.units import parse_timestamp_ms

log = logging.getLogger("deltakeeper.watcher")
CHECKPOINT, COMPACTION, VACUUM = Operation.CHECKPOINT, Operation.COMPACTION, Operation.VACUUM
# Tables with more file actions than this are held between polls without them (delta/held.py:
# about 24 bytes a file instead of a few hundred); planning reads them when it runs. Every
# table is: a small table's snapshot, a few Arrow tables, cost about 66 KiB of RSS more than
# its counts (94 against 28 KiB a 10-file table, 300 tables by /proc RSS; BENCHMARKS.md, the
# memory budget's notes), which a lake of small tables pays many times.
HOLD_FILE_ACTIONS = 0
# A big table: the memory work on it took goes back to the system after (a small one's is not
# worth a malloc_trim).
BIG_TABLE_ACTIONS = 100_000
# What a watcher reads of each add: the lean columns and the record count health needs (cheap
# from a checkpoint with `stats_parsed`, as deltakeeper writes them).
WATCHED_ADD = (*schema.LEAN_ADD, schema.NUM_RECORDS.name)


class TableWatcher:
    """The state kept between polls of one table; not thread-safe (one poll at a time)."""

    def __init__(
        self,
        watched_since_ms: int,
        last_maintenance: Mapping[str, Any] | None = None,
        compactor: Compactor | None = None,  # None: compaction is never planned here
        hold_file_actions: int | None = None,  # None: HOLD_FILE_ACTIONS
        spread_ms: int | None = None,  # None: drawn below LOOK_AGAIN_SPREAD_MS
    ):
        self.watched_since_ms = watched_since_ms
        self.spread_ms = random.randrange(LOOK_AGAIN_SPREAD_MS) if spread_ms is None else spread_ms
        # Per PERIODIC operation: when its last run said planning it again can find more.
        self.look_again_ms: dict[str, int] = {}
        self.hold_file_actions = (
            HOLD_FILE_ACTIONS if hold_file_actions is None else hold_file_actions
        )
        self.last_maintenance: dict[str, dict[str, Any]] = dict(last_maintenance or {})
        self.compactions = JobTracker(compactor, self.last_maintenance.get(COMPACTION))
        # A step refused over the memory budget was refused by the daemon, whose budget may
        # have changed since: planned again at the first poll, not after its cadence.
        self.last_run_ms = {
            op: int(entry["timeMs"])
            for op, entry in self.last_maintenance.items()
            if isinstance(entry, dict)
            and isinstance(entry.get("timeMs"), int)
            and not _over_budget(entry)
        }
        self._opened: tuple[str, str] | None = None
        self._table: Table | None = None
        self._snap: Snapshot | HeldSnapshot | None = None
        self._counts: _Counts | None = None  # what the last read of the log found
        self._health_until: int | None = None  # when time alone changes the health
        self._transitions = conditions.Transitions()
        self._requests_seen: Counter[str] = Counter()
        self._policy: Policy | None = None
        self._target: Target | None = None
        self._last: Observation | None = None  # the last full observation, for quiet polls
        self._vacuum_info: LastVacuumInfo | None = None  # as our last vacuum left it
        self._writers_at: dict[str, int] = {}  # the version each writer was last planned at
        # The version the last plan looked at: a commit that lands while maintenance runs is
        # read by the snapshot after it (not by a poll), and still counts as the log moving.
        self._planned_at: int | None = None
        # A version at which every live file had its statistics, as our last statistics run
        # found (the next reads only the commits after it); None: the next looks at all.
        self._stats_complete_at: int | None = None

    # -- observe ------------------------------------------------------------------------------
    def observe(self, target: Target, now_ms: int) -> Observation:
        """Read the table's log position (one listing when nothing changed) and its health."""
        same_target, self._target = target is self._target, target
        if target.problem is not None:
            self._snap = self._last = None
            return self._describe(target, now_ms, problem=target.problem)
        try:
            table = self._open(target, same_target)
            self._adopt(target)
            finished = self.compactions.check(table, now_ms)  # before the refresh: its commit
            changed = self._refresh(table)
            before = self._policy
            if changed or not same_target or before is None:
                configuration = self._snap.metadata.configuration  # type: ignore[union-attr]
                self._policy = shared(effective(configuration, **target.settings))
            new_policy = before is not None and self._policy is not before
        except Exception as e:  # store clients raise their own types; each becomes a condition
            if not isinstance(e, (DeltaError, PolicyError, OSError)):
                log.warning("%s/%s: unexpected %s", *target.key, type(e).__name__, exc_info=True)
            self._snap = self._last = None
            return self._describe(target, now_ms, error=e)
        if finished is not None:
            obs = self._finished(target, finished, now_ms)
        elif same_target and not changed and self._last is not None and not self._recount(now_ms):
            obs = self._quiet(now_ms)
        else:
            obs = self._describe(target, now_ms)
        if obs.ready and not target.suspend and not self._snap.unsupported_features:  # type: ignore[union-attr]
            version = self._snap.version  # type: ignore[union-attr]
            moved, self._planned_at = changed or version != self._planned_at, version
            try:
                obs.due = schedule.operations_to_plan(
                    now_ms,
                    self.last_run_ms,
                    moved,
                    self._schedules(),
                    self.watched_since_ms,
                    self._policy,
                    self.look_again_ms,
                    new_policy,
                )
            except ValueError as e:  # a schedule croniter cannot step through
                self._last = None
                return self._describe(target, now_ms, error=PolicyError(f"schedule: {e}"))
            obs.due = self._with_compaction(obs.due, now_ms)
            obs.due += schedule.writers_to_plan(self._writers(), self._writers_at, version)
        return obs

    def peek(self, target: Target) -> int:
        """Before the first poll: the bytes of the commits after the table's newest
        checkpoint, from its hint and one listing (0 when that cannot be had: the poll will
        say why). The fleet polls the tables with the most first."""
        if target.problem is not None:
            return 0
        try:
            listing, _ = self._open(target, False).listing_for(None)
        except Exception:
            return 0
        checkpoint = max(listing.checkpoints, default=-1)
        return sum(e.info.size for v, e in listing.commits.items() if v > checkpoint)

    def _schedules(self) -> dict[str, str | None]:
        """The cron schedules the policy gives its operations (vacuum.schedule, ...)."""
        policy = self._policy
        if policy is None:
            return {}
        return {op: spec.schedule(policy) for op, spec in REGISTRY.items()}

    def _writers(self) -> tuple[Operation, ...]:
        """The writers this table's policy asks for."""
        policy = self._policy
        return asked(policy, Cadence.EACH_VERSION) if policy is not None else ()

    def _adopt(self, target: Target) -> None:
        """Follow a job left running by an earlier operator; if the jobs cannot be listed
        now, the next poll looks again (and no second job starts meanwhile: the launcher
        refuses while one runs)."""
        if self.compactions.adopted:
            return
        deadline_ms = target.settings.get("compaction_deadline_ms") or COMPACTION_DEADLINE_MS
        try:
            self.compactions.adopt(target.key, deadline_ms / 1000, self._table)
        except Exception as e:
            log.warning(
                "%s/%s: cannot look for a running compaction job yet (%s)",
                *target.key,
                SCRUBBER.scrub(f"{type(e).__name__}: {e}"),
            )

    def _with_compaction(self, due: tuple[Operation, ...], now_ms: int) -> tuple[Operation, ...]:
        """`due` with compaction after the checkpoint, when a job may start now."""
        assert self._policy is not None and self._snap is not None
        if not self.compactions.due(now_ms, self._policy.compaction, self._snap.version):
            return due
        after = 1 if due[:1] == (CHECKPOINT,) else 0
        return (*due[:after], COMPACTION, *due[after:])

    def _finished(self, target: Target, outcome: Outcome, now_ms: int) -> Observation:
        """A poll that saw the table's compaction job end: recorded, evented, published."""
        outcome.message = SCRUBBER.scrub(outcome.message)
        assert self._snap is not None
        self._record([outcome], self._snap.version, now_ms)
        return self._describe(target, now_ms, outcomes=[outcome])

    def _quiet(self, now_ms: int) -> Observation:
        """The last observation again, for a table whose log did not move: the cheap path
        (its health again only when time alone changed it)."""
        assert self._last is not None
        if self._health_until is not None and now_ms >= self._health_until:
            self._last = replace(self._last, health=self._health(now_ms))
        return replace(
            self._last,
            polled_ms=now_ms,
            events=[],
            outcomes=[],
            requests=self._new_requests(),
            due=(),
            compaction_jobs=self._jobs(),
            quiet=True,
        )

    def _jobs(self) -> dict[str, int]:
        policy = self._policy
        return self.compactions.jobs(policy is not None and policy.compaction.enabled)

    def _open(self, target: Target, same_target: bool) -> Table:
        if same_target and self._table is not None:
            return self._table
        opened = (target.uri, repr(sorted(target.storage_options.items())))
        if self._table is None or self._opened != opened:
            self._table, self._snap, self._opened = None, None, None
            self._vacuum_info = self._stats_complete_at = None
            self._table = open_table(target.uri, dict(target.storage_options))
            self._opened = opened
            self._requests_seen = Counter()
        return self._table

    def _refresh(self, table: Table) -> bool:
        """Update the snapshot when the log moved on (reading only new commits when it can);
        True when it did (or on the first poll)."""
        if self._snap is None:
            self._snap = self._read(table)
        elif not table.moved_on(self._snap):
            return False
        elif isinstance(self._snap, HeldSnapshot):
            self._snap = update_held(table, self._snap)
        else:
            self._snap = self._hold(functools.partial(table.update, self._snap))
        self._counts = None
        return True

    # -- maintain -----------------------------------------------------------------------------
    def maintain(
        self,
        target: Target,
        obs: Observation,
        now_ms: int,
        refused: Mapping[Operation, str] | None = None,
        stop: Callable[[], bool] | None = None,
    ) -> Observation:
        """Plan the operations `obs.due` and run what is due; returns a fresh observation.
        `refused`: steps the fleet will not run (too big for its memory budget), and why.
        `stop`: true once the daemon is stopping (what is running ends at a safe point)."""
        table, snap = self._table, self._snap
        if not (obs.due or refused) or table is None or snap is None:
            return obs
        refused = dict(refused or {})
        if CHECKPOINT in refused and not self._checkpoint_due(table):
            refused.pop(CHECKPOINT)  # looked at because the log moved, but not due
        spark = self._spark_steps((*obs.due, *refused), refused)
        hint = memory.REFUSAL_HINT
        outcomes = [
            Outcome(op, Result.REFUSED, why + hint)
            for op, why in refused.items()
            if op not in spark
        ]
        if spark and not self.compactions.free(now_ms):
            # One Spark job per table at a time: these wait, and are looked at next poll.
            wanted = {op for op in obs.due if op not in spark}
            spark = {}
        else:
            wanted = {*obs.due, *spark}
        ops = tuple(op for op in Operation if op in wanted)
        if ops:
            outcomes += self._run(target, table, snap, ops, now_ms, spark, stop)
        self._record(outcomes, snap.version, now_ms, over_budget=frozenset(refused))
        for o in outcomes:
            if o.operation in WRITERS and o.result is not Result.FAILED:
                self._writers_at[o.operation] = snap.version
            if o.operation is Operation.STATS:
                self._stats_complete_at = _stats_complete_at(o)
        if any(o.result is Result.DONE for o in outcomes):
            self._snap, self._counts = self._read(table), None
        # `obs` was published already: its requests are not counted again.
        described = self._describe(target, now_ms, outcomes=outcomes)
        if _big(self._snap):  # what planning and writing read is gone
            _give_back()
        return described

    def _checkpoint_due(self, table: Table) -> bool:
        snap, policy = self._snap, self._policy
        if snap is None or policy is None:
            return True
        try:
            return checkpoint_op.due(table, snap, policy)
        except Exception:  # the plan says why; it runs as before
            return True

    def _spark_steps(
        self, ops: tuple[Operation, ...], too_big: Mapping[Operation, str]
    ) -> dict[Operation, str]:
        """The checkpoint and vacuum Spark runs (planner.spark_steps), where it can: this daemon
        has a launcher."""
        if self._policy is None or self.compactions.compactor is None:
            return {}
        return planner.spark_steps(self._policy, ops, too_big)

    def _read(self, table: Table) -> Snapshot | HeldSnapshot:
        """The newest snapshot read afresh. A table whose checkpoint, as `_last_checkpoint`
        says, holds more actions than are kept between polls is counted from it a batch at a
        time (delta/held.py), never loaded whole; the rest is read and then held."""
        listing, hint = table.listing_for(None)
        size = hint.checkpoint.size if hint.checkpoint is not None else None
        if size is not None and size > self.hold_file_actions:
            streamed = read_streamed(table, listing)
            if streamed is not None:
                if _big(streamed):  # what the batches took, before maintenance needs it
                    _give_back()
                return streamed
        if self.hold_file_actions <= BIG_TABLE_ACTIONS:  # held as counts: a long log in runs
            counted = read_commits_streamed(table, listing)
            if counted is not None:
                if _big(counted):
                    _give_back()
                return counted
        read = functools.partial(table.snapshot, add_cols=WATCHED_ADD, listing=listing)
        return self._hold(read)

    def _hold(self, read: Callable[[], Snapshot]) -> Snapshot | HeldSnapshot:
        """What to keep of the snapshot `read` returns until the next poll: all of it, or for a
        big table its header and file counts (the memory its file actions took goes back to
        the system: Arrow's allocator would keep it for the next read)."""
        snap = read()
        if snap.num_files + snap.num_tombstones <= self.hold_file_actions:
            return snap
        held = HeldSnapshot.counted(snap)
        del snap
        if _big(held):
            _give_back()
        return held

    def _run(
        self,
        target: Target,
        table: Table,
        snap: Snapshot | HeldSnapshot,
        ops: tuple[Operation, ...],
        now_ms: int,
        spark: Mapping[Operation, str] | None = None,
        stop: Callable[[], bool] | None = None,
    ) -> list[Outcome]:
        try:
            assert self._policy is not None  # set by the observe() that found `ops` due
            plan = planner.plan(
                table,
                snap,
                self._policy,
                now_ms,
                ops,
                cleanup_after_checkpoint=True,
                full_vacuum=vacuum_op.full_due(self._policy, self._last_full_ms(), now_ms),
                storage_options=target.storage_options,
                known=self._vacuum_info,
                stats_since=self._stats_complete_at,
                on_spark=spark,
            )
        except Exception as e:  # reported as failed steps, never raised
            message = SCRUBBER.scrub(f"{type(e).__name__}: {e}")
            return [Outcome(op, Result.FAILED, message) for op in ops]
        if plan.refusal:
            refused = UnsupportedProtocolError(plan.refusal)
            return [Outcome(op, Result.REFUSED, plan.refusal, error=refused) for op in ops]
        dry = self._dry_operations()
        compactor = self._compactor(target)
        report = executor.execute(table, plan, compactor=compactor, dry_operations=dry, stop=stop)
        if report.stopped:
            log.info(
                "%s/%s: %s: the daemon is stopping; the next run does the rest",
                *target.key,
                report.stopped,
            )
        outcomes = list(report.outcomes)
        self._track(plan, outcomes, now_ms)
        self._vacuum_info = _vacuum_info_after(outcomes, self._vacuum_info)
        for o in outcomes:
            o.message = SCRUBBER.scrub(o.message)
        return outcomes

    def _dry_operations(self) -> tuple[Operation, ...]:
        """What the policy says to dry-run (vacuum.dryRun, dataRetention.dryRun)."""
        policy = self._policy
        if policy is None:
            return ()
        return tuple(op for op, spec in REGISTRY.items() if spec.dry_run(policy))

    def _last_full_ms(self) -> int | None:
        """When the last FULL vacuum ran, as the status records it (None: never)."""
        when = (self.last_maintenance.get(VACUUM) or {}).get("lastFull")
        try:
            return parse_timestamp_ms(when) if isinstance(when, str) else None
        except ValueError:
            return None

    def _compactor(self, target: Target) -> Compactor | None:
        """The daemon's compactor with this table's storage options."""
        shared = self.compactions.compactor
        if shared is None:
            return None
        return replace(shared, storage_options=dict(target.storage_options), owner=target.key)

    def _track(self, plan: Plan, outcomes: list[Outcome], now_ms: int) -> None:
        for on_spark in plan.steps:
            if on_spark.spark is None:
                continue
            for o in outcomes:
                if o.operation is on_spark.operation:
                    self.compactions.found_running(o)
            # its job's Outcome: an operation's own step may come before it (expire's commit)
            out = next(
                (o for o in outcomes if o.operation is on_spark.operation and o.job is not None),
                None,
            )
            if out is not None:
                self.compactions.started(out, plan.version, on_spark.spark, now_ms)
        step = next((s for s in plan.steps if s.operation is COMPACTION), None)
        outcome = next((o for o in outcomes if o.operation is COMPACTION), None)
        if step is None or outcome is None:
            return
        detail = step.detail if isinstance(step.detail, CompactionPlan) else None
        self.compactions.planned(plan.version, outcome, detail, now_ms)

    def _record(
        self,
        outcomes: list[Outcome],
        version: int,
        now_ms: int,
        over_budget: frozenset[Operation] = frozenset(),
    ) -> None:
        """Keep each run for the schedules and the status; `over_budget`: the steps the
        memory budget refused (here, or because Spark could not take them either)."""
        for o in outcomes:
            if o.result is Result.SKIPPED_AFTER_FAILURE or o.result is Result.STARTED:
                continue  # a started job is recorded when it ends
            if o.result is Result.SKIPPED and record.on_spark(o):
                continue  # a Spark job runs for the table elsewhere: looked at next poll
            op = str(o.operation)
            again = None
            if o.result is Result.FAILED:
                self.last_run_ms.pop(op, None)  # retried at the next poll
            else:
                self.last_run_ms[op] = now_ms
                again = REGISTRY[o.operation].look_again(o)
            if again is None:
                self.look_again_ms.pop(op, None)
            else:
                self.look_again_ms[op] = again + self.spread_ms
            before = self.last_maintenance.get(op)
            if o.result is Result.SKIPPED:
                # Looked, nothing due: the status keeps the last real run, but not a refusal
                # over a budget that no longer refuses it.
                if before is not None and _over_budget(before):
                    del self.last_maintenance[op]
                continue
            self.last_maintenance[op] = record.entry(o, version, now_ms, before)
            if o.result is Result.REFUSED and o.operation in over_budget:
                self.last_maintenance[op][str(RunField.REASON)] = memory.REFUSED_REASON

    # -- describe -----------------------------------------------------------------------------
    def _describe(
        self,
        target: Target,
        now_ms: int,
        problem: Problem | None = None,
        error: BaseException | None = None,
        outcomes: list[Outcome] | None = None,
    ) -> Observation:
        found = conditions.table_conditions(
            target, self._snap, problem, error, self.last_maintenance, self._staged()
        )
        events = self._transitions.events(found)
        if outcomes:
            events = conditions.merged(conditions.outcome_events(outcomes), events)
        obs = Observation(
            now_ms,
            found,
            events,
            list(outcomes or []),
            last_maintenance=dict(self.last_maintenance),
            compaction=self.compactions.status(),
            compaction_jobs=self._jobs(),
        )
        if self._snap is not None and self._table is not None:
            obs.counts = self._read_counts(self._table, self._snap, target, now_ms).status
            if self._policy is not None:
                obs.retention = self._policy.retention_json()
                obs.health = self._health(now_ms)
                obs.checkpoint_loads_all = self._policy.write_checksum  # N.crc needs every file
            cp = self._snap.segment.checkpoint
            obs.checkpoint_written_ms = cp.files[0].info.mtime_ms if cp else None
            obs.checkpoint_bytes = sum(f.info.size for f in cp.files) if cp else None
        obs.requests = self._new_requests()  # the counts' reads included
        self._last = obs if problem is None and error is None else None
        return obs

    def _staged(self) -> int | None:
        """A catalog-managed table's staged commits newer than the snapshot (the published
        version may trail its catalog): one listing of `_staged_commits/` a poll, as they come
        and go without the published log moving. None for other tables, or when it fails."""
        snap, table = self._snap, self._table
        if snap is None or table is None or features.catalog_managed(snap.protocol) is None:
            return None
        try:
            return staged_commits(table, snap.version)
        except (DeltaError, OSError):
            return None  # the poll's own reads say what is wrong with the store

    def _read_counts(
        self, table: Table, snap: Snapshot | HeldSnapshot, target: Target, now_ms: int
    ) -> _Counts:
        """The log's numbers: read again after the log moved, for another small-file size or
        retention, or when the cleanup's cut-off day moved on."""
        small = target.small_file_bytes
        retention = self._policy.log_retention_ms if self._policy else None
        key = (small, retention)
        if self._counts is None or self._counts.key != key or self._recount(now_ms):
            infos = log_listing(table)
            summary = summarize(table, snap, small, infos)
            debt = health.log_debt(infos, retention, now_ms) if retention is not None else None
            kept = {k: summary[k] for k in health.SUMMARY_KEYS}
            self._counts = _Counts(key, status.counts(summary), kept, debt)
        return self._counts

    def _recount(self, now_ms: int) -> bool:
        """Whether the log's numbers are out of date though the log did not move."""
        debt = self._counts.debt if self._counts is not None else None
        return debt is not None and now_ms >= debt.until_ms

    def _health(self, now_ms: int) -> Health | None:
        counts, snap, policy = self._counts, self._snap, self._policy
        if counts is None or counts.debt is None or snap is None or policy is None:
            return None
        found, self._health_until = health.of_table(
            snap, counts.summary, counts.debt, policy, now_ms
        )
        return found

    def _new_requests(self) -> Counter[str]:
        if self._table is None:
            return Counter()
        seen = self._requests_seen
        new: Counter[str] = Counter()  # not Counter[str](): that gives each a __dict__
        for op, n in list(self._table.storage.requests.items()):  # a read-ahead may add one
            d = n - seen[op]
            if d:
                seen[op] = n
                if d > 0:
                    new[op] = d
        return new


@dataclass(frozen=True)
class _Counts:
    """What the last read of the log found (`summarize`), and its log debt."""

    key: tuple[int, int | None]  # (small-file size, log retention) it was read for
    status: dict[str, Any]  # status.counts()
    summary: dict[str, Any]  # the part of it health reads
    debt: health.LogDebt | None  # None: no policy yet


def _big(snap: Snapshot | HeldSnapshot | None) -> bool:
    return (
        isinstance(snap, HeldSnapshot) and snap.num_files + snap.num_tombstones > BIG_TABLE_ACTIONS
    )


def _give_back() -> None:
    """Return freed memory to the system after work on a big table: Arrow's allocator keeps it
    for the next read, and so does the C heap (glibc's malloc_trim releases it; a first pass
    over a million files left 25 MiB there). Elsewhere than glibc, Arrow's part only."""
    pa.default_memory_pool().release_unused()
    if _LIBC is not None:
        _LIBC.malloc_trim(0)


def _libc() -> Any:
    try:
        libc = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6")
        return libc if hasattr(libc, "malloc_trim") else None
    except OSError:
        return None


_LIBC = _libc()


def _vacuum_info_after(
    outcomes: list[Outcome], known: LastVacuumInfo | None
) -> LastVacuumInfo | None:
    """`_last_vacuum_info` as this poll's vacuum found or left it (the next plan reads no file;
    if another engine moves it on meanwhile, the next LITE only reads more commits)."""
    for o in outcomes:
        run = vacuum_op.run_of(o)
        if run is None or run.mode is Mode.INVENTORY:
            continue
        if o.result is Result.DONE and run.records is not None:
            return LastVacuumInfo(InfoStatus.RECORDED, run.records)
        return run.info
    return known


def _stats_complete_at(o: Outcome) -> int | None:
    """The version at which a statistics run left every live file with its statistics, or
    None: it failed, left files for later (read budget), or was a dry run."""
    run = o.detail_as(compute.StatsRun)
    if run is None or o.result not in (Result.DONE, Result.SKIPPED):
        return None
    return run.version if not (run.deferred or run.unreadable) else None


def _over_budget(entry: Mapping[str, Any]) -> bool:
    """Whether a lastMaintenance entry is a step refused over the memory budget."""
    return entry.get(RunField.REASON) == memory.REFUSED_REASON
