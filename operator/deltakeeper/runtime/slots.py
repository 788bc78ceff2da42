"""The fleet's maintenance slots, given benefit first with a bound on waiting.

A table whose maintenance is due waits for one of `n` slots. When one frees, it goes to the
waiting table with the largest expected benefit (`benefit`, runtime/health.py), except that a
table that has waited `bound_s` or longer goes first, the longest-waiting first: so a sick
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
import itertools
import time
from collections.abc import Callable
from dataclasses import dataclass, field


@dataclass(order=True)
class _Waiter:
    since: float
    order: int  # arrival order, for equal times
    benefit: float = field(compare=False)
    bound_s: float = field(compare=False)
    granted: asyncio.Future[None] = field(compare=False)
    need: int = field(compare=False, default=0)


class Slots:
    def __init__(
        self, n: int, clock: Callable[[], float] = time.monotonic, memory: int | None = None
    ) -> None:
        self.free = n
        self.memory = memory  # the budget left, in bytes; None: no budget
        self.clock = clock
        self._waiting: list[_Waiter] = []
        self._arrivals = itertools.count()

    @property
    def waiting(self) -> int:
        return len(self._waiting)

    async def acquire(self, benefit: float, bound_s: float, need: int = 0) -> None:
        """Wait for a slot (and `need` bytes of the budget, which must not exceed all of it).
        Cancelled while waiting: nothing is taken."""
        if self.free > 0 and not self._waiting and self._fits(need):
            self._take(need)
            return
        granted = asyncio.get_running_loop().create_future()
        waiter = _Waiter(self.clock(), next(self._arrivals), benefit, bound_s, granted, need)
        self._waiting.append(waiter)
        self._grant()
        try:
            await granted
        except asyncio.CancelledError:
            if waiter in self._waiting:
                self._waiting.remove(waiter)
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

    def _grant(self) -> None:
        while self.free > 0 and self._waiting:
            waiter = self._next()
            if not self._fits(waiter.need):
                return  # it goes next, once running steps give the memory back
            self._waiting.remove(waiter)
            self._take(waiter.need)
            waiter.granted.set_result(None)

    def _next(self) -> _Waiter:
        """The longest-waiting of those past their bound, else the largest benefit (on a tie
        the longest-waiting)."""
        now = self.clock()
        overdue = [w for w in self._waiting if now - w.since >= w.bound_s]
        if overdue:
            return min(overdue)
        return min(self._waiting, key=lambda w: (-w.benefit, w.since, w.order))
