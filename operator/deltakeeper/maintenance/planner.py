"""What maintenance is due for one table now, and why.

Planning only reads: it loads the snapshot's log position, lists what cleanup and vacuum would
delete, and returns a Plan, which is plain data. The executor carries a Plan out; a dry run
prints it. Steps run in this order because each makes the next one cheaper or possible: a new
checkpoint lets a later cleanup drop the commits before it, compaction's tombstones become
vacuumable later, and cleanup never touches data files.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field, replace
from typing import Any

from deltakeeper.delta import cleanup, features, inventory, log_compaction, vacuum, vacuum_lite
from deltakeeper.delta.checkpoint import CheckpointSource
from deltakeeper.delta.errors import (
    DeltaError,
    InvalidInputError,
    LiteVacuumImpossible,
    UnsupportedProtocolError,
)
from deltakeeper.delta.held import HeldSnapshot
from deltakeeper.delta.last_checkpoint import HintStatus, LastCheckpoint
from deltakeeper.delta.log import Checkpoint
from deltakeeper.delta.paths import Kind
from deltakeeper.delta.properties import duration_text
from deltakeeper.delta.schema import LEAN_ADD
from deltakeeper.delta.snapshot import Snapshot, SnapshotHeader
from deltakeeper.delta.table import Table, checked_hint
from deltakeeper.delta.vacuum_info import LastVacuumInfo
from deltakeeper.delta.vacuum_modes import Mode
from deltakeeper.maintenance import compaction_plan
from deltakeeper.maintenance.operations import WRITERS, Operation
from deltakeeper.maintenance.policy import CLASSIC_V2_EVERY_INTERVALS, Engine, Policy
from deltakeeper.units import format_bytes, format_ms

# Compaction, statistics, log compaction files and manifests are steps only where they are
# enabled (see _compaction and _writer).
OPERATIONS = tuple(Operation)
CHECKPOINT, COMPACTION, CLEANUP, VACUUM = OPERATIONS[:4]
STATS, LOG_COMPACTION, MANIFEST = WRITERS


@dataclass
class Step:
    operation: Operation
    due: bool
    reason: str
    # What the step would delete, as planned by delta/ (cleanup and vacuum only).
    detail: cleanup.CleanupPlan | vacuum.VacuumPlan | compaction_plan.CompactionPlan | None = None
    refused: bool = False  # not due because running it would be unsafe or against policy
    error: DeltaError | None = field(default=None, repr=False)  # for a refusal: its cause
    classic_v2: bool = False  # checkpoint: a classic-named V2 checkpoint for older readers
    # checkpoint: damaged checkpoints to rewrite first (classic-named, one file each)
    repair: tuple[int, ...] = ()
    regular: bool = True  # checkpoint: also the one at the plan's version (not only repairs)
    # cleanup after a checkpoint this run writes: `detail` counts that checkpoint as written (a
    # dry run shows it so); a real run plans again with `replan()` once it is there.
    replan: Callable[[], cleanup.CleanupPlan] | None = field(default=None, repr=False)
    # checkpoint: the source a front-end opened already (to read the table's policy); else the
    # executor opens one.
    source: CheckpointSource | None = field(default=None, repr=False)
    # compaction: the job's input (compaction_plan.job_spec) when due; a Spark checkpoint's
    # or vacuum's (_spark_spec)
    job_spec: dict[str, Any] | None = field(default=None, repr=False)
    # logCompaction: the commits the file reconciles (first, last)
    log_range: tuple[int, int] | None = None
    # stats: a version at which every live file had its statistics (a watcher's last complete
    # run); only the commits after it, up to `base` (the plan's snapshot), are looked at.
    stats_since: int | None = None
    base: SnapshotHeader | None = field(default=None, repr=False)
    # A failure of this step is reported and the steps after it still run (the checkpoint
    # before `compact`'s job: without it the job replays the JSON log, slower but right).
    optional: bool = False
    # A step that follows another: it runs once that one is done, whatever became of the steps
    # between, and is planned only then (`plan_later`); not reported when that one is not done.
    after: Operation | None = None
    plan_later: Callable[[], Step] | None = field(default=None, repr=False)
    # checkpoint, vacuum: why Delta Spark runs it, as a Spark job (None: deltakeeper does)
    spark: str | None = None

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {
            "operation": self.operation,
            "due": self.due,
            "refused": self.refused,
            "reason": self.reason,
        }
        if self.detail is not None:
            out["files"] = self.detail.files
            out["bytes"] = self.detail.bytes
        if isinstance(self.detail, compaction_plan.CompactionPlan):
            out["plan"] = self.detail.to_json()
        return out


@dataclass
class Plan:
    uri: str
    version: int
    now_ms: int
    policy: Policy
    steps: list[Step] = field(default_factory=list)
    refusal: str | None = None  # the table as a whole must not be touched

    @property
    def due(self) -> list[Step]:
        return [s for s in self.steps if s.due]

    def lines(self) -> list[str]:
        head = f"{self.uri} at version {self.version}, now {format_ms(self.now_ms)}"
        if self.refusal:
            return [head, f"refused: {self.refusal}"]
        marks = {True: "due", False: "not due"}
        body = [
            f"  {s.operation}: {'refused' if s.refused else marks[s.due]}: {s.reason}"
            for s in self.steps
        ]
        return [head, *body]

    def to_json(self) -> dict[str, Any]:
        return {
            "uri": self.uri,
            "version": self.version,
            "now": self.now_ms,
            "refusal": self.refusal,
            "steps": [s.to_json() for s in self.steps],
        }


def plan(
    table: Table,
    snap: Snapshot | HeldSnapshot | SnapshotHeader,
    policy: Policy,
    now_ms: int,
    operations: tuple[Operation, ...] = OPERATIONS,
    *,
    cleanup_after_checkpoint: bool = False,
    full_vacuum: str | None = None,
    storage_options: Mapping[str, Any] | None = None,
    known: LastVacuumInfo | None = None,
    stats_since: int | None = None,
    on_spark: Mapping[Operation, str] | None = None,
) -> Plan:
    """The Plan for `snap` (any column set; checkpoint columns are loaded by the executor). A
    watcher's held snapshot, without file actions, serves every step: compaction reads the
    file actions at its version, a vacuum only when it has candidates to check against them.
    A bare header (read for the steps a Spark job runs) serves those; any other is loaded.

    A new checkpoint is what lets cleanup drop the commits before it, so cleanup asked for
    with a due checkpoint is planned as it will be once the checkpoint is written. A watch
    loop, which asks for cleanup only now and then, sets `cleanup_after_checkpoint`: then a
    due checkpoint also brings a cleanup, planned after the checkpoint is written.

    Cleanup never makes the next LITE vacuum impossible: it keeps the commits from the N that
    `_last_vacuum_info` records, unless a vacuum in this plan moves N first; then the vacuum
    runs before it. `full_vacuum`: why an AUTO vacuum is FULL this time (the daemon's
    fullInterval); `storage_options` open an INVENTORY vacuum's report; `known`: what a
    watcher knows `_last_vacuum_info` holds, from its own last vacuum (else it is read);
    `stats_since`: a version at which every live file had its statistics (Step.stats_since);
    `on_spark`: the checkpoint and vacuum a Spark job runs, and why (`spark_steps`)."""
    result = Plan(table.uri, snap.version, now_ms, policy)
    result.refusal = features.refusal(snap.protocol, "maintenance")
    if result.refusal:
        return result
    operations = tuple(map(Operation, operations))
    keep = _lite_floor(table, policy) if CLEANUP in operations else None
    for op in operations:
        if op is CHECKPOINT:
            step = _checkpoint(table, snap, policy, now_ms)
            why = (on_spark or {}).get(op)
            if why and step.due:
                step = replace(step, spark=why, job_spec=_spark_spec(snap, policy, op, now_ms))
            result.steps.append(step)
        elif op is COMPACTION:
            if policy.compaction.enabled:
                result.steps.append(_compaction(table, with_files(table, snap), policy, now_ms))
        elif op is CLEANUP:
            writes = any(s.operation is CHECKPOINT and s.due for s in result.steps)
            result.steps.append(_cleanup(table, snap, policy, now_ms, writes, keep))
        elif op is VACUUM:
            why = (on_spark or {}).get(op)
            if why and policy.vacuum_enabled:  # Delta Spark lists and decides: nothing here
                spec = _spark_spec(snap, policy, op, now_ms)
                reason = f"Delta Spark's VACUUM: {why}"
                result.steps.append(Step(VACUUM, True, reason, spark=why, job_spec=spec))
                continue
            found = _VacuumInputs(full_vacuum, storage_options, known)
            result.steps.append(_vacuum(table, _counted(table, snap), policy, now_ms, found))
        else:
            wanted = _writer(snap, policy, op, stats_since)
            if wanted is not None:
                result.steps.append(wanted)
    _vacuum_first(table, snap, policy, now_ms, result)
    checkpoint = any(s.operation is CHECKPOINT and s.due for s in result.steps)
    if cleanup_after_checkpoint and checkpoint and CLEANUP not in operations:
        result.steps.append(_cleanup_after_checkpoint(table, snap, policy, now_ms, keep))
    return result


def asked_writers(policy: Policy) -> tuple[Operation, ...]:
    """The writers `policy` asks for: statistics and log compaction files by the spec,
    manifests by the table's property."""
    asked = {
        STATS: policy.stats_enabled,
        LOG_COMPACTION: bool(policy.log_compaction_interval),
        MANIFEST: policy.manifest_enabled,
    }
    return tuple(op for op in WRITERS if asked[op])


