"""A table's storage as Spark sees it: its URI in Hadoop's schemes, the non-secret Hadoop
settings (endpoint, path-style access) and the credentials as environment variables.

deltakeeper reads tables through obstore; the compaction job reads them through Hadoop's
connectors (s3a, abfss, gs). The same DeltaTable storage options, in either spelling
(delta/storage_options.py reads them into object_store's), map here, once, for both
launchers. Secrets never go into Spark conf (it is printed in logs and shown in the Spark UI and
the SparkApplication): they travel as environment variables, which the job copies into the
Hadoop configuration in-process (see job.hadoop_credentials).
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import urlsplit

from deltakeeper.delta import storage_options
from deltakeeper.delta.errors import InvalidInputError

# object_store option -> environment variable the job reads, per store.
S3_ENV = {
    "aws_access_key_id": "AWS_ACCESS_KEY_ID",
    "aws_secret_access_key": "AWS_SECRET_ACCESS_KEY",
    "aws_session_token": "AWS_SESSION_TOKEN",
}
AZURE_ENV = {
    "azure_storage_account_name": "AZURE_STORAGE_ACCOUNT_NAME",
    "azure_storage_account_key": "AZURE_STORAGE_ACCOUNT_KEY",
    "azure_storage_sas_token": "AZURE_STORAGE_SAS_TOKEN",
    "azure_client_id": "AZURE_CLIENT_ID",
    "azure_client_secret": "AZURE_CLIENT_SECRET",
    "azure_tenant_id": "AZURE_TENANT_ID",
}
AZURE_HOST = "dfs.core.windows.net"
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
    """Map a deltakeeper table URI and its storage options; InvalidInputError names an option
    that Spark's connector cannot be given."""
    scheme = urlsplit(uri).scheme.lower() if "://" in uri else "file"
    store = storage_options.store_of(uri)
    if store == "s3":
        return _s3(uri, storage_options.canonical(store, options))
    if store == "azure":
        return _azure(uri, storage_options.canonical(store, options))
    if store == "gcs":
        return _gcs(uri, options, storage_options.canonical(store, options))
    if scheme == "file":
        return SparkStorage(_local(uri))
    raise InvalidInputError(f"compaction cannot read {scheme}:// tables through Spark")


def _local(uri: str) -> str:
    path = urlsplit(uri).path if uri.startswith("file:") else uri
    return "file:" + os.path.abspath(path)


def _s3(uri: str, options: Mapping[str, Any]) -> SparkStorage:
    parts = urlsplit(uri)
    conf: dict[str, str] = {}
    endpoint = options.get("aws_endpoint")
    if endpoint:
        conf["spark.hadoop.fs.s3a.endpoint"] = str(endpoint)
        # S3-compatible stores (MinIO, Ceph) rarely serve virtual-host names.
        virtual = str(options.get("aws_virtual_hosted_style_request")).lower() == "true"
        conf["spark.hadoop.fs.s3a.path.style.access"] = str(not virtual).lower()
        conf["spark.hadoop.fs.s3a.connection.ssl.enabled"] = str(
            str(endpoint).startswith("https:")
        ).lower()
    region = options.get("aws_region")
    if region:
        conf["spark.hadoop.fs.s3a.endpoint.region"] = str(region)
    env = _env(options, S3_ENV)
    return SparkStorage(f"s3a://{parts.netloc}{parts.path}", conf, env)


def _azure(uri: str, options: Mapping[str, Any]) -> SparkStorage:
    parts = urlsplit(uri)
    _azure_host_only(options.get("azure_storage_endpoint"))
    account = options.get("azure_storage_account_name")
    if parts.scheme.lower() == "az":
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


def _azure_host_only(endpoint: Any) -> None:
    """Spark's ABFS connector reaches only Azure's own hosts: an endpoint elsewhere (an
    emulator, from a connection string or given) is refused."""
    host = urlsplit(str(endpoint)).hostname or "" if endpoint else ""
    if endpoint and not host.endswith(".core.windows.net"):
        raise InvalidInputError(
            "compaction cannot reach the Azure endpoint in the storage options through Spark's "
            "ABFS connector (Azure's own hosts only); give account_name with account_key or "
            "sas_token instead"
        )


def _gcs(uri: str, given: Mapping[str, Any], options: Mapping[str, Any]) -> SparkStorage:
    parts = urlsplit(uri)
    conf: dict[str, str] = {}
    endpoint = options.get("google_base_url")
    if endpoint:
        conf["spark.hadoop.fs.gs.storage.root.url"] = str(endpoint)
    env: dict[str, str] = {}
    word = given.get("token")
    keyfile = options.get("google_application_credentials") or options.get("google_service_account")
    if isinstance(word, str) and word in GCS_AUTH:
        conf["spark.hadoop.fs.gs.auth.type"] = GCS_AUTH[word]
    elif str(options.get("google_skip_signature")).lower() == "true":
        conf["spark.hadoop.fs.gs.auth.type"] = GCS_AUTH["anon"]
    elif options.get("google_service_account_key"):
        env["GOOGLE_APPLICATION_CREDENTIALS_JSON"] = str(options["google_service_account_key"])
    elif keyfile and os.path.isfile(str(keyfile)):
        env["GOOGLE_APPLICATION_CREDENTIALS"] = str(keyfile)
    elif keyfile or options.get("google_bearer_token"):
        raise InvalidInputError(
            "the gs token storage option must be a service-account key (JSON object), a key "
            f"file on this machine, or one of {', '.join(sorted(GCS_AUTH))} for Spark"
        )
    return SparkStorage(f"gs://{parts.netloc}{parts.path}", conf, env)


def _env(options: Mapping[str, Any], names: Mapping[str, str]) -> dict[str, str]:
    return {env: str(options[opt]) for opt, env in names.items() if options.get(opt)}
