"""`expire`: data retention by age on one table (delta/expire/)."""

from __future__ import annotations

import argparse
from typing import Any

from deltakeeper.cli import exits, flags, output
from deltakeeper.compaction.launcher import JobRequest
from deltakeeper.delta.expire.run import Expiry, ExpiryRun, expire, rfc3339_us
from deltakeeper.delta.table import Table, open_table
from deltakeeper.maintenance.operations import expire as expire_op
from deltakeeper.units import format_bytes, parse_interval_ms


def cmd_expire(args: argparse.Namespace) -> int:
    now = flags.now(args)
    keep = flags.parsed("--keep", args.keep, parse_interval_ms)
    assert keep is not None  # required by the parser
    options = flags.storage_options(args.storage_option)
    table = open_table(args.uri, options)
    run = expire(table, Expiry(args.column, keep, args.max_fraction), now, args.dry_run)
    if not args.json:
        _print(run, args.uri)
    job: dict[str, Any] | None = None
    code = exits.OK
    if args.rewrite == "spark" and run.plan.straddling:
        job, code = _rewrite(args, table, run, now, options)
    if args.json:
        report = {"operation": "expire", "rewrite": args.rewrite, **run.to_json(), "job": job}
        output.print_json(report)
    return code


def _rewrite(
    args: argparse.Namespace, table: Table, run: ExpiryRun, now: int, options: dict[str, Any]
) -> tuple[dict[str, Any], int]:
    """Delta Spark's DELETE of the straddling files' expired rows, after the expiry's commit:
    the job's spec (a dry run), or its JSON line once it ended, and the exit code."""
    base = run.version if run.version is not None else run.plan.version
    spec = expire_op.rewrite_spec(run.plan, base, now)
    where = (
        f"{len(spec['partitions'])} partitions"
        if run.plan.base.metadata.partition_columns
        else "the table"
    )
    if args.dry_run:
        if not args.json:
            print(f"would run Delta Spark's DELETE WHERE {spec['condition']} on {where}")
        return {"spec": spec}, exits.OK
    done = flags.spark_launcher(args).start(JobRequest(table.uri, spec, options)).wait()
    if not args.json:
        r = done.result
        print(
            f"Delta Spark's DELETE on {where}: {r.get('result')}, {r.get('rowsDeleted')} rows "
            f"deleted, {r.get('filesRemoved')} files rewritten into {r.get('filesAdded')}"
            + (f"; {done.error}" if not done.ok else "")
        )
    return done.result, exits.OK if done.ok else exits.UNEXPECTED


def _print(run: ExpiryRun, uri: str) -> None:
    p = run.plan
    print(
        f"version {p.version}: cutoff {rfc3339_us(p.cutoff_us)}, expiring {p.predicate} (by {p.by})"
    )
    rows = f"{p.rows} rows" + (f" (+{p.uncounted} files without a count)" if p.uncounted else "")
    what = f"{p.files} files, {rows}, {format_bytes(p.bytes)}"
    if run.dry_run:
        print(f"would remove {what}")
    elif run.version is None:
        print("nothing to remove")
    else:
        print(f"removed {what} in version {run.version}")
    _kept(p.straddling, "straddling the cutoff (rows on both sides, or nulls): kept")
    _kept(
        p.without_stats,
        f"without statistics for {p.column.name}: kept; `deltakeeper compute-stats {uri}` "
        "gives them some",
    )


def _kept(paths: list[str], why: str) -> None:
    if not paths:
        return
    print(f"{len(paths)} files {why}")
    shown: list[Any] = paths[:10]
    for path in shown:
        print(f"  {path}")
    if len(paths) > len(shown):
        print(f"  ... and {len(paths) - len(shown)} more")
