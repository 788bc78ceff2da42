"""runtime/fleet.py: the asyncio watch loops of many tables, on real local tables."""

from __future__ import annotations

import asyncio
import contextlib
import os
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from deltakeeper.runtime.fleet import DEFAULT_POLL_S, JITTER, START_SPREAD_S, Fleet, Loop
from deltakeeper.runtime.metrics import Metrics
from deltakeeper.runtime.model import Observation, Target
from deltakeeper.runtime.registry import record
from deltakeeper.runtime.watcher import TableWatcher
from tests.support.logbuilder import add, commit_info, remove
from tests.support.observed import status_of
from tests.support.tables import small_table

T = {"namespace": "ns", "table": "t"}


def fixed(target: Target) -> Any:
    """A `current` that always gives the same Target."""

    async def current() -> Target:
        return target

    return current


class Published:
    """A `publish` that keeps what it was given and records it in `metrics`, as the
    registry's does."""

    def __init__(self, metrics: Metrics | None = None) -> None:
        self.seen: list[tuple[Target, Observation]] = []
        self.metrics = metrics or Metrics()

    async def __call__(self, target: Target, obs: Observation) -> None:
        record(self.metrics, target, obs)
        self.seen.append((target, obs))


def test_watch_polls_a_table_until_sleep_says_stop(tmp_path: Path) -> None:
    b = small_table(tmp_path)
    target = Target("ns", "t", str(tmp_path), poll_interval_s=0.01)
    m = Metrics()
    published = Published(m)
    asked: list[float] = []
    fleet = Fleet()

    async def sleep(seconds: float) -> bool:
        asked.append(seconds)
        if fleet.polls == 2 and b.next_version == 3:
            b.commit(add("g.parquet"), commit_info())  # a writer commits between polls
        await asyncio.sleep(seconds)
        return fleet.polls >= 4

    async def go() -> None:
        try:
            await asyncio.wait_for(
                fleet.watch(fixed(target), TableWatcher(0), sleep, published), 10
            )
        finally:
            fleet.close()
        assert fleet.polls == 4

    asyncio.run(go())
    # Each poll publishes what it saw; a poll that ran maintenance publishes again after it.
    versions = [status_of(obs)["version"] for _, obs in published.seen]
    assert versions == [2, 2, 2, 3, 3, 3]
    assert all(t is target and obs.ready for t, obs in published.seen)
    # Maintenance ran on the first poll, published after the observation that found it due;
    # the quiet second poll was one listing.
    assert set(published.seen[0][1].due) == {"checkpoint", "cleanup", "vacuum"}
    assert published.seen[0][1].outcomes == []
    assert {o.operation for o in published.seen[1][1].outcomes} == {
        "checkpoint",
        "cleanup",
        "vacuum",
    }
    assert dict(published.seen[2][1].requests) == {"list": 1}
    assert published.seen[2][1].outcomes == [] and not published.seen[2][1].due
    # One initial jittered sleep; after the first poll a draw from the whole interval, then
    # the poll interval +-10% after each poll.
    assert len(asked) == 5 and 0 <= asked[0] <= JITTER * 0.01
    assert 0 <= asked[1] <= 0.01
    assert all(0.9 - 1e-9 <= s / 0.01 <= 1.1 + 1e-9 for s in asked[2:])

    def value(name: str, **labels: str) -> float | None:
        return m.registry.get_sample_value(name, {**T, **labels})

    assert value("deltakeeper_table_version") == 3
    assert value("deltakeeper_table_commits_total") == 1
    assert value("deltakeeper_table_files") == 4
    assert value("deltakeeper_table_condition", condition="Ready") == 1
    assert value("deltakeeper_table_condition", condition="Degraded") == 0
    runs = "deltakeeper_maintenance_runs_total"
    # Checkpoint looked twice (first poll, then the new commit); the rest once.
    assert value(runs, operation="checkpoint", result="skipped") == 2
    assert value(runs, operation="vacuum", result="skipped") == 1
    requests = value("deltakeeper_storage_requests_total", operation="list")
    assert requests is not None and requests >= 4
    reads = value("deltakeeper_storage_requests_total", operation="read")
    assert reads == sum(obs.requests["read"] for _, obs in published.seen)


