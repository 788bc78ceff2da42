"""k8s/secrets.py: one Secret read per TTL however many tables ask; the last good read while away.

With a fake API read; the e2e layer reads real Secrets."""

from __future__ import annotations

import asyncio
import threading
from typing import Any

import pytest
import urllib3

from deltakeeper.k8s.secrets import Secrets
from deltakeeper.runtime.targets import SecretUnreadable


class Api:
    """A blocking read that answers what the test sets, counting calls."""

    def __init__(self) -> None:
        self.answer: Any = {"k": "v1"}
        self.calls = 0
        self.gate = threading.Event()
        self.gate.set()

    def read(self, namespace: str, name: str) -> Any:
        self.calls += 1
        self.gate.wait(5)
        if isinstance(self.answer, Exception):
            raise self.answer
        return None if self.answer is None else dict(self.answer)


class Clock:
    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


def test_one_read_per_ttl_and_the_same_object_while_unchanged() -> None:
    async def go() -> None:
        api, clock = Api(), Clock()
        secrets = Secrets(api.read, ttl_s=30, clock=clock)
        first = await secrets.get("ns", "s")
        assert first == {"k": "v1"} and api.calls == 1
        clock.now = 29
        assert await secrets.get("ns", "s") is first and api.calls == 1
        clock.now = 30  # expired: read again; equal data keeps its identity
        assert await secrets.get("ns", "s") is first and api.calls == 2
        api.answer = {"k": "v2"}  # rotated
        clock.now = 60
        assert await secrets.get("ns", "s") == {"k": "v2"} and api.calls == 3
        api.answer = None  # deleted
        clock.now = 90
        assert await secrets.get("ns", "s") is None
        assert await secrets.get("other", "s") is None and api.calls == 5

    asyncio.run(go())


def test_tables_asking_at_once_share_one_read_off_the_event_loop() -> None:
    async def go() -> None:
        api = Api()
        api.gate.clear()  # the read blocks until released
        secrets = Secrets(api.read)
        asking = [asyncio.create_task(secrets.get("ns", "s")) for _ in range(50)]
        ticks = 0
        while ticks < 5:  # the event loop keeps running while the read blocks
            await asyncio.sleep(0.01)
            ticks += 1
        asking[0].cancel()  # one table's loop stops: the others still get the read
        api.gate.set()
        got = await asyncio.gather(*asking[1:])
        assert api.calls == 1
        assert all(g is got[0] for g in got) and got[0] == {"k": "v1"}

    asyncio.run(go())


def test_an_api_server_that_does_not_answer_leaves_the_last_good_read() -> None:
    async def go() -> None:
        api, clock = Api(), Clock()
        secrets = Secrets(api.read, ttl_s=30, clock=clock)
        good = await secrets.get("ns", "s")
        # Away after a good read: the last read is used, and tried again after the TTL.
        api.answer = urllib3.exceptions.MaxRetryError(None, "/api", "refused")  # type: ignore[arg-type]
        clock.now = 30
        assert await secrets.get("ns", "s") is good
        clock.now = 59
        assert await secrets.get("ns", "s") is good and api.calls == 2
        clock.now = 60
        api.answer = ConnectionResetError()
        assert await secrets.get("ns", "s") is good and api.calls == 3
        # Away before any read: unreadable, with the error's kind (never a URL or body).
        with pytest.raises(SecretUnreadable, match=r"did not answer \(ConnectionResetError\)"):
            await secrets.get("ns", "never-read")

    asyncio.run(go())


def test_a_refusal_is_kept_for_the_ttl_and_not_covered_by_an_old_read() -> None:
    async def go() -> None:
        api, clock = Api(), Clock()
        secrets = Secrets(api.read, ttl_s=30, clock=clock)
        await secrets.get("ns", "s")
        api.answer = SecretUnreadable("HTTP 403 Forbidden")  # RBAC taken away
        clock.now = 30
        with pytest.raises(SecretUnreadable, match="403"):
            await secrets.get("ns", "s")
        with pytest.raises(SecretUnreadable, match="403"):
            await secrets.get("ns", "s")
        assert api.calls == 2
        api.answer = {"k": "v1"}  # fixed: picked up after the TTL
        clock.now = 60
        assert await secrets.get("ns", "s") == {"k": "v1"}

    asyncio.run(go())
