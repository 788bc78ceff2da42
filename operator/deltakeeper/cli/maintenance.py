"""Commands that maintain one table: `checkpoint`, `cleanup` and `vacuum` run their one
operation now (the policy decides only how), `maintain` runs what the policy says is due."""

from __future__ import annotations

import argparse
from typing import Any

from deltakeeper.cli import exits, flags, output
from deltakeeper.delta import cleanup, log_compaction, manifest
from deltakeeper.delta.checkpoint import checkpoint_source
from deltakeeper.delta.errors import UnsupportedProtocolError
from deltakeeper.delta.held import read_header, read_held
from deltakeeper.delta.snapshot import SnapshotHeader
from deltakeeper.delta.stats import compute
from deltakeeper.delta.table import Table, open_table
from deltakeeper.delta.vacuum import plan as vacuum
from deltakeeper.maintenance import executor, planner, record
from deltakeeper.maintenance.operations import Operation
from deltakeeper.maintenance.operations import checkpoint as checkpoint_op
from deltakeeper.maintenance.operations import vacuum as vacuum_op
from deltakeeper.maintenance.operations.outcome import Compactor, Outcome, Progress, Report
from deltakeeper.maintenance.operations.outcome import RunField as R
from deltakeeper.maintenance.operations.registry import SPARK
from deltakeeper.maintenance.operations.steps import Plan


def cmd_checkpoint(args: argparse.Namespace) -> int:
    now = flags.now(args)
    chosen = flags.settings(args)
    table = open_table(args.uri, flags.storage_options(args.storage_option))
    source = checkpoint_source(table, args.version)  # streams the newest checkpoint when it can
    snap = source.header  # no file actions when the source streams
    output.warn_damage(snap)
    pol = flags.policy_for(args.uri, snap.metadata.configuration, chosen)
    plan = planner.forced(
        table, snap, pol, now, Operation.CHECKPOINT, classic=args.classic, source=source
    )
    outcome = _run_one(table, plan, args.dry_run, None)
    run = checkpoint_op.detail(outcome)
    result, checksum = run.written, run.checksum
    assert result is not None
    written = [*result.keys, *([checksum.key] if checksum and not checksum.existed else [])]
    report = {
        R.OPERATION: Operation.CHECKPOINT,
        "version": snap.version,
        "dryRun": args.dry_run,
        R.CHECKPOINT_VERSION: result.version,
        "checkpointFile": result.key,
        "actions": result.rows,
        "addFiles": result.adds,
        "tombstones": result.tombstones,
        "expiredTombstones": result.expired_tombstones,
        "sizeBytes": result.size_bytes,
        "lastCheckpointMoved": result.last_checkpoint_moved,
        "layout": result.layout,
        "checkpointFiles": list(result.keys),
        "parts": result.parts,
        "sidecars": result.sidecars,
        "checksumFile": checksum.key if checksum else None,
        "checksumExisted": checksum.existed if checksum else None,
        R.DELETED_FILES: 0,
        R.DELETED_BYTES: 0,
        R.FILES: written if args.dry_run else [],
    }
    if args.json:
        output.print_json(report)
    else:
        output.checkpoint_written(result, checksum, args.dry_run)
    return 0


def cmd_compact_log(args: argparse.Namespace) -> int:
    table = open_table(args.uri, flags.storage_options(args.storage_option))
    done = log_compaction.compact_log(table, args.start, args.end, args.dry_run)
    report = {
        R.OPERATION: "compact-log",
        "dryRun": args.dry_run,
        "from": done.start,
        "to": done.end,
        "file": done.key,
        "actions": done.actions,
        "sizeBytes": done.size_bytes,
        "written": done.written,
        "existed": done.existed,
    }
    if args.json:
        output.print_json(report)
    elif done.existed:
        print(f"{done.key} exists already: left as it is")
    else:
        verb = "would write" if args.dry_run else "wrote"
        print(f"{verb} {done.key}: {done.actions} actions, {done.size_bytes} bytes")
    return 0


