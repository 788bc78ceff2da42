"""Secrets as the table loops need them: read off the event loop, once per TTL however many
tables share one, and still served from the last good read while the API server is away."""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable, Mapping
from typing import Any

import urllib3

from deltakeeper.runtime.targets import SecretUnreadable

log = logging.getLogger("deltakeeper.operator")
Key = tuple[str, str]
Data = Mapping[str, str] | None  # None: there is no such Secret
# A read is kept this long: a rotated key is picked up within it, and 10,000 tables polling
# every 30 s do not read their Secrets 333 times a second.
TTL_S = 30.0


class Secrets:
    def __init__(
        self,
        read: Callable[[str, str], Data],
        ttl_s: float = TTL_S,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.read = read  # blocking: api.read_secret
        self.ttl_s = ttl_s
        self.clock = clock
        # (when read, the data or why it could not be read)
        self._cache: dict[Key, tuple[float, Data | SecretUnreadable]] = {}
        self._reading: dict[Key, asyncio.Future[tuple[float, Data | SecretUnreadable]]] = {}

    async def get(self, namespace: str, name: str) -> Data:
        """The Secret's data; raises SecretUnreadable. Unchanged data is the same object each
        time, so a Target resolved from it stays cached (targets.unchanged)."""
        key = (namespace, name)
        hit = self._cache.get(key)
        if hit is None or self.clock() - hit[0] >= self.ttl_s:
            reading = self._reading.get(key)
            if reading is None:  # the first table to ask reads it; the others wait for that
                reading = asyncio.ensure_future(self._refresh(key, hit))
                self._reading[key] = reading
                reading.add_done_callback(lambda _: self._reading.pop(key, None))
            # Shielded: a table's loop stopping must not cancel a read others wait for.
            hit = await asyncio.shield(reading)
        if isinstance(hit[1], SecretUnreadable):
            raise hit[1]
        return hit[1]

    def peek(self, namespace: str, name: str) -> tuple[bool, Data | SecretUnreadable]:
        """The Secret as `get` last served it, without waiting: (False, None) when it was
        never read. Past its TTL a read starts (on the event loop) and the last one is served
        meanwhile: a table whose Target is current is told so until the read says otherwise."""
        key = (namespace, name)
        hit = self._cache.get(key)
        if hit is None:
            return False, None
        if self.clock() - hit[0] >= self.ttl_s and key not in self._reading:
            reading = asyncio.ensure_future(self._refresh(key, hit))
            self._reading[key] = reading
            reading.add_done_callback(lambda _: self._reading.pop(key, None))
        return True, hit[1]

    async def _refresh(
        self, key: Key, hit: tuple[float, Data | SecretUnreadable] | None
    ) -> tuple[float, Data | SecretUnreadable]:
        value: Data | SecretUnreadable
        try:
            value = await asyncio.to_thread(self.read, *key)
        except SecretUnreadable as e:
            value = e
        except (urllib3.exceptions.HTTPError, OSError) as e:
            if hit is not None and not isinstance(hit[1], SecretUnreadable):
                # The API server is away, not the Secret: keep using the last good read.
                log.warning(
                    "Secret %s/%s: the API server did not answer (%s); using the last read",
                    *key,
                    type(e).__name__,
                )
                value = hit[1]
            else:
                value = SecretUnreadable(f"the API server did not answer ({type(e).__name__})")
        if hit is not None and hit[1] == value:
            value = hit[1]  # unchanged: the same object
        entry = (self.clock(), value)
        self._cache[key] = entry
        return entry


async def for_resolve(
    secrets: Secrets, namespace: str, name: str | None
) -> tuple[Any, Callable[[str, str], Data]]:
    """The Secret `name` read now (None when no Secret is named, or the SecretUnreadable),
    and the blocking read targets.resolve calls, which serves it (raising SecretUnreadable)."""
    secret: Any = None
    if name:
        try:
            secret = await secrets.get(namespace, name)
        except SecretUnreadable as e:
            secret = e  # resolve() turns it into the resource's problem

    def read(namespace: str, name: str) -> Data:
        if isinstance(secret, SecretUnreadable):
            raise secret
        return secret

    return secret, read
