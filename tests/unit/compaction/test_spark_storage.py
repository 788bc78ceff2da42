"""compaction/spark_storage.py: storage options as Spark's URI, Hadoop conf and environment.

Secrets travel in the environment only; the abfss and gs cases follow them on to the Hadoop
settings the job sets in-process (job.hadoop_credentials)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from deltakeeper.compaction import job
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


def test_the_s3_region_comes_from_client_kwargs() -> None:
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


def test_an_abfss_uri_is_kept_as_it_is() -> None:
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