def cmd_compute_stats(args: argparse.Namespace) -> int:
    table = open_table(args.uri, flags.storage_options(args.storage_option))
    limits = {
        k: v
        for k, v in (("max_data_bytes", args.max_read_bytes), ("batch", args.batch_size))
        if v is not None
    }
    show = None if args.json else output.step_progress("compute-stats", "footers read")
    run = compute.compute_stats(table, args.dry_run, args.columns, progress=show, **limits)
    report = {"operation": "compute-stats", "dryRun": args.dry_run, **run.to_json()}
    if args.json:
        output.print_json(report)
    else:
        output.stats_computed(run, args.dry_run)
    return 1 if run.unreadable else 0  # the files read were committed; the others need a look


def cmd_manifest(args: argparse.Namespace) -> int:
    table = open_table(args.uri, flags.storage_options(args.storage_option))
    allows = Operation.MANIFEST in (flags.catalog_allows(args.catalog_allows) or ())
    run = manifest.generate(table, args.dry_run, catalog_allows=allows)
    if args.json:
        output.print_json({"operation": "manifest", "dryRun": args.dry_run, **run.to_json()})
        return 0
    verb = ("would write", "would delete") if args.dry_run else ("wrote", "deleted")
    print(
        f"version {run.version}: {run.files} data files; {verb[0]} {len(run.written)} "
        f"manifests, {run.unchanged} unchanged, {verb[1]} {len(run.deleted)} stale"
    )
    for key in run.written:
        print(f"  {verb[0]} {key}")
    for key in run.deleted:
        print(f"  {verb[1]} {key}")
    return 0


def cmd_cleanup(args: argparse.Namespace) -> int:
    now = flags.now(args)
    chosen = flags.settings(args)
    table = open_table(args.uri, flags.storage_options(args.storage_option))
    snap = table.snapshot()
    output.warn_damage(snap)
    pol = flags.policy_for(args.uri, snap.metadata.configuration, chosen)
    forced = planner.forced(table, snap, pol, now, Operation.CLEANUP)
    deleted = _run_one(table, forced, args.dry_run, None).deleted_files
    step = forced.steps[0]
    plan = step.detail if isinstance(step.detail, cleanup.CleanupPlan) else None
    reasons = plan.reasons() if plan else [f"log cleanup is {step.reason}"]
    report = {
        R.OPERATION: Operation.CLEANUP,
        "version": snap.version,
        "dryRun": args.dry_run,
        R.CHECKPOINT_VERSION: plan.cutoff_checkpoint if plan else None,
        "cutoffCommit": plan.cutoff_commit if plan else None,
        "cutoffTimestamp": plan.cutoff_ms if plan else None,
        R.DELETED_FILES: deleted if not args.dry_run else 0,
        R.DELETED_BYTES: plan.bytes if plan and not args.dry_run else 0,
        R.FILES: [f.key for f in plan.delete] if plan and args.dry_run else [],
        "reasons": reasons,
    }
    if args.json:
        output.print_json(report)
        return 0
    output.lines(reasons)
    if plan is not None:
        output.deleted_files(plan.delete, plan.bytes, deleted, args.dry_run)
    return 0


