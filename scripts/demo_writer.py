"""The demo's external writer: delta-rs appending a small batch every second, compacting every
30 commits (which leaves files for vacuum). Its own checkpoints and log cleanup are off, so
all of that is deltakeeper's work. Stops on Ctrl-C or SIGTERM."""

from __future__ import annotations

import signal
import sys
import time
from datetime import UTC, datetime

import pyarrow as pa
from deltalake import DeltaTable, PostCommitHookProperties, write_deltalake

HOOKS = PostCommitHookProperties(create_checkpoint=False, cleanup_expired_logs=False)


def batch(i: int) -> pa.Table:
    return pa.table(
        {
            "event_id": pa.array(range(i * 100, i * 100 + 100), pa.int64()),
            "kind": pa.array(["click", "view", "buy", "view"] * 25),
            "day": pa.array([f"2026-11-{(i % 3) + 20}"] * 100),
            "at": pa.array([datetime.now(UTC)] * 100, pa.timestamp("us", tz="UTC")),
        }
    )


def main(path: str) -> int:
    signal.signal(signal.SIGTERM, signal.default_int_handler)
    try:
        dt = DeltaTable(path)
        i = dt.version() + 1
    except Exception:  # no table yet: the first write creates it
        write_deltalake(path, batch(0), partition_by=["day"], post_commithook_properties=HOOKS)
        dt, i = DeltaTable(path), 1
    try:
        while True:
            write_deltalake(dt, batch(i), mode="append", post_commithook_properties=HOOKS)
            if i % 30 == 0:
                dt.optimize.compact(post_commithook_properties=HOOKS)
            i += 1
            time.sleep(1)
    except KeyboardInterrupt:
        return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1]))
