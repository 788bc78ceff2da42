"""A DELETE that lands while the compaction job is between its read and its commit.

The race is made deterministic with a gate, not with sleeps: the job runs with a test LogStore
(tests/support/java/PausingLogStore.java) that stops its first commit until the test says go.
While the job waits there (its snapshot read, its new files written), delta-rs deletes a row
from a file the job is compacting. The job must then fail cleanly with Delta's conflict, lose
no row, and leave the table so that the next plan and job succeed.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from pathlib import Path

import pyarrow as pa
import pytest

from deltakeeper.maintenance import compaction_plan
from deltakeeper.maintenance.policy import CompactionSettings
from tests.support.compaction import (
    commit_info,
    file_changes,
    gate_conf,
    pausing_jars,
    plan_table,
    run_in_session,
    start_job,
)
from tests.support.oracles import table_versions
from tests.support.rows import deltars_digest, digest, duckdb_digest
from tests.support.spark import spark_session

pytestmark = pytest.mark.spark

SETTINGS = CompactionSettings(min_files_per_partition=2)
# Delta's conflict when a concurrent commit removed a file the transaction read.
CONFLICTS = {"ConcurrentDeleteReadException"}


def _write(path: Path) -> list[dict[str, object]]:
    """Three delta-rs appends into partitions 'a' and 'b': three small files in each."""
    from deltalake import write_deltalake

    rows = []
    for round_ in range(3):
        batch = [{"id": round_ * 10 + i, "p": "ab"[i % 2]} for i in range(4)]
        data = pa.table(
            {"id": pa.array([r["id"] for r in batch], pa.int64()), "p": [r["p"] for r in batch]}
        )
        write_deltalake(str(path), data, mode="append", partition_by=["p"])
        rows += batch
    return rows


def _plan(path: Path) -> tuple[compaction_plan.CompactionPlan, dict[str, str], int]:
    return plan_table(path, SETTINGS)


def _wait_for(flag: Path, job_poll: Callable[[], object], limit_s: float = 300) -> None:
    until = time.monotonic() + limit_s
    while not flag.exists():
        assert time.monotonic() < until, f"the job never reached the gate ({flag})"
        assert job_poll() is None, "the job ended before it reached the gate"
        time.sleep(0.05)


def test_a_delete_between_read_and_commit_fails_the_job_and_loses_no_row(tmp_path: Path) -> None:
    from deltalake import DeltaTable

    table = tmp_path / "t"
    rows = _write(table)
    found, names, planned = _plan(table)
    assert found.due and found.files == 6, found.reason()
    gate = tmp_path / "gate"
    gate.mkdir()
    spec = {**compaction_plan.job_spec(found, names, "dk-conflict", planned), "table": str(table)}

    job = start_job(spec, jars=pausing_jars(), conf=gate_conf(gate))
    try:
        _wait_for(gate / "paused", job.poll)
        # The job holds its snapshot of `planned` and its rewritten files; delete a row of a
        # file it compacts (delta-rs rewrites that file: a remove the job's commit conflicts with).
        DeltaTable(str(table)).delete("id = 1")
    finally:
        (gate / "go").touch()
    done = job.wait()

    expected = [r for r in rows if r["id"] != 1]
    assert done.exit_code == 1, done.stderr_tail
    assert done.result["result"] == "failed", done.result
    assert done.result["error"] in CONFLICTS, done.result
    versions = table_versions(str(table))
    assert versions[-1] == planned + 1, "only the delete committed"
    assert commit_info(table, planned + 1)["operation"] == "DELETE"
    assert deltars_digest(str(table)) == digest(expected) == duckdb_digest(str(table))

    # The next plan sees the delete and its job succeeds.
    again, names, now = _plan(table)
    assert again.due and now == planned + 1
    spec = {**compaction_plan.job_spec(again, names, "dk-after", now), "table": str(table)}
    code, out, err = run_in_session(spark_session(), spec)  # no gate now: the job's own code
    assert code == 0, err
    assert out["result"] == "done" and [c["version"] for c in out["commits"]] == [now + 1]
    assert commit_info(table, now + 1)["userMetadata"] == "dk-after"
    assert all(c["dataChange"] is False for c in file_changes(table, now + 1))
    assert deltars_digest(str(table)) == digest(expected) == duckdb_digest(str(table))
    assert not _plan(table)[0].due
