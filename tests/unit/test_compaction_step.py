"""Compaction as a maintenance step: spec -> settings, the planner's step, `maintain --compact`
planning and refusing, and reading a job's commits back from the log. The job itself runs in
tests/integration/test_compaction_maintain.py."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from deltakeeper.cli import main
from deltakeeper.compaction.launcher import JobResult
from deltakeeper.delta.table import open_table
from deltakeeper.maintenance import compaction_plan
from deltakeeper.maintenance.executor import Result, job_outcome
from deltakeeper.maintenance.policy import (
    COMPACTION_MIN_INTERVAL_MS,
    HOUR_MS,
    MIB,
    CompactionSettings,
    PolicyError,
    effective,
)
from deltakeeper.resources.manifests import PolicyResource, TableResource
from deltakeeper.resources.spec import from_spec, settings
from tests.support.logbuilder import LogBuilder, add, metadata, protocol, remove

NOW = "2023-11-15T00:00:00Z"  # a day after the log builder's modification times


def test_compaction_is_off_with_delta_like_defaults() -> None:
    c = effective({}).compaction
    assert c == CompactionSettings()
    assert not c.enabled
    assert (c.target_file_size, c.small_below) == (128 * MIB, 64 * MIB)
    assert (c.min_files_per_partition, c.max_age_ms, c.max_deleted_rows_ratio) == (
        50,
        HOUR_MS,
        0.05,
    )
    assert c.min_interval_ms == COMPACTION_MIN_INTERVAL_MS


def test_the_tables_target_file_size_is_the_default_target() -> None:
    c = effective({"delta.targetFileSize": "32mb"}).compaction
    assert (c.target_file_size, c.small_below) == (32 * MIB, 16 * MIB)
    explicit = effective({"delta.targetFileSize": "32mb"}, compaction_target_file_size=MIB)
    assert explicit.compaction.target_file_size == MIB


def test_spec_compaction_becomes_settings() -> None:
    spec = {
        "compaction": {
            "enabled": True,
            "targetFileSize": "8Mi",
            "minFileSize": "1Mi",
            "minFilesPerPartition": 8,
            "maxAge": "10m",
            "maxDeletedRowsRatio": 0.2,
            "minInterval": "5m",
            "deadline": "30m",
            "zOrderBy": ["country", "day"],
            "maxThreads": 4,
            "sparkApplication": {"image": "deltakeeper-spark:test"},
        }
    }
    c = effective({}, **from_spec(spec)).compaction
    assert c == CompactionSettings(
        target_file_size=8 * MIB,
        min_file_size=MIB,
        min_files_per_partition=8,
        max_age_ms=10 * 60_000,
        max_deleted_rows_ratio=0.2,
        enabled=True,
        min_interval_ms=5 * 60_000,
        deadline_ms=30 * 60_000,
        z_order_by=("country", "day"),
        max_threads=4,
        spark_application={"image": "deltakeeper-spark:test"},
    )


def test_the_table_spec_wins_field_by_field_over_its_policy() -> None:
    table = TableResource("ns", "t", {}, 1, {"uri": "/x", "compaction": {"targetFileSize": "8Mi"}})
    policy_spec = {"compaction": {"enabled": True, "targetFileSize": "1Gi", "minInterval": "1m"}}
    policy = PolicyResource("ns", "p", {}, 1, policy_spec, None)
    c = effective({}, **settings(table, policy)).compaction
    assert c.enabled and c.target_file_size == 8 * MIB and c.min_interval_ms == 60_000


def test_the_tables_spark_application_merges_key_by_key_over_its_policys() -> None:
    """Table over policy over the operator-wide default: objects merged, lists replaced."""
    from deltakeeper.k8s.spark_application import Owner, merge, spark_application

    policy_app = {
        "image": "spark:policy",
        "driver": {"cores": 2, "memory": "2g", "env": [{"name": "A", "value": "1"}]},
        "executor": {"instances": 4},
        "sparkConf": {"spark.a": "policy", "spark.b": "policy"},
    }
    table_app = {
        "driver": {"memory": "8g", "env": [{"name": "B", "value": "2"}]},
        "sparkConf": {"spark.b": "table"},
    }
    table = TableResource(
        "ns", "t", {}, 1, {"uri": "/x", "compaction": {"sparkApplication": table_app}}
    )
    policy_spec = {"compaction": {"enabled": True, "sparkApplication": policy_app}}
    policy = PolicyResource("ns", "p", {}, 1, policy_spec, None)
    got = effective({}, **settings(table, policy)).compaction.spark_application
    assert got == {
        "image": "spark:policy",
        "driver": {"cores": 2, "memory": "8g", "env": [{"name": "B", "value": "2"}]},
        "executor": {"instances": 4},
        "sparkConf": {"spark.a": "policy", "spark.b": "table"},
    }
    assert policy_app["driver"]["memory"] == "2g"  # the policy's own spec is left alone
    default = {"image": "spark:default", "serviceAccount": "sa", "executor": {"cores": 3}}
    owner = Owner("t", "ns", "uid")
    spec = spark_application(owner, "j", {"jobId": "j"}, merge(default, got), {})["spec"]
    assert (spec["image"], spec["serviceAccount"]) == ("spark:policy", "sa")
    assert spec["executor"] == {**spec["executor"], "instances": 4, "cores": 3}
    assert spec["driver"]["memory"] == "8g" and spec["driver"]["cores"] == 2
    assert spec["sparkConf"]["spark.a"] == "policy" and spec["sparkConf"]["spark.b"] == "table"


@pytest.mark.parametrize(
    ("field", "value", "message"),
    [
        ("enabled", "yes", "compaction.enabled: expected true or false"),
        ("targetFileSize", "big", "compaction.targetFileSize"),
        ("minFilesPerPartition", 0, "compaction.minFilesPerPartition"),
        ("maxAge", "1y", "compaction.maxAge"),
        ("maxDeletedRowsRatio", 2, "compaction.maxDeletedRowsRatio: expected a number from 0"),
        ("zOrderBy", "day", "compaction.zOrderBy: expected a list of column names"),
        ("zOrderBy", [], "compaction.zOrderBy: expected a list of column names"),
        ("zOrderBy", ["day", 3], "compaction.zOrderBy: expected column names, got 3"),
        ("zOrderBy", ["day", "day"], "compaction.zOrderBy: day named more than once"),
        ("maxThreads", 0, "compaction.maxThreads: expected a whole number above 0"),
        ("maxThreads", "4", "compaction.maxThreads: expected a whole number above 0"),
        ("sparkApplication", "spark:4", "compaction.sparkApplication: expected the fields"),
        (
            "sparkApplication",
            {"arguments": ["x"]},
            "sparkApplication.arguments: set by deltakeeper",
        ),
        ("sparkApplication", {"type": "Scala"}, "sparkApplication.type: the compaction job is Py"),
        ("sparkApplication", {"driver": "big"}, "sparkApplication.driver: expected an object"),
        ("sparkApplication", {"sparkConf": {"a": 1}}, r"sparkConf.a: expected a string value"),
        ("sparkApplication", {"timeToLiveSeconds": -1}, "timeToLiveSeconds: expected a whole"),
        (
            "sparkApplication",
            {"driver": {"env": [{"name": "AWS_SECRET_ACCESS_KEY", "value": "x"}]}},
            "driver.env: AWS_SECRET_ACCESS_KEY has a literal value; use valueFrom.secretKeyRef",
        ),
    ],
)
def test_bad_compaction_fields_name_themselves(field: str, value: Any, message: str) -> None:
    with pytest.raises(PolicyError, match=message):
        from_spec({"compaction": {field: value}})


def small_file_table(root: Path, proto: dict[str, Any] | None = None) -> LogBuilder:
    log = LogBuilder(root)
    log.commit(proto or protocol(), metadata(("day",)))
    for i in range(4):
        log.commit(add(f"day=a/{i}.parquet", size=1000, day="a"))
    log.commit(add("day=b/0.parquet", size=200 * MIB, day="b"))
    return log


def maintain(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, dict[str, Any], str]:
    code = main(["maintain", *argv, "--now", NOW, "--json"])
    out, err = capsys.readouterr()
    return code, json.loads(out), err


def test_maintain_plans_no_compaction_step_unless_enabled(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    small_file_table(tmp_path)
    code, report, _ = maintain(capsys, str(tmp_path), "--dry-run")
    assert code == 0
    assert [s["operation"] for s in report["plan"]["steps"]] == ["checkpoint", "cleanup", "vacuum"]


def test_maintain_compact_dry_run_shows_the_plan_after_the_checkpoint(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    small_file_table(tmp_path)
    before = sorted(p.name for p in (tmp_path / "_delta_log").iterdir())
    code, report, _ = maintain(capsys, str(tmp_path), "--compact", "--dry-run")
    assert code == 0
    ops = [s["operation"] for s in report["plan"]["steps"]]
    assert ops == ["checkpoint", "compaction", "cleanup", "vacuum"]
    step = report["plan"]["steps"][1]
    # Four small files of partition a, aged past an hour; b's one file is not small.
    assert step["due"] and step["files"] == 4 and step["bytes"] == 4000
    assert [(p["partition"], p["why"]) for p in step["plan"]["partitions"]] == [
        ({"day": "a"}, "small-files-aged")
    ]
    result = next(r for r in report["results"] if r["operation"] == "compaction")
    assert result["result"] == "dry-run" and result["jobId"].startswith("deltakeeper-")
    assert result["job"] is None and result["compacted"] is None
    assert sorted(p.name for p in (tmp_path / "_delta_log").iterdir()) == before


def test_maintain_compact_refuses_catalog_managed_tables_with_exit_3(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    managed = protocol(3, 7, readerFeatures=["catalogManaged"], writerFeatures=["catalogManaged"])
    small_file_table(tmp_path, managed)
    code, _, err = main_text(capsys, "maintain", str(tmp_path), "--compact", "--now", NOW)
    assert code == 3, err


def main_text(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    code = main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


def test_a_jobs_commits_are_read_back_by_their_tag(tmp_path: Path) -> None:
    log = small_file_table(tmp_path)
    tag = "deltakeeper-abc-1"
    info = {"commitInfo": {"operation": "OPTIMIZE", "userMetadata": tag}}
    removes = [remove(f"day=a/{i}.parquet") for i in range(4)]
    for r in removes:
        r["remove"]["size"] = 1000
    v = log.commit(info, *removes, add("day=a/big.parquet", size=3000, day="a"))
    other = log.commit({"commitInfo": {"operation": "OPTIMIZE", "userMetadata": "someone"}})
    table = open_table(str(tmp_path))
    back = compaction_plan.read_back(table, tag, [v, other, 99])
    assert back.versions == (v,)
    assert (back.files_removed, back.files_added) == (4, 1)
    assert (back.bytes_removed, back.bytes_added) == (4000, 3000)

    done = {"result": "done", "commits": [{"version": v}]}
    outcome = job_outcome(table, tag, JobResult(0, done, ""))
    assert outcome.result is Result.DONE and outcome.compacted == back
    assert "rewrote 4 files" in outcome.message and f"at version {v}" in outcome.message

    # A job that claims a commit the log does not carry with its tag did not do it.
    claims = {"result": "done", "commits": [{"version": other}]}
    assert job_outcome(table, tag, JobResult(0, claims, "")).result is Result.FAILED
    failed = {"result": "failed", "error": "ConcurrentDeleteReadException", "message": "lost"}
    outcome = job_outcome(table, tag, JobResult(1, failed, ""))
    assert outcome.result is Result.FAILED
    assert outcome.message == "ConcurrentDeleteReadException: lost"


def test_maintain_only_compaction_asks_for_it(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    small_file_table(tmp_path)
    code, report, _ = maintain(capsys, str(tmp_path), "--only", "compaction", "--dry-run")
    assert code == 0
    assert [(s["operation"], s["due"]) for s in report["plan"]["steps"]] == [("compaction", True)]


def test_the_planners_job_spec_says_types_version_and_replay_size(tmp_path: Path) -> None:
    from deltakeeper.maintenance.planner import forced_compaction

    log = small_file_table(tmp_path)
    log.commit(remove("day=a/0.parquet"))
    table = open_table(str(tmp_path))
    snap = table.snapshot()
    found = compaction_plan.plan(
        snap.files, ("day",), CompactionSettings(min_files_per_partition=2), 0
    )
    (step,) = forced_compaction(table, snap, effective({}), 0, found).steps
    spec = step.job_spec
    assert spec is not None and spec["compact"] == [{"day": "a"}]
    # What the job would otherwise ask Spark for: the types, and the version it starts after.
    assert spec["partitionTypes"] == {"day": "string"} and spec["plannedVersion"] == snap.version
    # Four files and a tombstone: one replay partition, not Delta's 50.
    assert snap.num_files + snap.num_tombstones == 5 and spec["snapshotPartitions"] == 1
