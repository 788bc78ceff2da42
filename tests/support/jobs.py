"""Stand-in compaction jobs and a launcher of them, for the daemon's side of compaction without
Spark: a job runs until the test calls `end`."""

from __future__ import annotations

from typing import Any

from deltakeeper.compaction.launcher import JobRequest, JobResult


class StandIn:
    """A job that ends when `end` is called."""

    def __init__(self, request: JobRequest) -> None:
        self.job_id = request.job_id
        self.request = request
        self.result: JobResult | None = None

    def end(self, exit_code: int, line: dict[str, Any]) -> None:
        self.result = JobResult(exit_code, line, "")

    def poll(self) -> JobResult | None:
        return self.result

    def wait(self) -> JobResult:
        assert self.result is not None
        return self.result

    def stop(self) -> None:
        self.result = JobResult(-9, {"result": "failed", "error": "Stopped"}, "")


class StandInLauncher:
    """Starts StandIns and keeps them in `jobs`, oldest first."""

    def __init__(self) -> None:
        self.jobs: list[StandIn] = []

    def start(self, request: JobRequest) -> StandIn:
        self.jobs.append(StandIn(request))
        return self.jobs[-1]


def request(tag: str) -> JobRequest:
    """A request for a job with id `tag` on the table /t."""
    return JobRequest("/t", {"jobId": tag})
