"""delta/log/checkpoint_files.py: row groups whose footer says a column set is all null are not
fetched; everything else is read as written."""

from __future__ import annotations

import io
from types import SimpleNamespace
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from deltakeeper.delta.log import checkpoint_files
from deltakeeper.delta.storage import RangedFile

PROTOCOL = pa.struct([("minReaderVersion", pa.int32()), ("minWriterVersion", pa.int32())])
TXN = pa.struct([("appId", pa.string()), ("version", pa.int64())])
ADD = pa.struct([("path", pa.string()), ("size", pa.int64())])
GROUP = 1000  # rows a row group


def _checkpoint(statistics: bool) -> bytes:
    """Four row groups: the protocol in the first row, a txn in the last group, adds
    everywhere else."""
    rows = 4 * GROUP
    protocol = [{"minReaderVersion": 1, "minWriterVersion": 2}] + [None] * (rows - 1)
    txn = [None] * rows
    txn[rows - 5] = {"appId": "app", "version": 7}
    add = [
        None if p or t else {"path": f"f{i}.parquet", "size": i}
        for i, (p, t) in enumerate(zip(protocol, txn, strict=True))
    ]
    table = pa.table(
        {
            "protocol": pa.array(protocol, PROTOCOL),
            "txn": pa.array(txn, TXN),
            "add": pa.array(add, ADD),
        }
    )
    buf = io.BytesIO()
    pq.write_table(table, buf, row_group_size=GROUP, write_statistics=statistics)
    return buf.getvalue()


def _read(data: bytes, columns: list[str]) -> tuple[list[pa.Table], list[tuple[int, int]]]:
    fetched: list[tuple[int, int]] = []

    def fetch(start: int, end: int) -> bytes:
        fetched.append((start, end))
        return data[start:end]

    pf = pq.ParquetFile(pa.PythonFile(io.BufferedReader(RangedFile(fetch, len(data)), 4096)))
    fetched.clear()  # the footer
    storage: Any = SimpleNamespace(uri="mem://t")  # named in errors only
    return list(checkpoint_files.batches(storage, "k", pf, columns)), fetched


def _groups_touched(data: bytes, fetched: list[tuple[int, int]]) -> set[int]:
    meta = pq.ParquetFile(io.BytesIO(data)).metadata
    touched = set()
    for g in range(meta.num_row_groups):
        rg = meta.row_group(g)
        cols = [rg.column(i) for i in range(rg.num_columns)]
        lo = min(c.dictionary_page_offset or c.data_page_offset for c in cols)
        hi = max(
            (c.dictionary_page_offset or c.data_page_offset) + c.total_compressed_size for c in cols
        )
        if any(start < hi and end > lo for start, end in fetched):
            touched.add(g)
    return touched


def test_the_non_file_actions_are_read_only_where_the_footer_says_they_are():
    data = _checkpoint(statistics=True)
    tables, fetched = _read(data, ["protocol", "txn"])
    others = [a for t in tables for a in checkpoint_files.other_actions(t)]
    assert {"protocol": {"minReaderVersion": 1, "minWriterVersion": 2}} in others
    assert {"txn": {"appId": "app", "version": 7}} in others and len(others) == 2
    assert _groups_touched(data, fetched) == {0, 3}


def test_file_actions_in_every_row_group_are_all_read():
    data = _checkpoint(statistics=True)
    tables, _fetched = _read(data, ["add.path", "add.size"])
    adds = pa.concat_tables(tables)["add"]
    assert adds.null_count == 2 and len(adds) == 4 * GROUP


@pytest.mark.parametrize("columns", [["protocol", "txn"], ["add.path"]])
def test_without_null_counts_every_row_group_is_read(columns: list[str]):
    data = _checkpoint(statistics=False)
    tables, fetched = _read(data, columns)
    assert sum(t.num_rows for t in tables) == 4 * GROUP
    assert _groups_touched(data, fetched) == {0, 1, 2, 3}
