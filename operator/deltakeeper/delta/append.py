"""New data files for a table deltakeeper writes itself (the operation history): an Arrow table
as one Parquet file, and its `add` action with the statistics readers skip files by.

Statistics follow Delta Spark's format: `numRecords`; `minValues`, `maxValues` and `nullCount`
per top-level column (none for maps, lists and structs here); timestamps as ISO-8601 with
milliseconds in UTC (a maximum rounded up); a string bound only when it is at most 32
characters, the prefix Delta indexes (a longer one would have to be truncated, so it is left
out: no bound is always safe).
"""

from __future__ import annotations

import datetime as dt
import io
import uuid
from typing import Any

import orjson
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from deltakeeper.delta.properties import STRING_PREFIX_DEFAULT
from deltakeeper.delta.storage import Storage


def write_file(storage: Storage, rows: pa.Table, now_ms: int) -> dict[str, Any]:
    """Write `rows` as a new Parquet file at the table's root; its `add` action."""
    sink = io.BytesIO()
    pq.write_table(rows, sink, compression="snappy")
    data = sink.getvalue()
    path = f"part-00000-{uuid.uuid4()}-c000.snappy.parquet"
    storage.put_if_absent(path, data)
    return {
        "add": {
            "path": path,
            "partitionValues": {},
            "size": len(data),
            "modificationTime": now_ms,
            "dataChange": True,
            "stats": orjson.dumps(stats(rows)).decode(),
        }
    }


def stats(rows: pa.Table) -> dict[str, Any]:
    out: dict[str, Any] = {"numRecords": rows.num_rows, "minValues": {}, "maxValues": {}}
    nulls: dict[str, int] = {}
    for name, column in zip(rows.column_names, rows.columns, strict=True):
        if pa.types.is_nested(column.type):
            continue
        nulls[name] = column.null_count
        if column.null_count == len(column):
            continue
        low, high = pc.min_max(column).values()
        for side, value in (("minValues", low.as_py()), ("maxValues", high.as_py())):
            if isinstance(value, str) and len(value) > STRING_PREFIX_DEFAULT:
                continue
            out[side][name] = _json_value(value, up=side == "maxValues")
    out["nullCount"] = nulls
    return out


def _json_value(value: Any, up: bool) -> Any:
    """A bound as Delta writes it; a maximum timestamp is rounded up to the millisecond, so
    that it still bounds the microseconds it drops."""
    if isinstance(value, dt.datetime):
        utc = value.astimezone(dt.UTC)
        if up and utc.microsecond % 1000:
            utc += dt.timedelta(microseconds=1000 - utc.microsecond % 1000)
        return utc.strftime("%Y-%m-%dT%H:%M:%S.") + f"{utc.microsecond // 1000:03d}Z"
    if isinstance(value, dt.date):
        return value.isoformat()
    return value
