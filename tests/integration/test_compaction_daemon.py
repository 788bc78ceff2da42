"""`deltakeeper run` compacts in the background with a real spark-submit (local[2], the Delta
jars): the job never holds up another table's polls; its end is read from its result line and
from the table's own commit; status, log events and metrics say what it did. A job past its
deadline is stopped and leaves the table Degraded with a retry scheduled. One job at a time
(--max-compaction-jobs 1)."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import urllib.request
from collections import Counter
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest

from deltakeeper.delta.table import open_table
from tests.support.oracles import table_versions
from tests.support.rows import deltars_digest
from tests.support.spark import SUBMIT_CONF, ensure_spark
from tests.support.stores import free_port
from tests.support.waiting import until

pytestmark = pytest.mark.spark

DELTAKEEPER = Path(sys.executable).parent / "deltakeeper"


def append(path: Path, ids: list[int]) -> None:
    from deltalake import write_deltalake

    batch = pa.table({"id": pa.array(ids, pa.int64()), "p": ["a" if i % 2 else "b" for i in ids]})
    write_deltalake(str(path), batch, mode="append", partition_by=["p"])


def manifest(name: str, path: Path, **spec: Any) -> str:
    body = {"uri": f"file://{path}", "pollInterval": "1s", **spec}
    doc = {"apiVersion": "deltakeeper.io/v1alpha1", "kind": "DeltaTable"}
    return json.dumps({**doc, "metadata": {"name": name, "namespace": "lake"}, "spec": body})


def statuses(folder: Path) -> dict[str, Any]:
    try:
        return json.loads((folder / ".deltakeeper" / "status.json").read_text())["tables"]
    except (FileNotFoundError, ValueError, KeyError):
        return {}


def condition(status: dict[str, Any], kind: str) -> dict[str, Any]:
    return next(c for c in status.get("conditions") or [] if c["type"] == kind)


def files_per_partition(path: Path) -> Counter[str]:
    files = open_table(str(path)).snapshot().files.to_pylist()
    return Counter(dict(row["partitionValues"])["p"] for row in files)


def test_run_compacts_in_the_background_and_reports_it(tmp_path: Path) -> None:
    small, busy, slow = tmp_path / "small", tmp_path / "busy", tmp_path / "slow"
    for table in (small, busy, slow):
        for r in range(3):
            append(table, [2 * r, 2 * r + 1])
    rows = {v: deltars_digest(str(small), v) for v in table_versions(str(small))}
    folder = tmp_path / "manifests"
    folder.mkdir()
    due = {"enabled": True, "minFilesPerPartition": 3, "minInterval": "10m"}
    (folder / "small.json").write_text(manifest("small", small, compaction=due))
    (folder / "busy.json").write_text(manifest("busy", busy))
    (folder / "slow.json").write_text(manifest("slow", slow, compaction={**due, "deadline": "1s"}))
    port = free_port()
    spark = ["--master", "local[2]", "--jars-dir", str(ensure_spark())]
    spark += [f"--spark-conf={k}={v}" for k, v in SUBMIT_CONF.items()]
    argv = [str(DELTAKEEPER), "run", "--manifests", str(folder), "--metrics-port", str(port)]
    env = {**os.environ, "SPARK_LOCAL_IP": "127.0.0.1"}
    log = tmp_path / "run.log"
    with open(log, "wb") as out:
        proc = subprocess.Popen(
            [*argv, "--max-compaction-jobs", "1", *spark],
            stdout=out,
            stderr=subprocess.STDOUT,
            env=env,
        )
    try:
        # While the small table's job runs, the busy table's commits still show at once.
        def running() -> bool:
            job = (statuses(folder).get("lake/small", {}).get("compaction") or {}).get("running")
            return bool(job)

        until(running, 300, "the small table's job to start")
        seen = statuses(folder)["lake/busy"]["version"]
        append(busy, [100, 101])
        until(
            lambda: statuses(folder)["lake/busy"]["version"] == seen + 1,
            10,
            "the busy table's new version",
        )
        assert running(), "the job ended before the busy table's poll; it cannot show this"

        def compacted() -> dict[str, Any] | None:
            entry = statuses(folder).get("lake/small", {}).get("lastMaintenance", {})
            return entry.get("compaction")

        entry = until(compacted, 600, "the small table's compaction")
        assert entry["result"] == "done", entry
        assert (entry["filesRemoved"], entry["filesAdded"]) == (6, 2)
        assert entry["bytesRemoved"] > entry["bytesAdded"] > 0
        assert files_per_partition(small) == {"a": 1, "b": 1}
        version = max(table_versions(str(small)))
        commit = (small / "_delta_log" / f"{version:020d}.json").read_text().splitlines()
        info = next(json.loads(c)["commitInfo"] for c in commit if "commitInfo" in c)
        assert info["operation"] == "OPTIMIZE" and info["userMetadata"] == entry["jobId"]
        assert {v: deltars_digest(str(small), v) for v in rows} == rows
        assert deltars_digest(str(small), version) == rows[max(rows)]
        status = statuses(folder)["lake/small"]
        assert status["compaction"]["running"] is None
        assert status["compaction"]["last"]["result"] == "COMPLETED"
        assert condition(status, "Degraded")["status"] == "False"

        # The slow table's job outlived its one-second deadline: stopped, Degraded, retried
        # after a backoff.
        def failed() -> dict[str, Any] | None:
            entry = statuses(folder).get("lake/slow", {}).get("lastMaintenance", {})
            return entry.get("compaction")

        entry = until(failed, 600, "the slow table's job to fail")
        assert entry["result"] == "failed" and "DeadlineExceeded" in entry["message"]
        status = statuses(folder)["lake/slow"]
        degraded = condition(status, "Degraded")
        assert degraded["status"] == "True" and degraded["reason"] == "MaintenanceFailed"
        assert "DeadlineExceeded" in degraded["message"]
        assert status["compaction"]["failures"] == 1 and status["compaction"]["nextAttempt"]
        assert files_per_partition(slow) == {"a": 3, "b": 3}  # nothing half-done

        with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=5) as r:
            metrics = r.read().decode()
        small_jobs = 'namespace="lake",table="small",state="COMPLETED"} 1.0'
        assert f"deltakeeper_compaction_jobs{{{small_jobs}" in metrics
        assert 'table="slow",state="FAILED"} 1.0' in metrics
        runs = 'namespace="lake",table="small",operation="compaction",result="done"} 1.0'
        assert f"deltakeeper_maintenance_runs_total{{{runs}" in metrics
        # The job's run time, from its start to the poll that saw its end.
        took = 'deltakeeper_maintenance_duration_seconds_sum{namespace="lake",table="small",'
        [line] = [x for x in metrics.splitlines() if x.startswith(took + 'operation="compaction"}')]
        assert float(line.rsplit(" ", 1)[1]) >= 1.0, line
    finally:
        proc.send_signal(signal.SIGINT)
        proc.wait(timeout=120)
    text = log.read_text()
    assert "lake/small: Compacted: job " in text and "rewrote 6 files" in text, text[-3000:]
    assert "lake/slow: MaintenanceFailed: compaction: DeadlineExceeded" in text
    assert "lake/busy: Compacted" not in text and "CompactionStarted" in text