def _writer(
    snap: SnapshotHeader, policy: Policy, op: Operation, stats_since: int | None = None
) -> Step | None:
    """Statistics, a log compaction file or manifests, where the policy (or, for manifests,
    the table) asks for them; None where it does not."""
    if op not in asked_writers(policy):
        return None
    if op is STATS:
        reason = "stats.enabled: files without statistics get them"
        return Step(STATS, True, reason, stats_since=stats_since, base=snap)
    if op is MANIFEST:
        reason = "delta.compatibility.symlinkFormatManifest.enabled: manifests kept current"
        return Step(MANIFEST, True, reason)
    every = policy.log_compaction_interval
    assert every is not None  # asked for
    cp = snap.segment.checkpoint
    floor = cp.version if cp is not None else -1
    found = [
        r
        for r in log_compaction.ranges(max(floor, snap.version - every), snap.version, every)
        if r[0] > floor
    ]
    if not found:
        return Step(
            LOG_COMPACTION,
            False,
            f"no {every} commits past the checkpoint end a range at version {snap.version}",
        )
    start, end = found[-1]
    return Step(
        LOG_COMPACTION, True, f"commits {start}..{end} (every {every})", log_range=found[-1]
    )


def with_files(table: Table, snap: SnapshotHeader) -> Snapshot:
    """`snap` with its file actions: itself, or read at its version for a header."""
    if isinstance(snap, Snapshot):
        return snap
    return table.snapshot(version=snap.version)


