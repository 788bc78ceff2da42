"""The webhook event source: `POST /events` with S3 event notifications, as MinIO, Ceph RGW and
other S3-compatible stores send them (`{"Records": [{"s3": {"bucket": {"name": ...},
"object": {"key": ...}}}]}`, keys URL-encoded).

The listener has a thread and an event loop of its own: requests are answered while the
daemon's loop is busy with polls (at 1,000 events a second for 10,000 tables, on the daemon's
loop they were answered seconds late). Each record's bucket and key are handed to the daemon's
loop, in batches, where Events.deliver wakes the table whose log the key is in
(runtime/events.py); nothing else in a request is believed. The listener is built for
hostile input: the token is checked (in constant time) before the body is read, a body over
MAX_BODY is refused unread, a client sending more than its rate gets 429 from a fixed-size
table of clients (no memory grows with the number of clients), and no log line carries a
request's headers.

    listener = Listener(events, Config("0.0.0.0", 9443, token))
    await listener.start()   # the webhook source is up: its tables are polled every resync
    await listener.stop()
"""

from __future__ import annotations

import asyncio
import collections
import concurrent.futures
import contextlib
import hmac
import logging
import os
import ssl
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import orjson
from aiohttp import web

from deltakeeper.delta.errors import InvalidInputError
from deltakeeper.runtime.events import WEBHOOK, EventResult, Events

log = logging.getLogger("deltakeeper.events")

PATH = "/events"
JSON = "application/json"
MAX_BODY = 2**20  # 1 MiB: MinIO and S3 send one record a request; RGW batches a few
# Per client (remote address): requests a second, and a burst above it. A store sends one
# request per object written; 1,000 a second from one MinIO is within it.
RATE = 2000.0
BURST = 4000.0
MAX_CLIENTS = 4096  # clients remembered for the rate limit; the least recent go first
# Records accepted and not yet routed by the daemon's loop; past this, 503 (the store sends
# them again) rather than memory growing while that loop is stalled.
MAX_PENDING = 100_000


class EventsListenError(InvalidInputError):
    """The listener cannot start as asked (address, token, certificate)."""


@dataclass(frozen=True)
class Config:
    host: str
    port: int
    token: str
    cert_file: str | None = None
    key_file: str | None = None
    rate: float = RATE
    burst: float = BURST

    def __repr__(self) -> str:  # never the token
        return f"Config(host={self.host!r}, port={self.port}, tls={self.cert_file is not None})"


def parse_listen(value: str) -> tuple[str, int]:
    """HOST:PORT ([v6]:PORT too) as --events-listen takes it."""
    host, sep, port = value.rpartition(":")
    if not sep or not port.isdigit() or not 0 < int(port) < 65536:
        raise EventsListenError(f"--events-listen {value!r}: expected HOST:PORT, e.g. 0.0.0.0:9443")
    return host.strip("[]") or "0.0.0.0", int(port)


def read_token(path: str) -> str:
    """The bearer token from its file (a mounted Secret), without surrounding whitespace."""
    try:
        with open(path, encoding="utf-8") as f:
            token = f.read().strip()
    except OSError as e:
        raise EventsListenError(f"--events-token-file {path}: {e.strerror}") from None
    if len(token) < 16:
        raise EventsListenError(
            f"--events-token-file {path}: the token must be at least 16 characters"
        )
    return token


def config_from(
    listen: str | None, token_file: str | None, cert: str | None = None, key: str | None = None
) -> Config | None:
    """The listener's settings from the flags, else the environment; None: no listener."""
    listen = listen or os.environ.get("DELTAKEEPER_EVENTS_LISTEN") or None
    token_file = token_file or os.environ.get("DELTAKEEPER_EVENTS_TOKEN_FILE") or None
    cert = cert or os.environ.get("DELTAKEEPER_EVENTS_TLS_CERT") or None
    key = key or os.environ.get("DELTAKEEPER_EVENTS_TLS_KEY") or None
    if listen is None:
        return None
    if token_file is None:
        raise EventsListenError(
            "--events-listen needs --events-token-file (or $DELTAKEEPER_EVENTS_TOKEN_FILE): "
            "events are accepted only with `Authorization: Bearer TOKEN`"
        )
    if (cert is None) != (key is None):
        raise EventsListenError("TLS needs both --events-tls-cert and --events-tls-key")
    host, port = parse_listen(listen)
    return Config(host, port, read_token(token_file), cert, key)


