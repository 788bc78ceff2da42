"""`expire`: data retention by age on one table (delta/expire/)."""

from __future__ import annotations

import argparse
from typing import Any

from deltakeeper.cli import flags, output
from deltakeeper.delta.errors import InvalidInputError
from deltakeeper.delta.expire.run import Expiry, ExpiryRun, expire, rfc3339_us
from deltakeeper.delta.table import open_table
from deltakeeper.units import format_bytes, parse_interval_ms


def cmd_expire(args: argparse.Namespace) -> int:
    now = flags.now(args)
    keep = flags.parsed("--keep", args.keep, parse_interval_ms)
    assert keep is not None  # required by the parser
    if args.rewrite != "none":
        raise InvalidInputError(
            "--rewrite spark is not in this build yet: straddling files are kept (--rewrite none)"
        )
    table = open_table(args.uri, flags.storage_options(args.storage_option))
    run = expire(table, Expiry(args.column, keep, args.max_fraction), now, args.dry_run)
    if args.json:
        output.print_json({"operation": "expire", "rewrite": args.rewrite, **run.to_json()})
    else:
        _print(run, args.uri)
    return 0


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
