"""The Spark job's checkpoint and vacuum (issue 26: Spark for what does not fit) on tables
delta-rs wrote. delta-rs and deltakeeper read the checkpoint Delta Spark wrote; a vacuum deletes
exactly the unreferenced file past its retention. The job's entry point runs in the worker's
Spark session (run_in_session); the two daemon tests at the end hand it to a real spark-submit
through the launcher."""

from __future__ import annotations

import json
import os
import subprocess
import time
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest

from deltakeeper.delta.log import last_checkpoint
from deltakeeper.delta.table import open_table
from tests.integration.test_standalone import DELTAKEEPER, _statuses
from tests.support.compaction import cli_spark_flags, run_in_session
from tests.support.manifests import table_doc
from tests.support.rows import deltars_digest
from tests.support.spark import spark_session

pytestmark = pytest.mark.spark


@pytest.fixture(scope="module")
def spark() -> Any:
    return spark_session("deltakeeper-spark-engine-job")


def appends(path: Path, n: int) -> None:
    from deltalake import write_deltalake

    for i in range(n):
        batch = pa.table({"id": pa.array([i], pa.int64()), "s": pa.array([f"r{i}"])})
        write_deltalake(str(path), batch, mode="append")


def test_checkpoint_job_writes_delta_sparks_checkpoint_that_every_reader_takes(
    spark: Any, tmp_path: Path
) -> None:
    table = tmp_path / "t"
    appends(table, 4)  # versions 0..3, no checkpoint
    before = deltars_digest(str(table), 3)

    code, out, err = run_in_session(
        spark, {"jobId": "dk-cp-1", "table": str(table), "operation": "checkpoint"}
    )

    assert code == 0, err
    assert out["result"] == "done" and out["checkpointVersion"] == 3, out
    log = table / "_delta_log"
    assert sorted(p.name for p in log.glob("*.checkpoint*.parquet")) == [
        "00000000000000000003.checkpoint.parquet"
    ]
    assert json.loads((log / "_last_checkpoint").read_text())["version"] == 3
    assert last_checkpoint.parse((log / "_last_checkpoint").read_bytes()).version == 3
    snap = open_table(str(table)).snapshot()
    assert (snap.version, snap.num_files) == (3, 4)
    assert deltars_digest(str(table), 3) == before


def test_checkpoint_job_on_a_folder_without_a_log_fails_saying_so(
    spark: Any, tmp_path: Path
) -> None:
    (tmp_path / "empty").mkdir()
    code, out, _ = run_in_session(
        spark, {"jobId": "dk-cp-2", "table": str(tmp_path / "empty"), "operation": "checkpoint"}
    )
    assert code == 1 and out["result"] == "failed"
    assert "not a Delta table" in out["message"], out


def test_vacuum_job_deletes_the_unreferenced_file_past_retention_and_no_other(
    spark: Any, tmp_path: Path
) -> None:
    from deltalake import DeltaTable

    table = tmp_path / "t"
    appends(table, 2)
    DeltaTable(str(table)).delete("id = 0")  # the file of row 0 is now a tombstone
    gone = tmp_path / "t" / "orphan.parquet"
    gone.write_bytes(b"not referenced")
    old = time.time() - 3 * 3600
    os.utime(gone, (old, old))
    live = {Path(u).name for u in DeltaTable(str(table)).file_uris()}
    # Removed by the delete just now: its tombstone keeps it, however old the file is.
    removed = [p for p in table.glob("*.parquet") if p.name not in live and p != gone]
    for p in removed:
        os.utime(p, (old, old))

    spec = {
        "jobId": "dk-vac-1",
        "table": str(table),
        "operation": "vacuum",
        "retentionHours": 1,
        "allowShortRetention": True,
    }
    code, out, err = run_in_session(spark, spec)

    assert code == 0, err
    assert out["result"] == "done", out
    assert not gone.exists()
    assert removed and all(p.exists() for p in removed)
    assert {p.name for p in table.glob("*.parquet")} == live | {p.name for p in removed}
    ended = [c for c in out["commits"] if c["operation"] == "VACUUM END"]
    assert ended and out["filesDeleted"] == 1, out
    assert deltars_digest(str(table), None) == deltars_digest(str(table), 2)


