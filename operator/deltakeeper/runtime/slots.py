"""The fleet's maintenance slots, given benefit first with a bound on waiting.

A table whose maintenance is due waits for one of `n` slots. When one frees, it goes to the
waiting table with the largest expected benefit (`benefit`, runtime/health.py), except that a
table that has waited `bound_s` or longer goes first, the one whose bound ended first: so a sick
table does not wait behind thousands of healthy ones, and a healthy one still gets its turn.

With a memory budget, a slot also takes the memory its table's steps are estimated to need
(maintenance/memory.py): the chosen table waits until that much is free (running alone if it
must), and the others wait behind it, so a big table is neither run beside others nor starved
by small ones.

    slots = Slots(2, memory=2 * 2**30)
    await slots.acquire(benefit=1e9, bound_s=90, need=600 * 2**20)
    try: ...
    finally: slots.release(600 * 2**20)
"""

from __future__ import annotations

import asyncio
import heapq
import itertools
import time
from collections.abc import Callable
from dataclasses import dataclass


@dataclass(eq=False)
class _Waiter:
    since: float
    order: int  # arrival order, for equal times
    benefit: float
    bound_s: float
    granted: asyncio.Future[None]
    need: int = 0
    active: bool = True  # still waiting (not granted, not cancelled)


class Slots:
    """Two heaps of the waiting (by benefit, by the end of their bound), so a grant costs a
    logarithm of the queue: after a start every table of a big fleet may queue here."""

    def __init__(
        self, n: int, clock: Callable[[], float] = time.monotonic, memory: int | None = None
    ) -> None:
        self.free = n
        self.memory = memory  # the budget left, in bytes; None: no budget
        self.clock = clock
        self.waiting = 0
        self._by_benefit: list[tuple[float, float, int, _Waiter]] = []
        self._by_bound: list[tuple[float, float, int, _Waiter]] = []
        self._arrivals = itertools.count()

    async def acquire(self, benefit: float, bound_s: float, need: int = 0) -> None:
        """Wait for a slot (and `need` bytes of the budget, which must not exceed all of it).
        Cancelled while waiting: nothing is taken."""
        if self.free > 0 and not self.waiting and self._fits(need):
            self._take(need)
            return
        granted = asyncio.get_running_loop().create_future()
        since, order = self.clock(), next(self._arrivals)
        waiter = _Waiter(since, order, benefit, bound_s, granted, need)
        heapq.heappush(self._by_benefit, (-benefit, since, order, waiter))
        heapq.heappush(self._by_bound, (since + bound_s, since, order, waiter))
        self.waiting += 1
        self._grant()
        try:
            await granted
        except asyncio.CancelledError:
            if waiter.active:
                self._leave(waiter)
            elif granted.done() and not granted.cancelled():
                self.release(need)  # granted as it was cancelled: give the slot on
            raise

    def release(self, need: int = 0) -> None:
        self.free += 1
        if self.memory is not None:
            self.memory += need
        self._grant()

    def _fits(self, need: int) -> bool:
        return self.memory is None or need <= self.memory

    def _take(self, need: int) -> None:
        self.free -= 1
        if self.memory is not None:
            self.memory -= need

    def _leave(self, waiter: _Waiter) -> None:
        waiter.active = False
        self.waiting -= 1
        if not self.waiting:  # what is left in the heaps has left
            self._by_benefit.clear()
            self._by_bound.clear()

    def _grant(self) -> None:
        while self.free > 0 and self.waiting:
            waiter = self._next()
            if not self._fits(waiter.need):
                return  # it goes next, once running steps give the memory back
            self._leave(waiter)
            self._take(waiter.need)
            waiter.granted.set_result(None)

    def _next(self) -> _Waiter:
        """The one whose bound ended first, if any has; else the largest benefit (on a tie
        the longest-waiting)."""
        for heap in (self._by_bound, self._by_benefit):
            while not heap[0][3].active:  # granted or cancelled since it was pushed
                heapq.heappop(heap)
        if self._by_bound[0][0] <= self.clock():
            return self._by_bound[0][3]
        return self._by_benefit[0][3]
