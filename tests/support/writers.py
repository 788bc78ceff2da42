"""Writers that commit to a Delta table continuously, in a child process, keeping a model.

    python -m tests.support.writers deltars|spark TABLE MODEL STOP BASE_MS [PAUSE_S]

Batch n holds the ids [n * BATCH, (n + 1) * BATCH); batch 0 creates the table. After each
commit the writer appends one JSON line to MODEL: {"batch", "first", "end", "version"}, so the
model holds exactly the commits the writer saw succeed. It stops when the file STOP exists and
exits 0; any failure ends it with the traceback on stderr and a non-zero exit.

Time is compressed: right after committing version v the writer sets the commit file's
modification time to BASE_MS + v days (`commit_time`), so a run of seconds spans years of
history and log retention has something to cut. The data files keep their real times.

- deltars: `write_deltalake(mode="append")` through one DeltaTable; delta-rs's own checkpoints
  and log cleanup are switched off, so every checkpoint and deletion is deltakeeper's.
- spark: Delta Spark appends through `spark_session()` (slower; Spark writes its own
  checkpoints every `delta.checkpointInterval` commits, as it would in a real lake).
"""

from __future__ import annotations

import json
import os
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

BATCH = 10
DAY_MS = 86_400_000
CHECKPOINT_INTERVAL = "5"


def commit_time(base_ms: int, version: int) -> int:
    return base_ms + version * DAY_MS


def read_model(path: str | os.PathLike[str]) -> list[dict[str, int]]:
    """The commits a writer recorded, in order (a line being written is left out)."""
    try:
        text = Path(path).read_text()
    except FileNotFoundError:
        return []
    return [json.loads(line) for line in text.splitlines(keepends=True) if line.endswith("\n")]


def _set_commit_time(table: str, version: int, base_ms: int) -> None:
    ns = commit_time(base_ms, version) * 1_000_000
    os.utime(os.path.join(table, "_delta_log", f"{version:020d}.json"), ns=(ns, ns))


def _deltars(table: str) -> Callable[[int, range], int]:
    import pyarrow as pa
    from deltalake import DeltaTable, PostCommitHookProperties, write_deltalake

    hooks = PostCommitHookProperties(create_checkpoint=False, cleanup_expired_logs=False)
    state: dict[str, Any] = {}

    def commit(n: int, ids: range) -> int:
        data = pa.table(
            {"id": pa.array(ids, pa.int64()), "batch": pa.array([n] * len(ids), pa.int64())}
        )
        if n == 0:
            config = {"delta.checkpointInterval": CHECKPOINT_INTERVAL}
            write_deltalake(table, data, configuration=config, post_commithook_properties=hooks)
            state["dt"] = DeltaTable(table)
        else:
            write_deltalake(state["dt"], data, mode="append", post_commithook_properties=hooks)
        return int(state["dt"].version())

    return commit


def _spark(table: str) -> Callable[[int, range], int]:
    from tests.support.spark import spark_session

    spark = spark_session("deltakeeper-writer")
    from delta.tables import DeltaTable

    def commit(n: int, ids: range) -> int:
        df = spark.createDataFrame([(i, n) for i in ids], "id LONG, batch LONG").coalesce(1)
        writer = df.write.format("delta").mode("append" if n else "error")
        if n == 0:
            writer = writer.option("delta.checkpointInterval", CHECKPOINT_INTERVAL)
        writer.save(table)
        # Only this process commits: the newest version in history is the one just written.
        return int(DeltaTable.forPath(spark, table).history(1).collect()[0]["version"])

    return commit


WRITERS = {"deltars": _deltars, "spark": _spark}


def run(kind: str, table: str, model: str, stop: str, base_ms: int, pause_s: float) -> int:
    commit = WRITERS[kind](table)
    n = 0
    with open(model, "a", encoding="utf-8") as out:
        while not os.path.exists(stop):
            ids = range(n * BATCH, (n + 1) * BATCH)
            version = commit(n, ids)
            _set_commit_time(table, version, base_ms)
            line = {"batch": n, "first": ids.start, "end": ids.stop, "version": version}
            out.write(json.dumps(line) + "\n")
            out.flush()
            n += 1
            time.sleep(pause_s)
    return 0


if __name__ == "__main__":
    kind, table, model, stop, base = sys.argv[1:6]
    pause = float(sys.argv[6]) if len(sys.argv) > 6 else 0.0
    sys.exit(run(kind, table, model, stop, int(base), pause))