def test_vacuum_job_under_the_tables_retention_is_refused_without_allow_short(
    spark: Any, tmp_path: Path
) -> None:
    table = tmp_path / "t"
    appends(table, 1)
    spec = {"jobId": "dk-vac-2", "table": str(table), "operation": "vacuum", "retentionHours": 1}
    code, out, _ = run_in_session(spark, spec)
    assert code == 1 and out["result"] == "failed", out
    assert "retention" in out["message"].lower()


def test_run_hands_a_checkpoint_over_the_memory_budget_to_spark(tmp_path: Path) -> None:
    """`deltakeeper run --once` with a budget too small for the checkpoint: with a Spark launcher
    it runs as Delta Spark's checkpoint (engine auto), and the status says so and why; with
    engine local it is refused as before."""
    table = tmp_path / "t"
    appends(table, 12)  # 12 commits, no checkpoint: due at interval 10
    folder = tmp_path / "manifests"
    folder.mkdir()
    doc = table_doc("t", f"file://{table}", checkpoint={"interval": 10}, vacuum={"enabled": False})
    (folder / "t.json").write_text(json.dumps(doc))
    argv = [str(DELTAKEEPER), "run", "--manifests", str(folder), "--once"]
    argv += ["--memory-budget", "32784Ki", *cli_spark_flags()]
    env = {**os.environ, "SPARK_LOCAL_IP": "127.0.0.1"}

    done = subprocess.run(argv, capture_output=True, text=True, env=env, timeout=600)

    assert done.returncode == 0, done.stderr[-3000:]
    entry = _statuses(folder)["lake/t"]["lastMaintenance"]["checkpoint"]
    assert (entry["result"], entry["engine"], entry["version"]) == ("done", "spark", 11), entry
    assert "Delta Spark wrote the checkpoint at version 11" in entry["message"]
    assert "too big for the memory budget here: checkpoint needs about" in entry["message"]
    assert (table / "_delta_log" / "00000000000000000011.checkpoint.parquet").exists()
    from deltalake import DeltaTable

    assert DeltaTable(str(table)).version() == 11
    assert deltars_digest(str(table), 11)[0] == 12  # delta-rs reads every row through it
    assert open_table(str(table)).snapshot().num_files == 12

    local = table_doc(
        "t",
        f"file://{table}",
        checkpoint={"interval": 10, "engine": "local"},
        vacuum={"enabled": False},
    )
    appends(table, 10)  # 10 more commits: the next checkpoint is due
    (folder / "t.json").write_text(json.dumps(local))
    # Streamed from the checkpoint at 11 now: 1.5 KiB a row at least; 8 KiB over the base is
    # short.
    argv[argv.index("32784Ki")] = "32776Ki"
    refused = subprocess.run(argv, capture_output=True, text=True, env=env, timeout=600)
    entry = _statuses(folder)["lake/t"]["lastMaintenance"]["checkpoint"]
    assert entry["result"] == "refused" and "engine" not in entry, entry
    assert "MaintenanceRefused: checkpoint:" in refused.stderr
    assert not (table / "_delta_log" / "00000000000000000021.checkpoint.parquet").exists()


def test_maintain_engine_spark_checkpoints_and_vacuums_with_delta_spark(tmp_path: Path) -> None:
    """Slow: two spark-submit JVMs, the checkpoint's and the vacuum's, as the CLI runs them
    (this is the test of that path)."""
    table = tmp_path / "t"
    appends(table, 11)  # versions 0..10: a checkpoint is due
    orphan = table / "orphan.parquet"
    orphan.write_bytes(b"not referenced")
    old = time.time() - 9 * 86400
    os.utime(orphan, (old, old))
    argv = [str(DELTAKEEPER), "maintain", str(table), "--engine", "spark", "--json"]
    argv += ["--only", "checkpoint,vacuum", *cli_spark_flags()]
    env = {**os.environ, "SPARK_LOCAL_IP": "127.0.0.1"}

    done = subprocess.run(argv, capture_output=True, text=True, env=env, timeout=900)

    assert done.returncode == 0, done.stderr[-3000:]
    report = json.loads(done.stdout)
    steps = {s["operation"]: s for s in report["results"]}
    assert steps["checkpoint"]["result"] == "done", steps
    assert "Delta Spark wrote the checkpoint at version 10" in steps["checkpoint"]["message"]
    assert steps["vacuum"]["result"] == "done" and steps["vacuum"]["deletedFiles"] == 1, steps
    assert (table / "_delta_log" / "00000000000000000010.checkpoint.parquet").exists()
    assert not orphan.exists()
    assert deltars_digest(str(table))[0] == 11
