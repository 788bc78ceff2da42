"""`compact`: plan small-file compaction, write a due checkpoint, run the Spark job."""

from __future__ import annotations

import argparse
from typing import Any

from deltakeeper.cli import exits, flags, output
from deltakeeper.compaction import launcher
from deltakeeper.delta import features
from deltakeeper.delta.schema import LEAN_ADD
from deltakeeper.delta.table import open_table
from deltakeeper.maintenance import compaction_plan, executor, planner, record
from deltakeeper.maintenance.operations.outcome import Compactor, Outcome, Result
from deltakeeper.maintenance.operations.outcome import RunField as R


def cmd_compact(args: argparse.Namespace) -> int:
    now = flags.now(args)
    options = flags.storage_options(args.storage_option)
    table = open_table(args.uri, options)
    snap = table.snapshot(add_cols=(*LEAN_ADD, "stats"))
    features.require_writable(snap, "compaction")  # CatalogOwnedError for a catalog's table
    meta = snap.metadata
    names = compaction_plan.logical_partition_names(meta)
    chosen = flags.settings(args)
    timestamps = compaction_plan.timestamp_partitions(meta)
    files = compaction_plan.only_where(snap.files, flags.where(args.where, names), timestamps)
    # The table's own policy: its checkpoint interval and retention rule the checkpoint step.
    pol = flags.policy_for(args.uri, meta.configuration, chosen)
    found = compaction_plan.plan(files, tuple(names), pol.compaction, now, timestamps)
    plan = planner.forced_compaction(
        table, snap, pol, now, found, checkpoint=not args.no_checkpoint
    )
    report: dict[str, Any] = {
        R.OPERATION: "compact",
        "version": snap.version,
        "dryRun": args.dry_run,
        "plan": found.to_json(),
        R.CHECKPOINT_VERSION: None,
        "checkpoint": None,
        "job": None,
    }
    if not args.json:  # with the checkpoint step before the job, if any
        output.compaction_plan(args.uri, snap.version, found, plan.lines()[1:-1])
    code = exits.OK
    if found.due:
        compactor = Compactor(flags.spark_launcher(args), options)
        outcomes = executor.execute(table, plan, args.dry_run, compactor=compactor).outcomes
        outcome = outcomes[-1]
        if len(outcomes) > 1:  # the checkpoint step ran first
            report["checkpoint"] = _checkpoint_first(outcomes[0], args.json)
            report[R.CHECKPOINT_VERSION] = outcomes[0].version
        if not args.dry_run:
            if outcome.result is Result.SKIPPED:
                raise launcher.JobRunning(outcome.message)
            if outcome.job_result is None and outcome.error is not None:
                raise outcome.error  # not started: no Spark here, a store Spark cannot read, ...
            report["job"] = outcome.job_result
            done = outcome.result is Result.DONE
            code = exits.OK if done else exits.UNEXPECTED
            if not args.json:
                output.job_line(outcome.job_result or {})
    if args.json:
        output.print_json(report)
    return code


def _checkpoint_first(outcome: Outcome, as_json: bool) -> dict[str, Any]:
    """The checkpoint before the job, as `compact` reports it; a failure is said on stderr
    too, as the job ran all the same (replaying the JSON log) and the exit code is its own."""
    if outcome.error is not None and outcome.result is Result.FAILED:
        output.warn(
            f"the checkpoint before the job failed: {outcome.message}; "
            "the job replayed the log without it. Fix the cause, then run "
            "`deltakeeper checkpoint URI`."
        )
    elif not as_json and outcome.result is not Result.SKIPPED:  # the plan said why
        output.lines([f"checkpoint: {outcome.result}: {outcome.message}"])
    out = record.as_json(outcome)
    out["error"] = exits.error_name(outcome.error) if outcome.error is not None else None
    return out
