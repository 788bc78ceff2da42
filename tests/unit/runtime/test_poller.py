"""runtime/poller.py: quiet tables polled off the event loop until a poll needs their loop."""

from __future__ import annotations

import asyncio
import logging
import threading
import time
from collections.abc import Awaitable, Callable
from pathlib import Path

import pytest

from deltakeeper.maintenance.operations import Operation
from deltakeeper.resources.manifests import TableResource
from deltakeeper.runtime import poller as poller_module
from deltakeeper.runtime.fleet import Fleet, Loop
from deltakeeper.runtime.metrics import Metrics
from deltakeeper.runtime.model import Event, Observation, Target
from deltakeeper.runtime.poller import Poller, Settled
from deltakeeper.runtime.registry import Entry, Key, Registry
from deltakeeper.runtime.watcher import TableWatcher
from tests.support.logbuilder import add, commit_info
from tests.support.tables import small_table


def run(scenario: Callable[[], object]) -> None:
    asyncio.run(asyncio.wait_for(scenario(), 20))  # type: ignore[arg-type]


TARGET = Target("ns", "t", "/t")


class Table:
    """A parked table as the Poller sees it (poller.Quiet), from a check and a settle."""

    def __init__(
        self, check: Callable[[], Observation], settle: Callable[[Observation], Settled]
    ) -> None:
        self._check, self._settle = check, settle

    def check(self, target: Target) -> Observation:
        assert target is TARGET
        return self._check()

    def settle(self, target: Target, obs: Observation) -> Settled:
        assert target is TARGET
        return self._settle(obs)


def polls(quiet_for: int, log: list[str]) -> Callable[[], Observation]:
    """A check whose first `quiet_for` polls are quiet, recording the thread of each."""

    def check() -> Observation:
        log.append(threading.current_thread().name)
        return Observation(len(log), [], quiet=len(log) <= quiet_for)

    return check


def test_quiet_polls_are_settled_off_the_loop_until_one_is_not() -> None:
    async def scenario() -> None:
        poller, threads, settled = Poller(threads=2), [], []

        def settle(obs: Observation) -> Settled:
            settled.append(obs.polled_ms)
            return Settled.SHOWN

        try:
            _, handed = poller.park(Table(polls(4, threads), settle), TARGET, 0.01)
            obs, fresh = await handed
        finally:
            poller.close()
        assert (obs.polled_ms, obs.quiet, fresh) == (5, False, True)
        assert settled == [1, 2, 3, 4] and poller.polls == 4
        assert threads and all(name.startswith("poll-") for name in threads)

    run(scenario)


def test_a_burst_of_due_tables_goes_to_the_poll_threads_a_chunk_at_a_time() -> None:
    """Tables due together are polled a chunk per thread (one wake-up a chunk), every chunk
    on a thread of its own while threads are free; each table is settled once a poll."""
    n = 3 * poller_module.CHUNK

    async def scenario() -> None:
        poller, gate, local = Poller(threads=3), threading.Barrier(3, timeout=10), threading.local()
        first_polls: dict[str, int] = {}
        polled: dict[int, int] = dict.fromkeys(range(n), 0)
        settled: list[int] = []

        def check_of(i: int) -> Callable[[], Observation]:
            def check() -> Observation:
                polled[i] += 1
                if polled[i] == 1:
                    name = threading.current_thread().name
                    first_polls[name] = first_polls.get(name, 0) + 1
                if not getattr(local, "met", False):
                    local.met = True
                    gate.wait()  # three threads poll at once, or this breaks
                return Observation(i, [], quiet=polled[i] == 1)

            return check

        def settle(obs: Observation) -> Settled:
            settled.append(obs.polled_ms)
            return Settled.SHOWN

        try:
            handed = [poller.park(Table(check_of(i), settle), TARGET, 0.01)[1] for i in range(n)]
            await asyncio.gather(*handed)
        finally:
            poller.close()
        assert sorted(settled) == list(range(n)) and poller.polls == n
        # The burst was three chunks, one to each thread.
        assert sorted(first_polls.values()) == [poller_module.CHUNK] * 3

    run(scenario)


