"""The watch loops of many tables on one asyncio event loop, shared by the operator and
standalone mode.

Each table gets its own loop: observe (off the event loop, in a thread), publish, run what is
due under a global limit on concurrent maintenance, publish again, then sleep its poll interval
with jitter so thousands of tables do not poll in step. Publishing (metrics, then a status
subresource or a file) is the caller's `publish`: the registry's.
"""

from __future__ import annotations

import asyncio
import contextvars
import dataclasses
import functools
import logging
import random
import threading
import time
from collections.abc import Awaitable, Callable
from concurrent.futures import ThreadPoolExecutor
from typing import Any, TypeVar

from deltakeeper.delta.storage import is_local
from deltakeeper.maintenance import memory
from deltakeeper.maintenance.operations import Operation
from deltakeeper.maintenance.operations.registry import estimate
from deltakeeper.maintenance.policy import MAX_CONCURRENT, POLL_INTERVAL_MS
from deltakeeper.resources.status_fields import StatusField as F
from deltakeeper.runtime import health
from deltakeeper.runtime.events import Events, TableEvents, Trigger
from deltakeeper.runtime.heap import Heap
from deltakeeper.runtime.model import Observation, Target
from deltakeeper.runtime.poller import Handed, Parked, Poller, Quiet
from deltakeeper.runtime.slots import Slots
from deltakeeper.runtime.watcher import TableWatcher

log = logging.getLogger("deltakeeper.fleet")
T = TypeVar("T")

Publish = Callable[[Target, Observation], Awaitable[None]]
# The table's Target as of now: its spec, policy and credentials may change between polls.
Current = Callable[[], Awaitable[Target]]
# Sleeps up to the given seconds; True when the loop must stop.
Sleep = Callable[[float], Awaitable[bool]]
# Parks a table (target, poll interval, seconds to its next poll) until a poll of it needs its
# loop.
Park = Callable[[Target, float, float], Awaitable[Handed]]
JITTER = 0.1  # each sleep is the poll interval +-10%
# A start spreads first polls over 10% of the interval, at most this: FIRST_POLLS already
# bounds how many run at once, and a table polled hourly (events on) must not stay unseen for
# minutes after a restart. Later sleeps' jitter takes the tables out of step.
START_SPREAD_S = 5.0
# How long a start waits for its loops to resolve their tables before events are taken.
RESOLVE_WAIT_S = 30.0
DEFAULT_POLL_S = POLL_INTERVAL_MS / 1000  # until a Target says otherwise
# A due table waits at most this many of its poll intervals before it goes first, whatever
# the benefit of the others (the one whose bound ended first among those past it).
STARVATION_INTERVALS = 4
# First polls at once on the local disk. After a start every table is due; fewer first polls
# at once leave the maintenance threads the CPU to fix the sick tables they found first
# (benchmarks/scheduling: 8 at once 0.32x first-come-first-served, 4 0.18x, 2 0.16x). On an
# object store a poll waits on requests, not the CPU: as many run as there are observers.
FIRST_POLLS = 4


def now_ms() -> int:
    return int(time.time() * 1000)


def _task_name() -> str:
    task = asyncio.current_task()
    return task.get_name() if task is not None else "?"  # a Loop names it namespace/name


