"""Row-level agreement: each oracle reads a table's rows, and we compare a digest of them.

Engines hand rows back in different shapes (Arrow maps as key/value pairs, Spark maps as dicts,
aware or naive datetimes, Decimal), so every value is first brought to one canonical JSON form;
the digest is the SHA-256 of the sorted canonical rows, so row order never matters.
"""

from __future__ import annotations

import datetime as dt
import hashlib
import json
import math
from decimal import Decimal
from typing import Any

from tests.support.oracles import Unreadable, _reason, duckdb_connect

EPOCH = dt.datetime(1970, 1, 1, tzinfo=dt.UTC)


def canonical(value: Any) -> Any:
    if isinstance(value, dt.datetime):
        aware = value if value.tzinfo else value.replace(tzinfo=dt.UTC)  # naive: UTC wall clock
        return {"ts_us": (aware - EPOCH) // dt.timedelta(microseconds=1)}
    if isinstance(value, dt.date):
        return {"date": value.isoformat()}
    if isinstance(value, Decimal):
        return {"dec": str(value.normalize())}
    if isinstance(value, float):
        return {"float": "nan" if math.isnan(value) else repr(value)}
    if isinstance(value, bytes | bytearray):
        return {"bin": bytes(value).hex()}
    if hasattr(value, "asDict"):  # a Spark Row (struct)
        value = value.asDict()
    if isinstance(value, dict):
        if not value:
            return []  # an empty Arrow map is an empty list: the two cannot be told apart
        return {"map": sorted([str(k), canonical(v)] for k, v in value.items())}
    if isinstance(value, list | tuple):
        if value and all(isinstance(e, tuple) and len(e) == 2 for e in value):
            return canonical(dict(value))  # an Arrow map: [(key, value), ...]
        return [canonical(e) for e in value]
    return value


def digest(rows: list[dict[str, Any]]) -> tuple[int, str]:
    lines = sorted(json.dumps(canonical(r), sort_keys=True) for r in rows)
    return len(lines), hashlib.sha256("\n".join(lines).encode()).hexdigest()


def deltars_digest(path: str, version: int | None = None) -> tuple[int, str] | Unreadable:
    import pyarrow as pa
    from deltalake import DeltaTable, QueryBuilder

    try:
        # QueryBuilder applies deletion vectors (a pyarrow dataset would not) and exits cleanly.
        qb = QueryBuilder().register("t", DeltaTable(path, version=version))
        return digest(pa.table(qb.execute("SELECT * FROM t").read_all()).to_pylist())
    except Exception as e:
        return _reason("delta-rs", e)


def duckdb_digest(path: str, version: int | None = None) -> tuple[int, str] | Unreadable:
    sql, args = "SELECT * FROM delta_scan(?)", [path]
    if version is not None:
        sql, args = "SELECT * FROM delta_scan(?, version => ?)", [path, version]
    try:
        with duckdb_connect() as con:
            # Through Arrow: DuckDB's Python rows need pytz for TIMESTAMPTZ (not installed).
            return digest(con.execute(sql, args).to_arrow_table().to_pylist())
    except Exception as e:
        return _reason("duckdb", e)


def spark_digest(spark: Any, path: str, version: int | None = None) -> tuple[int, str]:
    reader = spark.read.format("delta")
    if version is not None:
        reader = reader.option("versionAsOf", version)
    return digest([r.asDict() for r in reader.load(path).collect()])