class _Clients:
    """A token bucket per client, at most MAX_CLIENTS of them (least recently seen dropped)."""

    def __init__(
        self, rate: float, burst: float, clock: Callable[[], float] = time.monotonic
    ) -> None:
        self.rate, self.burst, self.clock = rate, burst, clock
        self._buckets: collections.OrderedDict[str, list[float]] = collections.OrderedDict()

    def allow(self, client: str) -> bool:
        now = self.clock()
        bucket = self._buckets.pop(client, None)
        if bucket is None:
            bucket = [self.burst, now]
            if len(self._buckets) >= MAX_CLIENTS:
                self._buckets.popitem(last=False)
        tokens = min(self.burst, bucket[0] + (now - bucket[1]) * self.rate)
        allowed = tokens >= 1
        bucket[0], bucket[1] = (tokens - 1 if allowed else tokens), now
        self._buckets[client] = bucket
        return allowed

    def __len__(self) -> int:
        return len(self._buckets)


def records(body: Any) -> list[tuple[str, str]] | None:
    """Each record's (bucket, key) of an S3 event notification; None when it is not one."""
    if not isinstance(body, dict) or not isinstance(body.get("Records"), list):
        return None
    out = []
    for record in body["Records"]:
        s3 = record.get("s3") if isinstance(record, dict) else None
        bucket = (s3.get("bucket") or {}).get("name") if isinstance(s3, dict) else None
        key = (s3.get("object") or {}).get("key") if isinstance(s3, dict) else None
        if not isinstance(bucket, str) or not isinstance(key, str):
            return None
        out.append((bucket, key))
    return out


