"""Create (or grow) the demo table for `make run`: small appends by delta-rs, an external writer.

Each run appends a few commits, so running `make run` twice shows the log growing.
"""

from __future__ import annotations

import os
import sys
from datetime import UTC, datetime

import pyarrow as pa
from deltalake import DeltaTable, write_deltalake


def main(path: str) -> None:
    os.makedirs(path, exist_ok=True)
    exists = os.path.isdir(os.path.join(path, "_delta_log"))
    start = DeltaTable(path).version() + 1 if exists else 0
    for i in range(start, start + 5):
        batch = pa.table(
            {
                "event_id": pa.array(range(i * 100, i * 100 + 100), pa.int64()),
                "kind": pa.array(["click", "view", "buy", "view"] * 25),
                "day": pa.array([f"2026-11-{(i % 3) + 20}"] * 100),
                "at": pa.array([datetime.now(UTC)] * 100, pa.timestamp("us", tz="UTC")),
            }
        )
        write_deltalake(path, batch, mode="append", partition_by=["day"])
    dt = DeltaTable(path)
    print(f"demo: {path} is at version {dt.version()} after 5 appends by delta-rs", file=sys.stderr)


if __name__ == "__main__":
    main(sys.argv[1] if len(sys.argv) > 1 else "demo-lake/events")
