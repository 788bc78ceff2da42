"""What the compaction job does to tables written by delta-rs and Delta Spark.

Each test runs `deltakeeper/compaction/job.py`'s entry point with the spec a launcher would
give it, in the worker's Spark session (run_in_session: the job's own code, Delta Spark and
its conf, without a spark-submit JVM of its own), then checks the table with oracles nobody
here wrote: delta-rs and DuckDB read the same rows at the new version and at every version
before, and the commit is an OPTIMIZE with dataChange=false carrying the job id. The planned
jobs on every kind of table, read by all three oracles, are in test_compaction_matrix.py; the
job under a real spark-submit in test_compaction_s3a.py, test_compaction_daemon.py,
test_compaction_conflict.py and the e2e tests.
"""

from __future__ import annotations

import datetime as dt
import threading
import time
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest

from deltakeeper.compaction.job import TUNING_CONF
from tests.support import spark as spark_support
from tests.support.compaction import (
    commit_actions,
    files_per_partition,
    live_files,
    run_in_session,
)
from tests.support.oracles import table_versions
from tests.support.rows import deltars_digest, duckdb_digest
from tests.support.spark import copy_table

pytestmark = pytest.mark.spark

spark_tables = spark_support.spark_tables


@pytest.fixture(scope="module")
def spark() -> Any:
    return spark_support.spark_session("deltakeeper-compaction-job")


# Partition values a planner must quote: quotes, %, =, /, backslash, unicode, and null.
SNAPSHOT_PARTITIONS = TUNING_CONF["snapshotPartitions"]
STRINGS = ["it's", "100%", "a=b/c", "back\\slash", "ünïcødé ☃", None]
DAYS = [dt.date(2024, 2, 29), None]


def digests(path: Path) -> dict[int, tuple[Any, Any]]:
    return {
        v: (deltars_digest(str(path), v), duckdb_digest(str(path), v))
        for v in table_versions(str(path))
    }


def write_small_files(path: Path) -> None:
    """Three delta-rs appends, each one file in every (s, d) partition: three small files each."""
    from deltalake import write_deltalake

    pairs = [(s, d) for s in STRINGS for d in DAYS]
    for round_ in range(3):
        ids = range(round_ * len(pairs), (round_ + 1) * len(pairs))
        batch = pa.table(
            {
                "id": pa.array(list(ids), pa.int64()),
                "s": pa.array([s for s, _ in pairs], pa.string()),
                "d": pa.array([d for _, d in pairs], pa.date32()),
            }
        )
        write_deltalake(str(path), batch, mode="append", partition_by=["s", "d"])


def test_compacts_only_the_named_partitions_with_quoting_that_holds(
    spark: Any, tmp_path: Path
) -> None:
    table = tmp_path / "t"
    write_small_files(table)
    before = files_per_partition(table)
    assert set(before.values()) == {3}
    history = digests(table)
    start = max(table_versions(str(table)))
    # Every partition but one: the spec keys are the log's own serialized values.
    keep = (("d", None), ("s", "it's"))
    groups = [dict(p) for p in before if p != keep]

    spec = {"jobId": "dk-job-1", "table": str(table), "compact": groups}
    code, out, err = run_in_session(spark, spec)

    assert code == 0, err
    assert out["result"] == "done" and out["jobId"] == "dk-job-1"
    assert out["filesRemoved"] == 3 * len(groups) and out["filesAdded"] == len(groups)
    after = files_per_partition(table)
    assert after[keep] == 3
    assert all(after[p] == 1 for p in before if p != keep)
    [commit] = out["commits"]
    assert commit["version"] == start + 1 == max(table_versions(str(table)))
    actions = commit_actions(table, commit["version"])
    info = next(a["commitInfo"] for a in actions if "commitInfo" in a)
    assert info["operation"] == "OPTIMIZE" and info["userMetadata"] == "dk-job-1"
    changes = [a.get("add") or a.get("remove") for a in actions if "add" in a or "remove" in a]
    assert changes and all(c["dataChange"] is False for c in changes)
    # Same rows for both oracles at the new version and, unchanged, at every version before.
    now = digests(table)
    assert {v: now[v] for v in history} == history
    assert now[commit["version"]] == history[start]
    assert now[start][0] == now[start][1]


