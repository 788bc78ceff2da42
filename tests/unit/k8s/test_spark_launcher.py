"""k8s/spark_launcher.py: a SparkApplication job as the daemon sees it, the API server stood in for.

States to results, the deadline, a job deleted under it, an API server that does not answer,
adoption, and the operator-wide template (the real API server and CRD:
tests/e2e/test_compaction_operator.py)."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

import pytest

from deltakeeper.compaction.launcher import JobRequest, JobRunning, Planned
from deltakeeper.k8s import spark_jobs, spark_launcher
from deltakeeper.k8s.spark_application import Owner
from deltakeeper.k8s.spark_jobs import Job, SparkState
from deltakeeper.k8s.spark_launcher import SparkApplicationJob
from deltakeeper.resources.spec import merge
from tests.support.spark_applications import build, check_against_the_crd

SPEC = {"jobId": "deltakeeper-ab-1", "plannedVersion": 7, "compact": [{}]}


def job(state: SparkState, error: str = "") -> Job:
    return Job("dk-t-1", "ns", "deltakeeper-ab-1", state, error, "2026-11-24T02:00:00Z", SPEC)


@pytest.fixture
def api(monkeypatch: pytest.MonkeyPatch) -> dict[str, Any]:
    """What spark_jobs.read answers next, and what was deleted."""
    server: dict[str, Any] = {"answer": job(SparkState.RUNNING), "deleted": []}

    def read(_: Any, namespace: str, name: str) -> Job | None:
        answer = server["answer"]
        if isinstance(answer, Exception):
            raise answer
        return answer  # type: ignore[no-any-return]

    def delete(_: Any, namespace: str, name: str) -> bool:
        server["deleted"].append((namespace, name))
        return True

    monkeypatch.setattr(spark_jobs, "read", read)
    monkeypatch.setattr(spark_jobs, "delete", delete)
    return server


def follow(deadline_s: float = 60.0) -> SparkApplicationJob:
    return SparkApplicationJob(None, job(SparkState.NEW), SPEC, time.time(), deadline_s)


def test_completed_is_done_with_the_planned_version_to_find_the_commits_from(
    api: dict[str, Any],
) -> None:
    running = follow()
    assert running.poll() is None and running.job_id == "deltakeeper-ab-1"
    api["answer"] = job(SparkState.COMPLETED)
    result = running.poll()
    assert result is not None and result.ok and "commits" not in result.result
    assert result.result["startVersion"] == 7
    api["answer"] = None  # collected after its TTL: the result seen stays
    assert running.poll() is result


def test_failed_carries_the_jobs_own_error(api: dict[str, Any]) -> None:
    running = follow()
    api["answer"] = job(SparkState.FAILED, "SpecError: 'nope' is not a partition column")
    result = running.poll()
    assert result is not None and not result.ok
    assert result.error == "SparkApplicationFailed: SpecError: 'nope' is not a partition column"
    api["answer"] = job(SparkState.SUBMISSION_FAILED)
    result = follow().poll()
    assert result is not None
    assert result.error == (
        "SparkApplicationSubmissionFailed: the SparkApplication ended SUBMISSION_FAILED "
        "without a message"
    )


def test_past_its_deadline_it_is_deleted_and_failed(api: dict[str, Any]) -> None:
    running = follow(deadline_s=-1)
    result = running.poll()
    assert result is not None and result.result["error"] == "DeadlineExceeded"
    assert api["deleted"] == [("ns", "dk-t-1")]


def test_deleted_under_it_is_a_failure_and_an_api_server_away_is_not(
    api: dict[str, Any], caplog: pytest.LogCaptureFixture
) -> None:
    running = follow()
    api["answer"] = OSError("connection refused")
    assert running.poll() is None  # runs on, as far as anyone knows
    assert "cannot read SparkApplication dk-t-1" in caplog.text
    api["answer"] = None
    result = running.poll()
    assert result is not None and result.result["error"] == "Gone"


def test_a_job_for_an_unknown_table_is_refused_before_any_call() -> None:
    from deltakeeper.compaction.launcher import JobRequest
    from deltakeeper.delta.errors import InvalidInputError

    launcher = spark_launcher.SparkApplicationLauncher(None, {}, lambda key: None)
    with pytest.raises(InvalidInputError, match="needs the DeltaTable"):
        launcher.start(JobRequest("/t", SPEC))


def test_a_template_the_crd_refuses_fails_the_job_with_the_api_servers_reason(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from kubernetes.client.exceptions import ApiException

    from deltakeeper.compaction.launcher import JobFailed, JobRequest

    refused = ApiException(status=422, reason="Unprocessable Entity")
    refused.body = '{"message": "spec.driver.cores: Invalid value: \\"string\\": must be integer"}'

    def create(_: Any, app: Any) -> Job:
        raise refused

    monkeypatch.setattr(spark_jobs, "for_table", lambda *_: [])
    monkeypatch.setattr(spark_jobs, "create", create)
    lookup = {("ns", "t"): spark_launcher.TableRef("uid-1", None)}.get
    launcher = spark_launcher.SparkApplicationLauncher(None, {}, lookup)
    request = JobRequest("/lake/t", SPEC, owner=("ns", "t"), template={"driver": {"cores": "x"}})
    with pytest.raises(JobFailed, match=r"refused it: spec\.driver\.cores: Invalid value"):
        launcher.start(request)
    monkeypatch.setattr(spark_jobs, "for_table", lambda *_: [job(SparkState.RUNNING)])
    with pytest.raises(JobRunning, match="dk-t-1 still runs"):
        launcher.start(request)


def test_a_created_application_carries_the_planned_files_and_bytes(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from deltakeeper.compaction.launcher import JobRequest

    created: list[Any] = []

    def create(_: Any, app: Any) -> Job:
        created.append(app)
        return Job.from_object(app)

    monkeypatch.setattr(spark_jobs, "for_table", lambda *_: [])
    monkeypatch.setattr(spark_jobs, "create", create)
    lookup = {("ns", "t"): spark_launcher.TableRef("uid-1", None)}.get
    launcher = spark_launcher.SparkApplicationLauncher(None, {}, lookup)
    launcher.start(JobRequest("/lake/t", SPEC, owner=("ns", "t"), planned=Planned(12, 4096)))
    [app] = created
    assert spark_jobs.Job.from_object(app).planned == Planned(12, 4096)


def test_adoption_prefers_a_running_job_else_one_that_ended_unseen(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    def at(state: SparkState, created: str, name: str) -> Job:
        planned = Planned(len(name), 1000)
        return Job(name, "ns", name, state, "", created, {**SPEC, "jobId": name}, planned)

    listed: list[Job] = []
    monkeypatch.setattr(spark_jobs, "by_table", lambda *_: {"t": list(listed)})
    by_name = lambda _, ns, name: next(j for j in listed if j.name == name)  # noqa: E731
    monkeypatch.setattr(spark_jobs, "read", by_name)
    launcher = spark_launcher.SparkApplicationLauncher(None, {}, lambda key: None)
    recorded_ms = 1_795_000_000_000  # the last result the table's status recorded
    before = "2026-11-19T07:46:00Z"  # 1_795_074_360 s: after it
    listed[:] = [at(SparkState.COMPLETED, "2026-11-01T00:00:00Z", "old")]
    assert launcher.adopt(("ns", "t"), 60.0, recorded_ms) is None  # seen and recorded
    listed.append(at(SparkState.COMPLETED, before, "unseen"))
    launcher.forget()  # each step a new listing
    found = launcher.adopt(("ns", "t"), 60.0, recorded_ms)
    assert found is not None and found.job.job_id == "unseen"
    result = found.job.poll()
    assert result is not None and result.ok  # read back at once
    listed.append(at(SparkState.RUNNING, "2026-11-01T00:00:01Z", "running"))
    launcher.forget()
    found = launcher.adopt(("ns", "t"), 10.0**9, recorded_ms)  # its deadline from its creation
    assert found is not None and found.job.job_id == "running" and found.job.poll() is None
    assert found.started_ms == 1_793_491_201_000
    assert found.planned == Planned(len("running"), 1000)  # from the job's annotations


def test_no_sparkapplication_crd_means_no_job_to_adopt(monkeypatch: pytest.MonkeyPatch) -> None:
    # Without spark-operator's CRD the list answers 404: nothing to adopt, so the watcher stops
    # asking (it asked, and warned, on every poll of every table); other errors still raise.
    from kubernetes import client
    from kubernetes.client.exceptions import ApiException

    answers: list[int] = []

    class Custom:
        def __init__(self, _: Any) -> None:
            pass

        def list_namespaced_custom_object(self, *args: Any, **kwargs: Any) -> Any:
            raise ApiException(status=answers.pop(0))

    monkeypatch.setattr(client, "CustomObjectsApi", Custom)
    launcher = spark_launcher.SparkApplicationLauncher(None, {}, lambda *_: None)
    answers.append(404)
    assert launcher.adopt(("ns", "t"), 60.0, None) is None
    answers.append(403)
    with pytest.raises(ApiException):
        launcher.adopt(("other", "t"), 60.0, None)  # ns is listed (and kept): another one


def test_one_listing_of_a_namespace_serves_its_tables_adoptions_for_a_while(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """After a start every table adopts: one LIST of its namespace serves them all for
    ADOPT_LISTING_S. A replica that resumes acting, or a start that meets a job the listing
    did not have, lists again."""
    lists: list[str] = []
    running = Job("dk-b-1", "ns", "b-1", SparkState.RUNNING, "", "2026-11-24T02:00:00Z", SPEC)

    def by_table(_: Any, namespace: str, table: str | None = None) -> dict[str, list[Job]]:
        lists.append(namespace)
        return {"b": [running]}

    now = [0.0]
    monkeypatch.setattr(spark_jobs, "by_table", by_table)
    lookup = {("ns", "c"): spark_launcher.TableRef("uid-c", None)}.get
    launcher = spark_launcher.SparkApplicationLauncher(None, {}, lookup, clock=lambda: now[0])
    assert launcher.adopt(("ns", "a"), 60.0, None) is None
    found = launcher.adopt(("ns", "b"), 60.0, None)
    assert found is not None and found.job.job_id == "b-1"
    launcher.adopt(("other", "a"), 60.0, None)
    assert lists == ["ns", "other"]
    now[0] = spark_launcher.ADOPT_LISTING_S + 1
    launcher.adopt(("ns", "a"), 60.0, None)
    launcher.forget()
    launcher.adopt(("ns", "a"), 60.0, None)
    assert lists == ["ns", "other", "ns", "ns"]
    monkeypatch.setattr(spark_jobs, "for_table", lambda *_: [job(SparkState.RUNNING)])
    with pytest.raises(JobRunning):  # started since the listing, by another replica
        launcher.start(JobRequest("/lake/c", SPEC, owner=("ns", "c")))
    launcher.adopt(("ns", "c"), 60.0, None)
    assert lists == ["ns", "other", "ns", "ns", "ns"]


def test_a_job_belongs_to_the_table_its_owner_reference_names() -> None:
    """A label value is cut to 63 characters; a DeltaTable's name may be longer."""
    long = "t" * 70
    app = build(owner=Owner(long, "lake", "uid-1"))
    assert Job.from_object(app).table == long
    del app["metadata"]["ownerReferences"]
    assert Job.from_object(app).table == long[:63]


