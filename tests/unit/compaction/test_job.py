"""compaction/job.py without Spark: SQL literals and predicates, its spec, credentials, tuning.

Spark itself runs the job in tests/integration/test_compaction_job.py."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import pytest

from deltakeeper.compaction import job

SECRET = "wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY"


@pytest.mark.parametrize(
    ("raw", "literal"),
    [
        ("plain", "'plain'"),
        ("it's", "'it\\'s'"),
        ("back\\slash", "'back\\\\slash'"),
        ("100%", "'100%'"),
        ("a=b/c", "'a=b/c'"),
        ("ünï ☃", "'ünï ☃'"),
    ],
)
def test_string_literals_escape_quotes_and_backslashes(raw: str, literal: str) -> None:
    assert job.quote_string(raw) == literal


def test_partition_predicates_are_typed_and_null_aware() -> None:
    types = {"s": "string", "d": "date", "n": "int", "we`ird": "string"}
    got = job.partition_predicate({"s": "it's", "d": "2024-02-29", "n": None, "we`ird": "x"}, types)
    assert got == (
        "`d` = CAST('2024-02-29' AS date) AND `n` IS NULL AND `s` = 'it\\'s' AND `we``ird` = 'x'"
    )
    assert job.partition_predicate({}, types) == "true"
    assert job.any_of(["a = 1", "b = 2"]) == "(a = 1) OR (b = 2)"


def test_a_column_that_is_not_a_partition_column_is_a_spec_error() -> None:
    with pytest.raises(job.SpecError, match="'x' is not a partition column"):
        job.partition_predicate({"x": "1"}, {"p": "string"})


def test_job_credentials_go_to_hadoop_conf_and_a_private_keyfile() -> None:
    env = {
        "AWS_ACCESS_KEY_ID": "AKIA1234",
        "AWS_SECRET_ACCESS_KEY": SECRET,
        "AZURE_STORAGE_ACCOUNT_NAME": "acct",
        "AZURE_STORAGE_ACCOUNT_KEY": SECRET,
        "GOOGLE_APPLICATION_CREDENTIALS_JSON": '{"private_key": "k"}',
    }
    conf = job.hadoop_credentials(env)
    assert conf["fs.s3a.secret.key"] == SECRET
    assert conf["fs.azure.account.key.acct.dfs.core.windows.net"] == SECRET
    keyfile = conf["google.cloud.auth.service.account.json.keyfile"]
    try:
        assert Path(keyfile).read_text() == '{"private_key": "k"}'
        assert os.stat(keyfile).st_mode & 0o077 == 0  # readable by its owner only
    finally:
        os.unlink(keyfile)


def test_job_spec_errors_name_the_key(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert job.main(["--spec-json", '{"table": "/t"}']) == 1
    out = json.loads(capsys.readouterr().out)
    assert out["result"] == "failed" and out["error"] == "SpecError"
    assert "spec.jobId" in out["message"]
    assert job.main(["--spec-json", "[1]"]) == 1
    assert "JSON object" in json.loads(capsys.readouterr().out)["message"]


def _never() -> Any:
    raise AssertionError("Spark asked although the spec says")


def test_the_job_takes_partition_types_and_start_version_from_the_spec() -> None:
    spec = {"partitionTypes": {"d": "date"}, "plannedVersion": 7}
    assert job.partition_types(spec, _never) == {"d": "date"}
    assert job.start_version(spec, _never) == 7
    # An unpartitioned table says so with {}, and version 0 is a version.
    unpartitioned = {"partitionTypes": {}, "plannedVersion": 0}
    assert job.partition_types(unpartitioned, _never) == {}
    assert job.start_version(unpartitioned, _never) == 0


def test_a_spec_without_them_makes_the_job_ask_spark() -> None:
    assert job.partition_types({}, lambda: {"p": "int"}) == {"p": "int"}
    assert job.start_version({}, lambda: 12) == 12


@pytest.mark.parametrize(
    ("extra", "key"),
    [
        ({"partitionTypes": ["date"]}, "spec.partitionTypes"),
        ({"partitionTypes": {"d": 1}}, "spec.partitionTypes"),
        ({"plannedVersion": "7"}, "spec.plannedVersion"),
        ({"plannedVersion": -1}, "spec.plannedVersion"),
        ({"plannedVersion": True}, "spec.plannedVersion"),
    ],
)
def test_bad_partition_types_or_planned_version_are_spec_errors(
    extra: dict[str, Any], key: str, capsys: pytest.CaptureFixture[str]
) -> None:
    spec = {"jobId": "dk-1", "table": "/t", "compact": [{}], **extra}
    assert job.main(["--spec-json", json.dumps(spec)]) == 1
    out = json.loads(capsys.readouterr().out)
    assert out["error"] == "SpecError" and key in out["message"], out


def _history(latest: int, calls: list[int]) -> Any:
    def history(limit: int) -> list[dict[str, int]]:
        calls.append(limit)
        return [{"version": v} for v in range(latest, max(latest - limit, -1), -1)]

    return history


def test_the_job_reads_only_the_history_newer_than_its_start() -> None:
    calls: list[int] = []
    rows = job.newest_history(_history(100, calls), after=98)
    assert [r["version"] for r in rows] == [100, 99] and calls == [4]
    calls.clear()
    rows = job.newest_history(_history(100, calls), after=80)
    assert [r["version"] for r in rows] == list(range(100, 80, -1)) and calls == [4, 16, 64]
    calls.clear()
    # A log shorter than the limit ends the search: every version it has is read.
    rows = job.newest_history(_history(2, calls), after=-1)
    assert [r["version"] for r in rows] == [2, 1, 0] and calls == [4]
    assert job.newest_history(_history(5, []), after=5) == []


def test_the_job_tunes_spark_only_where_the_users_conf_is_silent() -> None:
    key = job.TUNING_CONF["snapshotPartitions"]
    spec = {"snapshotPartitions": 3}
    assert job.tuning(spec, lambda k: None) == {key: "3"}
    assert job.tuning(spec, {key: "8"}.get) == {}  # the user's sparkConf wins
    assert job.tuning({}, lambda k: None) == {}


@pytest.mark.parametrize("value", [0, -2, "2", 1.5, True])
def test_a_bad_snapshot_partitions_is_a_spec_error(
    value: Any, capsys: pytest.CaptureFixture[str]
) -> None:
    spec = {"jobId": "dk-1", "table": "/t", "compact": [{}], "snapshotPartitions": value}
    assert job.main(["--spec-json", json.dumps(spec)]) == 1
    out = json.loads(capsys.readouterr().out)
    assert out["error"] == "SpecError" and "spec.snapshotPartitions" in out["message"], out


@pytest.mark.parametrize(
    ("extra", "says"),
    [
        ({}, "spec.condition must be the DELETE's condition"),
        ({"condition": "  "}, "spec.condition must be the DELETE's condition"),
        ({"condition": "ts < x", "partitions": {"day": "1"}}, "spec.partitions must be a list"),
    ],
)
def test_an_expire_spec_needs_its_condition(
    extra: dict[str, Any], says: str, capsys: pytest.CaptureFixture[str]
) -> None:
    spec = {"jobId": "dk-1", "table": "/t", "operation": "expire", **extra}
    assert job.main(["--spec-json", json.dumps(spec)]) == 1
    out = json.loads(capsys.readouterr().out)
    assert out["error"] == "SpecError" and says in out["message"], out
