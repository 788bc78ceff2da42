"""k8s/spark_jobs.py: a SparkApplication read back as a Job: its spec and state, odd ones too."""

from __future__ import annotations

from tests.support.spark_applications import build


def test_a_created_job_is_read_back_with_its_input_and_state() -> None:
    from deltakeeper.k8s.spark_jobs import Job, SparkState

    app = build()
    app["metadata"]["creationTimestamp"] = "2026-11-24T02:00:00Z"
    app["status"] = {"applicationState": {"state": "FAILING", "errorMessage": "SpecError: x"}}
    job = Job.from_object(app)
    assert job.job_spec == {"jobId": "deltakeeper-0001-1700000000000", "table": "s3a://lake/events"}
    assert job.job_id == "deltakeeper-0001-1700000000000" and job.name == app["metadata"]["name"]
    assert job.state is SparkState.FAILING and not job.state.finished
    assert job.error_message == "SpecError: x"
    app["spec"]["arguments"] = ["--spec-json", "{not json"]
    app["status"]["applicationState"]["state"] = "SOMETHING_NEW"
    odd = Job.from_object(app)
    assert odd.job_spec == {} and odd.state is SparkState.UNKNOWN