def test_the_operator_wide_template_is_a_spark_application_file(tmp_path: Path) -> None:
    from deltakeeper.delta.errors import InvalidInputError
    from deltakeeper.k8s.spark_launcher import default_template

    absent = str(tmp_path / "none.yaml")
    assert default_template(absent, required=False) == {}
    with pytest.raises(InvalidInputError, match="does not exist"):
        default_template(absent, required=True)
    bad = tmp_path / "bad.yaml"
    bad.write_text("kind: SparkApplication\nspec: [1, 2]\n")
    with pytest.raises(InvalidInputError, match="expected a SparkApplication with a `spec`"):
        default_template(str(bad), required=True)
    bad.write_text("spec: {image: [\n")
    with pytest.raises(InvalidInputError, match="cannot read"):
        default_template(str(bad), required=True)
    good = tmp_path / "good.yaml"
    good.write_text(
        "apiVersion: sparkoperator.k8s.io/v1beta2\nkind: SparkApplication\n"
        "spec: {image: dk-spark:1, driver: {cores: 2}}\n"
    )
    template = default_template(str(good), required=True)
    assert template == {"image": "dk-spark:1", "driver": {"cores": 2}}
    # A table's template merges over it key by key.
    app = build(template=merge(template, {"driver": {"memory": "4g"}}))
    assert app["spec"]["image"] == "dk-spark:1"
    assert (app["spec"]["driver"]["cores"], app["spec"]["driver"]["memory"]) == (2, "4g")
    check_against_the_crd(app)