class Fleet:
    def __init__(
        self,
        max_concurrent: int = MAX_CONCURRENT,
        observers: int = 8,
        clock: Callable[[], int] = now_ms,
        memory_budget: int | None = None,
        park_quiet: bool = True,
        events: Events | None = None,
    ) -> None:
        self.clock = clock
        # Tables with spec.events, and where events and polls are counted (runtime/events.py).
        self.events = events if events is not None else Events()
        self.max_concurrent = max_concurrent
        self.memory_budget = memory_budget  # bytes for maintenance steps; None: no budget
        self._slots: Slots | None = None
        self._queued: set[asyncio.Task[Any]] = set()  # table loops waiting for a slot
        # Polls and maintenance run in pools of their own: a table granted a maintenance slot
        # starts at once, not behind the polls of thousands of tables queued after a restart.
        self._pool = ThreadPoolExecutor(observers, thread_name_prefix="table")
        self.observers = observers
        self.park_quiet = park_quiet  # quiet tables polled by the Poller (False: by their loops)
        self._poller: Poller | None = None
        # First polls (every table's, after a start) go biggest log first, a few at once.
        self._firsts = Slots(FIRST_POLLS)
        self._remote_firsts = Slots(observers)
        self._maintenance = ThreadPoolExecutor(max_concurrent, thread_name_prefix="maintain")
        self.running = 0  # maintenance operations in flight (tests and the benchmark read it)
        self._polled = 0  # polls through the table loops (the Poller counts its own)
        self._resolving = 0  # started loops still resolving their first Target
        self.last_tick = time.monotonic()
        # Set when the daemon stops: running maintenance ends at its next safe point.
        self.stopping = threading.Event()

    async def _off_loop(self, fn: Callable[..., T], *args: Any) -> T:
        return await asyncio.get_running_loop().run_in_executor(self._pool, fn, *args)

    async def _maintaining(self, fn: Callable[..., T], *args: Any) -> T:
        return await asyncio.get_running_loop().run_in_executor(self._maintenance, fn, *args)

    async def watch(
        self,
        current: Current,
        watcher: TableWatcher,
        sleep: Sleep,
        publish: Publish,
        park: Park | None = None,
        owner: Loop | None = None,
    ) -> None:
        """Poll the table `current()` describes until `sleep` says stop; each observation
        goes to `publish`. With `park`, a table with nothing due is polled by the Poller until
        a poll of it needs this loop. `owner`: the Loop, which storage events wake when
        the Target has spec.events (then polled every resyncInterval while they are live)."""
        first = True
        try:
            interval = await self._resolve_first(current, owner)
            if await sleep(random.uniform(0, min(JITTER * interval, START_SPREAD_S))):
                return
            while True:
                wait = _wait(interval)  # unless the poll says otherwise
                try:
                    target = await current()
                    ev = self._follow(owner, target)
                    trigger = ev.begin() if ev is not None else Trigger.INTERVAL
                    self.events.counts.poll(trigger)
                    obs = await self.poll_once(target, watcher, publish, first, ev)
                    interval = _interval(target, ev)
                    wait = _wait(interval, first)
                    first = False
                    while park is not None and not obs.due:
                        if ev is not None:
                            ev.park()
                        handed = await park(target, interval, wait)
                        if handed is None:  # woken or stopped: `sleep` says which
                            break
                        obs = await self.act(target, watcher, publish, handed[0], ev)
                        if not (handed[1] and handed[0].quiet):  # its Target may have changed
                            target = await current()
                            ev = self._follow(owner, target)
                        interval = _interval(target, ev)
                        wait = _wait(interval)
                except asyncio.CancelledError:
                    raise
                except Exception:  # a bug must not end the table's loop; logged and retried
                    log.exception("%s: poll failed", _task_name())
                if await sleep(wait):
                    return
        finally:
            if owner is not None and owner.events is not None:
                owner.events.close()
                owner.events = None

    async def _resolve_first(self, current: Current, owner: Loop | None) -> float:
        """A starting loop's poll interval. Its table is indexed for events now, not at its
        first poll: an event during the start spread (a store sending again what it queued
        while the daemon was down) wakes it at once."""
        self._resolving += 1
        try:
            target = await current()
            self._follow(owner, target)
            return target.poll_interval_s
        except Exception:  # the first poll logs it
            return DEFAULT_POLL_S
        finally:
            self._resolving -= 1

    async def resolved(self, timeout_s: float = RESOLVE_WAIT_S) -> bool:
        """Wait until every loop started so far knows its table (and, with events, is
        indexed), at most `timeout_s`; whether they all do."""
        await asyncio.sleep(0)  # loops just started run up to their first await: counted
        deadline = time.monotonic() + timeout_s
        while self._resolving and time.monotonic() < deadline:
            await asyncio.sleep(0.02)
        return not self._resolving

    def _follow(self, owner: Loop | None, target: Target) -> TableEvents | None:
        """The table's events, made or dropped as its Target has spec.events or not."""
        if owner is None:
            return None
        ev = owner.events
        if target.events_source is None:
            if ev is not None:
                ev.close()
                owner.events = None
            return None
        if ev is None:
            ev = owner.events = self.events.table(owner.poke)
        ev.follow(target)
        return ev

    def count_poll(self, ev: TableEvents | None) -> None:
        """A poll of a parked table (the Poller's), by its trigger."""
        self.events.counts.poll(ev.trigger if ev is not None else Trigger.INTERVAL)

    async def poll_once(
        self,
        target: Target,
        watcher: TableWatcher,
        publish: Publish,
        first: bool = False,
        ev: TableEvents | None = None,
    ) -> Observation:
        obs = await (self._first_observe if first else self._observe)(target, watcher)
        return await self.act(target, watcher, publish, obs, ev)

    async def act(
        self,
        target: Target,
        watcher: TableWatcher,
        publish: Publish,
        obs: Observation,
        ev: TableEvents | None = None,
    ) -> Observation:
        """Publish a poll's observation, then run what it found due and publish again. `ev`:
        the table's events, which count the poll and add their status."""
        self._polled += 1
        if ev is not None:
            obs = ev.polled(obs)
        # Published before any maintenance: a table waiting for a maintenance slot (after a
        # restart, thousands may be due at once) still shows its new commits at once.
        await publish(target, obs)
        if not obs.due:
            return obs
        done = await self._maintain(target, watcher, obs)
        if ev is not None:
            done = ev.annotate(done)
        await publish(target, done)
        return done

    @property
    def polls(self) -> int:
        """Polls so far, the Poller's quiet ones included (tests and benchmarks read it)."""
        return self._polled + (self._poller.polls if self._poller is not None else 0)

    def poller(self) -> Poller:
        """The Poller of quiet tables, started on the running event loop at its first use."""
        if self._poller is None:
            self._poller = Poller(self.observers)
        return self._poller

    async def _observe(self, target: Target, watcher: TableWatcher) -> Observation:
        return await self._off_loop(watcher.observe, target, self.clock())

    async def _first_observe(self, target: Target, watcher: TableWatcher) -> Observation:
        """A table's first poll, in its turn: after a start thousands are queued, and those
        with the longest logs to read (the likeliest to be sick) go first."""
        gain = health.first_poll_benefit(await self._off_loop(watcher.peek, target))
        firsts = self._firsts if is_local(target.uri) else self._remote_firsts
        await firsts.acquire(gain, STARVATION_INTERVALS * target.poll_interval_s)
        try:
            return await self._observe(target, watcher)
        finally:
            firsts.release()

    async def _maintain(
        self, target: Target, watcher: TableWatcher, obs: Observation
    ) -> Observation:
        """Run `obs.due` in a slot, given benefit first (slots.py). While the table waits for
        a slot, its loop's stop cancels the wait (a deleted table, or thousands queued at
        shutdown, run nothing more); once started, the maintenance thread runs to its end and
        keeps its slot until then, even if this poll is cancelled. With a memory budget the slot
        also holds the steps' estimate; a step estimated above the whole budget is refused."""
        if self._slots is None:
            self._slots = Slots(self.max_concurrent, memory=self.memory_budget)
        slots, task = self._slots, asyncio.current_task()
        assert task is not None  # a coroutine always runs in a task
        needs = _needs(obs)
        refused = self._too_big(needs)
        if refused:
            obs = dataclasses.replace(obs, due=tuple(op for op in obs.due if op not in refused))
        run = functools.partial(watcher.maintain, refused=refused, stop=self.stopping.is_set)
        if refused and not obs.due:  # nothing left to run: no slot needed to say so
            return await self._off_loop(run, target, obs, self.clock())
        need = memory.largest(n for op, n in needs.items() if op not in refused)
        files = obs.counts.get(F.FILES) or 0
        gain = health.benefit(obs.health, obs.due, files)
        self._queued.add(task)
        try:
            await slots.acquire(gain, STARVATION_INTERVALS * target.poll_interval_s, need)
        finally:
            self._queued.discard(task)
        self.running += 1
        maintain = self._maintaining(run, target, obs, self.clock())
        work = asyncio.ensure_future(maintain)
        work.add_done_callback(lambda _: self._release(slots, need))
        return await asyncio.shield(work)

    def _too_big(self, needs: dict[Operation, int]) -> dict[Operation, str]:
        """The steps that would not fit the whole budget, each with why."""
        budget = self.memory_budget
        if budget is None:
            return {}
        return {op: memory.over_budget(op, n, budget) for op, n in needs.items() if n > budget}

    def _release(self, slots: Slots, need: int) -> None:
        self.running -= 1
        slots.release(need)

    def give_up(self, task: asyncio.Task[Any]) -> None:
        """Cancel `task` if it is waiting for a maintenance slot (and only then)."""
        if task in self._queued:
            task.cancel()

    async def heartbeat(self, every_s: float = 5.0, heap: Heap | None = None) -> None:
        """Proves the event loop is responsive, for /healthz; tends `heap` (a daemon's: a
        long-running process's collector) on the way."""
        while True:
            self.last_tick = time.monotonic()
            if heap is not None:
                heap.tend()
            await asyncio.sleep(every_s)

    def healthy(self, stall_s: float = 60.0) -> bool:
        return time.monotonic() - self.last_tick < stall_s

    def begin_stop(self) -> None:
        """Running maintenance ends at its next safe point (a vacuum after its current batch
        of deletes), so a stop takes seconds, within a pod's grace period, however big the
        work; what is left runs after the restart. A step that writes one file finishes."""
        self.stopping.set()

    def close(self) -> None:
        """Wait for what is running to end (begin_stop first, if not called yet)."""
        self.begin_stop()
        if self._poller is not None:
            self._poller.close()
        self._pool.shutdown(wait=True, cancel_futures=True)
        self._maintenance.shutdown(wait=True, cancel_futures=True)


