"""What an operation is made of: one OperationSpec each (the modules beside this one), which
the planner, the executor, the memory budget, conditions, metrics, history, the status and
the CRD read instead of naming operations themselves. ARCHITECTURE.md has the checklist for
adding one."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from deltakeeper.delta.checkpoint import CheckpointSource
from deltakeeper.delta.held import HeldSnapshot
from deltakeeper.delta.snapshot import Snapshot, SnapshotHeader
from deltakeeper.delta.table import Table
from deltakeeper.delta.vacuum.info import LastVacuumInfo
from deltakeeper.maintenance.memory import Holding
from deltakeeper.maintenance.operations import Cadence, OnCatalogManaged, Operation
from deltakeeper.maintenance.operations.outcome import Compactor, Outcome, Progress
from deltakeeper.maintenance.operations.steps import Plan, Step
from deltakeeper.maintenance.policy import Engine, Policy


@dataclass
class Planning:
    """What an operation plans its step from: the table, its snapshot (any column set; a
    watcher's held one serves every step), the policy, the time, and the steps planned
    before it in this plan."""

    table: Table
    snap: Snapshot | HeldSnapshot | SnapshotHeader
    policy: Policy
    now_ms: int
    steps: list[Step] = field(default_factory=list)
    # vacuum: why an AUTO vacuum is FULL this time (the daemon's fullInterval), what a watcher
    # knows `_last_vacuum_info` holds, the options that open an INVENTORY vacuum's report
    full_vacuum: str | None = None
    known: LastVacuumInfo | None = None
    storage_options: Mapping[str, Any] | None = None
    # stats: a version at which every live file had its statistics
    stats_since: int | None = None
    # cleanup: the commits from this version on stay for the next LITE vacuum
    keep: int | None = None
    # checkpoint (forced): a classic-named V2 checkpoint, and a source opened already
    classic: bool = False
    source: CheckpointSource | None = None

    def with_files(self) -> Snapshot:
        """The snapshot with its file actions: itself, or read at its version otherwise."""
        if isinstance(self.snap, Snapshot):
            return self.snap
        return self.table.snapshot(version=self.snap.version)

    def due(self, operation: Operation) -> bool:
        """Whether a step of `operation` planned before this one is due."""
        return any(s.operation is operation and s.due for s in self.steps)


@dataclass
class Running:
    """What an operation's runner gets: the table, the plan, its step, and the caller's ways."""

    table: Table
    plan: Plan
    step: Step
    dry_run: bool
    progress: Progress | None = None
    compactor: Compactor | None = None
    # True once the caller is stopping: a long step ends at its next safe point (Stopped).
    stop: Callable[[], bool] | None = None


# The schema of a count in a lastMaintenance entry (OperationSpec.record_schema).
COUNT_SCHEMA: Mapping[str, Any] = {"type": "integer", "format": "int64"}

Planner = Callable[[Planning], Step | None]
Runner = Callable[[Running], Outcome]


def _no_fields(o: Outcome, previous: Mapping[str, Any], now_ms: int) -> dict[str, Any]:
    return {}


def _no_metrics(o: Outcome) -> dict[str, int]:
    return {}


def _nothing_more(o: Outcome) -> dict[str, Any]:
    return {}


def _deleted_files(entry: Mapping[str, Any]) -> str:
    return f"{entry.get('deletedFiles', 0)} files"


@dataclass(frozen=True)
class OwnCounter:
    """A Prometheus counter of an operation's own (deltakeeper_expired_rows_total), per table,
    at 0 for every table whose policy asks for the operation."""

    name: str
    help: str
    count: Callable[[Outcome], int]  # what a done run adds


@dataclass(frozen=True)
class OperationSpec:
    """One operation, whole: how it is planned and run, what it costs, and how it is told."""

    operation: Operation
    summary: str  # one line: what it does (docs, --help)
    cadence: Cadence
    plan: Planner  # its step, due or not and why; None where the policy does not ask for it
    run: Runner  # carries a due step out (the executor catches DeltaError)
    memory: Callable[[Holding], int]  # bytes it may take on a table of these counts
    done_reason: str  # the Normal event's reason when it is done (kubectl describe)
    done_message: Callable[[Outcome], str]  # that event's message, before "in Ns"
    every_ms: int = 0  # PERIODIC and SCHEDULED without a schedule: how often it is planned
    # A PERIODIC one's next look, from its last run: when planning it again can find more
    # with the log as it was (cleanup: its cut-off's next move). None: every_ms after the run.
    look_again: Callable[[Outcome], int | None] = lambda o: None
    force: Planner | None = None  # the step its own command runs, due whatever the policy says
    asked: Callable[[Policy], bool] = lambda policy: True  # whether the policy wants it at all
    deletes: str | None = None  # what it deletes (metrics' `kind`): log or data files
    writes: bool = False  # counts the files it writes (writtenFiles)
    # On a catalog-managed table: whether it runs, needs the catalog's permission (it deletes or
    # writes beside the log; catalog.allowedOperations stands in for the permission), or never
    # runs (it commits). Refused unless permitted, as Delta says for any operation it does not
    # name.
    catalog: OnCatalogManaged = OnCatalogManaged.IF_PERMITTED
    # Its step when Delta Spark runs it as a job, and why (spec.<op>.engine, the memory
    # budget); None: only deltakeeper runs it.
    spark: Callable[[Planning, str], Step] | None = None
    # Its finished Spark job's Outcome (done, the job's line in job_result) made true to what
    # the job did, given the version planned: what it wrote, deleted, or why it failed.
    spark_done: Callable[[Table, Outcome, int], None] | None = None
    engine: Callable[[Policy], Engine] | None = None  # its setting: deltakeeper, spark or auto
    engine_key: str = ""  # that setting's name where it is not `<operation>.engine`
    # The Spark job that finishes its step where its engine says Spark (expire's Delta Spark
    # DELETE of the files it could not remove whole), given its step and why; it runs after
    # that step is done, or alone when that step had nothing to do. None: no such job.
    then: Callable[[Planning, Step, str], Step | None] | None = None
    skip: Callable[[Step], Outcome] | None = None  # its Outcome when not due (default: skipped)
    # The Normal event of a dry run (reason, message), for an operation a resource can set
    # to dry-run (a DeltaTable's vacuum.dryRun); None: no event.
    dry_run_event: Callable[[Outcome], tuple[str, str]] | None = None
    # The Normal event's reason when its Spark job started (the daemon follows it).
    started_reason: str = "SparkJobStarted"
    # A Warning event a done run raises besides its Normal one (reason, message), or None.
    warning: Callable[[Outcome], tuple[str, str] | None] = lambda o: None
    # What its lastMaintenance entry adds to every run's fields (record.RUN_FIELDS), with the
    # schema of each for the CRD; `previous` is its entry before this run.
    record: Callable[[Outcome, Mapping[str, Any], int], dict[str, Any]] = _no_fields
    record_schema: Mapping[str, Mapping[str, Any]] = field(default_factory=dict)
    history: Callable[[Outcome], dict[str, int]] = _no_metrics  # its history row's metrics
    # What its --json adds to every step's keys (record.as_json): its Outcome's detail.
    report: Callable[[Outcome], dict[str, Any]] = _nothing_more
    # Its cron schedule in the policy (vacuum.schedule), for a SCHEDULED one; None: every_ms.
    schedule: Callable[[Policy], str | None] = lambda policy: None
    # Whether the policy says to dry-run it in a daemon (vacuum.dryRun): reported, not done.
    dry_run: Callable[[Policy], bool] = lambda policy: False
    counters: tuple[OwnCounter, ...] = ()  # its metrics besides runs, durations and files
    # Its last run in a few words, from its lastMaintenance entry (`deltakeeper status`).
    brief: Callable[[Mapping[str, Any]], str] = _deleted_files
