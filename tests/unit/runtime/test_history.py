"""runtime/history.py: one row per maintenance operation, written to a real Delta table on
local disk that delta-rs and DuckDB read back (Delta Spark reads it in
tests/integration/test_commit_writer.py)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from deltakeeper.delta.checkpoint.write import CheckpointResult
from deltakeeper.delta.table import open_table
from deltakeeper.maintenance.operations import Operation
from deltakeeper.maintenance.operations.checkpoint import CheckpointRun
from deltakeeper.maintenance.operations.outcome import Outcome, Result
from deltakeeper.runtime.history import History
from deltakeeper.runtime.model import Observation, Target
from tests.support.oracles import duckdb_connect

T0 = 1_800_000_000_000
TARGET = Target("lake", "events", "s3://ak:sk-secret@bucket/events")


def obs(at: int, *outcomes: Outcome, files: int = 10, size: int = 1000) -> Observation:
    return Observation(
        at, [], outcomes=list(outcomes), counts={"files": files, "bytes": size, "version": 7}
    )


def deltars(path: Path) -> list[dict[str, Any]]:
    from deltalake import DeltaTable

    return sorted(
        DeltaTable(str(path)).to_pyarrow_table().to_pylist(), key=lambda r: r["start_time"]
    )


def written(size: int) -> CheckpointResult:
    return CheckpointResult(
        7,
        "k",
        rows=12,
        adds=10,
        tombstones=2,
        expired_tombstones=0,
        size_bytes=size,
        last_checkpoint_moved=True,
    )


def test_rows_of_a_maintenance_run_as_readers_see_them(tmp_path: Path) -> None:
    history = History(str(tmp_path / "h"), clock=lambda: T0)
    history.add(TARGET, obs(T0))  # the poll before maintenance: the counts before
    history.add(
        TARGET,
        obs(
            T0 + 1000,
            Outcome(
                Operation.CHECKPOINT,
                Result.DONE,
                "written",
                0.5,
                version=7,
                detail=CheckpointRun(written(4096)),
            ),
            Outcome(Operation.CLEANUP, Result.SKIPPED, "nothing expired", 0.0),
            Outcome(Operation.VACUUM, Result.FAILED, "list on s3://bucket/events failed", 0.25),
            files=10,
            size=900,
        ),
    )
    assert history.flush() == 3 and history.flush() == 0  # nothing new: no commit
    rows = deltars(tmp_path / "h")
    assert [(r["operation"], r["status"], r["reason"]) for r in rows] == [
        ("checkpoint", "succeeded", None),
        ("cleanup", "skipped", "nothing expired"),
        ("vacuum", "failed", "list on s3://bucket/events failed"),
    ]
    first = rows[0]
    assert (first["namespace"], first["table"], first["uri"]) == (
        "lake",
        "events",
        "s3://bucket/events",
    )
    assert first["table_version"] == 7 and first["job_id"] is None
    assert first["end_time"].timestamp() * 1000 == T0 + 1500
    assert rows[1]["start_time"] == first["end_time"]  # steps run one after the other
    assert dict(first["metrics"]) == {
        "filesBefore": 10,
        "filesAfter": 10,
        "bytesBefore": 1000,
        "bytesAfter": 900,
        "checkpointBytes": 4096,
        "checkpointActions": 12,
    }
    with duckdb_connect() as con:
        query = "SELECT operation, status, metrics['bytesBefore'] FROM delta_scan(?)"
        got = con.execute(f"{query} ORDER BY start_time", [str(tmp_path / "h")]).fetchall()
    assert got == [
        ("checkpoint", "succeeded", 1000),
        ("cleanup", "skipped", 1000),
        ("vacuum", "failed", 1000),
    ]
    everything = b"".join(p.read_bytes() for p in (tmp_path / "h").rglob("*") if p.is_file())
    assert b"sk-secret" not in everything and b"ak:" not in everything


def test_a_batch_is_one_commit_and_a_started_job_waits_for_its_end(tmp_path: Path) -> None:
    history = History(str(tmp_path / "h"), clock=lambda: T0)
    for i in range(5):
        history.add(
            TARGET, obs(T0 + i, Outcome(Operation.CLEANUP, Result.DONE, "", 0.0, deleted_files=i))
        )
    waiting = Outcome(Operation.COMPACTION, Result.SKIPPED, "at the limit", 0.0, job_id="j0")
    history.add(TARGET, obs(T0 + 8, waiting))  # asked again next poll: no row
    history.add(
        TARGET,
        obs(T0 + 9, Outcome(Operation.COMPACTION, Result.STARTED, "job j1", 0.0, job_id="j1")),
    )
    assert history.flush() == 5
    ended = Outcome(Operation.COMPACTION, Result.DONE, "compacted", 60.0, job_id="j1")
    history.add(TARGET, obs(T0 + 100_000, ended))
    assert history.flush() == 1
    snap = open_table(str(tmp_path / "h")).snapshot()
    assert snap.version == 2 and snap.num_files == 2  # create, then one commit a flush
    job = [r for r in deltars(tmp_path / "h") if r["operation"] == "compaction"]
    assert [(r["job_id"], r["start_time"].timestamp() * 1000) for r in job] == [("j1", T0 + 40_000)]
    info = json.loads(
        (tmp_path / "h" / "_delta_log" / f"{1:020d}.json").read_text().splitlines()[0]
    )
    assert info["commitInfo"]["operationMetrics"]["numOutputRows"] == "5"


def test_a_failed_flush_keeps_its_rows_for_the_next(tmp_path: Path) -> None:
    blocker = tmp_path / "h"
    blocker.write_text("not a folder")  # the history cannot be written here
    history = History(str(blocker), clock=lambda: T0)
    history.add(TARGET, obs(T0, Outcome(Operation.CLEANUP, Result.DONE, "", 0.0)))
    assert history.flush() == 0 and history.written == 0
    blocker.unlink()
    assert history.flush() == 1
    assert len(deltars(blocker)) == 1


def test_rows_beyond_the_limit_drop_the_oldest_and_are_counted(tmp_path: Path) -> None:
    history = History(str(tmp_path / "h"), clock=lambda: T0, max_rows=3)
    for i in range(5):
        history.add(
            TARGET, obs(T0 + i, Outcome(Operation.CLEANUP, Result.DONE, "", 0.0, deleted_files=i))
        )
    assert history.dropped == 2 and history.flush() == 3
    kept = [dict(r["metrics"])["deletedFiles"] for r in deltars(tmp_path / "h")]
    assert kept == [2, 3, 4]


def test_another_table_at_the_uri_is_refused_and_left_alone(tmp_path: Path) -> None:
    import pyarrow as pa
    from deltalake import write_deltalake

    write_deltalake(str(tmp_path / "h"), pa.table({"x": [1]}))
    before = sorted(p.name for p in (tmp_path / "h" / "_delta_log").iterdir())
    history = History(str(tmp_path / "h"), clock=lambda: T0)
    history.add(TARGET, obs(T0, Outcome(Operation.CLEANUP, Result.DONE, "", 0.0)))
    assert history.flush() == 0
    assert sorted(p.name for p in (tmp_path / "h" / "_delta_log").iterdir()) == before


def test_the_history_table_gets_checkpoints(tmp_path: Path) -> None:
    history = History(str(tmp_path / "h"), clock=lambda: T0)
    for i in range(12):
        history.add(TARGET, obs(T0 + i, Outcome(Operation.CLEANUP, Result.DONE, "", 0.0)))
        history.flush()
    snap = open_table(str(tmp_path / "h")).snapshot()
    assert snap.version == 12 and snap.segment.checkpoint is not None
    assert snap.segment.checkpoint.version == 9  # ten commits (0-9): the daemon's interval
    assert len(deltars(tmp_path / "h")) == 12


@pytest.mark.parametrize("result", [Result.REFUSED, Result.DRY_RUN, Result.SKIPPED_AFTER_FAILURE])
def test_every_result_has_a_status(tmp_path: Path, result: Result) -> None:
    history = History(str(tmp_path / "h"), clock=lambda: T0)
    history.add(TARGET, obs(T0, Outcome(Operation.VACUUM, result, "why", 0.0)))
    history.flush()
    (row,) = deltars(tmp_path / "h")
    assert row["status"] == ("failed" if result is Result.REFUSED else "skipped")
    assert row["reason"] == "why"


def test_a_writer_row_counts_what_it_wrote(tmp_path: Path) -> None:
    history = History(str(tmp_path / "h"), clock=lambda: T0)
    gave = Outcome(Operation.STATS, Result.DONE, "gave 7 of 9 files statistics", written_files=7)
    history.add(TARGET, obs(T0, gave))
    history.add(TARGET, obs(T0 + 1, Outcome(Operation.CLEANUP, Result.DONE, "", 0.0)))
    assert history.flush() == 2
    metrics = {r["operation"]: dict(r["metrics"]) for r in deltars(tmp_path / "h")}
    assert metrics["stats"]["writtenFiles"] == 7
    assert "writtenFiles" not in metrics["cleanup"]