def cmd_vacuum(args: argparse.Namespace) -> int:
    now = flags.now(args)
    chosen = flags.settings(args)
    options = flags.storage_options(args.storage_option)
    table = open_table(args.uri, options)
    snap = vacuum.load_for_vacuum(table)
    output.warn_damage(snap)
    pol = flags.policy_for(args.uri, snap.metadata.configuration, chosen)
    forced = planner.forced(table, snap, pol, now, Operation.VACUUM, storage_options=options)
    outcome = _run_one(table, forced, args.dry_run, None if args.json else output.progress)
    plan = forced.steps[0].detail
    run = vacuum_op.run_of(outcome)
    assert isinstance(plan, vacuum.VacuumPlan) and run is not None
    deleted, folders = outcome.deleted_files, run.folders
    report = {
        R.OPERATION: Operation.VACUUM,
        "version": plan.version,
        "dryRun": args.dry_run,
        R.CHECKPOINT_VERSION: None,
        R.DELETED_FILES: deleted,
        R.DELETED_BYTES: plan.bytes if not args.dry_run else 0,
        R.FILES: [f.key for f in plan.delete] if args.dry_run else [],
        "filesWithSizes": [{"path": f.key, "size": f.size} for f in plan.delete]
        if args.dry_run
        else [],
        "folders": plan.folders,
        "deletedFolders": folders,
        "skippedNestedTables": plan.nested,
        "retentionMs": plan.retention_ms,
        "cutoffTimestamp": plan.cutoff_ms,
        "scannedFiles": plan.scanned,
        "referencedFiles": plan.referenced,
        **run.to_json(),
        "reasons": [f"mode {plan.mode}: {plan.why}", *plan.reasons()],
    }
    if args.json:
        output.print_json(report)
        return 0
    output.lines(report["reasons"])
    output.deleted_files(plan.delete, plan.bytes, deleted, args.dry_run)
    output.removed_folders(plan.folders, folders, args.dry_run)
    return 0


def cmd_maintain(args: argparse.Namespace) -> int:
    now = flags.now(args)
    options = flags.storage_options(args.storage_option)
    table = open_table(args.uri, options)
    ops = flags.operations(args.only)
    snap = _read_for(table, ops, getattr(args, "engine", None) == "spark")
    output.warn_damage(snap)
    pol = flags.policy_for(args.uri, snap.metadata.configuration, flags.settings(args))
    spark = planner.spark_steps(pol, ops, {})  # no budget here: only --engine spark
    plan = planner.plan(
        table, snap, pol, now, ops, storage_options=options, on_spark=spark, named=bool(args.only)
    )
    if plan.refusal:
        raise UnsupportedProtocolError(f"{args.uri}: {plan.refusal}")
    if not args.json:
        output.lines(plan.lines())
    compactor = Compactor(flags.spark_launcher(args), options)
    progress = None if args.json else output.progress
    report = executor.execute(table, plan, args.dry_run, progress, compactor)
    if args.json:
        output.print_json(_maintain_json(plan, report))
    else:
        output.maintained(report, args.dry_run)
    return max((exits.exit_code(o.error) for o in report.outcomes), default=exits.OK)


def _read_for(table: Table, ops: tuple[Operation, ...], on_spark: bool) -> SnapshotHeader:
    """The snapshot `ops` need. With Spark running the checkpoint and vacuum nothing here needs
    the file actions: Spark's steps alone plan from the header (a table too big to load is
    handed over in seconds), others from a table counted a batch at a time."""
    if not on_spark:
        return table.snapshot()
    if set(ops) <= set(SPARK):
        return read_header(table)
    return read_held(table)


def _run_one(table: Table, plan: Plan, dry_run: bool, progress: Progress | None) -> Outcome:
    """Run a forced plan's one step; its failure is the command's."""
    outcome = executor.execute(table, plan, dry_run, progress).outcomes[0]
    if outcome.error is not None:
        raise outcome.error
    return outcome


def _maintain_json(plan: Plan, report: Report) -> dict[str, Any]:
    ran = (o for o in report.outcomes if o.operation is Operation.CHECKPOINT)
    written = [o.version for o in ran if o.version is not None]
    return {
        R.OPERATION: "maintain",
        "version": plan.version,
        "dryRun": report.dry_run,
        R.CHECKPOINT_VERSION: written[0] if written else None,
        R.DELETED_FILES: report.total("deleted_files"),
        R.DELETED_BYTES: report.total("deleted_bytes"),
        R.FILES: [f for o in report.outcomes for f in o.files],
        "retention": plan.policy.retention_json(),
        "plan": plan.to_json(),
        "results": [record.as_json(o) for o in report.outcomes],
        R.SECONDS: round(report.seconds, 3),
    }
