"""The webhook event source: `POST /events` with S3 event notifications, as MinIO, Ceph RGW and
other S3-compatible stores send them (`{"Records": [{"s3": {"bucket": {"name": ...},
"object": {"key": ...}}}]}`, keys URL-encoded).

Requests are answered by a process of its own (runtime/webhook_server.py: token, size, rate
and JSON checked there), so that answers never wait on the daemon's interpreter lock behind
the polls the events wake. It hands each record's bucket and key here, in batches over a pipe,
where Events.deliver wakes the table whose log the key is in (runtime/events.py); nothing else
in a request is believed. The Listener tells the process when the daemon's tables are indexed
(503 until then) and how many records it routed (503 past MAX_PENDING waiting), and starts it
again if it exits: its source is down meanwhile, so its tables are polled at pollInterval.

    listener = Listener(events, Config("0.0.0.0", 9443, token))
    await listener.start()   # the webhook source is up: its tables are polled every resync
    await listener.stop()
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import sys
from dataclasses import asdict, dataclass
from typing import Any

import orjson

from deltakeeper.delta.errors import InvalidInputError
from deltakeeper.runtime import webhook_server as server
from deltakeeper.runtime.events import WEBHOOK, EventResult, Events

log = logging.getLogger("deltakeeper.events")

PATH = server.PATH
# Per client (remote address): requests a second, and a burst above it. A store sends one
# request per object written; 1,000 a second from one MinIO is within it.
RATE = 2000.0
BURST = 4000.0
# Records accepted and not yet routed by the daemon's loop; past this, 503 (the store sends
# them again) rather than memory growing while that loop is stalled.
MAX_PENDING = 100_000
START_TIMEOUT_S = 60.0  # for the process to bind (an import of aiohttp on a loaded node)
RESTART_S = 1.0  # after the process exits unasked, before it is started again
STOP_TIMEOUT_S = 10  # for the process to finish its requests and exit when stopped


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
    max_pending: int = MAX_PENDING

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


class Listener:
    """The daemon's side of the webhook: starts the server process, routes what it hands over
    on the daemon's loop, and keeps it running."""

    def __init__(self, events: Events, config: Config) -> None:
        self.events = events
        self.config = config
        self.port: int | None = None  # bound (the config's, or the one chosen for port 0)
        self._process: asyncio.subprocess.Process | None = None
        self._keeper: asyncio.Task[None] | None = None
        self._stopping = False
        self.batches = 0  # batches routed: what the server handed over arrives as these

    async def start(self) -> None:
        """The server up and its source up; EventsListenError when it cannot bind."""
        self.port = await self._spawn()
        self._keeper = asyncio.create_task(self._keep(), name="events-listener")
        self.events.watch_ready(self._tell_ready)
        scheme = "https" if self.config.cert_file else "http"
        log.info("events: listening on %s://%s:%d%s", scheme, self.config.host, self.port, PATH)
        self.events.set_up(WEBHOOK, True)

    async def stop(self) -> None:
        if self._keeper is None:
            return
        self._stopping = True
        self.events.unwatch_ready(self._tell_ready)
        self.events.set_up(WEBHOOK, False, "listener stopped")
        self._close_input()  # the server's stop: it answers no more and sends the rest
        try:  # routes what was sent before the stop
            await asyncio.wait_for(asyncio.shield(self._keeper), STOP_TIMEOUT_S)
        except TimeoutError:
            log.warning("events: the listener did not stop within %d s; killed", STOP_TIMEOUT_S)
            if self._process is not None:
                with contextlib.suppress(ProcessLookupError):
                    self._process.kill()
            await self._keeper
        self._keeper = None

    def _close_input(self) -> None:
        back = self._process.stdin if self._process is not None else None
        if back is not None and not back.is_closing():
            back.close()

    @property
    def pid(self) -> int | None:
        return self._process.pid if self._process is not None else None

    async def _spawn(self) -> int:
        """Start the server process and give it its settings; the port it bound."""
        process = await asyncio.create_subprocess_exec(
            sys.executable,
            "-m",
            server.__name__,
            stdin=asyncio.subprocess.PIPE,
            stdout=asyncio.subprocess.PIPE,
            limit=server.LINE_LIMIT,
        )
        assert process.stdin is not None and process.stdout is not None
        settings = {**asdict(self.config), "ready": self.events.ready}  # the token on stdin
        process.stdin.write(orjson.dumps(settings) + b"\n")
        try:
            first = await asyncio.wait_for(process.stdout.readline(), START_TIMEOUT_S)
            answer = orjson.loads(first) if first else {"error": "it exited"}
        except (TimeoutError, orjson.JSONDecodeError) as e:
            answer = {"error": f"no answer ({type(e).__name__})"}
        if "port" not in answer:
            with contextlib.suppress(ProcessLookupError):
                process.kill()
            await process.wait()
            raise EventsListenError(str(answer.get("error")))
        self._process = process
        return int(answer["port"])

    async def _keep(self) -> None:
        """Route what the server hands over; when it exits unasked, mark the source down and
        start it again."""
        while True:
            await self._follow()
            if self._stopping:
                return
            assert self._process is not None
            why = f"listener exited ({self._process.returncode})"
            log.warning("events: %s; starting it again", why)
            self.events.set_up(WEBHOOK, False, why)
            while not self._stopping:
                await asyncio.sleep(RESTART_S)
                try:
                    self.port = await self._spawn()
                except EventsListenError as e:
                    log.warning("events: listener: %s", e)
                    continue
                if self._stopping:  # stop() came while it started: it stops too
                    self._close_input()
                else:
                    self.events.set_up(WEBHOOK, True)
                break

    async def _follow(self) -> None:
        """Until the server process ends: each batch routed, and the count sent back."""
        assert self._process is not None
        out, back = self._process.stdout, self._process.stdin
        assert out is not None and back is not None
        while True:
            try:
                line = await out.readline()
                if not line:
                    break
                routed = self._route(orjson.loads(line))
            except (ValueError, TypeError, KeyError) as e:  # not a batch: skipped, not fatal
                log.warning("events: listener: a line that is not a batch (%s)", e)
                continue
            if routed and not back.is_closing():
                back.write(b'{"routed":%d}\n' % routed)
        await self._process.wait()

    def _route(self, batch: dict[str, Any]) -> int:
        """Deliver a batch's records and count its refusals; how many records it had."""
        for result, n in (batch.get("refused") or {}).items():
            self.events.count(WEBHOOK, EventResult(result), int(n))
        found = batch.get("records") or ()
        for bucket, key in found:
            self.events.deliver(WEBHOOK, bucket, key)
        self.batches += 1
        return len(found)

    def _tell_ready(self, ready: bool) -> None:
        back = self._process.stdin if self._process is not None else None
        if back is not None and not back.is_closing():
            back.write(orjson.dumps({"ready": ready}) + b"\n")
