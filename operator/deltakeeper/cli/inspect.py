"""Commands that read one table: `inspect` (its summary) and `files` (its live files)."""

from __future__ import annotations

import argparse
import sys
import time
from typing import Any

from deltakeeper.cli import flags, output
from deltakeeper.delta import schema
from deltakeeper.delta.errors import InvalidInputError
from deltakeeper.delta.snapshot import Snapshot
from deltakeeper.delta.storage import FileInfo
from deltakeeper.delta.summary import log_listing, summarize
from deltakeeper.delta.table import open_table
from deltakeeper.maintenance.policy import PolicyError, effective
from deltakeeper.runtime import health
from deltakeeper.units import parse_size, parse_timestamp_ms


def cmd_inspect(args: argparse.Namespace) -> int:
    try:
        small = parse_size(args.small_file_size)
        ts = parse_timestamp_ms(args.timestamp) if args.timestamp else None
    except ValueError as e:
        raise InvalidInputError(str(e)) from e
    table = open_table(args.uri, flags.storage_options(args.storage_option))
    columns = (*schema.LEAN_ADD, schema.NUM_RECORDS.name)  # the counts health reads
    snap = table.snapshot(version=args.version, timestamp_ms=ts, add_cols=columns)
    output.warn_damage(snap)
    infos = log_listing(table)
    report = summarize(table, snap, small, infos)
    report["health"] = _health(snap, report, infos)
    if args.json:
        output.print_json(report)
    else:
        output.table_summary(report)
    return 0


def _health(snap: Snapshot, report: dict[str, Any], infos: list[FileInfo]) -> dict[str, Any] | None:
    """The table's health now, with the retention and checkpoint interval its properties set
    (Delta's defaults otherwise); None, with a warning, when its properties are invalid."""
    try:
        policy = effective(snap.metadata.configuration)
    except PolicyError as e:
        print(f"warning: no health score: {e}", file=sys.stderr)
        return None
    now = int(time.time() * 1000)
    debt = health.log_debt(infos, policy.log_retention_ms, now)
    return health.of_table(snap, report, debt, policy, now)[0].to_json()


def cmd_files(args: argparse.Namespace) -> int:
    table = open_table(args.uri, flags.storage_options(args.storage_option))
    snap = table.snapshot(version=args.version)
    output.warn_damage(snap)
    output.files(snap.files, args.json)
    return 0
