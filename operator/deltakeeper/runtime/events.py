"""Storage events: hints that a table's log moved, so that its next poll happens now.

A table with `spec.events` is indexed here by its bucket and path (as storage opens its URI:
the path URL-decoded). An event names an object key; the table whose path is the longest
prefix of that key, at a `/`, is the table it belongs to, and a key under that table's
`_delta_log/` wakes its loop (Loop.poke): the loop's next poll starts now, the same listing
from the last version as any poll, through the same pool. A burst coalesces: wakes while a
poll is pending or running make one more poll, not one each.

Nothing else in an event is believed. A forged, duplicated or reordered event costs one poll
at most; a lost one waits for the resync poll. That is why a table whose source is up is still
polled, every `resyncInterval` (jittered as every poll) instead of every `pollInterval`. A
resync poll that finds new commits no event announced counts a miss; MISSES_TO_DEGRADE misses
in a row, or the source down, and the table is polled at its pollInterval again, with
`EventsDegraded=True`, until an event for it arrives.

    events = Events(metrics)                 # one per daemon (Fleet.events)
    table = events.table(loop.poke)          # one per table with spec.events
    table.follow(target)                     # (re)indexed by its URI and source
    events.deliver("webhook", "lake", "sales/_delta_log/00000000000000000042.json")

Under a DeltaLake's prefix (`events.lake(source, uri, found)`, for a lake whose tableTemplate
has events), an event for the log of no watched table tells the lake: a commit or checkpoint
in `<prefix>/<path>/_delta_log/` calls `found(path)`, and the front-end lists that log once
(the event is not believed either) and watches the table as a scan would have found it.
"""

from __future__ import annotations

import dataclasses
import enum
import logging
import time
from collections.abc import Callable, Iterator, Mapping
from typing import Any, Protocol
from urllib.parse import unquote, unquote_plus, urlparse

from deltakeeper.delta import paths as log_paths
from deltakeeper.delta.discover import ROOT
from deltakeeper.maintenance.policy import EVENT_SOURCES
from deltakeeper.resources.conditions import ConditionStatus, ConditionType, Reason
from deltakeeper.resources.status_fields import StatusField as F
from deltakeeper.runtime import status
from deltakeeper.runtime.model import Condition, Observation, Target
from deltakeeper.units import rfc3339

log = logging.getLogger("deltakeeper.events")

WEBHOOK = "webhook"
# The sources every daemon has from its start; a queue URI (sqs://, pubsub://, azqueue://) is a
# source of its own, with a consumer (runtime/queues/) while a table names it.
SOURCES = EVENT_SOURCES
LOG_DIR = "_delta_log/"
# Resync polls in a row that found commits no event announced before the table falls back.
MISSES_TO_DEGRADE = 2


class Trigger(enum.StrEnum):
    """Why a poll ran (deltakeeper_polls_total)."""

    EVENT = "event"  # an event woke the table
    INTERVAL = "interval"  # a table without events, every pollInterval
    RESYNC = "resync"  # a table with live events, every resyncInterval
    FALLBACK = "fallback"  # a table with events, at its pollInterval: source down or missing


class EventResult(enum.StrEnum):
    """What became of one event (deltakeeper_events_total)."""

    WOKE = "woke"  # its table's next poll happens now
    DUPLICATE = "duplicate"  # its table was woken already and its poll has not started
    IGNORED = "ignored"  # a watched table's key outside its _delta_log/ (a data file)
    UNKNOWN_TABLE = "unknown_table"  # no watched table with events has that key
    # a commit or checkpoint in the log of a table not watched yet, under a DeltaLake's prefix
    # whose tables have events: the lake checks it is a table and, if so, watches it
    NEW_TABLE = "new_table"
    REJECTED = "rejected"  # the request was refused (token, size, rate): counted per request
    MALFORMED = "malformed"  # not an event as the source sends them: counted per request


class Counts(Protocol):
    """Where events and polls are counted (metrics.Metrics)."""

    def event(self, source: str, result: str, n: int = 1) -> None: ...

    def poll(self, trigger: str) -> None: ...

    def event_lag(self, seconds: float) -> None: ...

    def source_up(self, source: str, up: bool) -> None: ...


class QueueConsumers(Protocol):
    """Starts a queue source's consumer when a table first names it, stops it when none does
    (runtime/queues.Queues)."""

    def want(self, source: str, options: Mapping[str, Any]) -> None: ...

    def release(self, source: str) -> None: ...


class _Uncounted:
    def event(self, source: str, result: str, n: int = 1) -> None:
        pass

    def poll(self, trigger: str) -> None:
        pass

    def event_lag(self, seconds: float) -> None:
        pass

    def source_up(self, source: str, up: bool) -> None:
        pass


