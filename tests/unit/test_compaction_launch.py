"""The launch side of compaction without Spark: storage mapping, predicates, the command line,
the result line. Spark itself runs in tests/integration/test_compaction_job.py."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from deltakeeper.compaction import job, submit
from deltakeeper.compaction.spark_storage import spark_storage
from deltakeeper.delta.errors import InvalidInputError

SECRET = "wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY"


def test_s3_maps_to_s3a_with_the_endpoint_in_conf_and_the_keys_in_env_only() -> None:
    options = {"endpoint_url": "http://127.0.0.1:9000", "key": "AKIA1234", "secret": SECRET}
    got = spark_storage("s3://lake/events/", options)
    assert got.uri == "s3a://lake/events/"
    assert got.conf == {
        "spark.hadoop.fs.s3a.endpoint": "http://127.0.0.1:9000",
        "spark.hadoop.fs.s3a.path.style.access": "true",
        "spark.hadoop.fs.s3a.connection.ssl.enabled": "false",
    }
    assert got.env == {"AWS_ACCESS_KEY_ID": "AKIA1234", "AWS_SECRET_ACCESS_KEY": SECRET}
    assert SECRET not in json.dumps(got.conf)


def test_s3_region_from_client_kwargs() -> None:
    got = spark_storage("s3a://b/t", {"client_kwargs": {"region_name": "eu-west-1"}})
    assert got.conf == {"spark.hadoop.fs.s3a.endpoint.region": "eu-west-1"} and got.env == {}


def test_azure_az_scheme_becomes_abfss_with_the_account() -> None:
    got = spark_storage("az://data/t", {"account_name": "acct", "account_key": SECRET})
    assert got.uri == "abfss://data@acct.dfs.core.windows.net/t"
    assert got.env == {"AZURE_STORAGE_ACCOUNT_NAME": "acct", "AZURE_STORAGE_ACCOUNT_KEY": SECRET}
    assert got.conf == {}


def test_azure_az_without_an_account_says_what_to_give() -> None:
    with pytest.raises(InvalidInputError, match="account_name"):
        spark_storage("az://data/t", {})


def test_abfss_keeps_its_uri() -> None:
    uri = "abfss://c@acct.dfs.core.windows.net/path/t"
    assert spark_storage(uri, {}).uri == uri


def test_gcs_service_account_json_travels_as_env() -> None:
    info = {"type": "service_account", "private_key": SECRET}
    got = spark_storage("gs://b/t", {"token": info, "endpoint_url": "http://127.0.0.1:4443"})
    assert got.uri == "gs://b/t"
    assert got.conf == {"spark.hadoop.fs.gs.storage.root.url": "http://127.0.0.1:4443"}
    assert json.loads(got.env["GOOGLE_APPLICATION_CREDENTIALS_JSON"]) == info


def test_local_paths_become_file_uris(tmp_path: Path) -> None:
    assert spark_storage(str(tmp_path), {}).uri == f"file:{tmp_path}"
    assert spark_storage(f"file://{tmp_path}", {}).uri == f"file:{tmp_path}"


def test_unknown_scheme_is_refused() -> None:
    with pytest.raises(InvalidInputError, match="hdfs"):
        spark_storage("hdfs://nn/t", {})


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


def test_a_job_that_printed_nothing_is_a_failure() -> None:
    assert submit.parse_result("spark noise\n")["error"] == "NoResult"
    line = json.dumps({job.MARK: 1, "result": "done"})
    assert submit.parse_result(f"noise\n{line}\nmore noise\n")["result"] == "done"
