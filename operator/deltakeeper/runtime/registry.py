"""The tables a daemon watches: one entry per table with its loop and cached Target, which
other tables name the same storage, and the one way a poll is published. A table's loop polls
and publishes it through its `Watched`: `check` polls it (in a poll thread, when the Poller
has it parked), `settle` shows a quiet poll without a status write, `publish` shows any other:
metrics recorded and history rows added (`_count`), then status and events to the front-end's
Sink, and the table's stall deadline moved on (`_watch`), each in one place.

Shared by the operator and standalone mode; only their sources (watch events, a folder) and
sinks (the status subresource and Kubernetes Events, a status file) differ.

A quiet table's status is written about once an hour (status.REFRESH_S; less often in a big
operator fleet, status.refresh_ms), so `lastPoll` alone cannot show a table whose polls stopped.
`watch_stalls` does: a table with no poll published for STALL_INTERVALS of its poll intervals
(STALL_MIN_S at least) gets Degraded=True, reason PollsStalled (status, metric and a Warning
event), until its next poll. One heap of deadlines, not a scan of every table each tick.
"""

from __future__ import annotations

import asyncio
import contextvars
import dataclasses
import heapq
import logging
import os
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass
from typing import Generic, Protocol, TypeVar
from urllib.parse import unquote, urlparse

from deltakeeper.maintenance.operations import Operation
from deltakeeper.maintenance.operations import vacuum as vacuum_op
from deltakeeper.maintenance.operations.outcome import Result
from deltakeeper.maintenance.operations.registry import DELETES, REGISTRY, WRITERS
from deltakeeper.maintenance.policy import effective
from deltakeeper.resources.conditions import EventType, Reason
from deltakeeper.resources.manifests import TableResource
from deltakeeper.runtime import conditions
from deltakeeper.runtime.events import TableEvents
from deltakeeper.runtime.fleet import Fleet, Loop, now_ms
from deltakeeper.runtime.heap import HEAP
from deltakeeper.runtime.history import History
from deltakeeper.runtime.metrics import Metrics
from deltakeeper.runtime.model import Event, Observation, Target
from deltakeeper.runtime.poller import Settled
from deltakeeper.runtime.targets import unchanged
from deltakeeper.runtime.watcher import TableWatcher

Key = tuple[str, str]
# A table whose last poll was published this many poll intervals ago has stalled, and never
# sooner than STALL_MIN_S: with an interval of a few seconds, a poll with maintenance may well
# take two of them on a busy machine without being stuck.
STALL_INTERVALS = 2
STALL_MIN_S = 30
STALL_CHECK_S = 1.0


def same_table(uri: str) -> str:
    """A URI in one spelling per table: no trailing '/'; a local path (plain, file:/ or
    file:///, percent-decoded as open_storage reads it) as its real path, with '//', '.',
    '..' and symbolic links resolved. On an object store `a//b` is another key than `a/b`."""
    if not uri:
        return uri
    if "://" not in uri and not uri.lower().startswith("file:"):
        return os.path.realpath(uri)
    parsed = urlparse(uri)
    if parsed.scheme.lower() == "file":
        return os.path.realpath(unquote(parsed.path) or "/")
    return uri.rstrip("/") or uri


@dataclass(slots=True)
class Shown:
    """The last observation a table's loop published, and when."""

    target: Target
    obs: Observation
    at_ms: int
    stalled: bool = False  # shown as stalled since
    interval_s: float = 0.0  # the wait to its next poll then (its resyncInterval with events)

    @property
    def stalls_at_ms(self) -> int:
        interval = self.interval_s or self.target.poll_interval_s
        stall_s = max(STALL_INTERVALS * interval, STALL_MIN_S)
        return self.at_ms + int(stall_s * 1000)


@dataclass
class Entry:
    """A watched table: its resource as last seen, its loop, and the Target resolved from it."""

    resource: TableResource
    loop: Loop | None = None
    cached: tuple[Sequence[object], Target] | None = None
    shown: Shown | None = None  # the last poll published, for the stall watch
    queued: bool = False  # it has a deadline in the registry's heap (one at most)

    def target(self, inputs: Sequence[object], make: Callable[[], Target]) -> Target:
        """The cached Target while `inputs` are the same objects, else `make()`'s; resolving
        only on change keeps a quiet table's poll cheap (and the watcher on its quiet path)."""
        if self.cached is None or not unchanged(self.cached[0], inputs):
            self.cached = (inputs, make())
        return self.cached[1]


E = TypeVar("E", bound=Entry)
E_in = TypeVar("E_in", bound=Entry, contravariant=True)