def test_a_table_cancelled_while_its_chunk_is_polled_ends_without_a_poll() -> None:
    async def scenario() -> None:
        poller, started, release = Poller(threads=1), threading.Event(), threading.Event()
        polled: list[int] = []

        def check_of(i: int) -> Callable[[], Observation]:
            def check() -> Observation:
                polled.append(i)
                if len(polled) == 1:  # the chunk's first: the other waits behind it
                    started.set()
                    release.wait(10)
                return Observation(i, [], quiet=False)

            return check

        try:
            parked = [
                poller.park(Table(check_of(i), lambda obs: Settled.SHOWN), TARGET, 0.01)
                for i in range(2)
            ]
            await asyncio.to_thread(started.wait, 10)
            first = polled[0]
            poller.cancel(parked[1 - first][0])
            release.set()
            assert await parked[1 - first][1] is None
            obs, _ = await parked[first][1]
        finally:
            poller.close()
        assert obs.polled_ms == first and polled == [first]

    run(scenario)


@pytest.mark.parametrize(("settled", "fresh"), [(Settled.PUBLISH, True), (Settled.STALE, False)])
def test_a_quiet_poll_the_loop_must_see_is_handed_back(settled: Settled, fresh: bool) -> None:
    async def scenario() -> None:
        poller = Poller(threads=1)
        try:
            _, handed = poller.park(Table(polls(10, []), lambda obs: settled), TARGET, 0.01)
            obs, got = await handed
        finally:
            poller.close()
        assert (obs.polled_ms, obs.quiet, got) == (1, True, fresh)
        assert poller.polls == 0

    run(scenario)


def test_a_quiet_poll_with_something_due_goes_to_the_loop_unsettled() -> None:
    async def scenario() -> None:
        poller, settled = Poller(threads=1), []

        def check() -> Observation:
            return Observation(1, [], quiet=True, due=(Operation.VACUUM,))

        try:
            _, handed = poller.park(
                Table(check, lambda obs: settled.append(obs) or Settled.SHOWN), TARGET, 0.01
            )
            obs, fresh = await handed
        finally:
            poller.close()
        assert obs.due == (Operation.VACUUM,) and fresh and settled == []

    run(scenario)


def test_a_parking_cancelled_before_its_poll_ends_at_once_without_polling() -> None:
    async def scenario() -> None:
        poller, threads = Poller(threads=1), []
        try:
            parked, handed = poller.park(
                Table(polls(10, threads), lambda obs: Settled.SHOWN), TARGET, 60
            )
            poller.cancel(parked)
            assert await handed is None
        finally:
            poller.close()
        assert threads == []

    run(scenario)


def test_a_parking_cancelled_during_its_poll_ends_with_that_poll() -> None:
    async def scenario() -> None:
        poller, started, release, settled = (
            Poller(threads=1),
            threading.Event(),
            threading.Event(),
            [],
        )

        def check() -> Observation:
            started.set()
            release.wait(10)
            return Observation(7, [], quiet=True)

        try:
            parked, handed = poller.park(
                Table(check, lambda obs: settled.append(obs) or Settled.SHOWN), TARGET, 0
            )
            await asyncio.to_thread(started.wait, 10)
            poller.cancel(parked)
            await asyncio.sleep(0.05)
            assert not handed.done()  # the poll still runs: the loop must not poll meanwhile
            release.set()
            obs, fresh = await handed
        finally:
            poller.close()
        assert obs.polled_ms == 7 and fresh and settled == []

    run(scenario)


def test_a_check_that_raises_reaches_the_loop() -> None:
    async def scenario() -> None:
        poller = Poller(threads=1)

        def check() -> Observation:
            raise ValueError("a bug")

        try:
            _, handed = poller.park(Table(check, lambda obs: Settled.SHOWN), TARGET, 0)
            with pytest.raises(ValueError, match="a bug"):
                await handed
        finally:
            poller.close()

    run(scenario)


class QuietSink:
    """Records status writes; shows quiet polls without one while `quiet` says so."""

    def __init__(self) -> None:
        self.written: list[Observation] = []
        self.quiet_shown = 0
        self.stale = False

    async def write_status(self, entry: Entry, target: Target, obs: Observation) -> bool:
        self.written.append(obs)
        return True

    def post_event(self, entry: Entry, event: Event) -> None:
        pass

    def forget(self, key: Key) -> None:
        pass

    def quiet(self, entry: Entry, target: Target, obs: Observation) -> bool:
        self.quiet_shown += 1
        return True

    def fresh(self, key: Key, entry: Entry, target: Target) -> bool:
        return not self.stale


def _resolving(target: Target, resolved: list[Target]) -> Callable[[Key, Entry], Awaitable[Target]]:
    """A registry's resolve that always gives `target`, each call noted in `resolved`."""

    async def resolve(key: Key, entry: Entry) -> Target:
        resolved.append(target)
        return target

    return resolve


async def _until(ok: Callable[[], bool]) -> None:
    while not ok():
        await asyncio.sleep(0.01)


