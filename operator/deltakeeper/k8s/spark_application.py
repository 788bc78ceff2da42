"""The SparkApplication (kubeflow spark-operator, sparkoperator.k8s.io/v1beta2) that runs one
compaction job in a cluster: built here as plain data, created by the operator.

The template comes from the DeltaTable's `spec.compaction.sparkApplication`, merged over the
operator-wide default (image, serviceAccount, driver and executor resources, sparkConf). What
deltakeeper owns is set last and cannot be overridden: the job file and its arguments, Delta's
Spark settings, the labels that find the job again, the owner reference and the credentials,
which reach driver and executors only as references to the table's Secret, never as values.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from deltakeeper.compaction.launcher import Planned
from deltakeeper.resources import names
from deltakeeper.resources.crd import API_VERSION, GROUP
from deltakeeper.resources.spec import merge

GROUP_VERSION = "sparkoperator.k8s.io/v1beta2"
KIND = "SparkApplication"
OWNER_KIND = "DeltaTable"  # what a job's owner reference names
TABLE_LABEL = f"{GROUP}/table"
JOB_LABEL = f"{GROUP}/job-id"
# What the plan rewrites, read back by an operator that adopts the job after a restart.
PLANNED_FILES = f"{GROUP}/planned-files"
PLANNED_BYTES = f"{GROUP}/planned-bytes"
MAX_NAME = names.MAX_NAME
DEFAULT_TTL_SECONDS = 3600

# Spark's Delta settings; the job file's path inside the compaction image.
DELTA_CONF = {
    "spark.sql.extensions": "io.delta.sql.DeltaSparkSessionExtension",
    "spark.sql.catalog.spark_catalog": "org.apache.spark.sql.delta.catalog.DeltaCatalog",
}
JOB_FILE = "local:///opt/deltakeeper/job.py"

# A Secret key (the clouds' names or fsspec's) -> the environment variable the job reads
# (job.hadoop_credentials). A connection string has no Hadoop equivalent the job maps.
SECRET_ENV = {
    "AWS_ACCESS_KEY_ID": "AWS_ACCESS_KEY_ID",
    "key": "AWS_ACCESS_KEY_ID",
    "AWS_SECRET_ACCESS_KEY": "AWS_SECRET_ACCESS_KEY",
    "secret": "AWS_SECRET_ACCESS_KEY",
    "AWS_SESSION_TOKEN": "AWS_SESSION_TOKEN",
    "token": "AWS_SESSION_TOKEN",
    "AWS_ENDPOINT_URL": "AWS_ENDPOINT_URL",
    "AZURE_STORAGE_ACCOUNT_NAME": "AZURE_STORAGE_ACCOUNT_NAME",
    "account_name": "AZURE_STORAGE_ACCOUNT_NAME",
    "AZURE_STORAGE_ACCOUNT_KEY": "AZURE_STORAGE_ACCOUNT_KEY",
    "account_key": "AZURE_STORAGE_ACCOUNT_KEY",
    "AZURE_STORAGE_SAS_TOKEN": "AZURE_STORAGE_SAS_TOKEN",
    "sas_token": "AZURE_STORAGE_SAS_TOKEN",
    "AZURE_CLIENT_ID": "AZURE_CLIENT_ID",
    "client_id": "AZURE_CLIENT_ID",
    "AZURE_CLIENT_SECRET": "AZURE_CLIENT_SECRET",
    "client_secret": "AZURE_CLIENT_SECRET",
    "AZURE_TENANT_ID": "AZURE_TENANT_ID",
    "tenant_id": "AZURE_TENANT_ID",
    "service-account.json": "GOOGLE_APPLICATION_CREDENTIALS_JSON",
    "GOOGLE_APPLICATION_CREDENTIALS_JSON": "GOOGLE_APPLICATION_CREDENTIALS_JSON",
}


@dataclass(frozen=True)
class Owner:
    """The DeltaTable a job belongs to."""

    name: str
    namespace: str
    uid: str
    api_version: str = API_VERSION
    kind: str = OWNER_KIND


DEFAULT_EXECUTOR = {"instances": 1, "cores": 1, "memory": "2g"}


def job_name(table: str, job_id: str) -> str:
    """A DNS-1035 label of at most 63 characters, unique per job: `dk-<table>-<hash>`."""
    return names.dns_label(table, job_id, prefix="dk-")


def secret_env(secret_name: str | None, secret_keys: list[str]) -> list[dict[str, Any]]:
    """Environment entries that point at the Secret's keys; unknown keys are left out."""
    if not secret_name:
        return []
    env = {}
    for key in sorted(secret_keys):
        name = SECRET_ENV.get(key)
        if name:
            env[name] = {
                "name": name,
                "valueFrom": {"secretKeyRef": {"name": secret_name, "key": key}},
            }
    return [env[n] for n in sorted(env)]


