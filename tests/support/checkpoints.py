"""Small tables to checkpoint, and a checkpoint's content as comparable rows, for the checkpoint
writer's tests (tests/unit/delta/checkpoint/) and the conformance tests of the incremental
source (tests/conformance/test_checkpoint_write.py)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pyarrow.parquet as pq

from deltakeeper.delta.checkpoint import (
    CheckpointResult,
    Content,
    load_for_checkpoint,
    write_checkpoint,
)
from deltakeeper.delta.table import open_table
from tests.support.logbuilder import LogBuilder, add, metadata, protocol, remove

DAY = 86_400_000
NOW = 1_800_000_000_000
V2 = protocol(3, 7, readerFeatures=["v2Checkpoint"], writerFeatures=["v2Checkpoint"])


def partitioned_table(
    root: Path, proto: dict[str, Any] | None = None, n: int = 12, **conf: str
) -> Path:
    """`n` files over partitions day=d0..d2 at version 0; at version 1 one is removed (a day
    before NOW) and one added: n live files and one tombstone."""
    b = LogBuilder(root)
    files = [add(f"day=d{i % 3}/f-{i}.parquet", day=f"d{i % 3}") for i in range(n)]
    b.commit(proto or protocol(), metadata(("day",), **conf), *files)
    b.commit(remove("day=d0/f-0.parquet", ts=NOW - DAY), add("day=d1/g.parquet", day="d1"))
    return root


def checkpoint(root: Path, **kw: Any) -> CheckpointResult:
    """A checkpoint of the latest version at NOW with a 30-day retention; `kw` as
    write_checkpoint takes them (part_size, classic, dry_run)."""
    table = open_table(str(root))
    return write_checkpoint(table, load_for_checkpoint(table), NOW, 30 * DAY, **kw)


# A table whose `day` partition is a date, for the typed stats and partition columns.
STATS_SCHEMA = json.dumps(
    {
        "type": "struct",
        "fields": [
            {"name": "id", "type": "long", "nullable": True, "metadata": {}},
            {"name": "day", "type": "date", "nullable": True, "metadata": {}},
        ],
    }
)
GOOD_STATS = json.dumps(
    {"numRecords": 3, "minValues": {"id": 1}, "maxValues": {"id": 9}, "nullCount": {"id": 0}}
)


def stats_table(root: Path, stats: list[str | None], **conf: str) -> Path:
    """One file a day from 2024-01-01 with the given `stats` strings (None: no stats)."""
    b = LogBuilder(root)
    meta = metadata(("day",), **conf)
    meta["metaData"]["schemaString"] = STATS_SCHEMA
    files = []
    for i, s in enumerate(stats):
        a = add(f"day=2024-01-0{i + 1}/f{i}", day=f"2024-01-0{i + 1}")
        a["add"]["stats"] = s
        files.append(a)
    b.commit(protocol(), meta, *files)
    return root


def add_rows(root: Path, key: str) -> list[dict[str, Any]]:
    """The `add` rows of the checkpoint file `key` (relative to the table root)."""
    return [r["add"] for r in pq.read_table(root / key).to_pylist() if r["add"]]


def row_json(value: Any) -> str:
    """`value` as canonical JSON text: rows that compare and hash as equal when they are."""
    return json.dumps(value, sort_keys=True, default=str)


def content_rows(content: Content) -> tuple[list, set[str], set[str], tuple[int, int]]:
    """(header rows, add rows, remove rows, declared counts) of a Content, rows as JSON."""
    adds: list[str] = []
    removes: list[str] = []
    for batch in content.batches:
        for row in batch.to_pylist():
            if row["add"] is not None:
                adds.append(row_json(row["add"]))
            if row["remove"] is not None:
                removes.append(row_json(row["remove"]))
    assert len(adds) == len(set(adds)) and len(removes) == len(set(removes)), "duplicate rows"
    assert (len(adds), len(removes)) == (content.num_adds, content.num_removes)
    header = [(kind, row_json(body)) for kind, body in content.header]
    return header, set(adds), set(removes), (content.num_adds, content.num_removes)