def _counted(table: Table, snap: SnapshotHeader) -> Snapshot | HeldSnapshot:
    """`snap` with its files or their counts: a bare header (read for Spark's steps) loaded."""
    return snap if isinstance(snap, (Snapshot, HeldSnapshot)) else with_files(table, snap)


def forced(
    table: Table,
    snap: SnapshotHeader,
    policy: Policy,
    now_ms: int,
    operation: Operation,
    *,
    classic: bool = False,
    source: CheckpointSource | None = None,
    storage_options: Mapping[str, Any] | None = None,
) -> Plan:
    """A Plan of the one `operation`, run whatever the interval or schedule says: what the
    `checkpoint`, `cleanup` and `vacuum` commands run. A table or retention delta/ refuses
    raises here, as there is nothing else to plan (a LITE vacuum Delta refuses too, unless
    the mode is AUTO, which then runs FULL)."""
    result = Plan(table.uri, snap.version, now_ms, policy)
    if operation is CHECKPOINT:
        step = Step(CHECKPOINT, True, "asked for", classic_v2=classic, source=source)
    elif not isinstance(snap, Snapshot):
        raise TypeError(f"{operation} is planned from a snapshot with its file actions")
    elif operation is CLEANUP:
        step = _cleanup_disabled(policy) or _forced_cleanup(table, snap, policy, now_ms)
    else:
        inputs = _VacuumInputs(storage_options=storage_options)
        detail = _plan_vacuum(table, snap, policy, now_ms, inputs)
        step = Step(VACUUM, True, "asked for", detail)
    result.steps.append(step)
    return result


