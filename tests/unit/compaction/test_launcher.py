"""compaction/launcher.py: Limited, the global limit on compaction jobs running at once."""

from __future__ import annotations

import os

import pytest

from deltakeeper.compaction.launcher import (
    CLAIM_FIRST_S,
    STARVATION_ASKS,
    AtLimit,
    Job,
    JobRequest,
    Limited,
    Planned,
    job_cores,
)
from deltakeeper.compaction.submit import submit_cores
from tests.support.jobs import StandInLauncher, request


def test_the_global_limit_refuses_a_second_job_until_the_first_ends() -> None:
    inner = StandInLauncher()
    limited = Limited(inner, 1)
    first = limited.start(request("a"))
    with pytest.raises(AtLimit):
        limited.start(request("b"))
    assert first.poll() is None and limited.running == 1
    inner.jobs[0].end(0, {"result": "nothing-to-do"})
    assert first.poll() is not None and limited.running == 0
    assert first.poll() is not None and limited.running == 0  # given back once
    limited.start(request("b"))
    assert limited.running == 1


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


class Cores(StandInLauncher):
    """Stand-in jobs that take the executor cores their spec says."""

    def cores(self, request: JobRequest) -> int:
        return int(request.spec.get("cores", 1))


class Budget:
    """A Limited over stand-in jobs, and the slots it handed out."""

    def __init__(self, limit: int, cores: int | None = None) -> None:
        self.clock = Clock()
        self.inner = Cores()
        self.limited = Limited(self.inner, limit, cores, clock=self.clock)
        self.slots: list[Job] = []

    def ask(self, table: str, files: int = 0, cores: int = 1) -> bool:
        """Table `table` asks for a job whose plan rewrites `files` files: started?"""
        spec = {"jobId": f"{table}-{len(self.inner.jobs)}", "cores": cores}
        req = JobRequest(f"/{table}", spec, owner=("lake", table), planned=Planned(files, 1))
        try:
            self.slots.append(self.limited.start(req))
        except AtLimit:
            return False
        return True

    def end_all(self) -> None:
        for job in self.inner.jobs:
            if job.result is None:
                job.end(0, {"result": "done"})
        for slot in self.slots:
            slot.poll()

    def started(self) -> list[str]:
        return [j.request.owner[1] for j in self.inner.jobs]  # type: ignore[index]


def test_a_freed_slot_goes_to_the_largest_benefit_not_the_first_to_ask() -> None:
    b = Budget(1)
    assert b.ask("busy", 50)
    for table, files in (("small", 3), ("big", 400), ("mid", 40)):  # all wait, small first
        assert not b.ask(table, files)
    b.end_all()
    b.clock.now += 30
    assert not b.ask("small", 3)  # first to ask once room is free: not its turn
    assert not b.ask("mid", 40)
    assert b.ask("big", 400)
    assert b.started() == ["busy", "big"]


def test_with_two_free_slots_the_two_largest_go() -> None:
    b = Budget(2)
    for table, files in (("busy1", 1), ("busy2", 1)):
        assert b.ask(table, files)
    for table, files in (("a", 5), ("b", 500), ("c", 50)):
        assert not b.ask(table, files)
    b.end_all()
    assert not b.ask("a", 5) and b.ask("c", 50) and b.ask("b", 500)


def test_a_table_that_keeps_asking_gets_its_turn_within_the_bound() -> None:
    b = Budget(1)
    turns = []
    for poll in range(12):  # a poll every 30 s: a big table always wants a job, a small one too
        b.clock.now += 30
        b.end_all()
        for table, files in (("big", 1000), ("small", 2)):
            if b.ask(table, files):
                turns.append((poll, table))
    small = [p for p, t in turns if t == "small"]
    assert small and small[0] <= STARVATION_ASKS + 1, turns  # within its bound of asks
    assert len(turns) - len(small) > len(small)  # and the big one still goes first mostly


def test_a_claim_not_renewed_is_forgotten() -> None:
    b = Budget(1)
    assert b.ask("busy", 5)
    assert not b.ask("gone", 900)  # asks once, then is deleted (or compacted elsewhere)
    b.end_all()
    assert not b.ask("small", 2)  # "gone" would go first
    b.clock.now += CLAIM_FIRST_S + 1
    assert b.ask("small", 2)
    assert b.limited.waiting() == 0


def test_the_core_budget_holds_jobs_back_and_a_large_job_runs_alone() -> None:
    b = Budget(10, cores=8)
    assert b.ask("a", cores=4) and b.ask("b", cores=4)
    assert not b.ask("c", cores=2) and b.limited.cores_used == 8
    b.end_all()
    assert b.limited.cores_used == 0 and b.limited.running == 0
    assert b.ask("huge", 10, cores=16)  # more than the whole budget: it runs, alone
    assert not b.ask("c", cores=2)


def test_under_a_core_budget_a_small_job_does_not_take_the_cores_of_a_better_one() -> None:
    b = Budget(10, cores=8)
    assert b.ask("busy", 1, cores=4)
    assert not b.ask("big", 900, cores=8)  # waits for the 4 cores in use
    assert not b.ask("small", 2, cores=4)  # would fit, but is not first
    b.end_all()
    assert b.ask("big", 900, cores=8)


def test_job_cores_come_from_the_launcher_else_one() -> None:
    req = JobRequest("/t", {"jobId": "j", "cores": 6})
    assert job_cores(Cores(), req) == 6 and job_cores(StandInLauncher(), req) == 1


@pytest.mark.parametrize(
    ("master", "conf", "cores"),
    [
        ("local[3]", {}, 3),
        ("local", {}, 1),
        ("local[*]", {}, os.cpu_count()),
        ("spark://h:7077", {}, 2),
        ("k8s://h", {"spark.executor.cores": "4", "spark.executor.instances": "3"}, 12),
    ],
)
def test_spark_submit_jobs_count_their_cores(master: str, conf: dict[str, str], cores: int) -> None:
    assert submit_cores(master, conf) == cores
