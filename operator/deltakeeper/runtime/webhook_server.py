"""The webhook's HTTP server, run as a process of its own by runtime/webhook.py's Listener:
`python -m deltakeeper.runtime.webhook_server`.

A process, not a thread, so that answering does not wait on the daemon's interpreter lock: at
1,000 events a second for 1,000 tables the polls those events wake kept a listener thread to
about 620 answers a second (BENCHMARKS.md, "Storage events"). This module imports aiohttp,
orjson and the standard library only, so the process starts in a fraction of a second.

It speaks JSON lines. On stdin, from the Listener: its settings first (the token among them:
never in argv or the environment, where `ps` shows them), then `{"ready": bool}` as the
daemon's index comes and goes, and `{"routed": n}` as the daemon routes what it was handed.
On stdout, to the Listener: `{"port": n}` once bound, or `{"error": "..."}`; then batches
`{"records": [[bucket, key], ...], "refused": {result: n}}`. stdin's end is the stop.

Built for hostile input: the token is checked (in constant time) before the body is read, a
body over MAX_BODY is refused unread, a client past its rate gets 429 from a fixed-size table
of clients, and records handed over and not routed yet are capped (503 past `max_pending`),
so no memory grows with clients or with a stalled daemon. No log line carries a header.
"""

from __future__ import annotations

import asyncio
import collections
import hmac
import logging
import ssl
import sys
import time
from collections.abc import Callable
from typing import Any

import orjson
from aiohttp import web

log = logging.getLogger("deltakeeper.events")

PATH = "/events"
JSON = "application/json"
MAX_BODY = 2**20  # 1 MiB: MinIO and S3 send one record a request; RGW batches a few
MAX_CLIENTS = 4096  # clients remembered for the rate limit; the least recent go first
LINE_LIMIT = 2**24  # a batch line (a 1 MiB body's records, JSON-escaped, fit with room)
BATCH_RECORDS = 1000  # a batch is sent once it has this many (and at the end of each turn)
# What EventResult (runtime/events.py) calls a refused and an unreadable request.
REJECTED, MALFORMED = "rejected", "malformed"


class Clients:
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


class ListenError(Exception):
    """The server cannot start as asked (address, certificate): the message says which."""


