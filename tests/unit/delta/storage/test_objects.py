"""delta/storage/objects.py: RangedFile, the object stores' open_input: seekable, ranged, bounded.

A parquet read fetches only the footer and the columns it reads."""

from __future__ import annotations

import io

import pyarrow as pa
import pyarrow.parquet as pq

from deltakeeper.delta.storage import RangedFile
from deltakeeper.delta.storage.objects import RANGE_BUFFER_BYTES, RANGE_REQUEST_BYTES


def _parquet(rows: int) -> bytes:
    table = pa.table({"a": list(range(rows)), "b": [str(i) * 8 for i in range(rows)]})
    buf = io.BytesIO()
    pq.write_table(table, buf, row_group_size=rows // 4)
    return buf.getvalue()


def test_ranged_file_fetches_the_footer_and_one_column_not_the_whole_file():
    data = _parquet(400_000)
    fetched: list[tuple[int, int]] = []

    def fetch(start: int, end: int) -> bytes:
        fetched.append((start, end))
        return data[start:end]

    raw = RangedFile(fetch, len(data))
    pf = pq.ParquetFile(pa.PythonFile(io.BufferedReader(raw, 1 << 16), mode="r"))
    assert sum(b.num_rows for b in pf.iter_batches(columns=["a"])) == 400_000
    assert sum(end - start for start, end in fetched) < len(data) / 2


def test_a_long_read_is_split_into_bounded_requests():
    data = bytes(range(256)) * (40 * 1024)  # 10 MiB
    fetched: list[tuple[int, int]] = []

    def fetch(start: int, end: int) -> bytes:
        fetched.append((start, end))
        return data[start:end]

    reader = io.BufferedReader(RangedFile(fetch, len(data)), RANGE_BUFFER_BYTES)
    reader.seek(100)
    assert reader.read(9 << 20) == data[100 : 100 + (9 << 20)]
    assert max(end - start for start, end in fetched) <= RANGE_REQUEST_BYTES
    assert len(fetched) == 3