def _forced_cleanup(table: Table, snap: Snapshot, policy: Policy, now_ms: int) -> Step:
    keep = _lite_floor(table, policy)
    detail = cleanup.plan_table_cleanup(table, snap, policy.log_retention_ms, now_ms, None, keep)
    return Step(CLEANUP, True, "asked for", detail)


def _spark_spec(snap: SnapshotHeader, policy: Policy, op: Operation, now_ms: int) -> dict[str, Any]:
    """The Spark job's input for a checkpoint or vacuum (compaction/job.py)."""
    spec: dict[str, Any] = {
        # One plan may run both on Spark: each its own id (and SparkApplication name).
        "jobId": f"{compaction_plan.job_id(snap.metadata.id, now_ms)}-{op}",
        "operation": str(op),
        "plannedVersion": snap.version,
    }
    if op is VACUUM:  # deltakeeper's retention, never below the table's property
        # Delta rounds RETAIN to whole hours: rounded up here, so it never keeps less.
        spec["retentionHours"] = -(-policy.deleted_file_retention_ms // 3_600_000)
        spec["allowShortRetention"] = policy.allow_short_retention
    return spec


# The steps a Spark job can run (Delta Spark's checkpoint() and VACUUM).
SPARK_OPERATIONS = (CHECKPOINT, VACUUM)


def spark_steps(
    policy: Policy, operations: Iterable[Operation], too_big: Mapping[Operation, str]
) -> dict[Operation, str]:
    """Of `operations`, the checkpoint and vacuum a Spark job runs, each with why: its engine
    says spark, or auto and its estimate does not fit the memory budget (`too_big`: the step
    and what it needs against the budget). For callers that have a Spark launcher."""
    engines = {CHECKPOINT: policy.checkpoint_engine, VACUUM: policy.vacuum_engine}
    out: dict[Operation, str] = {}
    for op in operations:
        engine = engines.get(op)
        if engine is Engine.SPARK:
            out[op] = f"{op}.engine is spark"
        elif engine is Engine.AUTO and op in too_big:
            out[op] = f"too big for the memory budget here: {too_big[op]}"
    return out


def checkpoint_due(table: Table, snap: SnapshotHeader, policy: Policy) -> bool:
    """Whether a plan would write a checkpoint (or repair one): the interval is reached, the
    hint is behind, or a checkpoint is damaged."""
    return bool(snap.damaged_checkpoints) or _regular_checkpoint(table, snap, policy).due


def _checkpoint(table: Table, snap: SnapshotHeader, policy: Policy, now_ms: int) -> Step:
    step = _regular_checkpoint(table, snap, policy)
    damaged = sorted({d.version for d in snap.damaged_checkpoints})
    if not damaged:
        return step
    names = ", ".join(d.keys[0] for d in snap.damaged_checkpoints)
    reason = f"damaged checkpoint {names} is rewritten first"
    if step.due:
        reason += f"; then {step.reason}"
    return replace(step, due=True, reason=reason, repair=tuple(damaged), regular=step.due)


def _regular_checkpoint(table: Table, snap: SnapshotHeader, policy: Policy) -> Step:
    lag, every = snap.commits_since_checkpoint, policy.checkpoint_interval
    cp = snap.segment.checkpoint
    since = f"since the checkpoint at version {cp.version}" if cp else "and no checkpoint yet"
    reason = f"{lag} commits {since}; the interval is {every}"
    if lag < every:
        behind = _hint_behind(table, cp)
        if behind:
            return Step(CHECKPOINT, True, f"{reason}, but {behind}")
    if lag < every or not snap.protocol.has("v2Checkpoint"):
        return Step(CHECKPOINT, lag >= every, reason)
    classic = not _recent_classic(table, snap.version, every * CLASSIC_V2_EVERY_INTERVALS)
    if classic:
        reason += "; classic-named, as none of the last few checkpoints is (older readers)"
    return Step(CHECKPOINT, True, reason, classic_v2=classic)


def _hint_behind(table: Table, cp: Checkpoint | None) -> str | None:
    """Why `_last_checkpoint` needs moving to the newest checkpoint `cp` (a run killed between
    the two writes leaves it behind; or it names no complete checkpoint, which delta-rs and
    DuckDB cannot read past), or None. Writing the checkpoint again moves it. Costs one read,
    and a listing only when the hint names something other than `cp`."""
    hint = table.read_hint()
    named = hint.checkpoint
    if named is not None and not _names(named, cp):
        hint = checked_hint(hint, table.list_log(named.version))
    if hint.status is HintStatus.MISSING and cp is None:
        return None  # no checkpoint yet, and nothing claims one
    if hint.checkpoint is None or hint.status is HintStatus.STALE:
        why = f" ({hint.detail})" if hint.detail else ""
        return f"_last_checkpoint is {hint.status}{why}; writing the checkpoint again repairs it"
    if cp is not None and hint.checkpoint.version < cp.version:
        return (
            f"_last_checkpoint names version {hint.checkpoint.version}, behind the checkpoint "
            f"at {cp.version}; writing the checkpoint again moves it"
        )
    return None


def _names(hint: LastCheckpoint, cp: Checkpoint | None) -> bool:
    """Whether the hint describes `cp` (same version and, for multi-part, as many parts)."""
    if cp is None or hint.version != cp.version:
        return False
    return hint.parts is None or hint.parts <= 1 or len(cp.files) == hint.parts


def _recent_classic(table: Table, version: int, window: int) -> bool:
    """Whether a classic-named checkpoint exists within `window` versions before `version`."""
    listing = table.list_log(max(0, version - window))
    return any(c.kind is Kind.CHECKPOINT for found in listing.checkpoints.values() for c in found)


def _compaction(table: Table, snap: Snapshot, policy: Policy, now_ms: int) -> Step:
    """Which partitions a job would rewrite, from the file actions; refused on tables whose
    features could change what a correct plan is (catalog-managed ones included)."""
    refused = compaction_plan.refusal(snap)
    if refused:
        error = UnsupportedProtocolError(refused)
        return Step(COMPACTION, False, refused, refused=True, error=error)
    files = snap.files
    if "stats" not in files.column_names and snap.protocol.has("deletionVectors"):
        # Deleted-row ratios need the record counts; only DV tables pay for the stats.
        files = table.snapshot(version=snap.version, add_cols=(*LEAN_ADD, "stats")).files
    names = compaction_plan.logical_partition_names(snap.metadata)
    timestamps = compaction_plan.timestamp_partitions(snap.metadata)
    found = compaction_plan.plan(files, tuple(names), policy.compaction, now_ms, timestamps)
    return _compaction_step(snap, found, now_ms)


def forced_compaction(
    table: Table,
    snap: Snapshot,
    policy: Policy,
    now_ms: int,
    found: compaction_plan.CompactionPlan,
    *,
    checkpoint: bool = False,
) -> Plan:
    """A Plan of one compaction step for the partitions the caller planned (`compact`, with
    its own flags and --where). When `checkpoint` and a job is due, the checkpoint step
    `maintain` plans comes first, by the same rule (the checkpoint interval): the job replays
    the log from the newest checkpoint, so one written first saves the job replaying the
    commits since. It is optional: if it fails, the job still runs."""
    result = Plan(table.uri, snap.version, now_ms, policy)
    if checkpoint and found.due:
        result.steps.append(replace(_checkpoint(table, snap, policy, now_ms), optional=True))
    result.steps.append(_compaction_step(snap, found, now_ms))
    return result


def _compaction_step(snap: Snapshot, found: compaction_plan.CompactionPlan, now_ms: int) -> Step:
    if not found.due:
        return Step(COMPACTION, False, found.reason(), found)
    tag = compaction_plan.job_id(snap.metadata.id, now_ms)
    names = compaction_plan.logical_partition_names(snap.metadata)
    types = compaction_plan.spark_partition_types(snap.metadata)
    actions = snap.num_files + snap.num_tombstones
    spec = compaction_plan.job_spec(found, names, tag, snap.version, types, actions)
    return Step(COMPACTION, True, found.reason(), found, job_spec=spec)


def _cleanup(
    table: Table,
    snap: SnapshotHeader,
    policy: Policy,
    now_ms: int,
    after_checkpoint: bool,
    keep: int | None,
    vacuum_first: int | None = None,
) -> Step:
    """Cleanup as it will be once the due checkpoint (if any) is written: a checkpoint written
    in this run lets this run's cleanup drop the commits before it. `keep`: the commits from
    this version on stay for the next LITE vacuum; `vacuum_first`: the N a vacuum run before
    it records, which it keeps instead (a real run reads it back from the table)."""
    disabled = _cleanup_disabled(policy)
    if disabled is not None:
        return disabled
    retention = policy.log_retention_ms

    def planned() -> cleanup.CleanupPlan:
        floor = _lite_floor(table, policy)
        return cleanup.plan_table_cleanup(table, snap, retention, now_ms, None, floor)

    pending = snap.version if after_checkpoint else None
    floor = keep if vacuum_first is None else vacuum_first
    detail = cleanup.plan_table_cleanup(table, snap, retention, now_ms, pending, floor)
    replan = planned if after_checkpoint or vacuum_first is not None else None
    using = f", using the checkpoint at version {pending} written first" if pending else ""
    if vacuum_first is not None:
        using += f"; after the vacuum, which records N = {vacuum_first} first"
    if not detail.delete:
        return Step(CLEANUP, False, _why_nothing(detail) + using, detail, replan=replan)
    reason = f"{detail.files} log files ({format_bytes(detail.bytes)}) past the log retention"
    if detail.kept_for_lite is not None:
        reason += f"; commits from {detail.kept_for_lite} kept for the next LITE vacuum"
    return Step(CLEANUP, True, reason + using, detail, replan=replan)


def _cleanup_after_checkpoint(
    table: Table, snap: SnapshotHeader, policy: Policy, now_ms: int, keep: int | None
) -> Step:
    def later() -> Step:
        return _cleanup(table, snap, policy, now_ms, after_checkpoint=False, keep=keep)

    reason = "planned once the due checkpoint is written"
    return Step(CLEANUP, True, reason, after=CHECKPOINT, plan_later=later)


def _lite_floor(table: Table, policy: Policy) -> int | None:
    """The oldest commit cleanup keeps so that LITE vacuums stay possible; None where this
    table's vacuums never run LITE."""
    if not policy.vacuum_enabled or policy.vacuum_mode not in (Mode.AUTO, Mode.LITE):
        return None
    return vacuum_lite.cleanup_floor(table)


def _vacuum_first(
    table: Table, snap: SnapshotHeader, policy: Policy, now_ms: int, result: Plan
) -> None:
    """When the LITE floor holds cleanup back and this plan's vacuum moves the floor forward,
    run the vacuum first and plan the cleanup after it."""
    steps = result.steps
    clean = next((s for s in steps if s.operation is CLEANUP and s.after is None), None)
    vac = next((s for s in steps if s.operation is VACUUM), None)
    if clean is None or vac is None or not vac.due or vac.refused:
        return
    held = isinstance(clean.detail, cleanup.CleanupPlan) and clean.detail.kept_for_lite is not None
    moved = isinstance(vac.detail, vacuum.VacuumPlan) and vac.detail.record is not None
    if not (held and moved):
        return
    assert isinstance(vac.detail, vacuum.VacuumPlan) and vac.detail.record is not None
    pending = any(s.operation is CHECKPOINT and s.due for s in steps[: steps.index(clean)])
    again = _cleanup(table, snap, policy, now_ms, pending, None, vac.detail.record)
    steps.remove(vac)
    steps[steps.index(clean)] = again
    steps.insert(steps.index(again), vac)


def _cleanup_disabled(policy: Policy) -> Step | None:
    if policy.expired_log_cleanup:
        return None
    return Step(CLEANUP, False, "disabled by the table property delta.enableExpiredLogCleanup")


def full_vacuum_due(policy: Policy, last_full_ms: int | None, now_ms: int) -> str | None:
    """Why an AUTO vacuum is FULL this time, or None: none on record, or vacuum.fullInterval
    has passed since the last one (for the files no commit names: those of failed writes)."""
    if policy.vacuum_mode is not Mode.AUTO:
        return None
    if last_full_ms is None:
        return "no FULL vacuum on record"
    if now_ms - last_full_ms < policy.vacuum_full_interval_ms:
        return None
    every = duration_text(policy.vacuum_full_interval_ms)
    return f"the last FULL vacuum ran at {format_ms(last_full_ms)}, over {every} ago"


@dataclass(frozen=True)
class _VacuumInputs:
    """What a vacuum's plan takes besides the policy (see `plan`)."""

    full_vacuum: str | None = None
    storage_options: Mapping[str, Any] | None = None
    known: LastVacuumInfo | None = None


def _plan_vacuum(
    table: Table, snap: Snapshot | HeldSnapshot, policy: Policy, now_ms: int, inputs: _VacuumInputs
) -> vacuum.VacuumPlan:
    """The vacuum in the policy's mode; AUTO runs LITE unless a FULL one is due
    (`inputs.full_vacuum`) or Delta refuses LITE. The plan says why its mode."""
    mode = policy.vacuum_mode
    found = None
    if mode is Mode.INVENTORY:
        found = _inventory(policy, inputs.storage_options)

    def planned(chosen: Mode) -> vacuum.VacuumPlan:
        return vacuum.plan_table_vacuum(
            table,
            snap,
            policy.deleted_file_retention_ms,
            now_ms,
            policy.allow_short_retention,
            chosen,
            found,
            inputs.known,
        )

    if mode is not Mode.AUTO:
        detail = planned(mode)
        detail.why = f"vacuum mode {mode}"
        return detail
    if inputs.full_vacuum:
        detail = planned(Mode.FULL)
        detail.why = f"auto: {inputs.full_vacuum}"
        return detail
    try:
        detail = planned(Mode.LITE)
    except LiteVacuumImpossible as e:
        detail = planned(Mode.FULL)
        detail.why = f"auto: LITE refused, FULL instead: {e}"
        return detail
    every = duration_text(policy.vacuum_full_interval_ms)
    detail.why = f"auto: LITE while Delta allows it, FULL every {every}"
    return detail


def _inventory(policy: Policy, options: Mapping[str, Any] | None) -> inventory.Inventory:
    settings = policy.vacuum_inventory
    if settings is None:
        raise InvalidInputError("vacuum mode inventory needs vacuum.inventory (--inventory URI)")
    return inventory.open_inventory(settings.uri, settings.format, dict(options or {}))


def _vacuum(
    table: Table, snap: Snapshot | HeldSnapshot, policy: Policy, now_ms: int, inputs: _VacuumInputs
) -> Step:
    if not policy.vacuum_enabled:
        return Step(VACUUM, False, "disabled by the policy (vacuum.enabled: false)")
    try:
        detail = _plan_vacuum(table, snap, policy, now_ms, inputs)
    except (InvalidInputError, UnsupportedProtocolError) as e:
        return Step(VACUUM, False, str(e), refused=True, error=e)
    mode = f"{detail.mode.upper()} ({detail.why})"
    if not detail.delete:
        reason = f"{mode}: no unreferenced data files past the retention"
        if detail.record is None:
            return Step(VACUUM, False, reason, detail)
        return Step(VACUUM, True, f"{reason}; records N = {detail.record}", detail)
    reason = f"{mode}: {detail.files} unreferenced data files ({format_bytes(detail.bytes)})"
    return Step(VACUUM, True, reason, detail)


def _why_nothing(detail: cleanup.CleanupPlan) -> str:
    if detail.cutoff_commit is None:
        return f"no commit is older than the log retention (cut-off {format_ms(detail.cutoff_ms)})"
    if detail.cutoff_checkpoint is None:
        why = f" ({'; '.join(detail.notes)})" if detail.notes else ""
        return (
            f"no usable checkpoint at or before version {detail.cutoff_commit} (the newest "
            f"commit past the log retention){why}; log cleanup needs one to cut at"
        )
    if detail.notes:
        return detail.notes[-1]
    return f"nothing older than the checkpoint at version {detail.cutoff_checkpoint}"
