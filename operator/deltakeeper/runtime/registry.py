"""The tables a daemon watches: one entry per table with its loop and cached Target, and the
one way an observation is published (metrics dropped for a table gone, status and events to
a Sink).

Shared by the operator and standalone mode; only their sources (watch events, a folder) and
sinks (the status subresource and Kubernetes Events, a status file) differ.
"""

from __future__ import annotations

import asyncio
import contextvars
import functools
import logging
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass
from typing import Generic, Protocol, TypeVar

from deltakeeper.resources.manifests import TableResource
from deltakeeper.runtime.fleet import Fleet, Loop
from deltakeeper.runtime.metrics import Metrics
from deltakeeper.runtime.targets import unchanged
from deltakeeper.runtime.watcher import Event, Observation, TableWatcher, Target

Key = tuple[str, str]


@dataclass
class Entry:
    """A watched table: its resource as last seen, its loop, and the Target resolved from it."""

    resource: TableResource
    loop: Loop | None = None
    cached: tuple[Sequence[object], Target] | None = None

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


# Resolves an entry's Target as of now: its spec, policy and credentials may have changed.
Resolve = Callable[[Key, E], Awaitable[Target]]


class Registry(Generic[E]):
    def __init__(self, metrics: Metrics, sink: Sink[E], resolve: Resolve[E], log: logging.Logger):
        self.metrics = metrics
        self.sink = sink
        self.resolve = resolve
        self.log = log  # the front-end's, so its events read as before
        self.entries: dict[Key, E] = {}
        self.publishing = True  # False: polls still running are not shown (operator paused)

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
        current = functools.partial(self.resolve, key, entry)
        entry.loop.start(fleet, current, watcher, f"{key[0]}/{key[1]}", previous, context)

    def stop_loop(self, key: Key) -> None:
        """Stop the table's loop and take its metrics down; the entry stays."""
        loop = self.entries[key].loop
        if loop is not None:
            loop.stop()
        self.metrics.forget(*key)

    def remove(self, key: Key) -> E | None:
        entry = self.entries.pop(key, None)
        if entry is not None and entry.loop is not None:
            entry.loop.stop()
        self.metrics.forget(*key)
        self.sink.forget(key)
        return entry

    async def stop(self) -> None:
        for entry in self.entries.values():
            if entry.loop is not None:
                entry.loop.stop()
        tasks = [e.loop.task for e in self.entries.values() if e.loop and e.loop.task]
        await asyncio.gather(*tasks, return_exceptions=True)

    async def publish(self, target: Target, obs: Observation) -> None:
        """The Fleet's publish: status and events to the sink, each event also logged."""
        key = target.key
        entry = self.entries.get(key)
        if entry is None or not self.publishing:
            self.metrics.forget(*key)  # removed, or paused, while its poll ran
            return
        if not await self.sink.write_status(entry, target, obs):
            self.remove(key)  # deleted while nobody watched (no event came)
            return
        for event in obs.events:
            self.sink.post_event(entry, event)
            level = logging.WARNING if event.type == "Warning" else logging.INFO
            self.log.log(level, "%s/%s: %s: %s", *key, event.reason, event.message)
