"""How maintenance starts a compaction job and learns its end, whatever runs it.

The executor plans and launches through `Launcher`; the CLI waits for the job, the daemon polls
it between table polls. spark-submit (submit.py) is one launcher; the operator's
SparkApplication launcher is another with the same shape.
"""

from __future__ import annotations

import enum
import threading
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any, Protocol, runtime_checkable

from deltakeeper.delta.errors import DeltaError


class JobRunning(DeltaError):
    """A deltakeeper compaction job for this table runs already (here or in another process)."""


class JobFailed(DeltaError):
    """The job ended without doing its work; the message is the job's own error."""


class JobState(enum.StrEnum):
    """The states metrics and status show: the spark-operator's names for the same things."""

    RUNNING = "RUNNING"
    COMPLETED = "COMPLETED"
    FAILED = "FAILED"


@dataclass(frozen=True)
class Planned:
    """The files and bytes a job was planned to rewrite."""

    files: int
    bytes: int


@dataclass(frozen=True)
class JobRequest:
    uri: str  # the table as deltakeeper reads it
    spec: Mapping[str, Any]  # the job's input (maintenance.compaction.job_spec)
    storage_options: Mapping[str, Any] = field(default_factory=dict, repr=False)
    deadline_s: float = 3600.0
    owner: tuple[str, str] | None = None  # the resource (namespace, name) the job is for
    template: Mapping[str, Any] = field(default_factory=dict)  # the table's SparkApplication
    planned: Planned | None = None  # what the plan rewrites, for a process that adopts the job

    @property
    def job_id(self) -> str:
        return str(self.spec["jobId"])


@dataclass(frozen=True)
class JobResult:
    exit_code: int
    result: dict[str, Any]  # the job's JSON line ("result": done / nothing-to-do / failed)
    stderr_tail: str

    @property
    def ok(self) -> bool:
        return self.exit_code == 0 and self.result.get("result") in ("done", "nothing-to-do")

    @property
    def error(self) -> str:
        """What went wrong, in the job's words ("" when it did not fail)."""
        if self.ok:
            return ""
        r = self.result
        return f"{r.get('error') or 'JobFailed'}: {r.get('message') or 'no message'}"


class Job(Protocol):
    job_id: str

    def poll(self) -> JobResult | None:
        """The result once the job ended (a job past its deadline is stopped and failed);
        None while it runs. Never blocks."""
        ...

    def wait(self) -> JobResult:
        """Block until the job ends (or its deadline stops it)."""
        ...

    def stop(self) -> None:
        """End the job now, if it still runs (the daemon is stopping)."""
        ...


class Launcher(Protocol):
    def start(self, request: JobRequest) -> Job:
        """Start the job; JobRunning when one for the table runs already, DeltaError (e.g.
        InvalidInputError) when it cannot be started here."""
        ...


@dataclass(frozen=True)
class Found:
    """A job that runs already, found again (an operator restarted while it ran)."""

    job: Job
    spec: Mapping[str, Any]  # the job's input as it was started
    started_ms: int
    planned: Planned | None = None  # None: the job did not say (made by an older deltakeeper)


@runtime_checkable
class Adopting(Protocol):
    """A Launcher whose jobs outlive the process that started them (SparkApplications)."""

    def adopt(
        self, owner: tuple[str, str], deadline_s: float, since_ms: int | None
    ) -> Found | None:
        """The owner's job that still runs, to be followed instead of starting another; else
        one that ended after `since_ms` (the last result recorded) unseen, to be read back."""
        ...


class AtLimit(JobRunning):
    """The daemon runs as many compaction jobs as it may (--max-compaction-jobs)."""


class Limited:
    """A Launcher that runs at most `limit` jobs at once across every table (thread-safe);
    a job's slot is given back when its end is seen."""

    def __init__(self, launcher: Launcher, limit: int) -> None:
        self.launcher = launcher
        self.limit = limit
        self.running = 0
        self._lock = threading.Lock()

    def start(self, request: JobRequest) -> Job:
        with self._lock:
            if self.running >= self.limit:
                raise AtLimit(f"{self.running} compaction jobs run already (the limit)")
            self.running += 1
        try:
            return _Slot(self.launcher.start(request), self._give)
        except BaseException:
            self._give()
            raise

    def adopt(
        self, owner: tuple[str, str], deadline_s: float, since_ms: int | None
    ) -> Found | None:
        """The wrapped launcher's job, holding a slot (even past the limit: it runs)."""
        if not isinstance(self.launcher, Adopting):
            return None
        found = self.launcher.adopt(owner, deadline_s, since_ms)
        if found is None:
            return None
        with self._lock:
            self.running += 1
        return Found(_Slot(found.job, self._give), found.spec, found.started_ms, found.planned)

    def _give(self) -> None:
        with self._lock:
            self.running -= 1


class _Slot:
    def __init__(self, job: Job, give: Callable[[], None]) -> None:
        self.job = job
        self.job_id = job.job_id
        self._give: Callable[[], None] | None = give

    def poll(self) -> JobResult | None:
        return self._ended(self.job.poll())

    def wait(self) -> JobResult:
        result = self._ended(self.job.wait())
        assert result is not None
        return result

    def stop(self) -> None:
        self.job.stop()
        self._ended(JobResult(-9, {"result": "failed"}, ""))

    def _ended(self, result: JobResult | None) -> JobResult | None:
        give = self._give
        if result is not None and give is not None:
            self._give = None
            give()
        return result