def table_place(uri: str) -> tuple[str, str] | None:
    """A table URI's bucket (or container) and path, as storage opens it (the path
    URL-decoded, no slash at either end); None for a URI no object store event can name."""
    if "://" not in uri:
        return None
    parsed = urlparse(uri)
    if parsed.scheme.lower() == "file" or not parsed.netloc:
        return None
    bucket = parsed.netloc.partition("@")[0]  # abfss://container@account...
    return bucket, unquote(parsed.path).strip("/")


def key_path(key: str) -> str | None:
    """An event's object key as a path: URL-decoded as S3 encodes it (a space as +); None for
    a key no table can have (absolute, `.` or `..` segments, empty, a NUL)."""
    path = unquote_plus(key)
    if not path or path.startswith("/") or "\x00" in path:
        return None
    if any(part in (".", "..") for part in path.split("/")):
        return None
    return path


class TableEvents:
    """One table's events: whether it is woken, its misses, and what its status says."""

    __slots__ = (
        "_hub",
        "_place",
        "_woken_s",
        "last_event_ms",
        "misses",
        "name",
        "polling_woken_s",
        "source",
        "trigger",
        "version",
        "wake",
    )

    def __init__(self, hub: Events, wake: Callable[[], None]) -> None:
        self._hub = hub
        self.wake = wake
        self.source: str | None = None
        self._place: tuple[str, str] | None = None
        self.name = "?"  # "namespace/name", for log lines
        self._woken_s: float | None = None  # monotonic time of the first event not yet polled
        self.polling_woken_s: float | None = None  # the same, for the poll under way
        self.last_event_ms: int | None = None
        self.misses = 0  # resync polls in a row that found commits no event announced
        self.version: int | None = None  # the version the last poll saw
        self.trigger = Trigger.RESYNC  # of the poll under way or parked

    # -- the index ----------------------------------------------------------------------------
    def follow(self, target: Target) -> None:
        """Be found by the events of `target`'s source and URI (again, if they changed)."""
        place = table_place(target.uri)
        self.name = f"{target.namespace}/{target.name}"
        if target.events_source == self.source and place == self._place:
            if self.source is not None and place is not None:
                self._hub.refresh(self.source, target.storage_options)  # a rotated Secret
            return
        old = (self.source, self._place)
        self.source, self._place = target.events_source, place
        if self.source is not None and place is not None:  # before the old is dropped: a
            # queue source both name keeps its consumer
            self._hub.index(self.source, place, self, target.storage_options)
        if old[0] is not None and old[1] is not None:
            self._hub.unindex(old[0], old[1], self)

    def close(self) -> None:
        if self.source is not None and self._place is not None:
            self._hub.unindex(self.source, self._place, self)
        self.source = self._place = None

    def announce(self, now_ms: int) -> EventResult:
        """An event for this table's log: wake its loop, unless it was woken already."""
        self.last_event_ms = now_ms
        self.misses = 0
        if self._woken_s is not None:
            return EventResult.DUPLICATE
        self._woken_s = self._hub.monotonic()
        self.wake()
        return EventResult.WOKE

    # -- the loop -----------------------------------------------------------------------------
    @property
    def live(self) -> bool:
        """Events stand in for polls: the source is up and no events went missing."""
        return (
            self.source is not None
            and self._hub.is_up(self.source)
            and self.misses < MISSES_TO_DEGRADE
        )

    def interval_s(self, target: Target) -> float:
        return target.resync_interval_s if self.live else target.poll_interval_s

    def mode(self) -> Trigger:
        return Trigger.RESYNC if self.live else Trigger.FALLBACK

    def begin(self) -> Trigger:
        """A poll starts: an event's, if one woke the table, else its interval's."""
        self.polling_woken_s, self._woken_s = self._woken_s, None
        self.trigger = Trigger.EVENT if self.polling_woken_s is not None else self.mode()
        return self.trigger

    def park(self) -> None:
        """The table is parked: the Poller's polls of it are its interval's."""
        self.trigger = self.mode()

    def polled(self, obs: Observation) -> Observation:
        """A poll's observation, before it is published: counts a resync poll's miss, and the
        event-to-poll lag; returns it with the table's events status and condition."""
        version = obs.counts.get(F.VERSION)
        moved = version is not None and self.version is not None and version > self.version
        if version is not None:
            self.version = version
        if self.trigger is Trigger.EVENT and self.polling_woken_s is not None:
            self._hub.counts.event_lag(self._hub.monotonic() - self.polling_woken_s)
            self.polling_woken_s = None
        elif moved and self.trigger is Trigger.RESYNC and self._woken_s is None:
            self.misses += 1
            log.warning(
                "%s: a resync poll found commits no event announced (%d in a row)",
                self.name,
                self.misses,
            )
        return self.annotate(obs)

    def annotate(self, obs: Observation) -> Observation:
        """`obs` with the events status and the EventsDegraded condition."""
        if self.source is None:
            return obs
        kept = [c for c in obs.conditions if c.type is not ConditionType.EVENTS_DEGRADED]
        conditions = [*kept, self.condition()]
        return dataclasses.replace(obs, conditions=conditions, storage_events=self.status())

    def shown_differs(self, shown: Observation) -> bool:
        """Whether the status last published says other than this table's events now do."""
        if self.source is None:
            return shown.storage_events is not None
        return status.events_differ(shown.storage_events, self.status())

    def status(self) -> dict[str, Any]:
        return {
            "source": self.source,
            "live": self.live,
            "lastEventTime": rfc3339(self.last_event_ms) if self.last_event_ms else None,
            "missed": self.misses,
        }

    def condition(self) -> Condition:
        assert self.source is not None
        if not self._hub.is_up(self.source):
            return Condition(
                ConditionType.EVENTS_DEGRADED,
                ConditionStatus.TRUE,
                Reason.EVENT_SOURCE_DOWN,
                f"event source {self.source} is not running in this daemon "
                f"({self._hub.why_down(self.source)}); polled at its pollInterval",
            )
        if self.misses >= MISSES_TO_DEGRADE:
            return Condition(
                ConditionType.EVENTS_DEGRADED,
                ConditionStatus.TRUE,
                Reason.EVENTS_MISSED,
                f"{self.misses} resync polls in a row found commits no event announced; polled "
                "at its pollInterval until events for it arrive (check the bucket's "
                "notification configuration)",
            )
        return Condition(
            ConditionType.EVENTS_DEGRADED,
            ConditionStatus.FALSE,
            Reason.EVENTS_LIVE,
            f"woken by {self.source} events; polled every resyncInterval",
        )


