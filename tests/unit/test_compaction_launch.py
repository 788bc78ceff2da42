"""The launch side of compaction without Spark: storage mapping, predicates, the command line,
the result line. Spark itself runs in tests/integration/test_compaction_job.py."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

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


def test_a_job_that_printed_nothing_is_a_failure() -> None:
    assert submit.parse_result("spark noise\n")["error"] == "NoResult"
    line = json.dumps({job.MARK: 1, "result": "done"})
    assert submit.parse_result(f"noise\n{line}\nmore noise\n")["result"] == "done"


# ------------------------------------------------------------------------------------------
# abfss and gs end to end, as far as Python goes: storage options -> (Spark conf, environment)
# -> the Hadoop settings the job sets in-process. No emulator runs ABFS or GCS under Spark here.
# ------------------------------------------------------------------------------------------

ABFSS = "abfss://data@acct.dfs.core.windows.net/t"


def hadoop_settings(uri: str, options: dict[str, object]) -> dict[str, str]:
    """Everything the connector would read: the spark.hadoop.* conf plus the job's own."""
    storage = spark_storage(uri, options)
    conf = {k.removeprefix("spark.hadoop."): v for k, v in storage.conf.items()}
    assert SECRET not in json.dumps(storage.conf)
    return {**conf, **job.hadoop_credentials(storage.env, storage.uri)}


def test_abfss_with_only_a_key_uses_the_account_in_its_host() -> None:
    got = hadoop_settings(ABFSS, {"account_key": SECRET})
    assert got == {
        "fs.azure.account.key.acct.dfs.core.windows.net": SECRET,
        "fs.azure.account.key.acct.blob.core.windows.net": SECRET,
    }


def test_abfss_in_another_azure_cloud_keys_its_own_host() -> None:
    uri = "abfss://data@acct.dfs.core.chinacloudapi.cn/t"
    got = hadoop_settings(uri, {"account_key": SECRET})
    assert got["fs.azure.account.key.acct.dfs.core.chinacloudapi.cn"] == SECRET


def test_abfss_sas_token_is_a_fixed_sas_per_account() -> None:
    got = hadoop_settings(ABFSS, {"sas_token": f"?sv=2024&sig={SECRET}"})
    host = "acct.dfs.core.windows.net"
    assert got[f"fs.azure.account.auth.type.{host}"] == "SAS"
    assert got[f"fs.azure.sas.fixed.token.{host}"] == f"sv=2024&sig={SECRET}"


def test_abfss_service_principal_is_oauth_client_credentials() -> None:
    options = {"client_id": "app-id", "client_secret": SECRET, "tenant_id": "tenant-1"}
    got = hadoop_settings(ABFSS, options)
    host = "acct.dfs.core.windows.net"
    assert got[f"fs.azure.account.auth.type.{host}"] == "OAuth"
    assert got[f"fs.azure.account.oauth.provider.type.{host}"] == job.OAUTH_PROVIDER
    assert got[f"fs.azure.account.oauth2.client.id.{host}"] == "app-id"
    assert got[f"fs.azure.account.oauth2.client.secret.{host}"] == SECRET
    assert (
        got[f"fs.azure.account.oauth2.client.endpoint.{host}"]
        == "https://login.microsoftonline.com/tenant-1/oauth2/token"
    )


def test_a_shared_key_wins_over_other_azure_credentials() -> None:
    got = hadoop_settings(ABFSS, {"account_key": SECRET, "sas_token": "sv=1"})
    assert not any("sas" in k or "auth.type" in k for k in got)


def test_azure_connection_strings_give_account_and_key_or_sas() -> None:
    text = (
        "DefaultEndpointsProtocol=https;AccountName=other;"
        f"AccountKey={SECRET};EndpointSuffix=core.windows.net"
    )
    got = spark_storage("az://data/t", {"connection_string": text})
    assert got.uri == "abfss://data@other.dfs.core.windows.net/t"
    assert got.env == {"AZURE_STORAGE_ACCOUNT_NAME": "other", "AZURE_STORAGE_ACCOUNT_KEY": SECRET}
    sas = f"BlobEndpoint=https://acct.blob.core.windows.net/;SharedAccessSignature=sv=2024&sig={SECRET}"
    got = spark_storage("az://data/t", {"connection_string": sas})
    assert got.uri == ABFSS
    assert got.env["AZURE_STORAGE_SAS_TOKEN"] == f"sv=2024&sig={SECRET}"


@pytest.mark.parametrize(
    "text",
    [
        "UseDevelopmentStorage=true",
        f"AccountName=devstoreaccount1;AccountKey={SECRET};BlobEndpoint=http://127.0.0.1:10000/devstoreaccount1",
    ],
)
def test_azure_emulator_connection_strings_are_refused_for_spark(text: str) -> None:
    with pytest.raises(InvalidInputError, match="account_key or sas_token") as e:
        spark_storage("az://data/t", {"connection_string": text})
    assert SECRET not in str(e.value)


@pytest.mark.parametrize(
    ("token", "auth"),
    [
        ("anon", "UNAUTHENTICATED"),
        ("google_default", "APPLICATION_DEFAULT"),
        ("cloud", "COMPUTE_ENGINE"),
    ],
)
def test_gcs_token_words_become_the_connector_auth_type(token: str, auth: str) -> None:
    got = hadoop_settings("gs://b/t", {"token": token})
    assert got == {"fs.gs.auth.type": auth}


def test_gcs_keyfile_path_and_json_key_reach_the_connector(tmp_path: Path) -> None:
    keyfile = tmp_path / "key.json"
    keyfile.write_text('{"private_key": "k"}')
    got = hadoop_settings("gs://b/t", {"token": str(keyfile)})
    assert got == {
        "google.cloud.auth.type": "SERVICE_ACCOUNT_JSON_KEYFILE",
        "google.cloud.auth.service.account.json.keyfile": str(keyfile),
    }


def test_a_gcs_token_spark_cannot_use_is_refused(tmp_path: Path) -> None:
    with pytest.raises(InvalidInputError, match="service-account key"):
        spark_storage("gs://b/t", {"token": str(tmp_path / "missing.json")})


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