class Listener:
    def __init__(self, events: Events, config: Config) -> None:
        self.events = events
        self.config = config
        self._expected = f"Bearer {config.token}".encode()
        self._clients = _Clients(config.rate, config.burst)  # the listener's thread only
        self._runner: web.AppRunner | None = None
        self._loop: asyncio.AbstractEventLoop | None = None  # the listener's
        self._thread: threading.Thread | None = None
        self._daemon: asyncio.AbstractEventLoop | None = None  # where events are routed
        # Handed from the listener's thread to the daemon's loop under the lock: records to
        # route, and requests refused or unreadable, by result.
        self._lock = threading.Lock()
        self._records: list[tuple[str, str]] = []
        self._refusals: collections.Counter[EventResult] = collections.Counter()
        self._routing = False
        self.port: int | None = None  # bound (the config's, or the one chosen for port 0)

    async def start(self) -> None:
        self._daemon = asyncio.get_running_loop()
        started: concurrent.futures.Future[int] = concurrent.futures.Future()
        self._thread = threading.Thread(
            target=self._serve, args=(started,), name="events-listener", daemon=True
        )
        self._thread.start()
        try:
            self.port = await asyncio.wrap_future(started)
        except EventsListenError:
            self._thread.join()
            self._thread = None
            raise
        scheme = "https" if self.config.cert_file else "http"
        log.info("events: listening on %s://%s:%d%s", scheme, self.config.host, self.port, PATH)
        self.events.set_up(WEBHOOK, True)

    async def stop(self) -> None:
        if self._thread is None:
            return
        self.events.set_up(WEBHOOK, False, "listener stopped")
        assert self._loop is not None
        self._loop.call_soon_threadsafe(self._loop.stop)
        await asyncio.to_thread(self._thread.join)
        self._thread = None
        self._route()  # what was accepted before the stop

    def _serve(self, started: concurrent.futures.Future[int]) -> None:
        """The listener's thread: its loop, until stop()."""
        loop = self._loop = asyncio.new_event_loop()
        try:
            try:
                port = loop.run_until_complete(self._bind())
            except BaseException as e:
                started.set_exception(e)
                return
            started.set_result(port)
            loop.run_forever()
            assert self._runner is not None
            loop.run_until_complete(self._runner.cleanup())
        finally:
            loop.close()

    async def _bind(self) -> int:
        app = web.Application(client_max_size=MAX_BODY)
        app.router.add_post(PATH, self._handle)
        app.router.add_route("HEAD", PATH, self._head)  # MinIO's reachability check
        self._runner = web.AppRunner(app, access_log=None, handle_signals=False)
        await self._runner.setup()
        site = web.TCPSite(
            self._runner, self.config.host, self.config.port, ssl_context=self._tls()
        )
        try:
            await site.start()
        except OSError as e:
            await self._runner.cleanup()
            raise EventsListenError(
                f"--events-listen {self.config.host}:{self.config.port}: {e.strerror}"
            ) from None
        server = site._server
        sockets = getattr(server, "sockets", None) or ()
        return int(sockets[0].getsockname()[1]) if sockets else self.config.port

    # -- from the listener's thread to the daemon's loop ----------------------------------------
    def _take(self, found: list[tuple[str, str]]) -> bool:
        """Hand `found` to the daemon's loop; False (nothing taken, counted rejected) when
        MAX_PENDING records wait there already."""
        with self._lock:
            if len(self._records) + len(found) > MAX_PENDING:
                self._refusals[EventResult.REJECTED] += 1
                return False
            self._records += found
        self._call_router()
        return True

    def _refuse(self, result: EventResult) -> None:
        """Count a request refused or unreadable, on the daemon's loop."""
        with self._lock:
            self._refusals[result] += 1
        self._call_router()

    def _call_router(self) -> None:
        """One call of _route on the daemon's loop for what is waiting (a burst is a batch)."""
        with self._lock:
            if self._routing:
                return
            self._routing = True
        assert self._daemon is not None
        # RuntimeError: the daemon's loop is closed; stop() routes what is left.
        with contextlib.suppress(RuntimeError):
            self._daemon.call_soon_threadsafe(self._route)

    def _route(self) -> None:
        """On the daemon's loop: deliver what the listener took, and count its refusals."""
        with self._lock:
            found, self._records = self._records, []
            refusals, self._refusals = self._refusals, collections.Counter()
            self._routing = False
        for result, n in refusals.items():
            self.events.count(WEBHOOK, result, n)
        for bucket, key in found:
            self.events.deliver(WEBHOOK, bucket, key)

    def _tls(self) -> ssl.SSLContext | None:
        if self.config.cert_file is None or self.config.key_file is None:
            return None
        context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
        try:
            context.load_cert_chain(self.config.cert_file, self.config.key_file)
        except (OSError, ssl.SSLError) as e:
            raise EventsListenError(f"--events-tls-cert/--events-tls-key: {e}") from None
        return context

    def _refused(self, request: web.Request) -> web.Response | None:
        """The answer to a request refused before its body is read; None: read it."""
        if not self._clients.allow(request.remote or "?"):
            self._refuse(EventResult.REJECTED)
            return web.Response(status=429, text="too many requests\n")
        given = request.headers.get("Authorization", "").encode()
        if not hmac.compare_digest(given, self._expected):
            self._refuse(EventResult.REJECTED)
            return web.Response(
                status=401, text="unauthorized\n", headers={"WWW-Authenticate": "Bearer"}
            )
        length = request.content_length
        if length is not None and length > MAX_BODY:
            self._refuse(EventResult.REJECTED)
            return web.Response(status=413, text="body over 1 MiB\n")
        return None

    async def _head(self, request: web.Request) -> web.Response:
        return self._refused(request) or web.Response(status=200)

    async def _handle(self, request: web.Request) -> web.Response:
        refused = self._refused(request)
        if refused is not None:
            return refused
        if not self.events.ready:
            self._refuse(EventResult.REJECTED)
            return web.Response(
                status=503, text="starting: tables not indexed yet\n", headers={"Retry-After": "2"}
            )
        try:
            raw = await request.read()  # client_max_size: over MAX_BODY raises 413
        except web.HTTPRequestEntityTooLarge:
            self._refuse(EventResult.REJECTED)
            return web.Response(status=413, text="body over 1 MiB\n")
        try:
            found = records(orjson.loads(raw))
        except orjson.JSONDecodeError:
            found = None
        if found is None:
            self._refuse(EventResult.MALFORMED)
            return web.Response(status=400, text="expected S3 event notification JSON\n")
        if not self._take(found):
            return web.Response(
                status=503, text="busy: too many events waiting\n", headers={"Retry-After": "1"}
            )
        return web.Response(body=orjson.dumps({"records": len(found)}), content_type=JSON)