class Sink(Protocol[E_in]):
    """Where a front-end shows a table's status and events."""

    async def write_status(self, entry: E_in, target: Target, obs: Observation) -> bool:
        """Show the status; False when the table turns out to be gone."""
        ...

    def post_event(self, entry: E_in, event: Event) -> None: ...

    def forget(self, key: Key) -> None:
        """Drop what the sink keeps for a table no longer watched here."""
        ...

    def quiet(self, entry: E_in, target: Target, obs: Observation) -> bool:
        """Show a quiet poll (nothing but `lastPoll` changed) without a write, on the event
        loop; False when its status is to be written now (a refresh): the loop publishes it."""
        ...

    def fresh(self, key: Key, entry: E_in, target: Target) -> bool:
        """Whether `target` is still what the table's resource, policies and Secrets resolve
        to, as far as can be told without waiting (False: the loop resolves it again)."""
        ...


# Resolves an entry's Target as of now: its spec, policy and credentials may have changed.
Resolve = Callable[[Key, E], Awaitable[Target]]


class Registry(Generic[E]):
    def __init__(
        self,
        metrics: Metrics,
        sink: Sink[E],
        resolve: Resolve[E],
        log: logging.Logger,
        clock: Callable[[], int] = now_ms,
    ):
        self.metrics = metrics
        self.clock = clock
        self.sink = sink
        self.resolve = resolve
        self.log = log  # the front-end's, so its events read as before
        self.entries: dict[Key, E] = {}
        self.publishing = True  # False: polls still running are not shown (operator paused)
        self.history: History | None = None  # where each operation is also recorded
        self._uris: dict[Key, str] = {}  # each entry's URI as same_table() spells it
        # The keys naming each URI: a tuple, one key almost always (a set is 216 bytes a table).
        self._by_uri: dict[str, tuple[Key, ...]] = {}
        self._duplicates: dict[Key, tuple[str, ...]] = {}
        self._deadlines: list[tuple[int, Key]] = []  # (stalls at ms, key), a heap
        self._in_flight: set[Key] = set()  # tables whose publish is under way
        self._stall_writes: dict[Key, asyncio.Event] = {}  # set once the write is done

    def add(self, key: Key, entry: E) -> None:
        """Know a table (its loop is started separately)."""
        self.entries[key] = entry
        self._index(key)

    def change(self, key: Key, resource: TableResource) -> None:
        """A table's new resource; its loop resolves it at the next poll."""
        self.entries[key].resource = resource
        self._index(key)

    def duplicates(self, key: Key) -> tuple[str, ...]:
        """The other tables ("ns/name") that name the same URI as `key`. The same tuple until
        that changes, so a Target cached on it holds while nothing did."""
        return self._duplicates.get(key, ())

    def _index(self, key: Key) -> None:
        self._unindex(key)
        uri = same_table(str(self.entries[key].resource.spec.get("uri") or ""))
        if uri:
            self._uris[key] = uri
            self._by_uri[uri] = (*self._by_uri.get(uri, ()), key)
            self._regroup(uri)

    def _unindex(self, key: Key) -> None:
        uri = self._uris.pop(key, None)
        if uri is None:
            return
        self._by_uri[uri] = tuple(k for k in self._by_uri[uri] if k != key)
        self._duplicates.pop(key, None)
        self._regroup(uri)

    def _regroup(self, uri: str) -> None:
        group = sorted(self._by_uri.get(uri, ()))
        if not group:
            self._by_uri.pop(uri, None)
        for key in group:
            others = tuple(f"{ns}/{name}" for ns, name in group if (ns, name) != key)
            if not others:
                self._duplicates.pop(key, None)
            elif others != self._duplicates.get(key):
                self._duplicates[key] = others

    def start(
        self,
        key: Key,
        fleet: Fleet,
        watcher: TableWatcher,
        context: contextvars.Context | None = None,
    ) -> None:
        """(Re)start a table's loop; a previous one ends first, so no two polls overlap."""
        entry = self.entries[key]
        previous = entry.loop.task if entry.loop is not None else None
        entry.loop = Loop()
        table = Watched(self, key, entry, watcher, fleet)
        name = f"{key[0]}/{key[1]}"
        entry.loop.start(
            fleet, table.current, watcher, table.publish, name, previous, context, table
        )

    def stop_loop(self, key: Key) -> None:
        """Stop the table's loop and take its metrics down; the entry stays."""
        loop = self.entries[key].loop
        if loop is not None:
            loop.stop()
        self.metrics.forget(*key)

    def remove(self, key: Key) -> E | None:
        self._unindex(key)
        entry = self.entries.pop(key, None)
        if entry is not None:
            HEAP.forgotten()
            if entry.loop is not None:
                entry.loop.stop()
        self.metrics.forget(*key)
        self.sink.forget(key)
        if self.history is not None:
            self.history.forget(key)
        return entry

    async def stop(self) -> None:
        for entry in self.entries.values():
            if entry.loop is not None:
                entry.loop.stop()
        tasks = [e.loop.task for e in self.entries.values() if e.loop and e.loop.task]
        await asyncio.gather(*tasks, return_exceptions=True)

    async def publish(self, target: Target, obs: Observation) -> None:
        """Publish a poll made without a loop (`run --once`), as a loop's Watched does."""
        await Watched(self, target.key, None).publish(target, obs)

    def _count(self, target: Target, obs: Observation, shown: Observation | None) -> None:
        """A shown poll's metrics (`shown`: the poll published before, when `obs` is a quiet
        poll after it) and its rows in the operation history."""
        record(self.metrics, target, obs, shown)
        if self.history is not None:
            self.history.add(target, obs)

    def _watch(self, entry: E, shown: Shown) -> None:
        """Its table's stall deadline moves with the poll just shown."""
        if not entry.queued:
            heapq.heappush(self._deadlines, (shown.stalls_at_ms, shown.target.key))
            entry.queued = True

    def _post(self, entry: E, key: Key, events: Sequence[Event]) -> None:
        for event in events:
            self.sink.post_event(entry, event)
            level = logging.WARNING if event.type is EventType.WARNING else logging.INFO
            self.log.log(level, "%s/%s: %s: %s", *key, event.reason, event.message)

    async def watch_stalls(self, every_s: float = STALL_CHECK_S) -> None:
        """Mark the tables whose polls stopped, until cancelled."""
        while True:
            await asyncio.sleep(every_s)
            await self.check_stalls()

    async def check_stalls(self) -> list[Key]:
        """Show every table whose last poll is older than its stall deadline as stalled;
        returns them. A table polled since its deadline was queued is queued again."""
        now, found = self.clock(), []
        while self._deadlines and self._deadlines[0][0] <= now:
            _, key = heapq.heappop(self._deadlines)
            entry = self.entries.get(key)
            if entry is None:
                continue
            entry.queued = False
            shown = entry.shown
            if shown is None or shown.stalled or not self.publishing:
                continue  # its next publish queues it again
            if shown.stalls_at_ms > now or key in self._in_flight:
                later = max(shown.stalls_at_ms, now + 1)
                heapq.heappush(self._deadlines, (later, key))
                entry.queued = True
                continue
            shown.stalled = True
            found.append(key)
            await self._show_stalled(entry, shown, now)
        return found

    async def _show_stalled(self, entry: E, shown: Shown, now: int) -> None:
        interval = shown.interval_s or shown.target.poll_interval_s
        marked = conditions.stalled(shown.obs.conditions, now - shown.at_ms, interval)
        obs = dataclasses.replace(shown.obs, conditions=marked, events=[], outcomes=[])
        key = shown.target.key
        self.metrics.conditions(*key, {c.type: c.status for c in marked})
        done = self._stall_writes[key] = asyncio.Event()
        try:
            await self.sink.write_status(entry, shown.target, obs)
        finally:
            done.set()
            del self._stall_writes[key]
        stalled = next(c for c in marked if c.reason is Reason.POLLS_STALLED)
        self._post(entry, key, [Event(EventType.WARNING, Reason.POLLS_STALLED, stalled.message)])