class Server:
    """The HTTP side: answers requests and hands what it took to `send`, a batch a turn of
    the loop."""

    def __init__(self, settings: dict[str, Any], send: Callable[[bytes], None]) -> None:
        self.settings = settings
        self._send = send
        self._expected = f"Bearer {settings['token']}".encode()
        self._clients = Clients(float(settings["rate"]), float(settings["burst"]))
        self._max_pending = int(settings["max_pending"])
        self.ready = bool(settings.get("ready"))  # False: the daemon's tables not indexed yet
        self._handed = 0  # records handed to the Listener
        self._routed = 0  # of which the daemon has routed
        self._records: list[tuple[str, str]] = []
        self._refusals: collections.Counter[str] = collections.Counter()
        self._flush_due = False
        self._runner: web.AppRunner | None = None

    async def start(self) -> int:
        app = web.Application(client_max_size=MAX_BODY)
        app.router.add_post(PATH, self._handle)
        app.router.add_route("HEAD", PATH, self._head)  # MinIO's reachability check
        self._runner = web.AppRunner(app, access_log=None, handle_signals=False)
        await self._runner.setup()
        host, port = self.settings["host"], int(self.settings["port"])
        site = web.TCPSite(self._runner, host, port, ssl_context=self._tls())
        try:
            await site.start()
        except OSError as e:
            await self._runner.cleanup()
            raise ListenError(f"--events-listen {host}:{port}: {e.strerror}") from None
        sockets = getattr(site._server, "sockets", None) or ()
        return int(sockets[0].getsockname()[1]) if sockets else port

    async def stop(self) -> None:
        if self._runner is not None:
            await self._runner.cleanup()
        self._flush()

    def control(self, message: dict[str, Any]) -> None:
        """A line from the Listener: the daemon's readiness, or how many more it routed."""
        if "ready" in message:
            self.ready = bool(message["ready"])
        self._routed += int(message.get("routed", 0))

    def _tls(self) -> ssl.SSLContext | None:
        cert, key = self.settings.get("cert_file"), self.settings.get("key_file")
        if cert is None or key is None:
            return None
        context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
        try:
            context.load_cert_chain(cert, key)
        except (OSError, ssl.SSLError) as e:
            raise ListenError(f"--events-tls-cert/--events-tls-key: {e}") from None
        return context

    # -- to the Listener ------------------------------------------------------------------------
    def _take(self, found: list[tuple[str, str]]) -> bool:
        """Hand `found` over; False (counted rejected) when `max_pending` records wait already."""
        if self._handed - self._routed + len(found) > self._max_pending:
            self._refuse(REJECTED)
            return False
        if len(self._records) >= BATCH_RECORDS:  # a line stays far below LINE_LIMIT
            self._flush()
        self._records += found
        self._handed += len(found)
        self._flush_soon()
        return True

    def _refuse(self, result: str) -> None:
        self._refusals[result] += 1
        self._flush_soon()

    def _flush_soon(self) -> None:
        """One line for what arrives in this turn of the loop (a burst is a batch)."""
        if not self._flush_due:
            self._flush_due = True
            asyncio.get_running_loop().call_soon(self._flush)

    def _flush(self) -> None:
        self._flush_due = False
        if not self._records and not self._refusals:
            return
        batch = {"records": self._records, "refused": self._refusals}
        self._records, self._refusals = [], collections.Counter()
        self._send(orjson.dumps(batch) + b"\n")

    # -- requests -------------------------------------------------------------------------------
    def _refused(self, request: web.Request) -> web.Response | None:
        """The answer to a request refused before its body is read; None: read it."""
        if not self._clients.allow(request.remote or "?"):
            self._refuse(REJECTED)
            return web.Response(status=429, text="too many requests\n")
        given = request.headers.get("Authorization", "").encode()
        if not hmac.compare_digest(given, self._expected):
            self._refuse(REJECTED)
            return web.Response(
                status=401, text="unauthorized\n", headers={"WWW-Authenticate": "Bearer"}
            )
        length = request.content_length
        if length is not None and length > MAX_BODY:
            self._refuse(REJECTED)
            return web.Response(status=413, text="body over 1 MiB\n")
        return None

    async def _head(self, request: web.Request) -> web.Response:
        return self._refused(request) or web.Response(status=200)

    async def _handle(self, request: web.Request) -> web.Response:
        refused = self._refused(request)
        if refused is not None:
            return refused
        if not self.ready:
            self._refuse(REJECTED)
            return web.Response(
                status=503, text="starting: tables not indexed yet\n", headers={"Retry-After": "2"}
            )
        try:
            raw = await request.read()  # client_max_size: over MAX_BODY raises 413
        except web.HTTPRequestEntityTooLarge:
            self._refuse(REJECTED)
            return web.Response(status=413, text="body over 1 MiB\n")
        try:
            found = records(orjson.loads(raw))
        except orjson.JSONDecodeError:
            found = None
        if found is None:
            self._refuse(MALFORMED)
            return web.Response(status=400, text="expected S3 event notification JSON\n")
        if not self._take(found):
            return web.Response(
                status=503, text="busy: too many events waiting\n", headers={"Retry-After": "1"}
            )
        return web.Response(body=orjson.dumps({"records": len(found)}), content_type=JSON)


async def _main() -> int:
    loop = asyncio.get_running_loop()
    stdin = asyncio.StreamReader(limit=LINE_LIMIT)
    await loop.connect_read_pipe(lambda: asyncio.StreamReaderProtocol(stdin), sys.stdin)
    # Writes never block the loop: what the pipe cannot take yet waits in the transport.
    out, _ = await loop.connect_write_pipe(asyncio.Protocol, sys.stdout)
    first = await stdin.readline()
    if not first:
        return 0
    server = Server(orjson.loads(first), out.write)
    try:
        port = await server.start()
    except ListenError as e:
        out.write(orjson.dumps({"error": str(e)}) + b"\n")
        return 2
    out.write(orjson.dumps({"port": port}) + b"\n")
    while line := await stdin.readline():  # until the Listener closes it (or exits)
        server.control(orjson.loads(line))
    await server.stop()
    while out.get_write_buffer_size() and not out.is_closing():  # the last batch, sent
        await asyncio.sleep(0.01)
    return 0


if __name__ == "__main__":
    logging.basicConfig(level=logging.WARNING, format="events listener: %(levelname)s %(message)s")
    sys.exit(asyncio.run(_main()))
