"""Write small Delta logs by hand, action by action, for unit tests of the reader."""

from __future__ import annotations

import json
import os
import uuid
from pathlib import Path
from typing import Any

SCHEMA = json.dumps(
    {
        "type": "struct",
        "fields": [
            {"name": "id", "type": "long", "nullable": True, "metadata": {}},
            {"name": "day", "type": "string", "nullable": True, "metadata": {}},
        ],
    }
)


def protocol(reader: int = 1, writer: int = 2, **features: list[str]) -> dict[str, Any]:
    p: dict[str, Any] = {"minReaderVersion": reader, "minWriterVersion": writer}
    p.update(features)
    return {"protocol": p}


def metadata(partitions: tuple[str, ...] = (), **conf: str) -> dict[str, Any]:
    return {
        "metaData": {
            "id": "00000000-0000-0000-0000-000000000001",
            "format": {"provider": "parquet", "options": {}},
            "schemaString": SCHEMA,
            "partitionColumns": list(partitions),
            "configuration": dict(conf),
            "createdTime": 1_700_000_000_000,
        }
    }


def add(path: str, size: int = 100, dv: dict[str, Any] | None = None, **pv: str) -> dict[str, Any]:
    a: dict[str, Any] = {
        "path": path,
        "partitionValues": dict(pv),
        "size": size,
        "modificationTime": 1_700_000_000_000,
        "dataChange": True,
    }
    if dv is not None:
        a["deletionVector"] = dv
    return {"add": a}


def remove(
    path: str, ts: int = 1_700_000_000_000, dv: dict[str, Any] | None = None
) -> dict[str, Any]:
    r: dict[str, Any] = {"path": path, "deletionTimestamp": ts, "dataChange": True, "size": 100}
    if dv is not None:
        r["deletionVector"] = dv
    return {"remove": r}


def dv(name: str, offset: int | None = 1) -> dict[str, Any]:
    d: dict[str, Any] = {
        "storageType": "u",
        "pathOrInlineDv": name,
        "sizeInBytes": 10,
        "cardinality": 1,
    }
    if offset is not None:
        d["offset"] = offset
    return d


def commit_info(ts: int = 1_700_000_000_000, ict: int | None = None) -> dict[str, Any]:
    c: dict[str, Any] = {"timestamp": ts, "operation": "WRITE"}
    if ict is not None:
        c["inCommitTimestamp"] = ict
    return {"commitInfo": c}


class LogBuilder:
    """Commits numbered from 0; `mtime_ms` sets the file time used for timestamp time travel."""

    def __init__(self, root: Path) -> None:
        self.root = root
        self.log = root / "_delta_log"
        self.log.mkdir(parents=True, exist_ok=True)
        self.next_version = 0

    def commit(self, *actions: dict[str, Any], mtime_ms: int | None = None) -> int:
        v = self.next_version
        path = self.log / f"{v:020d}.json"
        path.write_text("".join(json.dumps(a) + "\n" for a in actions))
        if mtime_ms is not None:
            os.utime(path, ns=(mtime_ms * 1_000_000, mtime_ms * 1_000_000))
        self.next_version += 1
        return v

    def raw(self, name: str, content: str | bytes) -> Path:
        path = self.log / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(content.encode() if isinstance(content, str) else content)
        return path

    def staged(self, version: int) -> Path:
        return self.raw(f"_staged_commits/{version:020d}.{uuid.uuid4()}.json", "{}\n")