class Events:
    """The tables with events, by source, bucket and path; which sources are up; what is
    counted. One per daemon, on its event loop (deliver and the index are not thread-safe)."""

    def __init__(
        self,
        counts: Counts | None = None,
        clock_ms: Callable[[], int] = lambda: int(time.time() * 1000),
        monotonic: Callable[[], float] = time.monotonic,
    ) -> None:
        self.counts: Counts = counts if counts is not None else _Uncounted()
        self.clock_ms = clock_ms
        self.monotonic = monotonic
        self._tables: dict[tuple[str, str], dict[str, TableEvents]] = {}
        # DeltaLakes listening for new tables: (source, bucket) -> prefix path -> found(path)
        self._lakes: dict[tuple[str, str], dict[str, Callable[[str], bool]]] = {}
        self._up: dict[str, bool] = dict.fromkeys(SOURCES, False)
        self._down_why: dict[str, str] = dict.fromkeys(SOURCES, "not started")
        for source in SOURCES:
            self.counts.source_up(source, False)
        # Starts and stops the queue sources' consumers; None: queue sources stay down.
        self.queues: QueueConsumers | None = None
        # False while a starting daemon indexes its tables: the webhook answers 503, so that
        # a store keeps what it queued while the daemon was down and sends it again, rather
        # than its events being counted unknown tables and dropped.
        self._ready = True
        self._ready_watchers: list[Callable[[bool], None]] = []  # told when it changes

    @property
    def ready(self) -> bool:
        return self._ready

    @ready.setter
    def ready(self, ready: bool) -> None:
        if ready != self._ready:
            self._ready = ready
            for tell in list(self._ready_watchers):
                tell(ready)

    def watch_ready(self, tell: Callable[[bool], None]) -> None:
        self._ready_watchers.append(tell)

    def unwatch_ready(self, tell: Callable[[bool], None]) -> None:
        self._ready_watchers.remove(tell)

    def table(self, wake: Callable[[], None]) -> TableEvents:
        return TableEvents(self, wake)

    def index(
        self,
        source: str,
        place: tuple[str, str],
        table: TableEvents,
        options: Mapping[str, Any] | None = None,
    ) -> None:
        """`options`: the table's storage options, the credentials of a queue source."""
        self._tables.setdefault((source, place[0]), {})[place[1]] = table
        if source not in SOURCES and self.queues is not None:
            self.queues.want(source, options or {})

    def unindex(self, source: str, place: tuple[str, str], table: TableEvents) -> None:
        paths = self._tables.get((source, place[0]))
        if paths is not None and paths.get(place[1]) is table:
            del paths[place[1]]
            if not paths:
                del self._tables[(source, place[0])]
        if source not in SOURCES and self.queues is not None and not self.named(source):
            self.queues.release(source)

    def refresh(self, source: str, options: Mapping[str, Any]) -> None:
        """A table still naming `source`, with its storage options as of now."""
        if source not in SOURCES and self.queues is not None:
            self.queues.want(source, options)

    def named(self, source: str) -> bool:
        """Whether any table has events from `source`."""
        return any(s == source for s, _ in self._tables)

    def lake(self, source: str, uri: str, found: Callable[[str], bool]) -> Callable[[], None]:
        """Tell `found` of new tables under the prefix `uri`: it is called with a table's path
        relative to the prefix ("." for the prefix itself) for a commit or checkpoint in a log
        no watched table has, and returns whether it takes it (a path its scan would report).
        Returns what stops it; a URI outside an object store hears of nothing."""
        place = table_place(uri)
        if place is None:
            return lambda: None
        lakes = self._lakes.setdefault((source, place[0]), {})
        lakes[place[1]] = found

        def stop() -> None:
            here = self._lakes.get((source, place[0]))
            if here is not None and here.get(place[1]) is found:
                del here[place[1]]
                if not here:
                    del self._lakes[(source, place[0])]

        return stop

    def tables(self, source: str) -> Iterator[TableEvents]:
        for (s, _), paths in list(self._tables.items()):
            if s == source:
                yield from list(paths.values())

    # -- sources ------------------------------------------------------------------------------
    def is_up(self, source: str) -> bool:
        return self._up.get(source, False)

    def why_down(self, source: str) -> str:
        return self._down_why.get(source, "not started")

    def add_source(self, source: str) -> None:
        """A queue source's consumer starts: counted down (0) until it reads its queue."""
        if source not in self._up:
            self._up[source] = False
            self._down_why[source] = "starting"
            self.counts.source_up(source, False)

    def set_up(self, source: str, up: bool, why: str = "") -> None:
        """A source started or failed. Its tables are woken either way: down, they poll at
        once (what was missed meanwhile) and then at their pollInterval; up, they are parked
        again at their resyncInterval."""
        if not up:  # why it is down now, even when it was down already
            self._down_why[source] = why or "stopped"
        if self._up.get(source) == up:
            return
        self._up[source] = up
        self.counts.source_up(source, up)
        for table in self.tables(source):
            table.wake()

    # -- events -------------------------------------------------------------------------------
    def deliver(self, source: str, bucket: str, key: str) -> EventResult:
        """One event's object: wake the table whose log it is in; counted by result."""
        result = self._route(source, bucket, key)
        self.counts.event(source, result)
        return result

    def _route(self, source: str, bucket: str, key: str) -> EventResult:
        paths = self._tables.get((source, bucket))
        path = key_path(key)
        if path is None:
            return EventResult.UNKNOWN_TABLE
        found = _longest(paths, path) if paths is not None else None
        if found is None:
            return self._new_table(source, bucket, path)
        table, rest = found
        if not rest.startswith(LOG_DIR):
            return EventResult.IGNORED
        return table.announce(self.clock_ms())

    def _new_table(self, source: str, bucket: str, path: str) -> EventResult:
        """A key of no watched table: a new table's first commit under a lake's prefix?"""
        lakes = self._lakes.get((source, bucket))
        if not lakes:
            return EventResult.UNKNOWN_TABLE
        table, sep, name = f"/{path}".rpartition(f"/{LOG_DIR}")
        parsed = log_paths.parse(name) if sep else None
        if parsed is None or not (parsed.kind is log_paths.Kind.COMMIT or parsed.is_checkpoint):
            return EventResult.UNKNOWN_TABLE
        table = table.lstrip("/")
        prefix = table
        while True:  # the lake with the longest prefix of the table's path
            found = lakes.get(prefix)
            if found is not None:
                rel = table[len(prefix) :].lstrip("/") if prefix else table
                taken = found(rel or ROOT)
                return EventResult.NEW_TABLE if taken else EventResult.UNKNOWN_TABLE
            if not prefix:
                return EventResult.UNKNOWN_TABLE
            prefix = prefix.rpartition("/")[0]

    def count(self, source: str, result: EventResult, n: int = 1) -> None:
        """Requests refused or unreadable as a whole (the listener's)."""
        self.counts.event(source, result, n)


def _longest(paths: dict[str, TableEvents], path: str) -> tuple[TableEvents, str] | None:
    """The table whose path is the longest prefix of `path` at a `/`, and the rest of it."""
    prefix = path
    while True:
        i = prefix.rfind("/")
        if i < 0:
            break
        prefix = prefix[:i]
        table = paths.get(prefix)
        if table is not None:
            return table, path[i + 1 :]
    table = paths.get("")  # a table at the bucket's root
    return (table, path) if table is not None else None
