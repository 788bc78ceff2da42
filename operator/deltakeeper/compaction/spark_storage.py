"""A table's storage as Spark sees it: its URI in Hadoop's schemes, the non-secret Hadoop
settings (endpoint, path-style access) and the credentials as environment variables.

deltakeeper reads tables through fsspec; the compaction job reads them through Hadoop's
connectors (s3a, abfss, gs). The same DeltaTable storage options map here, once, for both
launchers. Secrets never go into Spark conf (it is printed in logs and shown in the Spark UI and
the SparkApplication): they travel as environment variables, which the job copies into the
Hadoop configuration in-process (see job.hadoop_credentials).
"""

from __future__ import annotations

import json
import os
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import urlsplit

from deltakeeper.delta.errors import InvalidInputError

# fsspec option -> environment variable the job reads, per store.
S3_ENV = {
    "key": "AWS_ACCESS_KEY_ID",
    "secret": "AWS_SECRET_ACCESS_KEY",
    "token": "AWS_SESSION_TOKEN",
}
AZURE_ENV = {
    "account_name": "AZURE_STORAGE_ACCOUNT_NAME",
    "account_key": "AZURE_STORAGE_ACCOUNT_KEY",
    "sas_token": "AZURE_STORAGE_SAS_TOKEN",
    "client_id": "AZURE_CLIENT_ID",
    "client_secret": "AZURE_CLIENT_SECRET",
    "tenant_id": "AZURE_TENANT_ID",
}
AZURE_HOST = "dfs.core.windows.net"
# Connection-string fields -> the fsspec option they stand for.
CONNECTION_STRING = {
    "AccountName": "account_name",
    "AccountKey": "account_key",
    "SharedAccessSignature": "sas_token",
}
# gcsfs `token` words -> the GCS connector's fs.gs.auth.type.
GCS_AUTH = {
    "anon": "UNAUTHENTICATED",
    "google_default": "APPLICATION_DEFAULT",
    "cloud": "COMPUTE_ENGINE",
}


@dataclass(frozen=True)
class SparkStorage:
    uri: str  # the table as Spark reads it
    conf: dict[str, str] = field(default_factory=dict)  # spark.hadoop.* settings, no secrets
    env: dict[str, str] = field(default_factory=dict)  # credentials for driver and executors


def spark_storage(uri: str, options: Mapping[str, Any]) -> SparkStorage:
    """Map a deltakeeper table URI and its fsspec storage options; InvalidInputError names an
    option that Spark's connector cannot be given."""
    scheme = urlsplit(uri).scheme.lower() if "://" in uri else "file"
    if scheme in ("s3", "s3a"):
        return _s3(uri, options)
    if scheme in ("abfss", "abfs", "az"):
        return _azure(uri, options)
    if scheme in ("gs", "gcs"):
        return _gcs(uri, options)
    if scheme == "file":
        return SparkStorage(_local(uri))
    raise InvalidInputError(f"compaction cannot read {scheme}:// tables through Spark")


def _local(uri: str) -> str:
    path = urlsplit(uri).path if uri.startswith("file:") else uri
    return "file:" + os.path.abspath(path)


def _s3(uri: str, options: Mapping[str, Any]) -> SparkStorage:
    parts = urlsplit(uri)
    conf: dict[str, str] = {}
    endpoint = options.get("endpoint_url") or (options.get("client_kwargs") or {}).get(
        "endpoint_url"
    )
    if endpoint:
        conf["spark.hadoop.fs.s3a.endpoint"] = str(endpoint)
        # S3-compatible stores (MinIO, Ceph) rarely serve virtual-host names.
        conf["spark.hadoop.fs.s3a.path.style.access"] = "true"
        conf["spark.hadoop.fs.s3a.connection.ssl.enabled"] = str(
            str(endpoint).startswith("https:")
        ).lower()
    region = (options.get("client_kwargs") or {}).get("region_name")
    if region:
        conf["spark.hadoop.fs.s3a.endpoint.region"] = str(region)
    env = _env(options, S3_ENV)
    return SparkStorage(f"s3a://{parts.netloc}{parts.path}", conf, env)


def _azure(uri: str, options: Mapping[str, Any]) -> SparkStorage:
    parts = urlsplit(uri)
    options = {**_connection_string(options.get("connection_string")), **options}
    if parts.scheme.lower() == "az":
        account = options.get("account_name")
        if not account:
            raise InvalidInputError(
                "az:// tables need the account_name storage option (or AZURE_STORAGE_ACCOUNT_NAME "
                "in the Secret) for Spark; or give the table as abfss://container@account."
                f"{AZURE_HOST}/path"
            )
        netloc = f"{parts.netloc}@{account}.{AZURE_HOST}"
    else:
        netloc = parts.netloc
    return SparkStorage(f"abfss://{netloc}{parts.path}", {}, _env(options, AZURE_ENV))


def _gcs(uri: str, options: Mapping[str, Any]) -> SparkStorage:
    parts = urlsplit(uri)
    conf: dict[str, str] = {}
    endpoint = options.get("endpoint_url")
    if endpoint:
        conf["spark.hadoop.fs.gs.storage.root.url"] = str(endpoint)
    env: dict[str, str] = {}
    token = options.get("token")
    if isinstance(token, dict):
        env["GOOGLE_APPLICATION_CREDENTIALS_JSON"] = json.dumps(token)
    elif isinstance(token, str) and token in GCS_AUTH:
        conf["spark.hadoop.fs.gs.auth.type"] = GCS_AUTH[token]
    elif isinstance(token, str) and token and os.path.isfile(token):
        env["GOOGLE_APPLICATION_CREDENTIALS"] = token
    elif token:
        raise InvalidInputError(
            "the gs token storage option must be a service-account key (JSON object), a key "
            f"file on this machine, or one of {', '.join(sorted(GCS_AUTH))} for Spark"
        )
    return SparkStorage(f"gs://{parts.netloc}{parts.path}", conf, env)


def _connection_string(text: Any) -> dict[str, str]:
    """The account, key or SAS an Azure connection string carries. Spark's ABFS connector
    reaches only Azure's own hosts, so a string naming another endpoint (an emulator) is
    refused."""
    if not text:
        return {}
    fields = {k: v for k, _, v in (p.partition("=") for p in str(text).split(";")) if v}
    hosts = [urlsplit(v).hostname or "" for k, v in fields.items() if k.endswith("Endpoint")]
    if fields.get("UseDevelopmentStorage") or any(
        not h.endswith(".core.windows.net") for h in hosts
    ):
        raise InvalidInputError(
            "compaction cannot reach the Azure endpoint in connection_string through Spark's "
            "ABFS connector (Azure's own hosts only); give account_name with account_key or "
            "sas_token instead"
        )
    out = {opt: fields[name] for name, opt in CONNECTION_STRING.items() if fields.get(name)}
    if hosts and "account_name" not in out:
        out["account_name"] = hosts[0].split(".", 1)[0]
    return out


def _env(options: Mapping[str, Any], names: Mapping[str, str]) -> dict[str, str]:
    return {env: str(options[opt]) for opt, env in names.items() if options.get(opt)}