def test_a_quiet_table_is_polled_without_its_loop_until_its_log_moves(tmp_path: Path) -> None:
    """The whole path: a registry's loop parks a real quiet table, its polls are counted in
    the metrics and shown without status writes; a commit goes back through its loop."""
    b = small_table(tmp_path)
    sink, metrics = QuietSink(), Metrics()
    target = Target("ns", "t", str(tmp_path), poll_interval_s=0.02)
    resolved: list[Target] = []
    resolve = _resolving(target, resolved)

    async def scenario() -> None:
        fleet = Fleet(observers=2)
        r = Registry(metrics, sink, resolve, logging.getLogger("test"))
        r.add(("ns", "t"), Entry(TableResource("ns", "t", {}, 1, {"uri": str(tmp_path)})))
        try:
            r.start(("ns", "t"), fleet, TableWatcher(0))
            await _until(lambda: fleet._poller is not None and fleet._poller.polls >= 5)
            writes, resolves = len(sink.written), len(resolved)
            await _until(lambda: fleet._poller is not None and fleet._poller.polls >= 10)
            # Quiet polls: no status written, no target resolved, each listing counted.
            assert (len(sink.written), len(resolved)) == (writes, resolves)
            assert sink.quiet_shown >= 10
            listed = metrics._tables[("ns", "t")].requests["list"]
            assert listed >= 10
            b.commit(add("g.parquet"), commit_info())
            await _until(lambda: any(o.counts.get("version") == 3 for o in sink.written))
            sink.stale = True  # its next quiet poll goes back to be resolved again
            before = len(resolved)
            await _until(lambda: len(resolved) > before)
            sink.stale = False  # then it parks again with what was resolved
            assert fleet._poller is not None
            shown = fleet._poller.polls
            await _until(lambda: fleet._poller is not None and fleet._poller.polls >= shown + 3)
        finally:
            await r.stop()
            fleet.close()

    run(scenario)


def test_a_table_parks_right_after_a_poll_that_maintained_or_found_commits(tmp_path: Path) -> None:
    """Not one loop poll later: after a start every table's first poll maintains, and at an
    hour's resync the loop's polls cost several times the Poller's."""
    b = small_table(tmp_path)
    sink = QuietSink()
    target = Target("ns", "t", str(tmp_path), poll_interval_s=0.02)
    resolved: list[Target] = []
    resolve = _resolving(target, resolved)

    async def scenario() -> None:
        fleet = Fleet(observers=2)
        r = Registry(Metrics(), sink, resolve, logging.getLogger("test"))
        r.add(("ns", "t"), Entry(TableResource("ns", "t", {}, 1, {"uri": str(tmp_path)})))
        try:
            r.start(("ns", "t"), fleet, TableWatcher(0))
            await _until(lambda: fleet._poller is not None and fleet._poller.polls >= 3)
            # Resolved to start and for its first poll, which maintained; then parked.
            assert len(resolved) == 2 and sink.written[0].due and sink.written[1].outcomes
            assert fleet._polled == 1
            b.commit(add("g.parquet"), commit_info())
            await _until(lambda: any(o.counts.get("version") == 3 for o in sink.written))
            assert fleet._poller is not None
            shown = fleet._poller.polls
            await _until(lambda: fleet._poller is not None and fleet._poller.polls >= shown + 3)
            # The commit came back through the loop once, which resolved its Target (the
            # Poller had not asked whether it still held) and parked it again.
            assert fleet._polled == 2 and len(resolved) == 3
        finally:
            await r.stop()
            fleet.close()

    run(scenario)


def test_a_loop_cancelled_while_its_table_is_polled_ends_after_that_poll(tmp_path: Path) -> None:
    """Its next loop must not poll the table while this poll still runs."""

    async def scenario() -> None:
        fleet, started, release, ended = (
            Fleet(observers=1),
            threading.Event(),
            threading.Event(),
            [],
        )
        loop = Loop()

        def slow() -> Observation:
            started.set()
            release.wait(10)
            ended.append(time.monotonic())
            return Observation(1, [], quiet=True)

        loop.fleet, loop.quiet = fleet, Table(slow, lambda obs: Settled.SHOWN)
        try:
            parking = asyncio.ensure_future(loop.park(TARGET, 0, 0))
            await asyncio.to_thread(started.wait, 10)
            parking.cancel()
            await asyncio.sleep(0.05)
            assert not parking.done()  # still waiting for the poll under way
            release.set()
            with pytest.raises(asyncio.CancelledError):
                await parking
            assert ended, "the loop ended before the poll did"
        finally:
            fleet.close()

    run(scenario)
