"""The demo's external writer: delta-rs appending a small batch every second, compacting every
30 commits (which leaves files for vacuum) unless DEMO_WRITER_COMPACT=0 (deltakeeper's Spark
compaction does it then). Its own checkpoints and log cleanup are off, so all of that is
deltakeeper's work. Stops on Ctrl-C or SIGTERM.

A new table starts with three days of history (commits and one checkpoint, their files
backdated): log cleanup only removes what is older than midnight UTC of now minus the
retention, so without it a newcomer would wait until tomorrow to see one."""

from __future__ import annotations

import os
import signal
import sys
import time
from datetime import UTC, datetime

import pyarrow as pa
from deltalake import DeltaTable, PostCommitHookProperties, write_deltalake

HOOKS = PostCommitHookProperties(create_checkpoint=False, cleanup_expired_logs=False)
HISTORY_COMMITS = 24  # one every 3 hours over the last three days
CHECKPOINT_AT = 11  # a checkpoint in that history: what cleanup keeps, and everything after


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
    except Exception:  # no table yet: the first write creates it, with backdated history
        dt = seed_history(path)
        i = dt.version() + 1
    compact = os.environ.get("DEMO_WRITER_COMPACT", "1") != "0"
    try:
        while True:
            write_deltalake(dt, batch(i), mode="append", post_commithook_properties=HOOKS)
            if compact and i % 30 == 0:
                dt.optimize.compact(post_commithook_properties=HOOKS)
            i += 1
            time.sleep(1)
    except KeyboardInterrupt:
        return 0


def seed_history(path: str) -> DeltaTable:
    write_deltalake(path, batch(0), partition_by=["day"], post_commithook_properties=HOOKS)
    dt = DeltaTable(path)
    for i in range(1, HISTORY_COMMITS):
        write_deltalake(dt, batch(i), mode="append", post_commithook_properties=HOOKS)
        if i == CHECKPOINT_AT:
            dt.create_checkpoint()
    # A commit's time is its file's modification time (no in-commit timestamps here).
    start = time.time() - 3 * 86400
    log = os.path.join(path, "_delta_log")
    for name in os.listdir(log):
        if name[:20].isdigit():
            when = start + int(name[:20]) * 3 * 3600
            os.utime(os.path.join(log, name), (when, when))
    return DeltaTable(path)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1]))
