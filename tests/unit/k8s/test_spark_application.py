"""k8s/spark_application.py: the SparkApplication of a compaction job, checked against its CRD.

The spark-operator's CRD is read in place from ../shared/third-party-crds."""

from __future__ import annotations

import json
import re

import pytest

from deltakeeper.k8s.spark_application import JOB_LABEL, TABLE_LABEL, executor_cores, job_name
from tests.support.spark_applications import OWNER, build, check_against_the_crd

DNS_1035 = re.compile(r"^[a-z]([-a-z0-9]*[a-z0-9])?$")


SECRET = "wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY"


def test_a_spark_application_validates_against_the_real_crd() -> None:
    app = build()
    check_against_the_crd(app)
    assert app["apiVersion"] == "sparkoperator.k8s.io/v1beta2" and app["kind"] == "SparkApplication"
    spec = app["spec"]
    assert spec["type"] == "Python" and spec["restartPolicy"] == {"type": "Never"}
    assert spec["mainApplicationFile"] == "local:///opt/deltakeeper/job.py"
    assert spec["timeToLiveSeconds"] == 3600


def test_credentials_are_secret_references_only() -> None:
    app = build()
    for role in ("driver", "executor"):
        env = {e["name"]: e for e in app["spec"][role]["env"]}
        assert set(env) == {"AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY"}
        ref = env["AWS_SECRET_ACCESS_KEY"]["valueFrom"]["secretKeyRef"]
        assert ref == {"name": "lake-credentials", "key": "AWS_SECRET_ACCESS_KEY"}
        assert all("value" not in e for e in env.values())
    assert SECRET not in json.dumps(app)


def test_fsspec_key_names_in_the_secret_map_to_the_same_variables() -> None:
    app = build(secret_keys=["key", "secret", "account_name", "account_key"])
    names = [e["name"] for e in app["spec"]["driver"]["env"]]
    assert names == [
        "AWS_ACCESS_KEY_ID",
        "AWS_SECRET_ACCESS_KEY",
        "AZURE_STORAGE_ACCOUNT_KEY",
        "AZURE_STORAGE_ACCOUNT_NAME",
    ]


@pytest.mark.parametrize(
    ("keys", "auth"),
    [
        (["AZURE_STORAGE_ACCOUNT_NAME", "AZURE_STORAGE_SAS_TOKEN"], "SAS"),
        (["account_name", "sas_token"], "SAS"),
        (["AZURE_CLIENT_ID", "AZURE_CLIENT_SECRET", "AZURE_TENANT_ID"], "OAuth"),
        (["client_id", "client_secret", "tenant_id"], "OAuth"),
    ],
)
def test_azure_sas_and_service_principal_keys_reach_the_job_as_references(
    keys: list[str], auth: str
) -> None:
    """What the job reads (job.hadoop_credentials) from the variables the SparkApplication
    names: the environment the kubelet would build from the Secret's keys."""
    from deltakeeper.compaction.job import hadoop_credentials

    table = "abfss://lake@acct.dfs.core.windows.net/events"
    app = build(job_spec={"jobId": "j", "table": table}, secret_keys=keys)
    check_against_the_crd(app)
    secret = {k: f"value-of-{k}" for k in keys}
    for role in ("driver", "executor"):
        entries = app["spec"][role]["env"]
        assert all("value" not in e for e in entries)
        refs = [e["valueFrom"]["secretKeyRef"] for e in entries]
        assert sorted(r["key"] for r in refs) == sorted(keys)
        assert {r["name"] for r in refs} == {"lake-credentials"}
        env = {e["name"]: secret[e["valueFrom"]["secretKeyRef"]["key"]] for e in entries}
        conf = hadoop_credentials(env, table)
        host = "acct.dfs.core.windows.net"
        assert conf[f"fs.azure.account.auth.type.{host}"] == auth
    assert not any(v in json.dumps(app) for v in secret.values())


def test_the_planned_files_and_bytes_are_annotations_read_back_on_adoption() -> None:
    from deltakeeper.compaction.launcher import Planned
    from deltakeeper.k8s.spark_application import PLANNED_BYTES, PLANNED_FILES
    from deltakeeper.k8s.spark_jobs import Job

    app = build(planned=Planned(12, 34_567_890_123))
    check_against_the_crd(app)
    annotations = app["metadata"]["annotations"]
    assert annotations == {PLANNED_FILES: "12", PLANNED_BYTES: "34567890123"}
    assert Job.from_object(app).planned == Planned(12, 34_567_890_123)
    for odd in ({}, {PLANNED_FILES: "12"}, {PLANNED_FILES: "x", PLANNED_BYTES: "1"}):
        app["metadata"]["annotations"] = odd
        assert Job.from_object(app).planned is None
    assert build()["metadata"]["annotations"] == {}


def test_owned_by_the_table_and_labelled_to_be_found_again() -> None:
    meta = build()["metadata"]
    assert meta["namespace"] == "lake"
    assert meta["labels"] == {TABLE_LABEL: "events", JOB_LABEL: "deltakeeper-0001-1700000000000"}
    [ref] = meta["ownerReferences"]
    assert (ref["kind"], ref["name"], ref["uid"]) == ("DeltaTable", "events", OWNER.uid)
    assert ref["controller"] is True


def test_the_template_cannot_override_what_deltakeeper_owns() -> None:
    template = {
        "image": "img",
        "arguments": ["--evil"],
        "sparkConf": {"spark.sql.extensions": "x", "spark.executor.memoryOverhead": "512m"},
        "driver": {"memory": "4g", "env": [{"name": "AWS_SECRET_ACCESS_KEY", "value": "plain"}]},
        "executor": {"instances": 3},
    }
    spec = build(template=template)["spec"]
    assert spec["arguments"][0] == "--spec-json"
    assert json.loads(spec["arguments"][1])["table"] == "s3a://lake/events"
    assert spec["sparkConf"]["spark.sql.extensions"] == "io.delta.sql.DeltaSparkSessionExtension"
    assert spec["sparkConf"]["spark.executor.memoryOverhead"] == "512m"
    assert spec["driver"]["memory"] == "4g" and spec["driver"]["cores"] == 1
    assert spec["executor"]["instances"] == 3
    assert not any(e.get("value") == "plain" for e in spec["driver"]["env"])


@pytest.mark.parametrize(
    "table",
    ["events", "Événements_2024", "a" * 200, "---", "x.y.z", "9lives"],
)
def test_names_are_dns_1035_labels_of_at_most_63(table: str) -> None:
    name = job_name(table, "job-1")
    assert len(name) <= 63 and DNS_1035.match(name), name
    assert job_name(table, "job-2") != name


def test_spark_applications_count_executor_cores() -> None:
    assert executor_cores({}) == 1
    assert executor_cores({"executor": {"cores": 2, "instances": 3}}) == 6
    dynamic = {"executor": {"cores": 2}, "dynamicAllocation": {"enabled": True, "maxExecutors": 5}}
    assert executor_cores(dynamic) == 10
