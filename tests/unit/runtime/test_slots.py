"""runtime/slots.py: maintenance slots by benefit, with a bound on waiting."""

from __future__ import annotations

import asyncio

import pytest

from deltakeeper.runtime.slots import Slots


class Clock:
    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


async def _queue(slots: Slots, order: list[str], who: str, benefit: float, bound: float) -> None:
    await slots.acquire(benefit, bound)
    order.append(who)
    await asyncio.sleep(0)
    slots.release()


def test_a_freed_slot_goes_to_the_largest_benefit() -> None:
    async def go() -> list[str]:
        slots, order = Slots(1), []
        await slots.acquire(0, 60)  # busy
        tasks = [
            asyncio.create_task(_queue(slots, order, who, benefit, 60))
            for who, benefit in (("small", 1), ("sick", 100), ("fair", 10), ("tie", 10))
        ]
        await asyncio.sleep(0)
        assert slots.waiting == 4
        slots.release()
        await asyncio.gather(*tasks)
        return order

    assert asyncio.run(go()) == ["sick", "fair", "tie", "small"]  # a tie: first come


def test_a_table_past_its_bound_goes_first_whatever_the_others_benefit() -> None:
    async def go() -> list[str]:
        clock = Clock()
        slots, order = Slots(1, clock), []
        await slots.acquire(0, 60)
        patient = asyncio.create_task(_queue(slots, order, "patient", 0, 10))
        await asyncio.sleep(0)
        clock.now = 5.0
        late = asyncio.create_task(_queue(slots, order, "late", 0, 10))
        await asyncio.sleep(0)
        clock.now = 11.0  # patient has waited 11 s, late 6 s
        sick = asyncio.create_task(_queue(slots, order, "sick", 1e12, 10))
        await asyncio.sleep(0)
        slots.release()
        await asyncio.gather(patient, late, sick)
        return order

    assert asyncio.run(go()) == ["patient", "sick", "late"]


def test_free_slots_are_taken_at_once_and_a_cancelled_wait_takes_none() -> None:
    async def go() -> None:
        slots = Slots(2)
        await slots.acquire(0, 60)
        await slots.acquire(0, 60)
        assert slots.free == 0
        waiting = asyncio.create_task(slots.acquire(5, 60))
        await asyncio.sleep(0)
        waiting.cancel()
        with pytest.raises(asyncio.CancelledError):
            await waiting
        assert slots.waiting == 0
        slots.release()
        slots.release()
        assert slots.free == 2
        # Granted in the same step as it is cancelled: the slot goes back.
        await slots.acquire(0, 60)
        await slots.acquire(0, 60)
        granted = asyncio.create_task(slots.acquire(1, 60))
        await asyncio.sleep(0)
        slots.release()  # grants it
        granted.cancel()
        with pytest.raises(asyncio.CancelledError):
            await granted
        assert slots.free == 1

    asyncio.run(go())


def test_with_a_memory_budget_the_big_table_waits_for_room_and_the_small_ones_behind_it() -> None:
    MIB = 2**20

    async def go() -> list[str]:
        slots, order = Slots(3, memory=1000 * MIB), []
        await slots.acquire(0, 60, need=600 * MIB)  # a step running
        assert slots.memory == 400 * MIB

        async def table(who: str, benefit: float, need: int) -> None:
            await slots.acquire(benefit, 60, need)
            order.append(who)
            await asyncio.sleep(0)
            slots.release(need)

        big = asyncio.create_task(table("big", 100, 900 * MIB))
        small = asyncio.create_task(table("small", 1, 10 * MIB))
        await asyncio.sleep(0)
        # Two slots free, but the big table, first by benefit, needs 900 MiB: both wait.
        assert (slots.waiting, order) == (2, [])
        slots.release(600 * MIB)
        await asyncio.gather(big, small)
        assert slots.memory == 1000 * MIB and slots.free == 3  # all given back
        return order

    assert asyncio.run(go()) == ["big", "small"]


def test_without_a_budget_need_is_ignored() -> None:
    async def go() -> None:
        slots = Slots(1)
        await slots.acquire(0, 60, need=10**15)
        assert slots.memory is None
        slots.release(10**15)
        assert slots.free == 1

    asyncio.run(go())
