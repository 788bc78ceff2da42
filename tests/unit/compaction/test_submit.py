"""compaction/submit.py: the spark-submit command line, and the job's result line read back."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from deltakeeper.compaction import job, submit
from deltakeeper.compaction.spark_storage import spark_storage

SECRET = "wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY"


def test_the_command_names_jars_conf_and_the_job_file(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(submit, "spark_submit_path", lambda: "/opt/spark/bin/spark-submit")
    (tmp_path / "jars.txt").write_text("delta-spark.jar\ndelta-storage.jar\n")
    cfg = submit.SubmitConfig("local[2]", jars_dir=str(tmp_path), conf={"spark.x": "1"})
    storage = spark_storage("s3://b/t", {"endpoint_url": "http://127.0.0.1:9000", "secret": SECRET})
    cmd = submit.command(cfg, storage, "/tmp/spec.json")
    assert cmd[:3] == ["/opt/spark/bin/spark-submit", "--master", "local[2]"]
    assert (
        cmd[cmd.index("--jars") + 1] == f"{tmp_path}/delta-spark.jar,{tmp_path}/delta-storage.jar"
    )
    assert "spark.hadoop.fs.s3a.endpoint=http://127.0.0.1:9000" in cmd
    assert "spark.x=1" in cmd
    assert cmd[-3:] == [str(submit.JOB_FILE), "--spec", "/tmp/spec.json"]
    assert not any(SECRET in part for part in cmd)


def test_a_short_local_job_gets_c1_jit_and_serial_gc_unless_the_user_sets_them(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(submit, "spark_submit_path", lambda: "/opt/spark/bin/spark-submit")
    storage = spark_storage(str(tmp_path), {})
    key = "spark.driver.extraJavaOptions"

    short = submit.SHORT_JOB_BYTES

    def java_options(master: str, conf: dict[str, str], planned: int | None = short) -> list[str]:
        cfg = submit.SubmitConfig(master, conf=conf)
        cmd = submit.command(cfg, storage, "/tmp/spec.json", planned)
        return [part for part in cmd if part.startswith(f"{key}=")]

    default = f"{key}={submit.LOCAL_JVM_CONF[key]}"
    assert java_options("local[2]", {}) == [default]
    assert "-XX:TieredStopAtLevel=1" in default
    assert java_options("local[2]", {key: "-Xss4m"}) == [f"{key}=-Xss4m"]  # the user's wins
    assert java_options("spark://host:7077", {}) == []  # executors elsewhere: untouched
    assert java_options("local[2]", {}, short + 1) == []  # a big rewrite: C2's code is faster
    assert java_options("local[2]", {}, None) == []  # size unknown


def test_a_local_master_lists_a_vacuum_in_one_task_per_thread(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Delta Spark's VACUUM lists in spark.sql.sources.parallelPartitionDiscovery.parallelism
    tasks, 10,000 by default: a minute of empty tasks on local[2]."""
    monkeypatch.setattr(submit, "spark_submit_path", lambda: "/opt/spark/bin/spark-submit")
    storage = spark_storage(str(tmp_path), {})
    key = submit.LISTING_PARALLELISM

    def listing(master: str, conf: dict[str, str]) -> list[str]:
        cmd = submit.command(submit.SubmitConfig(master, conf=conf), storage, "/tmp/spec.json")
        return [part for part in cmd if part.startswith(f"{key}=")]

    assert listing("local[2]", {}) == [f"{key}=2"]
    assert listing("local[2]", {key: "64"}) == [f"{key}=64"]  # the user's wins
    assert listing("spark://host:7077", {}) == []  # a cluster: Spark's default


def test_a_job_that_printed_nothing_is_a_failure() -> None:
    assert submit.parse_result("spark noise\n")["error"] == "NoResult"
    line = json.dumps({job.MARK: 1, "result": "done"})
    assert submit.parse_result(f"noise\n{line}\nmore noise\n")["result"] == "done"