def _wait(interval_s: float, first: bool = False) -> float:
    """Seconds to a table's next poll. After its first, a draw from the whole interval: the
    tables of a start, first polled within minutes, then come due spread over the interval,
    not an hour later within the same minutes (at 50,000 tables, started in 24 minutes, with
    a resync of an hour: 35 polls a second where 14 would do); after that, the interval with
    jitter."""
    if first:
        return interval_s * random.random()
    return interval_s * random.uniform(1 - JITTER, 1 + JITTER)


def _interval(target: Target, ev: TableEvents | None) -> float:
    """Seconds to the table's next poll unless something wakes it."""
    return ev.interval_s(target) if ev is not None else target.poll_interval_s


def _needs(obs: Observation) -> dict[Operation, int]:
    """Each due step's memory estimate, from what the poll counted."""
    counts = obs.counts
    files, tombstones = counts.get(F.FILES) or 0, counts.get(F.TOMBSTONES) or 0
    log_files = counts.get(F.LOG_FILES) or 0
    # A checkpoint streams the newest checkpoint, unless there is none or it needs every file.
    streamed = counts.get(F.LAST_CHECKPOINT_VERSION) is not None and not obs.checkpoint_loads_all
    checkpoint = obs.checkpoint_bytes if streamed else None
    held = memory.Holding(files, tombstones, log_files, streamed, checkpoint)
    return {op: estimate(op, held) for op in obs.due}


