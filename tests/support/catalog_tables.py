"""A catalog-managed table on local disk, built to the Delta protocol ("Catalog-managed tables"):
published commits 0-11 written by delta-rs, a checkpoint at 5, commit 12 enabling
`catalogManaged` with the features it requires (`inCommitTimestamp`, and `vacuumProtocolCheck`
as Delta's catalog-managed writers add it), and staged commits 13 and 14 (one of them twice:
a ratified and a rejected attempt) under `_delta_log/_staged_commits/`, which the catalog has
not published. Commits 0-9 are 40 days old by file time (the log retention is 30 days); the
in-commit timestamps start at 12, where the table reads times from them."""

from __future__ import annotations

import json
import os
import time
import uuid
from pathlib import Path
from typing import Any

import deltalake
import pyarrow as pa

DAY_MS = 86_400_000
PUBLISHED = 12  # the newest published commit
STAGED = (13, 13, 14)  # versions of the staged commit files (two attempts at 13)
OLD = 10  # commits 0 .. OLD-1 are past the log retention


def _log(root: Path) -> Path:
    return root / "_delta_log"


def _write(path: Path, actions: list[dict[str, Any]]) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("".join(json.dumps(a) + "\n" for a in actions))


def _set_mtime(path: Path, ms: int) -> None:
    os.utime(path, ns=(ms * 1_000_000, ms * 1_000_000))


def _latest(root: Path, kind: str) -> dict[str, Any]:
    """The newest `kind` action (metaData, protocol) of the published commits 0-11."""
    found: dict[str, Any] = {}
    for v in range(PUBLISHED):
        for line in (_log(root) / f"{v:020d}.json").read_text().splitlines():
            action = json.loads(line)
            if kind in action:
                found = action[kind]
    return found


def _commit_info(ict: int, operation: str) -> dict[str, Any]:
    # First action of every commit once in-commit timestamps are on; txnId as catalog-managed
    # tables require.
    info = {"timestamp": ict, "inCommitTimestamp": ict, "operation": operation}
    return {"commitInfo": {**info, "txnId": str(uuid.uuid4())}}


def build(root: Path, now_ms: int | None = None) -> Path:
    """The table at `root`; `now_ms`: the time the newest commits are dated (default: now)."""
    now = int(time.time() * 1000) if now_ms is None else now_ms
    for i in range(PUBLISHED):
        data = pa.table({"id": [i, i + 100], "day": ["a", "b"]})
        mode = "overwrite" if i % 4 == 3 else "append"  # overwrites leave tombstones
        deltalake.write_deltalake(str(root), data, mode=mode, partition_by=["day"])
        if i == 5:
            deltalake.DeltaTable(str(root)).create_checkpoint()
    for v in range(PUBLISHED):
        age = 40 * DAY_MS - v * 60_000 if v < OLD else DAY_MS - v * 60_000
        _set_mtime(_log(root) / f"{v:020d}.json", now - age)
    _set_mtime(_log(root) / f"{5:020d}.checkpoint.parquet", now - 40 * DAY_MS + 5 * 60_000)
    enable_ms = now - 3_600_000
    meta = _latest(root, "metaData")
    meta["configuration"] = {
        **(meta.get("configuration") or {}),
        "delta.enableInCommitTimestamps": "true",
        "delta.inCommitTimestampEnablementVersion": str(PUBLISHED),
        "delta.inCommitTimestampEnablementTimestamp": str(enable_ms),
    }
    reader = ["catalogManaged", "vacuumProtocolCheck"]
    writer = ["catalogManaged", "inCommitTimestamp", "vacuumProtocolCheck"]
    proto = {
        "minReaderVersion": 3,
        "minWriterVersion": 7,
        "readerFeatures": reader,
        "writerFeatures": writer,
    }
    _write(
        _log(root) / f"{PUBLISHED:020d}.json",
        [_commit_info(enable_ms, "ALTER TABLE"), {"protocol": proto}, {"metaData": meta}],
    )
    for n, v in enumerate(STAGED):
        add = {
            "path": f"day=a/staged-{v}-{n}.parquet",
            "partitionValues": {"day": "a"},
            "size": 100,
            "modificationTime": now,
            "dataChange": True,
        }
        name = f"{v:020d}.{uuid.uuid4()}.json"
        _write(_log(root) / "_staged_commits" / name, [_commit_info(now, "WRITE"), {"add": add}])
    return root


def listing(root: Path) -> dict[str, int]:
    """Every file under the table, by path relative to it, and its size."""
    return {
        str(p.relative_to(root)): p.stat().st_size for p in sorted(root.rglob("*")) if p.is_file()
    }


def commits(root: Path) -> list[int]:
    """The versions of the published commit files."""
    return sorted(int(p.name[:20]) for p in _log(root).glob("*.json") if p.name[:20].isdigit())
