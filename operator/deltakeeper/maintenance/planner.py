"""What maintenance is due for one table now, and why.

Planning only reads: each operation plans its own step (maintenance/operations/), and this
module puts them in order, with the two rules that join operations: a new checkpoint lets a
cleanup drop the commits before it, and a vacuum that moves `_last_vacuum_info` runs before
the cleanup it unblocks. It returns a Plan, which is plain data: the executor carries it out;
a dry run prints it.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import replace
from typing import Any

from deltakeeper.delta import cleanup as delta_cleanup
from deltakeeper.delta import features
from deltakeeper.delta.checkpoint import CheckpointSource
from deltakeeper.delta.errors import CatalogOwnedError
from deltakeeper.delta.features import Protocol
from deltakeeper.delta.held import HeldSnapshot
from deltakeeper.delta.snapshot import Snapshot, SnapshotHeader
from deltakeeper.delta.table import Table
from deltakeeper.delta.vacuum import plan as delta_vacuum
from deltakeeper.delta.vacuum.info import LastVacuumInfo
from deltakeeper.maintenance import compaction_plan
from deltakeeper.maintenance.operations import OnCatalogManaged, Operation
from deltakeeper.maintenance.operations import checkpoint as checkpoint_op
from deltakeeper.maintenance.operations import cleanup as cleanup_op
from deltakeeper.maintenance.operations import compaction as compaction_op
from deltakeeper.maintenance.operations.registry import REGISTRY, in_order
from deltakeeper.maintenance.operations.spec import Planning
from deltakeeper.maintenance.operations.steps import Plan, Step, unplanned
from deltakeeper.maintenance.policy import Engine, Policy

CHECKPOINT, CLEANUP, VACUUM = Operation.CHECKPOINT, Operation.CLEANUP, Operation.VACUUM


def plan(
    table: Table,
    snap: Snapshot | HeldSnapshot | SnapshotHeader,
    policy: Policy,
    now_ms: int,
    operations: Iterable[Operation] = tuple(Operation),
    *,
    cleanup_after_checkpoint: bool = False,
    full_vacuum: str | None = None,
    storage_options: Mapping[str, Any] | None = None,
    known: LastVacuumInfo | None = None,
    stats_since: int | None = None,
    on_spark: Mapping[Operation, str] | None = None,
    named: bool = False,
) -> Plan:
    """The Plan for `snap` (any column set; checkpoint columns are loaded by the executor). A
    watcher's held snapshot, without file actions, serves every step: compaction reads the
    file actions at its version, a vacuum only when it has candidates to check against them.
    A bare header (read for the steps a Spark job runs) serves those; any other is loaded.
    An operation the policy does not ask for (compaction not enabled, no statistics, ...) is
    no step at all, unless `named`: the caller named `operations` itself (`maintain --only`).

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
    `on_spark`: the operations a Spark job runs, and why (`spark_steps`)."""
    result = Plan(table.uri, snap.version, now_ms, policy)
    result.refusal = features.refusal(snap.protocol, "maintenance")
    if result.refusal:
        return result
    ops = in_order(operations)
    keep, floor_failed = None, None
    try:
        keep = cleanup_op.lite_floor(table, policy) if CLEANUP in ops else None
    except Exception as e:  # cleanup cannot know what to keep: it alone fails
        floor_failed = unplanned(CLEANUP, e)
    p = Planning(
        table,
        snap,
        policy,
        now_ms,
        result.steps,
        full_vacuum=full_vacuum,
        known=known,
        storage_options=storage_options,
        stats_since=stats_since,
        keep=keep,
    )
    for op in ops:
        spec = REGISTRY[op]
        if not (named or spec.asked(policy)):
            continue
        owned = catalog_owned(snap.protocol, policy, op)
        if owned is not None:
            error = CatalogOwnedError(f"{table.uri}: {owned}")
            result.steps.append(Step(op, False, owned, refused=True, error=error))
            continue
        if op is CLEANUP and floor_failed is not None:
            result.steps.append(floor_failed)
            continue
        why = (on_spark or {}).get(op)
        step = _planned(p, op, why)
        if step is not None:
            result.steps.append(step)
            result.steps += _finishing(p, step, why)
    _vacuum_first(p, result)
    owned = catalog_owned(snap.protocol, policy, CLEANUP)
    if cleanup_after_checkpoint and p.due(CHECKPOINT) and CLEANUP not in ops and not owned:
        result.steps.append(cleanup_op.after_checkpoint(p))
    return result


def _planned(p: Planning, op: Operation, on_spark: str | None) -> Step | None:
    """`op`'s step; a failed one when planning it raises: an input one operation reads (an
    inventory, `_last_vacuum_info`) that cannot be read stops that operation, not the plan."""
    spec = REGISTRY[op]
    try:
        return spec.spark(p, on_spark) if on_spark and spec.spark else spec.plan(p)
    except Exception as e:
        return unplanned(op, e)


def _finishing(p: Planning, step: Step, on_spark: str | None) -> list[Step]:
    """The Spark job that finishes `step` (its spec's `then`), where a Spark job runs for it."""
    then = REGISTRY[step.operation].then
    if then is None or on_spark is None or step.refused or step.failed:
        return []
    follow = then(p, step, on_spark)
    return [follow] if follow is not None else []


def catalog_owned(protocol: Protocol, policy: Policy, operation: Operation) -> str | None:
    """Why `operation` must not run on this table, or None: a catalog-managed table is its
    catalog's, and a client may only write checkpoints, log compaction files and checksums
    for it (Delta's "Maintenance Operations on Catalog-managed Tables"). Each operation's
    spec says which it is; an operation that needs the catalog's permission runs when the
    policy's catalog.allowedOperations names it, one that commits never does."""
    managed = features.catalog_managed(protocol)
    rule = REGISTRY[operation].catalog
    if managed is None or rule is OnCatalogManaged.RUNS:
        return None
    if rule is OnCatalogManaged.IF_PERMITTED and operation in policy.catalog_allowed:
        return None
    lead = f"{operation} refused, nothing deleted or written: the table is catalog-managed"
    if rule is OnCatalogManaged.NEVER:
        return (
            f"{lead} ({managed}); it would commit, and commits to this table go through its "
            "catalog, which deltakeeper does not do"
        )
    return (
        f"{lead} ({managed}); its catalog runs {operation} or permits it (if it does, name "
        f"{operation} in catalog.allowedOperations, or on the command line in --catalog-allows)"
    )


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
    force = REGISTRY[operation].force
    if force is None:
        raise ValueError(f"{operation} has no command of its own that forces it")
    owned = catalog_owned(snap.protocol, policy, operation)
    if owned is not None:
        raise CatalogOwnedError(f"{table.uri}: {owned}")
    p = Planning(
        table, snap, policy, now_ms, storage_options=storage_options, classic=classic, source=source
    )
    result = Plan(table.uri, snap.version, now_ms, policy)
    step = force(p)
    assert step is not None
    result.steps.append(step)
    return result


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
        first = checkpoint_op.plan(Planning(table, snap, policy, now_ms))
        result.steps.append(replace(first, optional=True))
    result.steps.append(compaction_op.step(snap, found, now_ms))
    return result


def spark_steps(
    policy: Policy, operations: Iterable[Operation], too_big: Mapping[Operation, str]
) -> dict[Operation, str]:
    """Of `operations`, those a Spark job runs (those with an engine setting), each with why: its
    engine says spark, or auto and its estimate does not fit the memory budget (`too_big`:
    the step and what it needs against the budget). For callers that have a Spark launcher."""
    out: dict[Operation, str] = {}
    for op in operations:
        spec = REGISTRY[op]
        engine = spec.engine(policy) if spec.engine is not None else None
        if engine is Engine.SPARK:
            out[op] = f"{spec.engine_key or f'{op}.engine'} is spark"
        elif engine is Engine.AUTO and op in too_big:
            out[op] = f"too big for the memory budget here: {too_big[op]}"
    return out


def _vacuum_first(p: Planning, result: Plan) -> None:
    """When the LITE floor holds cleanup back and this plan's vacuum moves the floor forward,
    run the vacuum first and plan the cleanup after it."""
    steps = result.steps
    clean = next((s for s in steps if s.operation is CLEANUP and s.after is None), None)
    vac = next((s for s in steps if s.operation is VACUUM), None)
    if clean is None or vac is None or not vac.due or vac.refused:
        return
    detail = clean.detail
    held = isinstance(detail, delta_cleanup.CleanupPlan) and detail.kept_for_lite is not None
    moved = isinstance(vac.detail, delta_vacuum.VacuumPlan) and vac.detail.record is not None
    if not (held and moved):
        return
    assert isinstance(vac.detail, delta_vacuum.VacuumPlan) and vac.detail.record is not None
    pending = any(s.operation is CHECKPOINT and s.due for s in steps[: steps.index(clean)])
    again = cleanup_op.step(p.table, p.snap, p.policy, p.now_ms, pending, None, vac.detail.record)
    steps.remove(vac)
    steps[steps.index(clean)] = again
    steps.insert(steps.index(again), vac)
