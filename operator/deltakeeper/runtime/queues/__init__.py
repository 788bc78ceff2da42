"""Queue event sources: one consumer per queue URI, shared by every table naming it, feeding
the same Events as the webhook (runtime/events.py).

A consumer starts when the first table names its URI (Events.index calls Queues.want) and stops
when none does; so in the operator only the active replica, the one with table loops, reads
(and deletes from) the queue. It checks that it can read the queue, then says the source is
up (deltakeeper_event_source_up 1, its tables polled every resyncInterval) and receives:
each message's objects go to Events.deliver, and only then is the message deleted
(acknowledged), so a daemon stopped between the two leaves it to come back after the queue's
visibility timeout (a duplicate wake, harmless). A message that is no event this source knows
is counted `malformed` and deleted as well: it would come back forever and can never wake a
table; the resync poll covers what it may have meant. Any failure to reach the queue says the
source is down (its tables back to their pollInterval, EventsDegraded) and the consumer
retries, RETRY_MIN_S doubling to RETRY_MAX_S.

Credentials are the table's storage options (the newest table to name the queue gives them),
in delta-rs's names; without them each cloud's default chain (IRSA, workload identity).
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable, Mapping
from typing import Any

from deltakeeper.delta import storage_options as storage_opts
from deltakeeper.maintenance.policy import PolicyError
from deltakeeper.resources.event_sources import QueueSource, parse
from deltakeeper.runtime.events import EventResult, Events
from deltakeeper.runtime.queues.messages import Client, Message

log = logging.getLogger("deltakeeper.events")

RETRY_MIN_S = 1.0
RETRY_MAX_S = 60.0
# A consumer no table names is stopped this much later: a table's loop restarted (a spec edit,
# a reload) names it again at once, and a restart would cost a reconnect, a long poll's
# messages hidden for their visibility timeout, and a wake of every table of the source.
RELEASE_AFTER_S = 30.0


MakeClient = Callable[[QueueSource, Mapping[str, Any]], Client]


def credentials(queue: QueueSource, options: Mapping[str, Any]) -> dict[str, Any]:
    """The table's storage options in one spelling (lower-case object_store names)."""
    try:
        return storage_opts.canonical(queue.store, dict(options))
    except Exception:  # a spelling the store will refuse: the default chain, then
        return {str(k).lower(): v for k, v in options.items()}


def _clients() -> dict[str, MakeClient]:
    from deltakeeper.runtime.queues import azqueue, pubsub, sqs

    return {"sqs": sqs.SqsClient, "azqueue": azqueue.QueueClient, "pubsub": pubsub.PubSubClient}


class Consumer:
    """One queue's reading loop (a task on the daemon's event loop)."""

    def __init__(
        self,
        events: Events,
        queue: QueueSource,
        options: Mapping[str, Any],
        make_client: MakeClient,
    ) -> None:
        self.events = events
        self.queue = queue
        self.options = dict(options)  # the newest table's; read again at each reconnect
        self.make_client = make_client
        self.task: asyncio.Task[None] | None = None

    def start(self) -> None:
        self.task = asyncio.get_running_loop().create_task(
            self._run(), name=f"events {self.queue.uri}"
        )

    def stop(self) -> None:
        if self.task is not None:
            self.task.cancel()

    async def _run(self) -> None:
        source = self.queue.uri
        delay = RETRY_MIN_S
        try:
            while True:
                client = None
                try:
                    client = self.make_client(self.queue, credentials(self.queue, self.options))
                    await client.check()
                    log.info("events: reading %s", source)
                    self.events.set_up(source, True)
                    delay = RETRY_MIN_S
                    while True:
                        await self._handle(client, await client.receive())
                except asyncio.CancelledError:
                    raise
                except Exception as e:
                    why = _describe(e)
                    if self.events.is_up(source) or self.events.why_down(source) != why:
                        log.warning("events: %s: %s; retrying in %.0fs", source, why, delay)
                    self.events.set_up(source, False, why)
                finally:
                    if client is not None:
                        await _quietly(client.close())
                await asyncio.sleep(delay)
                delay = min(delay * 2, RETRY_MAX_S)
        finally:
            self.events.set_up(source, False, "stopped")

    async def _handle(self, client: Client, messages: list[Message]) -> None:
        """Deliver each message's objects (their wakes are queued when deliver returns), then
        delete the messages."""
        if not messages:
            return
        source = self.queue.uri
        for message in messages:
            if message.objects is None:
                self.events.count(source, EventResult.MALFORMED)
                log.warning("events: %s: message %s is no event; deleted", source, message.id)
                continue
            for bucket, key in message.objects:
                self.events.deliver(source, bucket, key)
            if message.ignored:
                self.events.count(source, EventResult.IGNORED, message.ignored)
        await client.ack([m.handle for m in messages])


def _describe(e: BaseException) -> str:
    text = str(e) or type(e).__name__
    return text if len(text) <= 300 else text[:300] + "..."


async def _quietly(closing: Any) -> None:
    try:
        await closing
    except Exception:  # closing a broken connection
        log.debug("events: closing a queue client failed", exc_info=True)


class Queues:
    """The consumers of one daemon, by queue URI (Events.queues)."""

    def __init__(self, events: Events, clients: Mapping[str, MakeClient] | None = None) -> None:
        self.events = events
        self._clients = clients
        self._consumers: dict[str, Consumer] = {}

    def want(self, source: str, options: Mapping[str, Any]) -> None:
        consumer = self._consumers.get(source)
        if consumer is not None:
            if consumer.options != options:  # read at its next reconnect
                consumer.options = dict(options)
            return
        try:
            queue = parse(source)
        except PolicyError:  # the spec refuses it first; nothing to read
            return
        clients = self._clients if self._clients is not None else _clients()
        self.events.add_source(source)
        consumer = self._consumers[source] = Consumer(
            self.events, queue, options, clients[queue.scheme]
        )
        consumer.start()

    def release(self, source: str) -> None:
        if source in self._consumers:
            asyncio.get_running_loop().call_later(RELEASE_AFTER_S, self._stop_unnamed, source)

    def _stop_unnamed(self, source: str) -> None:
        if self.events.named(source):
            return
        consumer = self._consumers.pop(source, None)
        if consumer is not None:
            log.info("events: no table names %s any more; stopped reading it", source)
            consumer.stop()

    async def close(self) -> None:
        """Stop every consumer and wait for them to end."""
        consumers, self._consumers = list(self._consumers.values()), {}
        for consumer in consumers:
            consumer.stop()
        tasks = [c.task for c in consumers if c.task is not None]
        await asyncio.gather(*tasks, return_exceptions=True)

    def __contains__(self, source: str) -> bool:
        return source in self._consumers


def install(events: Events) -> Queues:
    """Give `events` its queue consumers (the daemons call it once)."""
    queues = Queues(events)
    events.queues = queues
    return queues
