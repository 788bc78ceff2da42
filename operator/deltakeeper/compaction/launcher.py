"""How maintenance starts a compaction job and learns its end, whatever runs it.

The executor plans and launches through `Launcher`; the CLI waits for the job, the daemon polls
it between table polls. spark-submit (submit.py) is one launcher; the operator's
SparkApplication launcher is another with the same shape.
"""

from __future__ import annotations

import enum
import functools
import threading
import time
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
    def benefit(self) -> float:
        """What the job is worth against others waiting: the files its plan rewrites."""
        return float(self.planned.files) if self.planned else 0.0

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

    def forget(self) -> None:
        """Drop what adopt() keeps between calls (this process resumes acting: other
        processes may have started jobs meanwhile)."""
        ...


class AtLimit(JobRunning):
    """The daemon runs as many compaction jobs as it may (--max-compaction-jobs)."""


# A table that keeps asking for a job gets one within this many of its own asks, whatever the
# benefit of the others; a claim not renewed within CLAIM_STALE_ASKS of its asks (or
# CLAIM_FIRST_S after a single ask) is forgotten, so a table gone or compacted meanwhile does
# not hold a slot back.
STARVATION_ASKS = 4
CLAIM_STALE_ASKS = 2.5
CLAIM_FIRST_S = 300.0


@dataclass
class _Claim:
    benefit: float
    first_s: float  # when the table first asked (since its last job)
    seen_s: float  # when it last asked
    period_s: float | None = None  # between its last two asks

    def stale(self, now_s: float) -> bool:
        limit = CLAIM_FIRST_S if self.period_s is None else CLAIM_STALE_ASKS * self.period_s
        return now_s - self.seen_s > limit

    def overdue(self, now_s: float) -> bool:
        return self.period_s is not None and now_s - self.first_s > STARVATION_ASKS * self.period_s


class Limited:
    """A Launcher that runs at most `limit` jobs, and at most `cores` executor cores, at once
    across every table (thread-safe); a job's share is given back when its end is seen.

    When jobs wait for room, the next one goes to the table with the largest benefit among
    those asking (the files its plan rewrites), not to whichever asks first once room is
    free; a table that has waited STARVATION_ASKS of its asks goes first (oldest first). Each
    table asks again at its polls; a refused ask is AtLimit, and the poll moves on."""

    def __init__(
        self,
        launcher: Launcher,
        limit: int,
        cores: int | None = None,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.launcher = launcher
        self.limit = limit
        self.cores = cores  # None: no limit on cores
        self.clock = clock
        self.running = 0
        self.cores_used = 0
        self._claims: dict[str, _Claim] = {}
        self._lock = threading.Lock()

    def start(self, request: JobRequest) -> Job:
        need = job_cores(self.launcher, request)
        with self._lock:
            key = _claimant(request)
            self._claim(key, request.benefit)
            self._check_room(need)
            # Under a core budget only the first may start: another that fits now could take
            # the cores the first needs.
            room = 1 if self.cores is not None else self.limit - self.running
            ahead = self._order()[:room]
            if key not in ahead:
                raise AtLimit(
                    f"waiting: {ahead[0]} goes first (a larger benefit, or waiting longer)"
                )
            del self._claims[key]
            self.running += 1
            self.cores_used += need
        try:
            return _Slot(self.launcher.start(request), functools.partial(self._give, need))
        except BaseException:
            self._give(need)
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
        need = job_cores(self.launcher, JobRequest("", found.spec, owner=owner))
        with self._lock:
            self.running += 1
            self.cores_used += need
        give = functools.partial(self._give, need)
        return Found(_Slot(found.job, give), found.spec, found.started_ms, found.planned)

    def forget(self) -> None:
        if isinstance(self.launcher, Adopting):
            self.launcher.forget()

    def waiting(self) -> int:
        """Tables asking for a job now (claims not yet stale)."""
        with self._lock:
            self._forget_stale(self.clock())
            return len(self._claims)

    def _claim(self, key: str, benefit: float) -> None:
        now = self.clock()
        self._forget_stale(now)
        old = self._claims.get(key)
        if old is None:
            self._claims[key] = _Claim(benefit, now, now)
        else:
            period = now - old.seen_s
            self._claims[key] = _Claim(benefit, old.first_s, now, period or old.period_s)

    def _check_room(self, need: int) -> None:
        if self.running >= self.limit:
            raise AtLimit(f"{self.running} compaction jobs run already (the limit)")
        # A job larger than the whole budget runs alone, when nothing else runs.
        if self.cores is not None and self.cores_used and self.cores_used + need > self.cores:
            raise AtLimit(
                f"{self.cores_used} of {self.cores} executor cores in use; the job needs {need}"
            )

    def _order(self) -> list[str]:
        """Who goes first: the overdue, longest waiting first; then by benefit, largest first
        (on a tie, who asked first)."""
        now = self.clock()

        def rank(kc: tuple[str, _Claim]) -> tuple[bool, float, float]:
            claim = kc[1]
            if claim.overdue(now):
                return (False, claim.first_s, 0.0)
            return (True, -claim.benefit, claim.first_s)

        return [k for k, _ in sorted(self._claims.items(), key=rank)]

    def _forget_stale(self, now: float) -> None:
        for key in [k for k, c in self._claims.items() if c.stale(now)]:
            del self._claims[key]

    def _give(self, cores: int) -> None:
        with self._lock:
            self.running -= 1
            self.cores_used -= cores


def job_cores(launcher: Launcher, request: JobRequest) -> int:
    """The executor cores a job takes: what its launcher says (`cores(request)`), else 1."""
    cores = getattr(launcher, "cores", None)
    return max(1, int(cores(request))) if callable(cores) else 1


def _claimant(request: JobRequest) -> str:
    return "/".join(request.owner) if request.owner else request.uri


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
