"""`discover`: the Delta tables under a prefix, as a DeltaLake would find them."""

from __future__ import annotations

import argparse
import os
from typing import Any

from deltakeeper.cli import flags, output
from deltakeeper.delta import discover as discovery
from deltakeeper.delta.errors import InvalidInputError, NotADeltaTableError
from deltakeeper.delta.storage import LocalStorage, open_storage
from deltakeeper.resources.lake import table_uri


def cmd_discover(args: argparse.Namespace) -> int:
    try:
        storage = open_storage(args.uri, flags.storage_options(args.storage_option))
    except NotADeltaTableError as e:  # a local file: discover wants a folder, not a table
        raise InvalidInputError(f"{args.uri} is a file; give the folder the tables are in") from e
    if isinstance(storage, LocalStorage) and not os.path.isdir(storage.root):
        raise InvalidInputError(f"{args.uri}: no such folder; give the folder the tables are in")
    scan = discovery.discover(
        storage, include=args.include, exclude=args.exclude, max_depth=args.max_depth
    )
    if args.json:
        output.print_json(_report(args.uri, scan))
    else:
        output.discovered(args.uri, scan)
    return 0


def _report(uri: str, scan: discovery.Scan) -> dict[str, Any]:
    return {
        "uri": uri,
        "tables": [{"path": p, "uri": table_uri(uri, p)} for p in scan.tables],
        "requests": scan.requests,
        "seconds": round(scan.seconds, 3),
        "foldersListed": scan.folders_listed,
        "logsChecked": scan.logs_checked,
        "emptyLogs": list(scan.empty_logs),
        "excluded": scan.excluded,
    }