class Watched(Generic[E]):
    """One table as its loop polls it (the Poller's Quiet): `current` resolves its Target,
    `check` polls it, `settle` shows a quiet poll, `publish` shows any other."""

    __slots__ = ("entry", "fleet", "key", "registry", "watcher")

    def __init__(
        self,
        registry: Registry[E],
        key: Key,
        entry: E | None,  # None: a poll made without a loop, published only
        watcher: TableWatcher | None = None,
        fleet: Fleet | None = None,  # its clock stamps the polls `check` makes
    ) -> None:
        self.registry, self.key, self.entry = registry, key, entry
        self.watcher, self.fleet = watcher, fleet

    async def current(self) -> Target:
        """The table's Target as of now: its spec, policy and credentials may have changed."""
        assert self.entry is not None
        return await self.registry.resolve(self.key, self.entry)

    def check(self, target: Target) -> Observation:
        """The table's poll, in a poll thread (the Poller's)."""
        assert self.watcher is not None and self.fleet is not None
        self.fleet.count_poll(self._events())
        return self.watcher.observe(target, self.fleet.clock())

    def _events(self) -> TableEvents | None:
        loop = self.entry.loop if self.entry is not None else None
        return loop.events if loop is not None else None

    def _interval_s(self, target: Target) -> float:
        ev = self._events()
        return ev.interval_s(target) if ev is not None else target.poll_interval_s

    def settle(self, target: Target, obs: Observation) -> Settled:
        """A quiet poll, on the event loop: shown here (metrics, history, stall deadline, the
        Sink's `quiet`) when nothing else changed; else its loop publishes it."""
        r, key, entry = self.registry, self.key, self.entry
        if entry is None or r.entries.get(key) is not entry or not r.publishing:
            return Settled.PUBLISH  # removed or paused meanwhile: publish() says so
        shown = entry.shown
        if shown is None or shown.stalled or not _same_show(shown.obs, obs):
            return Settled.PUBLISH
        ev = self._events()
        if ev.shown_differs(shown.obs) if ev is not None else shown.obs.storage_events is not None:
            return Settled.PUBLISH  # its events' status or condition changed
        if not r.sink.fresh(key, entry, target):
            return Settled.STALE
        if not r.sink.quiet(entry, target, obs):
            return Settled.PUBLISH
        r._count(target, obs, shown.obs)
        shown.at_ms = r.clock()
        shown.interval_s = self._interval_s(target)
        r._watch(entry, shown)
        return Settled.SHOWN

    async def publish(self, target: Target, obs: Observation) -> None:
        """Metrics and history, then status and events to the Sink (each event also logged),
        then the stall deadline."""
        r, key = self.registry, self.key
        entry = r.entries.get(key)
        if entry is None or not r.publishing:
            r.metrics.forget(*key)  # removed, or paused, while its poll ran
            return
        r._count(target, obs, None)
        stall_write = r._stall_writes.get(key)
        if stall_write is not None:
            await stall_write.wait()  # then ours, the newer, lands last
        r._in_flight.add(key)
        try:
            if not await r.sink.write_status(entry, target, obs):
                r.remove(key)  # deleted while nobody watched (no event came)
                return
        finally:
            r._in_flight.discard(key)
        if entry.shown is not None and entry.shown.stalled:
            r.log.info("%s/%s: polls resumed", *key)
        entry.shown = Shown(target, obs, r.clock(), interval_s=self._interval_s(target))
        r._watch(entry, entry.shown)
        r._post(entry, key, obs.events)