class Loop:
    """One table's watch loop as a task, which can be stopped, or woken for an early poll."""

    def __init__(self) -> None:
        self.stopped = False
        self.task: asyncio.Task[None] | None = None
        self.fleet: Fleet | None = None
        # A future while asleep, not an asyncio.Event (with its deque, 0.7 KiB a table).
        self._waiter: asyncio.Future[None] | None = None
        self._woken = False  # poked while awake: the next sleep returns at once
        self._parked: tuple[Poller, Parked] | None = None  # while quiet polls run off the loop
        self.quiet: Quiet | None = None  # how the Poller polls and settles the table
        self.events: TableEvents | None = None  # while its Target has spec.events

    def start(
        self,
        fleet: Fleet,
        current: Current,
        watcher: TableWatcher,
        publish: Publish,
        name: str,
        after: asyncio.Task[None] | None = None,
        context: contextvars.Context | None = None,
        quiet: Quiet | None = None,
    ) -> None:
        """Run the loop; `after`, the table's previous loop, ends first (its last poll may
        still be running), so one table never has two polls at once. `context`: the context
        variables it runs with (default: a copy of the caller's). `quiet`: polls and shows a
        quiet poll without this loop (Poller), if the fleet parks quiet tables."""
        self.quiet = quiet if quiet is not None and fleet.park_quiet else None
        park = self.park if self.quiet is not None else None

        async def run() -> None:
            if after is not None:
                await asyncio.gather(after, return_exceptions=True)
            await fleet.watch(current, watcher, self.sleep, publish, park, self)

        self.fleet = fleet
        self.task = asyncio.create_task(run(), name=name, context=context)

    def stop(self) -> None:
        self.stopped = True
        if self.events is not None:  # its events are unknown tables from now on
            self.events.close()
        self._wake()
        if self.task is not None and self.fleet is not None:
            self.fleet.give_up(self.task)

    def poke(self) -> None:
        self._wake()

    async def park(self, target: Target, interval_s: float, wait_s: float) -> Handed:
        """Polls off the loop, the first in `wait_s`, until one needs it (Poller); None at
        once when woken."""
        if self._woken or self.stopped:
            return None
        assert self.fleet is not None and self.quiet is not None  # start() set them
        poller = self.fleet.poller()
        parked, handed = poller.park(self.quiet, target, interval_s, wait_s)
        self._parked = (poller, parked)
        try:
            # Shielded: cancelling this task must not cancel `handed`, which says when a poll
            # of the table under way has ended.
            return await asyncio.shield(handed)
        except asyncio.CancelledError:
            poller.cancel(parked)
            if not handed.done():  # a poll of it runs: it ends before this loop does
                await asyncio.wait([handed])
            raise
        finally:
            self._parked = None

    def _wake(self) -> None:
        if self._parked is not None:
            self._parked[0].cancel(self._parked[1])
            self._woken = True
            return
        if self._waiter is not None and not self._waiter.done():
            self._waiter.set_result(None)
        else:
            self._woken = True

    async def sleep(self, seconds: float) -> bool:
        # A timer that wakes the future: no task per sleep (10,000 tables sleep 333 times a
        # second).
        if not self._woken:
            loop = asyncio.get_running_loop()
            self._waiter = loop.create_future()
            timer = loop.call_later(seconds, self._wake)
            try:
                await self._waiter
            finally:
                timer.cancel()
                self._waiter = None
        self._woken = False
        return self.stopped