def test_a_target_that_cannot_be_had_is_logged_and_the_loop_goes_on(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    small_table(tmp_path)
    target = Target("ns", "t", str(tmp_path), poll_interval_s=0.01)
    asked = 0

    async def current() -> Target:
        nonlocal asked
        asked += 1
        if asked in (1, 2):  # the start offset and the first poll
            raise RuntimeError("a bug while resolving the table")
        return target

    published = Published()
    fleet = Fleet()
    slept: list[float] = []

    async def sleep(seconds: float) -> bool:
        slept.append(seconds)
        return fleet.polls >= 2

    async def go() -> None:
        try:
            await asyncio.wait_for(fleet.watch(current, TableWatcher(0), sleep, published), 10)
        finally:
            fleet.close()

    asyncio.run(go())
    assert fleet.polls == 2 and asked == 4
    assert "poll failed" in caplog.text and "a bug while resolving" in caplog.text
    # Without a Target, the start offset and the retry use the default interval.
    assert slept[0] <= min(JITTER * DEFAULT_POLL_S, START_SPREAD_S)
    assert 0.9 * DEFAULT_POLL_S <= slept[1] <= 1.1 * DEFAULT_POLL_S
    assert all(s <= 0.011 for s in slept[2:])


def test_sleep_returning_true_stops_the_loop(tmp_path: Path) -> None:
    small_table(tmp_path)
    target = Target("ns", "t", str(tmp_path), poll_interval_s=0.01)

    async def run(stop_at_call: int) -> int:
        published = Published()
        calls = 0

        async def sleep(seconds: float) -> bool:
            nonlocal calls
            calls += 1
            return calls >= stop_at_call

        fleet = Fleet()
        try:
            await asyncio.wait_for(
                fleet.watch(fixed(target), TableWatcher(0), sleep, published), 10
            )
        finally:
            fleet.close()
        # The first poll maintains, so it publishes twice; the quiet ones once.
        assert len(published.seen) == (fleet.polls + 1 if fleet.polls else 0)
        return fleet.polls

    assert asyncio.run(run(1)) == 0  # stopped during the initial jitter: no poll at all
    assert asyncio.run(run(2)) == 1
    assert asyncio.run(run(3)) == 2


def test_an_hourly_table_is_first_polled_within_seconds_of_a_start(tmp_path: Path) -> None:
    """10% of an hour would hide the table for up to six minutes after a restart."""
    small_table(tmp_path)
    target = Target("ns", "t", str(tmp_path), poll_interval_s=3600)
    starts: list[float] = []
    waits: list[float] = []

    async def go() -> None:
        slept: list[float] = []

        async def sleep(seconds: float) -> bool:
            slept.append(seconds)
            return len(slept) >= 2

        fleet = Fleet()
        try:
            await asyncio.wait_for(
                fleet.watch(fixed(target), TableWatcher(0), sleep, Published()), 10
            )
        finally:
            fleet.close()
        starts.append(slept[0])
        waits.append(slept[1])

    for _ in range(20):
        asyncio.run(go())
    assert all(0 <= s <= START_SPREAD_S for s in starts), starts
    # Its next poll: anywhere in the hour, so the tables of a start do not come due together.
    assert all(0 <= w <= 3600 for w in waits), waits
    assert any(w < 0.9 * 3600 for w in waits), waits  # not the usual +-10% (1e-20 to fail)


def test_a_vacuum_records_deleted_files_by_kind(tmp_path: Path) -> None:
    small_table(tmp_path)
    stray = tmp_path / "stray.parquet"
    stray.write_bytes(b"x" * 64)
    old = time.time() - 30 * 86400
    os.utime(stray, (old, old))
    m = Metrics()
    published = Published(m)

    async def go() -> None:
        fleet = Fleet()
        try:
            await fleet.poll_once(Target("ns", "t", str(tmp_path)), TableWatcher(0), published)
        finally:
            fleet.close()

    asyncio.run(go())
    assert not stray.exists()
    labels = {**T, "kind": "data"}
    assert m.registry.get_sample_value("deltakeeper_deleted_files_total", labels) == 1
    assert m.registry.get_sample_value("deltakeeper_deleted_bytes_total", labels) == 64
    done = {**T, "operation": "vacuum", "result": "done"}
    assert m.registry.get_sample_value("deltakeeper_maintenance_runs_total", done) == 1


def test_a_stop_ends_a_running_vacuum_after_its_batch_and_records_no_result(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    """A pod has seconds to stop (its grace period), a vacuum of millions of files minutes:
    begin_stop ends it after the batch it is deleting. What it did not reach is the next
    vacuum's; nothing is recorded for it, as after a kill."""
    from deltakeeper.delta.storage.local import LocalStorage
    from deltakeeper.delta.vacuum import plan as vacuum_plan

    small_table(tmp_path)
    old = time.time() - 30 * 86400
    for i in range(5):
        stray = tmp_path / f"stray{i}.parquet"
        stray.write_bytes(b"x")
        os.utime(stray, (old, old))
    monkeypatch.setattr(vacuum_plan, "DELETE_BATCH", 2)
    fleet = Fleet()
    delete_many = LocalStorage._delete_many

    def then_stop(self: LocalStorage, keys: list[str]) -> int:
        fleet.begin_stop()  # as the daemon's stop does, from its own thread
        return delete_many(self, keys)

    monkeypatch.setattr(LocalStorage, "_delete_many", then_stop)
    m = Metrics()

    async def go() -> Observation:
        try:
            target = Target("ns", "t", str(tmp_path))
            return await fleet.poll_once(target, TableWatcher(0), Published(m))
        finally:
            fleet.close()

    with caplog.at_level("INFO", "deltakeeper.watcher"):
        obs = asyncio.run(go())
    assert len(list(tmp_path.glob("stray*"))) == 3
    assert "vacuum" not in {o.operation for o in obs.outcomes}
    runs = {**T, "operation": "vacuum", "result": "done"}
    assert m.registry.get_sample_value("deltakeeper_maintenance_runs_total", runs) in (None, 0)
    assert "vacuum stopped after deleting 2 of 5 files: the daemon is stopping" in caplog.text


class Tracker:
    """Counts maintenances in flight (from their threads) and the most seen at once."""

    def __init__(self, hold_s: float = 0.05, wait_for_peer: bool = False) -> None:
        self.lock = threading.Condition()
        self.now = 0
        self.most = 0
        self.fleet_running: list[int] = []
        self.fleet: Fleet | None = None
        self.hold_s = hold_s
        self.wait_for_peer = wait_for_peer

    @contextlib.contextmanager
    def running(self) -> Iterator[None]:
        with self.lock:
            self.now += 1
            self.most = max(self.most, self.now)
            if self.fleet is not None:
                self.fleet_running.append(self.fleet.running)
            self.lock.notify_all()
            if self.wait_for_peer:  # returns at once when a second one is let in
                self.lock.wait_for(lambda: self.most > 1, timeout=self.hold_s)
        if not self.wait_for_peer:
            time.sleep(self.hold_s)
        try:
            yield
        finally:
            with self.lock:
                self.now -= 1


class Tracked(TableWatcher):
    """A watcher whose maintenance is slow and counted, to see how many run at once."""

    def __init__(self, tracker: Tracker) -> None:
        super().__init__(0)
        self.tracker = tracker

    def maintain(self, target: Target, obs: Observation, now_ms: int, **kw: Any) -> Observation:
        with self.tracker.running():
            return super().maintain(target, obs, now_ms, **kw)


def _run_tables(
    tmp_path: Path,
    max_concurrent: int,
    tracker: Tracker,
    once: bool = False,
    memory_budget: int | None = None,
) -> list[Any]:
    """Four tables polled once each, in watch loops or (`once`) by poll_once directly."""
    published = Published()
    targets = []
    for i in range(4):
        small_table(tmp_path / f"t{i}")
        targets.append(Target("ns", f"t{i}", str(tmp_path / f"t{i}"), poll_interval_s=0.01))

    async def go() -> None:
        fleet = Fleet(max_concurrent=max_concurrent, memory_budget=memory_budget)
        tracker.fleet = fleet

        def stop_after_one_poll(name: str) -> Any:
            async def sleep(seconds: float) -> bool:
                return any(t.name == name for t, _ in published.seen)

            return sleep

        try:
            if once:
                polls = [fleet.poll_once(t, Tracked(tracker), published) for t in targets]
            else:
                polls = [
                    fleet.watch(fixed(t), Tracked(tracker), stop_after_one_poll(t.name), published)
                    for t in targets
                ]
            await asyncio.wait_for(asyncio.gather(*polls), 10)
        finally:
            fleet.close()

    asyncio.run(go())
    return published.seen


def test_max_concurrent_1_never_runs_two_maintenances_at_once(tmp_path: Path) -> None:
    tracker = Tracker()
    seen = _run_tables(tmp_path, 1, tracker)
    # One poll each, published before and after its maintenance.
    assert sorted(t.name for t, _ in seen) == ["t0", "t0", "t1", "t1", "t2", "t2", "t3", "t3"]
    assert all(status_of(obs)["version"] == 2 for _, obs in seen)
    assert tracker.most == 1
    assert tracker.fleet_running == [1, 1, 1, 1]
    # The same limit holds for polls started directly (poll_once, as `run --once` polls).
    tracker = Tracker()
    seen = _run_tables(tmp_path / "once", 1, tracker, once=True)
    assert len(seen) == 8 and all(status_of(obs)["version"] == 2 for _, obs in seen)
    assert tracker.most == 1


def test_a_budget_with_room_for_one_table_runs_them_one_at_a_time(tmp_path: Path) -> None:
    from deltakeeper.maintenance import memory

    # Two slots, but room for one table's steps at a time (each estimated at 32 MiB and a
    # little): they queue instead of overlapping, and every table is still maintained.
    tracker = Tracker(hold_s=1.0, wait_for_peer=True)
    seen = _run_tables(tmp_path, 2, tracker, memory_budget=memory.BASE_BYTES * 3 // 2)
    assert tracker.most == 1
    assert sorted(t.name for t, _ in seen) == ["t0", "t0", "t1", "t1", "t2", "t2", "t3", "t3"]
    assert all(o.result != "refused" for _, obs in seen for o in obs.outcomes)


def test_max_concurrent_2_does_run_two_at_once(tmp_path: Path) -> None:
    # The control for the test above: the tracker can see concurrency when it is allowed.
    tracker = Tracker(hold_s=5.0, wait_for_peer=True)
    _run_tables(tmp_path, 2, tracker)
    assert tracker.most == 2 and max(tracker.fleet_running) == 2


class Blocking(TableWatcher):
    """Maintenance that waits for `release` (or sleeps briefly), counted like Tracker."""

    def __init__(self, tracker: Tracker, entered: threading.Event, release: threading.Event):
        super().__init__(0)
        self.tracker, self.entered, self.release = tracker, entered, release

    def maintain(self, target: Target, obs: Observation, now_ms: int, **kw: Any) -> Observation:
        with self.tracker.running():
            self.entered.set()
            self.release.wait(5)
            return super().maintain(target, obs, now_ms, **kw)


def test_a_cancelled_poll_keeps_its_slot_until_its_maintenance_ends(tmp_path: Path) -> None:
    small_table(tmp_path / "a")
    small_table(tmp_path / "b")
    tracker = Tracker(hold_s=0)
    entered_a, release_a = threading.Event(), threading.Event()
    b_runs = threading.Event()
    b_runs.set()  # b never blocks

    async def go() -> None:
        fleet = Fleet(max_concurrent=1)
        tracker.fleet = fleet
        try:
            a = asyncio.create_task(
                fleet.poll_once(
                    Target("ns", "a", str(tmp_path / "a")),
                    Blocking(tracker, entered_a, release_a),
                    Published(),
                )
            )
            await asyncio.wait_for(asyncio.to_thread(entered_a.wait, 5), 10)
            a.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await a
            asyncio.get_running_loop().call_later(0.3, release_a.set)
            b = Blocking(tracker, threading.Event(), b_runs)
            b_target = Target("ns", "b", str(tmp_path / "b"))
            await asyncio.wait_for(fleet.poll_once(b_target, b, Published()), 10)
        finally:
            release_a.set()
            fleet.close()

    asyncio.run(go())
    assert tracker.most == 1


def test_a_stopped_loop_waiting_for_a_slot_gives_it_up_and_runs_nothing(tmp_path: Path) -> None:
    # At shutdown, thousands of tables may be queued for a slot: they must not all run first.
    for name in "abc":
        small_table(tmp_path / name)
    tracker = Tracker(hold_s=0)
    entered_a, release_a = threading.Event(), threading.Event()
    started: list[str] = []
    published = Published()

    class Counted(Blocking):
        def maintain(self, target: Target, obs: Observation, now_ms: int, **kw: Any) -> Observation:
            started.append(target.name)
            return super().maintain(target, obs, now_ms, **kw)

    def loop(fleet: Fleet, name: str, entered: threading.Event) -> Loop:
        target = Target("ns", name, str(tmp_path / name), poll_interval_s=1)
        one = Loop()
        watcher = Counted(tracker, entered, release_a)
        one.start(fleet, fixed(target), watcher, published, f"ns/{name}")
        return one

    async def go() -> float:
        fleet = Fleet(max_concurrent=1)
        try:
            a = loop(fleet, "a", entered_a)
            await asyncio.wait_for(asyncio.to_thread(entered_a.wait, 5), 10)
            queued = [loop(fleet, name, threading.Event()) for name in "bc"]
            while {t.name for t, _ in published.seen} != {"a", "b", "c"}:
                await asyncio.sleep(0.01)  # each publishes its poll, then waits for the slot
            stopping = time.monotonic()
            for one in queued:
                one.stop()
            await asyncio.wait_for(
                asyncio.gather(*(q.task for q in queued), return_exceptions=True), 2
            )
            took = time.monotonic() - stopping
            release_a.set()
            a.stop()
            await asyncio.wait_for(asyncio.gather(a.task, return_exceptions=True), 10)
            assert fleet.running == 0
            # The slot was given back: another table's maintenance runs at once.
            b = Target("ns", "b", str(tmp_path / "b"))
            await asyncio.wait_for(
                fleet.poll_once(b, Counted(tracker, threading.Event(), release_a), published), 10
            )
            return took
        finally:
            release_a.set()
            fleet.close()

    took = asyncio.run(go())
    assert took < 1.0
    assert started == ["a", "b"]  # b's only after a's ended; c's never


def test_healthy_follows_the_heartbeat() -> None:
    async def go() -> tuple[bool, bool]:
        fleet = Fleet()
        try:
            fleet.last_tick = time.monotonic() - 120
            stalled = fleet.healthy(stall_s=60)
            beat = asyncio.create_task(fleet.heartbeat(every_s=0.01))
            await asyncio.sleep(0.05)
            beat.cancel()
            return stalled, fleet.healthy(stall_s=60)
        finally:
            fleet.close()

    assert asyncio.run(go()) == (False, True)


class Ordered(TableWatcher):
    """A watcher that notes when its maintenance starts, and holds its slot a while."""

    def __init__(self, started: list[str], hold_s: float) -> None:
        super().__init__(0)
        self.started, self.hold_s = started, hold_s

    def maintain(self, target: Target, obs: Observation, now_ms: int, **kw: Any) -> Observation:
        self.started.append(target.name)
        time.sleep(self.hold_s)
        return super().maintain(target, obs, now_ms, **kw)


def test_the_slot_goes_to_the_sick_tables_before_the_healthy_ones(tmp_path: Path) -> None:
    """One slot, 12 healthy tables and 3 with vacuum debt (files removed 8 days ago), all due
    at once: after the table that found the slot free, the sick ones go first."""
    old = int(time.time() * 1000) - 8 * 86_400_000
    targets = []
    for i in range(15):
        root = tmp_path / f"t{i:02d}"
        b = small_table(root)
        if i % 5 == 4:  # t04, t09, t14
            b.commit(remove("a.parquet", ts=old), commit_info())
            (root / "a.parquet").write_bytes(b"x" * 100)
        targets.append(Target("ns", f"t{i:02d}", str(root), poll_interval_s=60))
    started: list[str] = []

    async def go() -> None:
        fleet = Fleet(max_concurrent=1)
        try:
            polls = [fleet.poll_once(t, Ordered(started, 0.2), Published()) for t in targets]
            await asyncio.wait_for(asyncio.gather(*polls), 30)
        finally:
            fleet.close()

    asyncio.run(go())
    assert len(started) == 15
    # The first found the slot free; the three sick ones follow it, whenever they asked
    # (first come, first served they would be 5th, 10th and 15th).
    assert max(started.index(n) for n in ("t04", "t09", "t14")) <= 3, started


def test_a_step_too_big_for_the_memory_budget_is_refused_and_the_others_run(
    tmp_path: Path,
) -> None:
    from deltakeeper.maintenance import memory
    from deltakeeper.maintenance.operations import Operation
    from deltakeeper.maintenance.operations.registry import estimate

    small_table(tmp_path, commits=12)  # a checkpoint due; 12 files, 13 log files
    # Room for cleanup and vacuum on this table, not for a checkpoint.
    budget = estimate(Operation.VACUUM, memory.Holding(12, 0, 13, False)) + 1
    published = Published()

    async def go() -> Observation:
        fleet = Fleet(memory_budget=budget)
        try:
            return await fleet.poll_once(
                Target("ns", "t", str(tmp_path)), TableWatcher(0), published
            )
        finally:
            fleet.close()

    obs = asyncio.run(go())
    results = {str(o.operation): str(o.result) for o in obs.outcomes}
    assert results["checkpoint"] == "refused" and results["vacuum"] in ("done", "skipped")
    refused = next(o for o in obs.outcomes if o.operation is Operation.CHECKPOINT)
    assert "checkpoint needs about 32.0 MiB" in refused.message and "budget is 32.0 MiB" in (
        refused.message
    )
    assert not list((tmp_path / "_delta_log").glob("*.checkpoint.parquet"))  # nothing written
    degraded = next(c for c in obs.conditions if str(c.type) == "Degraded")
    assert (str(degraded.status), str(degraded.reason)) == ("True", "MaintenanceRefused")


def test_first_polls_go_longest_log_first(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from deltakeeper.runtime import fleet as fleet_module

    monkeypatch.setattr(fleet_module, "FIRST_POLLS", 1)  # one at a time: the order shows
    order: list[str] = []

    class Recorded(TableWatcher):
        def observe(self, target: Target, now_ms: int) -> Observation:
            order.append(target.name)
            if len(order) == 1:
                time.sleep(0.3)  # the others have peeked and wait for their turn meanwhile
            return super().observe(target, now_ms)

    targets = []
    for i in range(6):
        small_table(tmp_path / f"t{i}", commits=40 if i == 4 else 2)  # t4: the long log
        targets.append(Target("ns", f"t{i}", str(tmp_path / f"t{i}"), poll_interval_s=60))
    published = Published()

    async def go() -> None:
        fleet = Fleet()

        def once(name: str) -> Any:
            async def sleep(seconds: float) -> bool:
                return any(t.name == name for t, _ in published.seen)

            return sleep

        try:
            loops = [fleet.watch(fixed(t), Recorded(0), once(t.name), published) for t in targets]
            await asyncio.wait_for(asyncio.gather(*loops), 30)
        finally:
            fleet.close()

    asyncio.run(go())
    assert sorted(order) == [f"t{i}" for i in range(6)]
    assert order.index("t4") <= 1  # the first to ask may go at once; then the longest log


def test_first_polls_on_an_object_store_run_as_many_at_once_as_the_observers() -> None:
    """A first poll on an object store waits on requests, not the CPU: held to FIRST_POLLS (4)
    at once, a start of 50,000 MinIO tables showed 22 a second. Local first polls stay at 4."""
    from deltakeeper.runtime.fleet import FIRST_POLLS

    class Waiting(TableWatcher):
        """A poll that waits as if on requests, counting how many wait at once."""

        def __init__(self, counts: dict[str, int], lock: threading.Lock) -> None:
            super().__init__(0)
            self.counts, self.lock = counts, lock

        def peek(self, target: Target) -> int:
            return 0

        def observe(self, target: Target, now_ms: int) -> Observation:
            with self.lock:
                self.counts["now"] += 1
                self.counts["most"] = max(self.counts["most"], self.counts["now"])
            time.sleep(0.2)
            with self.lock:
                self.counts["now"] -= 1
            return Observation(now_ms, [], quiet=True)

    def most_at_once(uri: str) -> int:
        counts, lock = {"now": 0, "most": 0}, threading.Lock()

        async def go() -> None:
            fleet = Fleet(observers=8)
            try:
                firsts = [
                    fleet._first_observe(
                        Target("ns", f"t{i}", f"{uri}/t{i}"), Waiting(counts, lock)
                    )
                    for i in range(16)
                ]
                await asyncio.wait_for(asyncio.gather(*firsts), 30)
            finally:
                fleet.close()

        asyncio.run(go())
        return counts["most"]

    assert most_at_once("s3://bucket/lake") == 8
    assert most_at_once("/data/lake") == FIRST_POLLS == 4
