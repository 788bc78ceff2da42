"""Hand-written logs of tables with time columns, for the unit tests of expiry (delta/expire/,
its CLI command and its operation)."""

from __future__ import annotations

import datetime as dt
import json
from pathlib import Path
from typing import Any

from deltakeeper.delta.expire import times
from tests.support.logbuilder import LogBuilder, protocol

DAY_MS = 86_400_000
NOW_MS = times.micros(dt.datetime(2026, 1, 10, 12)) // 1000  # cutoff 2026-01-05 12:00 at keep 5d
KEEP_MS = 5 * DAY_MS

COLUMNS = {
    "id": "long",
    "day": "string",
    "d": "date",
    "ts": "timestamp",
    "ntz": "timestamp_ntz",
    "n": "integer",
    "day2": "date",
}


def schema(generated: dict[str, str] | None = None, physical: bool = False) -> str:
    fields = []
    for i, (name, kind) in enumerate(COLUMNS.items()):
        meta: dict[str, Any] = {}
        if generated and name in generated:
            meta["delta.generationExpression"] = generated[name]
        if physical:
            meta |= {
                "delta.columnMapping.id": i + 1,
                "delta.columnMapping.physicalName": f"col-{name}",
            }
        fields.append({"name": name, "type": kind, "nullable": True, "metadata": meta})
    return json.dumps({"type": "struct", "fields": fields})


def metadata(
    partitions: tuple[str, ...] = (), generated: dict[str, str] | None = None, **conf: str
) -> dict[str, Any]:
    return {
        "metaData": {
            "id": "00000000-0000-0000-0000-000000000001",
            "format": {"provider": "parquet", "options": {}},
            "schemaString": schema(generated, conf.get("delta.columnMapping.mode") == "name"),
            "partitionColumns": list(partitions),
            "configuration": conf,
            "createdTime": 1_700_000_000_000,
        }
    }


def stats(
    records: int,
    column: str = "ts",
    low: str | None = None,
    high: str | None = None,
    nulls: int | None = 0,
) -> str:
    doc: dict[str, Any] = {"numRecords": records}
    if low is not None:
        doc["minValues"] = {column: low}
    if high is not None:
        doc["maxValues"] = {column: high}
    if nulls is not None:
        doc["nullCount"] = {column: nulls}
    return json.dumps(doc)


def add(
    path: str, records: int | None = 10, size: int = 100, stat: str | None = None, **pv: str
) -> dict[str, Any]:
    body: dict[str, Any] = {
        "path": path,
        "partitionValues": pv,
        "size": size,
        "modificationTime": 1_700_000_000_000,
        "dataChange": True,
    }
    if stat is not None:
        body["stats"] = stat
    elif records is not None:
        body["stats"] = json.dumps({"numRecords": records})
    return {"add": body}


def table(
    root: Path, meta: dict[str, Any], *adds: dict[str, Any], proto: dict[str, Any] | None = None
) -> Path:
    LogBuilder(root).commit(proto or protocol(1, 2), meta, *adds)
    return root


def ts(day: int, hour: int = 0) -> str:
    return f"2026-01-{day:02d}T{hour:02d}:00:00.000Z"
