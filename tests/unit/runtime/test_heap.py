"""runtime/heap.py: the daemon's settled state frozen out of full collections, and thawed
after tables are removed, on this process's real collector (restored after each test)."""

from __future__ import annotations

import asyncio
import gc
import weakref
from collections.abc import Iterator

import pytest

from deltakeeper.runtime import heap
from deltakeeper.runtime.fleet import Fleet


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


class Cycle:
    """Garbage only the collector frees: it refers to itself."""

    def __init__(self) -> None:
        self.me = self


@pytest.fixture(autouse=True)
def thawed() -> Iterator[None]:
    threshold = gc.get_threshold()
    gc.unfreeze()
    yield
    gc.unfreeze()
    gc.set_threshold(*threshold)
    gc.collect()


def old_objects() -> int:
    return len(gc.get_objects(generation=2))


def test_a_small_daemon_keeps_pythons_collector_as_it_is(monkeypatch: pytest.MonkeyPatch):
    monkeypatch.setattr(heap, "MIN_OBJECTS", old_objects() + 1_000_000)
    threshold = gc.get_threshold()
    assert heap.Heap(Clock()).tend() is None
    assert gc.get_freeze_count() == 0 and gc.get_threshold() == threshold


def test_what_lived_through_the_young_generations_is_frozen_checked_every_few_seconds(
    monkeypatch: pytest.MonkeyPatch,
):
    monkeypatch.setattr(heap, "MIN_OBJECTS", 5_000)
    clock = Clock()
    h = heap.Heap(clock)
    state = [Cycle() for _ in range(6_000)]  # a daemon's tables
    garbage = Cycle()
    gone = weakref.ref(garbage)
    del garbage
    gc.collect(1)
    gc.collect(1)  # into the oldest generation, as time would take them
    assert h.tend() == "frozen"
    assert gone() is None  # collected before the freeze, not frozen with the state
    frozen = gc.get_freeze_count()
    assert frozen >= len(state) and old_objects() < heap.MIN_OBJECTS
    assert gc.get_threshold()[0] == heap.YOUNG_THRESHOLD
    more = [Cycle() for _ in range(6_000)]
    gc.collect(1)
    gc.collect(1)
    assert h.tend() is None  # checked a moment ago
    clock.now += heap.CHECK_S
    assert h.tend() == "frozen" and gc.get_freeze_count() >= frozen + len(more)


def test_frozen_cyclic_garbage_is_freed_an_hour_after_the_start_and_hourly_while_tables_go(
    monkeypatch: pytest.MonkeyPatch,
):
    monkeypatch.setattr(heap, "MIN_OBJECTS", 1_000)
    clock = Clock()
    h = heap.Heap(clock)
    table = Cycle()  # a table's loop, which refers to itself through its task
    gone = weakref.ref(table)
    padding = [Cycle() for _ in range(2_000)]
    gc.collect()
    assert h.tend() == "frozen"
    del table
    gc.collect()
    assert gone() is not None  # frozen: a full collection no longer walks it
    clock.now += heap.CHECK_S
    assert h.tend() is None  # an hour has not passed since the start
    clock.now += heap.THAW_S
    assert h.tend() == "thawed"
    assert gone() is None and gc.get_freeze_count() >= len(padding)
    clock.now += heap.THAW_S
    assert h.tend() != "thawed"  # no table removed since
    table = Cycle()
    gone = weakref.ref(table)
    gc.collect()
    gc.freeze()
    del table
    h.forgotten()
    clock.now += heap.THAW_S
    assert h.tend() == "thawed" and gone() is None


def test_a_check_never_counts_the_frozen_objects(monkeypatch: pytest.MonkeyPatch):
    """gc.get_freeze_count() walks every frozen object: 0.2 s at 10,000 tables, made every
    CHECK_S for the first hour (until the first thaw), it was the steady state's largest cost
    (py-spy: 0.02 of the operator's 0.09 cores at 10,000 tables)."""
    monkeypatch.setattr(heap, "MIN_OBJECTS", 1_000)
    counted: list[int] = []
    count = gc.get_freeze_count
    monkeypatch.setattr(gc, "get_freeze_count", lambda: counted.append(1) or count())
    clock = Clock()
    h = heap.Heap(clock)
    padding = [Cycle() for _ in range(2_000)]
    gc.collect()
    assert h.tend() == "frozen"
    for _ in range(int(heap.THAW_S / heap.CHECK_S) - 1):
        clock.now += heap.CHECK_S
        h.tend()
    assert counted == [] and padding


def test_the_fleets_heartbeat_tends_the_heap_it_is_given():
    tended = []

    class Counting(heap.Heap):
        def tend(self) -> str | None:
            tended.append(1)
            return None

    async def beat() -> None:
        fleet = Fleet()
        try:
            task = asyncio.create_task(fleet.heartbeat(every_s=0.01, heap=Counting()))
            await asyncio.sleep(0.1)
            task.cancel()
            await asyncio.gather(task, return_exceptions=True)
        finally:
            fleet.close()

    asyncio.run(beat())
    assert len(tended) >= 3