def spark_application(
    owner: Owner,
    job_id: str,
    job_spec: Mapping[str, Any],
    template: Mapping[str, Any],
    storage_conf: Mapping[str, str],
    secret_name: str | None = None,
    secret_keys: list[str] | None = None,
    planned: Planned | None = None,
) -> dict[str, Any]:
    """The SparkApplication for one job. `template` is the merged default and table template
    (spark-operator's spec fields); `storage_conf` the table's non-secret Spark settings."""
    spec = merge(
        {
            "type": "Python",
            "pythonVersion": "3",
            "mode": "cluster",
            "sparkVersion": "4.0.0",
            "restartPolicy": {"type": "Never"},
            "timeToLiveSeconds": DEFAULT_TTL_SECONDS,
            "driver": {"cores": 1, "memory": "1g"},
            "executor": dict(DEFAULT_EXECUTOR),
        },
        template,
    )
    spec["mainApplicationFile"] = spec.get("mainApplicationFile") or JOB_FILE
    spec["arguments"] = ["--spec-json", json.dumps(dict(job_spec), sort_keys=True)]
    spec["sparkConf"] = {**dict(spec.get("sparkConf") or {}), **storage_conf, **DELTA_CONF}
    env = secret_env(secret_name, secret_keys or [])
    for role in ("driver", "executor"):
        pod = spec.setdefault(role, {})
        kept = [e for e in pod.get("env") or [] if e.get("name") not in {x["name"] for x in env}]
        pod["env"] = kept + env
        pod["labels"] = {**dict(pod.get("labels") or {}), **_labels(owner, job_id)}
    annotations = {}
    if planned is not None:
        annotations = {PLANNED_FILES: str(planned.files), PLANNED_BYTES: str(planned.bytes)}
    return {
        "apiVersion": GROUP_VERSION,
        "kind": KIND,
        "metadata": {
            "name": job_name(owner.name, job_id),
            "namespace": owner.namespace,
            "labels": _labels(owner, job_id),
            "annotations": annotations,
            "ownerReferences": [
                {
                    "apiVersion": owner.api_version,
                    "kind": owner.kind,
                    "name": owner.name,
                    "uid": owner.uid,
                    "controller": True,
                    "blockOwnerDeletion": False,
                }
            ],
        },
        "spec": spec,
    }


def executor_cores(template: Mapping[str, Any]) -> int:
    """The executor cores a SparkApplication of `template` asks for: executor.cores x
    executor.instances, or x maxExecutors under dynamic allocation (the defaults above)."""
    executor = {**DEFAULT_EXECUTOR, **dict(template.get("executor") or {})}
    instances = executor.get("instances") or 1
    dynamic = template.get("dynamicAllocation") or {}
    if dynamic.get("enabled"):
        instances = dynamic.get("maxExecutors") or instances
    try:
        return max(1, int(executor.get("cores") or 1) * int(instances))
    except (TypeError, ValueError):
        return 1


def _labels(owner: Owner, job_id: str) -> dict[str, str]:
    # Label values are at most 63 characters; the job id is hashed into the name already.
    return {TABLE_LABEL: owner.name[:63], JOB_LABEL: job_id[:63]}
