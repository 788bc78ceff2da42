"""Commands that read one table: `inspect` (its summary) and `files` (its live files)."""

from __future__ import annotations

import argparse

from deltakeeper.cli import flags, output
from deltakeeper.delta.errors import InvalidInputError
from deltakeeper.delta.summary import summarize
from deltakeeper.delta.table import open_table
from deltakeeper.units import parse_size, parse_timestamp_ms


def cmd_inspect(args: argparse.Namespace) -> int:
    try:
        small = parse_size(args.small_file_size)
        ts = parse_timestamp_ms(args.timestamp) if args.timestamp else None
    except ValueError as e:
        raise InvalidInputError(str(e)) from e
    table = open_table(args.uri, flags.storage_options(args.storage_option))
    snap = table.snapshot(version=args.version, timestamp_ms=ts)
    output.warn_damage(snap)
    report = summarize(table, snap, small)
    if args.json:
        output.print_json(report)
    else:
        output.table_summary(report)
    return 0


def cmd_files(args: argparse.Namespace) -> int:
    table = open_table(args.uri, flags.storage_options(args.storage_option))
    snap = table.snapshot(version=args.version)
    output.warn_damage(snap)
    output.files(snap.files, args.json)
    return 0
