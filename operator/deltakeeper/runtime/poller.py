"""Quiet polls, back to back, off the event loop.

A table with nothing due after its last poll is parked here between polls. A timer thread hands
the parked tables to a few poll threads as they come due, a few at a time; the event loop gets
what they found in batches, and keeps only what it must act on (the log moved, something is
due, a status must be written). The rest are parked again at once. So a quiet poll costs its
listing and a few dictionary updates, where a poll on the event loop also cost a timer, a task
wake-up and two thread hops; thread wake-ups are paid a batch at a time (issue 24: the
daemon's CPU a poll against delta-rs's).

    poller = Poller(threads=8)
    parked, handed = poller.park(table, target, interval_s, wait_s)
    await handed          # (observation, fresh), or None when the parking was cancelled

`table` is the table's Quiet: its `check` polls it in a poll thread, its `settle` shows a
quiet poll on the event loop (registry.Watched).
"""

from __future__ import annotations

import asyncio
import enum
import heapq
import itertools
import queue
import random
import threading
import time
from collections.abc import Callable
from typing import Any, Protocol

from deltakeeper.runtime.model import Observation, Target

JITTER = 0.1  # each wait is the poll interval +-10%, as the table loops' sleeps
# Tables due within this long are polled together, and what the poll threads found goes to the
# event loop this long after the first of a batch: one wake-up for many polls (at 10,000
# tables polled every 30 s, 333 a second). Each wake-up of the timer or the event loop costs
# far more than a poll's own Python (GIL hand-offs): 1,000 tables at a 3 s poll on the local
# disk cost 0.20 ms a poll at 20 ms, 0.14 at 50 ms, 0.12 at 100 ms, 0.15 at 250 ms (bigger
# bursts to the poll threads). A poll up to this much early is within JITTER of any interval
# of a second or more.
BATCH_S = 0.1
# A poll thread takes this many due tables at a time: one wake-up for them, while a burst (after
# a start, thousands due at once) still spreads over every thread.
CHUNK = 16


class Settled(enum.Enum):
    """What the event loop did with a quiet poll."""

    SHOWN = "shown"  # metrics and status updated: parked again
    PUBLISH = "publish"  # the table's loop publishes it (a status to write), then parks again
    STALE = "stale"  # the table's loop publishes it and resolves its Target again, then parks


class Quiet(Protocol):
    """A parked table, as the Poller polls it."""

    def check(self, target: Target) -> Observation:
        """Its poll, in a poll thread (TableWatcher.observe)."""
        ...

    def settle(self, target: Target, obs: Observation) -> Settled:
        """What to do with a quiet poll's observation, on the event loop."""
        ...


# What the table's loop gets back: the observation to act on and whether its target may have
# changed; None when the parking was cancelled before its next poll started.
Handed = tuple[Observation, bool] | None


class _State(enum.Enum):
    WAITING = 1  # in the timer's heap or the work queue
    POLLING = 2  # a poll thread runs its check
    CANCELLED = 3  # cancelled while waiting: dropped where it is found
    CANCEL_AFTER = 4  # cancelled while polling: handed back with that poll


class Parked:
    """One parked table: the Target it is polled with, and the future its loop awaits."""

    __slots__ = ("future", "interval_s", "state", "table", "target")

    def __init__(
        self, table: Quiet, target: Target, interval_s: float, future: asyncio.Future[Handed]
    ) -> None:
        self.table, self.target, self.interval_s = table, target, interval_s
        self.future = future
        self.state = _State.WAITING


