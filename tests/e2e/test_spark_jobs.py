"""Compaction jobs as SparkApplications on the real API server, with the real spark-operator CRD
applied (read from ../shared/third-party-crds), run by the suite's stand-in for the controller.

These tests cover the pieces the operator's launcher uses (the operator itself compacting is
test_compaction_operator.py): the SparkApplication deltakeeper builds is accepted by the real
CRD's schema, runs the job to a compacted table, is found again by its labels with its state,
and carries no secret value.
"""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest
from kubernetes import client

from deltakeeper.compaction.spark_storage import spark_storage
from deltakeeper.delta.table import open_table
from deltakeeper.k8s import spark_jobs
from deltakeeper.k8s.spark_application import Owner, spark_application
from deltakeeper.k8s.spark_jobs import SparkState
from deltakeeper.maintenance import compaction_plan
from tests.support.kube import KubeCluster
from tests.support.spark_operator import CRD, stand_in

pytestmark = [pytest.mark.e2e, pytest.mark.spark]

NS = "spark-jobs"
SECRET = {"AWS_ACCESS_KEY_ID": "AKIAE2EKEYID0001", "AWS_SECRET_ACCESS_KEY": "e2e/secret+Value9"}


@pytest.fixture(scope="module")
def cluster(kube_cluster: KubeCluster) -> KubeCluster:
    kube_cluster.apply_crds([CRD])
    kube_cluster.create_namespace(NS)
    kube_cluster.create_secret(NS, "lake-credentials", SECRET)
    return kube_cluster


def small_file_table(path: Path) -> None:
    from deltalake import write_deltalake

    for i in range(4):
        batch = pa.table({"id": pa.array([2 * i, 2 * i + 1], pa.int64()), "p": ["a", "b"]})
        write_deltalake(str(path), batch, mode="append", partition_by=["p"])


def app_for(table: Path, name: str, job_id: str, spec: dict[str, Any]) -> dict[str, Any]:
    owner = Owner(name=name, namespace=NS, uid="00000000-0000-4000-8000-00000000e2e0")
    storage = spark_storage(str(table), {})
    job = {**spec, "jobId": job_id, "table": storage.uri}
    return spark_application(
        owner,
        job_id,
        job,
        {"image": "deltakeeper-spark:test", "sparkVersion": "4.2.0"},
        storage.conf,
        secret_name="lake-credentials",
        secret_keys=sorted(SECRET),
    )


def wait_finished(api: client.ApiClient, table: str, timeout: float = 900) -> spark_jobs.Job:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        jobs = spark_jobs.for_table(api, NS, table)
        if jobs and jobs[-1].state.finished:
            return jobs[-1]
        time.sleep(1)
    raise AssertionError(f"the job of {table} did not finish: {jobs}")


def test_a_job_compacts_and_is_found_again_by_its_labels(
    cluster: KubeCluster, tmp_path: Path
) -> None:
    api = cluster.api_client()
    table = tmp_path / "events"
    small_file_table(table)
    snap = open_table(str(table)).snapshot()
    settings = compaction_plan.CompactionSettings(min_files_per_partition=4)
    found = compaction_plan.plan(snap.files, ("p",), settings, now_ms=0)
    spec = compaction_plan.job_spec(found, {"p": "p"}, "dk-e2e-1", snap.version)
    app = app_for(table, "events", "dk-e2e-1", spec)

    with stand_in(api, NS) as controller:
        created = spark_jobs.create(api, app)
        assert created.state is SparkState.NEW
        assert spark_jobs.create(api, app).name == created.name  # a retried create adopts it
        job = wait_finished(api, "events")

    assert job.state is SparkState.COMPLETED, job.error_message
    assert job.job_id == "dk-e2e-1" and job.name == app["metadata"]["name"]
    [run] = controller.runs
    assert run["env"] == ["AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY"]  # from the Secret
    after = open_table(str(table)).snapshot()
    assert after.num_files == 2 and after.version == snap.version + 1
    log = table / "_delta_log" / f"{after.version:020d}.json"
    lines = log.read_text().splitlines()
    info = next(json.loads(x)["commitInfo"] for x in lines if '"commitInfo"' in x)
    assert info["operation"] == "OPTIMIZE" and info["userMetadata"] == "dk-e2e-1"
    stored = client.CustomObjectsApi(api).get_namespaced_custom_object(
        "sparkoperator.k8s.io", "v1beta2", NS, "sparkapplications", job.name
    )
    assert not any(v in json.dumps(stored) for v in SECRET.values())
    assert spark_jobs.delete(api, NS, job.name) and not spark_jobs.delete(api, NS, job.name)


def test_a_failing_job_is_failed_with_its_error(cluster: KubeCluster, tmp_path: Path) -> None:
    api = cluster.api_client()
    table = tmp_path / "broken"
    small_file_table(table)
    app = app_for(table, "broken", "dk-e2e-2", {"compact": [{"nope": "x"}]})

    with stand_in(api, NS):
        spark_jobs.create(api, app)
        job = wait_finished(api, "broken")

    assert job.state is SparkState.FAILED and job.state.failed
    assert "SpecError" in job.error_message and "nope" in job.error_message


def test_the_crd_rejects_what_the_spark_operator_would_not_run(cluster: KubeCluster) -> None:
    api = cluster.api_client()
    app = app_for(Path("/tmp/x"), "invalid", "dk-e2e-3", {"compact": [{}]})
    app["spec"]["type"] = "Perl"
    with pytest.raises(client.ApiException) as e:
        spark_jobs.create(api, app)
    assert e.value.status == 422 and "Perl" in e.value.body


def test_a_checkpoint_job_runs_as_a_spark_application_and_is_read_back(
    cluster: KubeCluster, tmp_path: Path
) -> None:
    """Issue 26: Delta Spark's checkpoint as the operator starts it for a table too big for its
    memory budget (or with checkpoint.engine spark); the outcome comes from the log, as the
    operator's launcher cannot see the job's output."""
    from deltakeeper.compaction.launcher import JobResult
    from deltakeeper.maintenance.executor import spark_outcome
    from deltakeeper.maintenance.operations import Operation
    from deltakeeper.maintenance.operations.outcome import Result

    api = cluster.api_client()
    table = tmp_path / "big"
    small_file_table(table)  # versions 0..3, no checkpoint
    app = app_for(table, "big", "dk-e2e-cp", {"operation": "checkpoint", "plannedVersion": 3})

    with stand_in(api, NS):
        spark_jobs.create(api, app)
        job = wait_finished(api, "big")

    assert job.state is SparkState.COMPLETED, job.error_message
    assert (table / "_delta_log" / "00000000000000000003.checkpoint.parquet").exists()
    outcome = spark_outcome(
        open_table(str(table)),
        Operation.CHECKPOINT,
        "dk-e2e-cp",
        JobResult(0, {"result": "done"}, ""),
        3,
    )
    assert outcome.result is Result.DONE and outcome.version == 3, outcome.message
    from deltalake import DeltaTable

    assert DeltaTable(str(table)).version() == 3