def test_second_run_finds_nothing_to_do(spark: Any, tmp_path: Path) -> None:
    table = tmp_path / "t"
    write_small_files(table)
    groups = [dict(p) for p in files_per_partition(table)]
    spec = {"jobId": "dk-first", "table": str(table), "compact": groups, "snapshotPartitions": 1}
    code, out, err = run_in_session(spark, spec)  # the session's conf sets it: that wins
    assert code == 0 and out["tunedConf"] == {}, (out, err)
    version = max(table_versions(str(table)))

    second = dict(spec, jobId="dk-second")
    code, out, err = run_in_session(spark, second, conf={SNAPSHOT_PARTITIONS: None})

    assert code == 0, err
    assert out["result"] == "nothing-to-do" and out["commits"] == []
    assert out["tunedConf"] == {SNAPSHOT_PARTITIONS: "1"}  # nothing set it: the spec's value
    assert max(table_versions(str(table))) == version


def test_purge_rewrites_a_lone_file_full_of_deleted_rows(
    spark: Any, spark_tables: dict[str, str], tmp_path: Path
) -> None:
    table = copy_table(spark_tables["dv"], tmp_path / "dv")
    assert any(f["deletionVector"] for f in live_files(table))
    rows = deltars_digest(str(table))

    spec = {"jobId": "dk-purge", "table": str(table), "purge": [{}]}
    code, out, err = run_in_session(spark, spec)

    assert code == 0, err
    assert out["result"] == "done"
    assert not any(f["deletionVector"] for f in live_files(table))
    assert deltars_digest(str(table)) == rows == duckdb_digest(str(table))
    info = next(
        a["commitInfo"]
        for a in commit_actions(table, out["commits"][0]["version"])
        if "commitInfo" in a
    )
    assert info["userMetadata"] == "dk-purge"


def test_a_bad_spec_fails_cleanly_and_writes_nothing(spark: Any, tmp_path: Path) -> None:
    table = tmp_path / "t"
    write_small_files(table)
    listing = sorted(p.name for p in (table / "_delta_log").iterdir())

    code, out, _ = run_in_session(
        spark, {"jobId": "dk-bad", "table": str(table), "compact": [{"no_such_column": "x"}]}
    )

    assert code == 1
    assert out["result"] == "failed" and out["error"] == "SpecError"
    assert "no_such_column" in out["message"] and "not a partition column" in out["message"]
    assert sorted(p.name for p in (table / "_delta_log").iterdir()) == listing


def test_appends_committed_during_the_job_are_all_kept_once(spark: Any, tmp_path: Path) -> None:
    """delta-rs appends to the partitions being compacted for as long as the job runs."""
    from deltalake import write_deltalake

    table = tmp_path / "t"
    write_small_files(table)
    groups = [dict(p) for p in files_per_partition(table)]
    first_id, appended, stop = 1000, [], threading.Event()

    def writer() -> None:
        n = first_id
        while not stop.is_set():
            batch = pa.table(
                {
                    "id": pa.array([n], pa.int64()),
                    "s": pa.array([STRINGS[n % len(STRINGS)]], pa.string()),
                    "d": pa.array([DAYS[n % len(DAYS)]], pa.date32()),
                }
            )
            write_deltalake(str(table), batch, mode="append", partition_by=["s", "d"])
            appended.append(n)
            n += 1
            # Two commits a second: on a loaded machine (three test workers on two cores) 0.2 s
            # made 1,924 commits that the job, slowed down too, was still checking at 600 s.
            time.sleep(0.5)

    thread = threading.Thread(target=writer)
    thread.start()
    try:
        code, out, err = run_in_session(
            spark, {"jobId": "dk-busy", "table": str(table), "compact": groups}
        )
    finally:
        stop.set()
        thread.join()

    assert code == 0, err
    assert out["result"] == "done" and appended, "the writer must have committed during the job"
    ids = ids_of(table)
    initial = list(range(3 * len(STRINGS) * len(DAYS)))
    assert sorted(ids) == sorted(initial + appended)  # every row once: none lost, none doubled


def ids_of(path: Path) -> list[int]:
    from deltalake import DeltaTable, QueryBuilder

    qb = QueryBuilder().register("t", DeltaTable(str(path)))
    return pa.table(qb.execute("SELECT id FROM t").read_all())["id"].to_pylist()