class Poller:
    """Parked tables and the threads that poll them; built on the event loop it hands back to."""

    def __init__(self, threads: int = 8, clock: Callable[[], float] = time.monotonic) -> None:
        self.clock = clock
        self.polls = 0  # quiet polls settled here
        self._loop = asyncio.get_running_loop()
        self._lock = threading.Condition()
        self._heap: list[tuple[float, int, Parked]] = []  # (due, tie-break, parked)
        self._order = itertools.count()
        self._work: queue.SimpleQueue[list[Parked] | None] = queue.SimpleQueue()
        self._found: list[tuple[Parked, Observation | BaseException]] = []
        self._flush_queued = False
        self._closed = False
        self._threads = [threading.Thread(target=self._time, name="poll-timer", daemon=True)]
        self._threads += [
            threading.Thread(target=self._poll, name=f"poll-{i}", daemon=True)
            for i in range(threads)
        ]
        for thread in self._threads:
            thread.start()

    def park(
        self, table: Quiet, target: Target, interval_s: float, wait_s: float | None = None
    ) -> tuple[Parked, Any]:
        """Park a table, polled with `target` in `wait_s` (default: its interval with jitter)
        and then every interval, until a poll of it needs its loop; returns the parking (to
        cancel it) and the future that resolves with what its loop gets back."""
        parked = Parked(table, target, interval_s, self._loop.create_future())
        self._queue(parked, wait_s=wait_s)
        return parked, parked.future

    def cancel(self, parked: Parked) -> None:
        """Stop polling `parked` (on the event loop). Its future resolves with None now, or,
        when a poll of it is under way, with that poll when it ends: the table's loop never
        runs a poll while one still runs here."""
        with self._lock:
            if parked.state is _State.WAITING:
                parked.state = _State.CANCELLED
            elif parked.state is _State.POLLING:
                parked.state = _State.CANCEL_AFTER
                return
            else:
                return
        if not parked.future.done():
            parked.future.set_result(None)

    def close(self) -> None:
        with self._lock:
            self._closed = True
            self._lock.notify_all()
        for _ in self._threads:
            self._work.put(None)

    def _queue(self, *parked: Parked, wait_s: float | None = None) -> None:
        now = self.clock()
        with self._lock:
            first = self._heap[0][0] if self._heap else None
            for p in parked:
                p.state = _State.WAITING
                wait = p.interval_s * random.uniform(1 - JITTER, 1 + JITTER)
                due = now + (wait if wait_s is None else wait_s)
                heapq.heappush(self._heap, (due, next(self._order), p))
            if first is None or self._heap[0][0] < first:  # the timer must wait less
                self._lock.notify()

    # -- threads ------------------------------------------------------------------------------
    def _time(self) -> None:
        """Hand each parked table to the poll threads when its wait is over."""
        while True:
            with self._lock:
                while not self._closed:
                    wait = self._heap[0][0] - self.clock() if self._heap else None
                    if wait is not None and wait <= 0:
                        break
                    self._lock.wait(wait)
                if self._closed:
                    return
                # With those due a little later: one wake-up of this thread for a few polls.
                now, due = self.clock() + BATCH_S, []
                while self._heap and self._heap[0][0] <= now:
                    due.append(heapq.heappop(self._heap)[2])
            for i in range(0, len(due), CHUNK):
                self._work.put(due[i : i + CHUNK])

    def _poll(self) -> None:
        while True:
            chunk = self._work.get()
            if chunk is None:
                return
            found: list[tuple[Parked, Observation | BaseException]] = []
            for parked in chunk:
                with self._lock:
                    if parked.state is not _State.WAITING:
                        continue  # cancelled meanwhile
                    parked.state = _State.POLLING
                try:
                    found.append((parked, parked.table.check(parked.target)))
                except Exception as e:  # a bug: the table's loop logs it, as its own polls'
                    found.append((parked, e))
            if not found:
                continue
            with self._lock:
                self._found += found
                flush = not self._flush_queued
                self._flush_queued = True
            if flush:
                try:
                    self._loop.call_soon_threadsafe(self._loop.call_later, BATCH_S, self._flush)
                except RuntimeError:  # the event loop is closed: nobody waits any more
                    return

    # -- the event loop -----------------------------------------------------------------------
    def _flush(self) -> None:
        with self._lock:
            found, self._found = self._found, []
            self._flush_queued = False
        shown = [parked for parked, obs in found if self._settle(parked, obs)]
        if shown:
            self.polls += len(shown)
            self._queue(*shown)

    def _settle(self, parked: Parked, obs: Observation | BaseException) -> bool:
        """True when the event loop showed the poll: `parked` is to be parked again."""
        if parked.future.done():  # its loop was cancelled
            return False
        if isinstance(obs, BaseException):
            parked.future.set_exception(obs)
            return False
        settled = Settled.PUBLISH
        # Only this loop moves a polled table to CANCEL_AFTER, and its poll thread is done with
        # it: no lock needed to read it.
        if parked.state is not _State.CANCEL_AFTER and obs.quiet and not obs.due:
            try:
                settled = parked.table.settle(parked.target, obs)
            except Exception as e:  # a bug: the table's loop logs it, and the batch goes on
                parked.future.set_exception(e)
                return False
            if settled is Settled.SHOWN:
                return True
        parked.future.set_result((obs, settled is not Settled.STALE))
        return False
