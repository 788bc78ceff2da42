"""delta/held.py: a snapshot held as its header and file counts, updated from new commits."""

from __future__ import annotations

from collections import Counter
from pathlib import Path

import pyarrow as pa

from deltakeeper.cli import main
from deltakeeper.delta import schema
from deltakeeper.delta.held import FileCounts, HeldSnapshot, read_held, update_held
from deltakeeper.delta.snapshot import Snapshot
from deltakeeper.delta.table import open_table
from tests.support.logbuilder import LogBuilder, add, dv, metadata, protocol, remove


def _same(held: HeldSnapshot, snap: Snapshot) -> None:
    assert held.version == snap.version
    assert (held.num_files, held.size_bytes, held.num_tombstones) == (
        snap.num_files,
        snap.size_bytes,
        snap.num_tombstones,
    )
    for threshold in (0, 150, 250, 10**9):
        assert held.small_files(threshold) == snap.small_files(threshold)


def test_new_commits_update_the_counts_as_a_fresh_read_finds_them(tmp_path: Path) -> None:
    b = LogBuilder(tmp_path)
    b.commit(
        protocol(3, 7, readerFeatures=["deletionVectors"], writerFeatures=["deletionVectors"]),
        metadata(),
        add("a", 100),
        add("b", 200),
        add("c", 300),
    )
    table = open_table(str(tmp_path))
    held = read_held(table)
    _same(held, table.snapshot())
    steps = [
        (remove("a"),),  # a live file goes; its tombstone counts
        (add("a", 120),),  # ...and comes back: the tombstone goes
        (add("b", 210),),  # the same path again (stats rewritten): one file, the new size
        (remove("c"), add("c", 300, dv=dv("x"))),  # a deletion vector: a new key
        (remove("c", dv=dv("x")), add("c", 300, dv=dv("y", offset=None))),
        (add("d", 50), add("e", 60), remove("d")),  # in one commit: the newest action wins
    ]
    for actions in steps:
        b.commit(*actions)
        before = Counter(table.storage.requests)
        held = update_held(table, held)
        read = Counter(table.storage.requests) - before
        assert read == Counter(list=1, read=1), read  # the listing and the new commit
        _same(held, table.snapshot())
    assert update_held(table, held) is held  # quiet: nothing read but the listing


def test_a_newer_checkpoint_or_a_rewritten_table_is_read_afresh(tmp_path: Path) -> None:
    b = LogBuilder(tmp_path)
    b.commit(protocol(), metadata(), add("a"), add("b"))
    table = open_table(str(tmp_path))
    held = read_held(table)
    b.commit(remove("a"))
    assert main(["checkpoint", str(tmp_path)]) == 0  # as another writer would
    held = update_held(table, held)
    assert held.segment.checkpoint is not None and held.segment.checkpoint.version == 1
    _same(held, table.snapshot())


def test_a_million_files_take_about_24_bytes_each() -> None:
    n = 1_000_000
    adds = pa.table(
        {
            "path": pa.array([f"part=x/file-{i:07d}-c000.snappy.parquet" for i in range(n)]),
            "size": pa.array(range(n), pa.int64()),
            "partitionValues": pa.nulls(n, pa.map_(pa.string(), pa.string())),
            "deletionVector": pa.nulls(n, schema.DELETION_VECTOR),
            "numRecords": pa.array(range(n), pa.int64()),
        }
    )
    removes = pa.table({"path": pa.array([], pa.string())})
    counts = FileCounts.of(adds, removes)
    keys = counts.files["key"].to_pylist()
    assert len(keys) == n and len(set(keys)) == n
    # key and size (8 bytes each), partition hash and record count (4 each), validity bits
    assert counts.nbytes <= 25 * n