def _same_show(shown: Observation, obs: Observation) -> bool:
    """Whether a quiet poll shows what the last one published did (its health, recomputed
    when time alone changes it, and its jobs)."""
    return obs.health is shown.health and obs.compaction_jobs == shown.compaction_jobs


def record(
    metrics: Metrics, target: Target, obs: Observation, shown: Observation | None = None
) -> None:
    """What one poll adds to the table's metrics. `shown`: the poll its loop last published
    (recorded in full), when `obs` is a quiet poll after it; what `obs` shares with it (the
    same objects: a quiet poll reuses them) is in the metrics already."""
    ns, name = target.key
    if shown is None or obs.counts is not shown.counts:
        metrics.table(ns, name, obs.counts)
    if shown is None or obs.conditions is not shown.conditions:
        metrics.conditions(ns, name, {c.type: c.status for c in obs.conditions})
    if shown is None or obs.checkpoint_written_ms != shown.checkpoint_written_ms:
        metrics.checkpoint_written(ns, name, obs.checkpoint_written_ms)
    metrics.requests(ns, name, obs.requests)
    if shown is None or obs.compaction_jobs != shown.compaction_jobs:
        metrics.compaction_jobs(ns, name, obs.compaction_jobs)
    if shown is None or obs.health is not shown.health:
        metrics.health(ns, name, obs.health)
    if shown is None:
        metrics.asks(ns, name, counted_operations(target))
    for o in obs.outcomes:
        if o.result is Result.SKIPPED_AFTER_FAILURE or o.result is Result.STARTED:
            continue  # a started job counts when it ends
        metrics.maintenance(ns, name, o.operation, o.result, o.seconds)
        run = vacuum_op.run_of(o)
        if run is not None:
            metrics.vacuum(ns, name, run.mode, o.result, (run.candidates, run.listed), run.requests)
        kind = DELETES.get(o.operation)
        if kind is not None and o.result is Result.DONE:
            metrics.deleted(ns, name, kind, o.deleted_files, o.deleted_bytes)
        if o.operation in WRITERS and o.result is Result.DONE:
            metrics.written(ns, name, o.operation, o.written_files)
        if o.result is Result.DONE:
            metrics.counted(ns, name, o)


def counted_operations(target: Target) -> frozenset[Operation]:
    """The operations with counters of their own that the table's settings ask for (the
    table's properties aside: none of those depends on them)."""
    policy = effective({}, **target.settings)
    return frozenset(op for op, spec in REGISTRY.items() if spec.counters and spec.asked(policy))
