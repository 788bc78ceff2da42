"""runtime/webhook.py: the webhook event source on a real socket, under friendly and hostile
requests (raw HTTP/1.1, so that what is sent, and what is not, is exactly known)."""

from __future__ import annotations

import asyncio
import concurrent.futures
import json
import logging
import os
import signal
import socket
import ssl
import sys
import time
import urllib.error
import urllib.request
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import psutil
import pytest

from deltakeeper.runtime import webhook, webhook_server
from deltakeeper.runtime.events import WEBHOOK, Events
from deltakeeper.runtime.metrics import Metrics
from deltakeeper.runtime.model import Target
from tests.support.tls import self_signed

TOKEN = "s3cret-token-for-tests-0123456789"


def s3_event(bucket: str, *keys: str) -> bytes:
    """An S3 event notification as MinIO sends it (keys URL-encoded)."""
    records = [
        {
            "eventVersion": "2.0",
            "eventSource": "minio:s3",
            "eventName": "s3:ObjectCreated:Put",
            "s3": {"bucket": {"name": bucket}, "object": {"key": key, "size": 1}},
        }
        for key in keys
    ]
    return json.dumps({"EventName": "s3:ObjectCreated:Put", "Records": records}).encode()


async def exchange(
    port: int, head: str, body: bytes = b"", tls: ssl.SSLContext | None = None
) -> tuple[int, bytes]:
    """Send `head` (request line and headers) and `body`; the status and the answer's body."""
    reader, writer = await asyncio.open_connection("127.0.0.1", port, ssl=tls)
    try:
        writer.write(head.encode() + b"\r\n" + body)
        await writer.drain()
        answer = await asyncio.wait_for(reader.read(65536), 5)
    finally:
        writer.close()
    status = int(answer.split(b" ", 2)[1])
    return status, answer.partition(b"\r\n\r\n")[2]


def post(length: int, token: str | None = TOKEN, extra: str = "") -> str:
    auth = f"Authorization: Bearer {token}\r\n" if token is not None else ""
    return (
        f"POST /events HTTP/1.1\r\nHost: x\r\n{auth}Content-Type: application/json\r\n"
        f"Content-Length: {length}\r\nConnection: close\r\n{extra}"
    )


class Setup:
    def __init__(self, **config: Any) -> None:
        self.metrics = Metrics()
        self.events = Events(self.metrics)
        self.woken: list[str] = []
        self.woken_by_events: list[str] = []
        for uri in ("s3://lake/sales/orders", "s3://lake/a b/été=1%"):
            table = self.events.table(lambda uri=uri: self.woken.append(uri))  # type: ignore[misc]
            table.follow(Target("ns", uri.rsplit("/", 1)[-1], uri, events_source=WEBHOOK))
        self.listener = webhook.Listener(
            self.events, webhook.Config("127.0.0.1", 0, TOKEN, **config)
        )

    def count(self, result: str) -> float:
        labels = {"source": WEBHOOK, "result": result}
        value = self.metrics.registry.get_sample_value("deltakeeper_events_total", labels)
        assert value is not None
        return value


async def routed(listener: webhook.Listener, quiet_s: float = 0.3) -> None:
    """Until what the server process handed over is routed (no batch for `quiet_s`)."""
    seen = -1
    while seen != listener.batches:
        seen = listener.batches
        await asyncio.sleep(quiet_s)


def serve(scenario: Callable[[Setup, int], Awaitable[None]], **config: Any) -> Setup:
    setup = Setup(**config)

    async def main() -> None:
        await setup.listener.start()
        setup.woken.clear()  # the source coming up wakes its tables: not the events'
        try:
            assert setup.listener.port is not None
            await scenario(setup, setup.listener.port)
            await routed(setup.listener)
            setup.woken_by_events = list(setup.woken)
        finally:
            await setup.listener.stop()

    asyncio.run(main())
    return setup


def test_an_event_in_a_tables_log_wakes_it_and_the_source_is_up_while_listening() -> None:
    async def scenario(s: Setup, port: int) -> None:
        assert s.metrics.registry.get_sample_value(
            "deltakeeper_event_source_up", {"source": WEBHOOK}
        )
        key = "a+b/%C3%A9t%C3%A9%3D1%25/_delta_log/00000000000000000001.json"
        body = s3_event("lake", key, "sales/orders/_delta_log/00000000000000000007.json")
        status, answer = await exchange(port, post(len(body)), body)
        assert (status, json.loads(answer)) == (200, {"records": 2})

    s = serve(scenario)
    assert sorted(s.woken_by_events) == ["s3://lake/a b/été=1%", "s3://lake/sales/orders"]
    assert s.count("woke") == 2
    up = s.metrics.registry.get_sample_value("deltakeeper_event_source_up", {"source": WEBHOOK})
    assert up == 0  # stopped


def test_while_the_tables_are_indexed_an_event_gets_503_so_the_store_sends_it_again() -> None:
    key = "sales/orders/_delta_log/00000000000000000007.json"

    async def scenario(s: Setup, port: int) -> None:
        s.events.ready = False  # a daemon starting: its tables not indexed yet
        body = s3_event("lake", key)
        status, answer = await exchange(port, post(len(body)), body)
        assert (status, answer) == (503, b"starting: tables not indexed yet\n")
        assert s.woken == []
        status, _ = await exchange(port, post(len(body), "wrong"), body)
        assert status == 401  # the token is still checked first
        s.events.ready = True
        status, answer = await exchange(port, post(len(body)), body)
        assert (status, json.loads(answer)) == (200, {"records": 1})

    s = serve(scenario)
    assert s.count("rejected") == 2 and s.count("woke") == 1
    assert s.count("unknown_table") == 0 and s.woken_by_events == ["s3://lake/sales/orders"]


def test_a_wrong_or_missing_token_gets_401_before_the_body_is_read() -> None:
    async def scenario(s: Setup, port: int) -> None:
        # A body announced and never sent: the answer comes without waiting for it.
        for token in (None, "wrong", TOKEN[:-1], TOKEN + "x", ""):
            status, _ = await exchange(port, post(10 * 2**20, token))
            assert status == 401, token
        status, _ = await exchange(port, post(0, None).replace("Bearer", "Basic"))
        assert status == 401

    s = serve(scenario)
    assert s.count("rejected") == 6 and s.woken_by_events == []


def test_a_body_over_one_mib_gets_413_announced_or_streamed() -> None:
    async def scenario(s: Setup, port: int) -> None:
        status, _ = await exchange(port, post(2**20 + 1))  # announced: never read
        assert status == 413
        chunked = post(0).replace("Content-Length: 0\r\n", "Transfer-Encoding: chunked\r\n")
        big = b"x" * (2**20 + 10)
        body = f"{len(big):x}\r\n".encode() + big + b"\r\n0\r\n\r\n"
        status, _ = await exchange(port, chunked, body)
        assert status == 413

    s = serve(scenario)
    assert s.count("rejected") == 2


@pytest.mark.parametrize(
    "body",
    [b"{not json", b"[]", b'{"Records": "x"}', b'{"Records": [{"s3": {"bucket": {}}}]}', b""],
)
def test_malformed_json_gets_400(body: bytes) -> None:
    async def scenario(s: Setup, port: int) -> None:
        status, _ = await exchange(port, post(len(body)), body)
        assert status == 400

    s = serve(scenario)
    assert s.count("malformed") == 1 and s.woken_by_events == []


def test_keys_out_of_a_table_or_bucket_are_unknown_tables() -> None:
    keys = [
        "sales/orders/../../etc/_delta_log/00000000000000000001.json",
        "/sales/orders/_delta_log/00000000000000000001.json",
        "sales/orders%2F..%2F..%2Fx/_delta_log/00000000000000000001.json",
        "sales/_delta_log/00000000000000000001.json",
    ]

    async def scenario(s: Setup, port: int) -> None:
        for body in (s3_event("lake", *keys), s3_event("other", "sales/orders/_delta_log/1.json")):
            status, answer = await exchange(port, post(len(body)), body)
            assert status == 200 and json.loads(answer)["records"] > 0

    s = serve(scenario)
    assert s.count("unknown_table") == 5 and s.woken_by_events == []


def test_a_flood_from_one_client_is_rate_limited() -> None:
    body = s3_event("lake", "sales/orders/_delta_log/00000000000000000001.json")

    async def scenario(s: Setup, port: int) -> None:
        statuses = [(await exchange(port, post(len(body)), body))[0] for _ in range(8)]
        assert statuses[:3] == [200] * 3 and set(statuses[3:]) == {429}

    s = serve(scenario, rate=0.001, burst=3)
    assert s.count("rejected") == 5
    assert s.count("woke") + s.count("duplicate") == 3


def test_the_rate_limits_table_of_clients_stays_bounded() -> None:
    now = [0.0]
    clients = webhook_server.Clients(rate=1, burst=1, clock=lambda: now[0])
    for i in range(webhook_server.MAX_CLIENTS * 3):
        assert clients.allow(f"10.0.{i // 256}.{i % 256}")
    assert len(clients) == webhook_server.MAX_CLIENTS
    last = webhook_server.MAX_CLIENTS * 3 - 1
    assert not clients.allow(f"10.0.{last // 256}.{last % 256}")  # remembered: no burst left
    assert clients.allow("10.0.0.0")  # forgotten, the least recent: a new bucket
    assert clients.allow("a") and not clients.allow("a")
    now[0] += 1
    assert clients.allow("a")


def test_no_log_line_carries_the_token(caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.DEBUG)
    body = s3_event("lake", "sales/orders/_delta_log/00000000000000000001.json")

    async def scenario(s: Setup, port: int) -> None:
        await exchange(port, post(len(body)), body)
        await exchange(port, post(len(body), TOKEN + "wrong"), body)
        await exchange(port, post(3), b"{x}")

    serve(scenario)
    assert caplog.records  # it does log (the listening line)
    assert all(TOKEN not in r.getMessage() for r in caplog.records)
    assert TOKEN not in repr(webhook.Config("h", 1, TOKEN))


def test_tls_from_a_cert_and_key(tmp_path: Path) -> None:
    cert, key = self_signed(tmp_path)
    client = ssl.create_default_context(cafile=str(cert))
    client.check_hostname = False
    body = s3_event("lake", "sales/orders/_delta_log/00000000000000000001.json")

    async def scenario(s: Setup, port: int) -> None:
        status, _ = await exchange(port, post(len(body)), body, tls=client)
        assert status == 200
        with pytest.raises((ConnectionError, asyncio.IncompleteReadError, ValueError, IndexError)):
            await exchange(port, post(len(body)), body)  # plain HTTP to a TLS port

    s = serve(scenario, cert_file=str(cert), key_file=str(key))
    assert s.woken_by_events == ["s3://lake/sales/orders"]


def test_the_settings_come_from_flags_else_the_environment(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    token = tmp_path / "token"
    token.write_text(TOKEN + "\n")
    assert webhook.config_from(None, None) is None
    monkeypatch.setenv("DELTAKEEPER_EVENTS_LISTEN", "0.0.0.0:9443")
    monkeypatch.setenv("DELTAKEEPER_EVENTS_TOKEN_FILE", str(token))
    config = webhook.config_from(None, None)
    assert config is not None and (config.host, config.port, config.token) == (
        "0.0.0.0",
        9443,
        TOKEN,
    )
    config = webhook.config_from("[::1]:8080", str(token))
    assert config is not None and (config.host, config.port) == ("::1", 8080)
    monkeypatch.delenv("DELTAKEEPER_EVENTS_TOKEN_FILE")
    with pytest.raises(webhook.EventsListenError, match="needs --events-token-file"):
        webhook.config_from(None, None)
    short = tmp_path / "short"
    short.write_text("abc")
    with pytest.raises(webhook.EventsListenError, match="at least 16"):
        webhook.config_from("127.0.0.1:1", str(short))
    with pytest.raises(webhook.EventsListenError, match="HOST:PORT"):
        webhook.config_from("127.0.0.1", str(token))


def blocking_post(port: int, body: bytes) -> tuple[int, float]:
    """A POST from another thread, as a store sends it: the status and the seconds it took."""
    started = time.monotonic()
    request = urllib.request.Request(
        f"http://127.0.0.1:{port}/events",
        data=body,
        headers={"Authorization": f"Bearer {TOKEN}", "Content-Type": "application/json"},
    )
    try:
        with urllib.request.urlopen(request, timeout=5) as answer:
            status = answer.status
    except urllib.error.HTTPError as e:
        status = e.code
    return status, time.monotonic() - started


def test_events_are_answered_while_the_daemons_loop_is_busy_and_routed_after() -> None:
    body = s3_event("lake", "sales/orders/_delta_log/00000000000000000001.json")

    async def scenario(s: Setup, port: int) -> None:
        with concurrent.futures.ThreadPoolExecutor(1) as pool:
            answered = pool.submit(blocking_post, port, body)
            time.sleep(1.5)  # the daemon's loop busy (a long poll's work, a collection)
            assert answered.done() and answered.result()[0] == 200
            assert answered.result()[1] < 1.0
            assert s.woken == []  # not routed yet: that is the daemon loop's work
        await asyncio.sleep(0.1)
        assert s.woken == ["s3://lake/sales/orders"]

    s = serve(scenario)
    assert s.count("woke") == 1


def test_past_max_pending_records_a_request_gets_503_and_nothing_grows() -> None:
    keys = [f"sales/orders/_delta_log/0000000000000000000{i}.json" for i in range(3)]

    async def scenario(s: Setup, port: int) -> None:
        with concurrent.futures.ThreadPoolExecutor(1) as pool:
            first = pool.submit(blocking_post, port, s3_event("lake", *keys[:2])).result()
            second = pool.submit(blocking_post, port, s3_event("lake", keys[2])).result()
            assert (first[0], second[0]) == (200, 503)  # the daemon's loop took none yet
        await asyncio.sleep(0.1)
        status, _ = await exchange(port, post(len(body := s3_event("lake", keys[2]))), body)
        assert status == 200  # routed meanwhile: room again

    s = serve(scenario, max_pending=2)
    assert s.count("rejected") == 1
    assert s.count("woke") + s.count("duplicate") == 3


async def until(check: Callable[[], bool], timeout: float = 30) -> None:
    deadline = time.monotonic() + timeout
    while not check():
        assert time.monotonic() < deadline, "timed out"
        await asyncio.sleep(0.05)


def test_the_server_is_a_process_of_its_own_started_again_when_it_exits() -> None:
    body = s3_event("lake", "sales/orders/_delta_log/00000000000000000001.json")

    async def scenario(s: Setup, port: int) -> None:
        def up() -> float | None:
            labels = {"source": WEBHOOK}
            return s.metrics.registry.get_sample_value("deltakeeper_event_source_up", labels)

        first = s.listener.pid
        assert first is not None and first != os.getpid()
        for shown in ("cmdline", "environ"):  # the token reaches it on stdin, not where ps looks
            assert TOKEN.encode() not in Path(f"/proc/{first}/{shown}").read_bytes()
        os.kill(first, signal.SIGKILL)
        await until(lambda: up() == 0)  # down: its tables poll at their pollInterval meanwhile
        assert sorted(s.woken) == ["s3://lake/a b/été=1%", "s3://lake/sales/orders"]
        await until(lambda: up() == 1)
        assert s.listener.pid not in (None, first) and s.listener.port is not None
        s.woken.clear()
        status, answer = await exchange(s.listener.port, post(len(body)), body)
        assert (status, json.loads(answer)) == (200, {"records": 1})

    s = serve(scenario)
    assert s.woken_by_events == ["s3://lake/sales/orders"]


def test_an_address_in_use_or_a_missing_certificate_is_a_clear_error(tmp_path: Path) -> None:
    async def start(config: webhook.Config) -> None:
        listener = webhook.Listener(Events(), config)
        await listener.start()
        await listener.stop()

    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        with pytest.raises(webhook.EventsListenError, match=f"--events-listen 127.0.0.1:{port}"):
            asyncio.run(start(webhook.Config("127.0.0.1", port, TOKEN)))
    missing = str(tmp_path / "absent.pem")
    with pytest.raises(webhook.EventsListenError, match="--events-tls-cert/--events-tls-key"):
        asyncio.run(start(webhook.Config("127.0.0.1", 0, TOKEN, missing, missing)))


def _servers(ours: set[int]) -> list[int]:
    """Children that are webhook servers, or are one of `ours` even as a zombie."""
    found = []
    for p in psutil.Process().children(recursive=True):
        try:
            if p.pid in ours or "deltakeeper.runtime.webhook_server" in " ".join(p.cmdline()):
                found.append(p.pid)
        except (psutil.ZombieProcess, psutil.NoSuchProcess):
            continue  # another test's child not reaped yet, or gone meanwhile: not ours
    return found


@pytest.mark.parametrize("wait_s", [0.0, 1.1])  # stopped before its restart, or during it
def test_a_stop_while_the_server_is_started_again_leaves_no_process(wait_s: float) -> None:
    async def main() -> None:
        listener = webhook.Listener(Events(), webhook.Config("127.0.0.1", 0, TOKEN))
        await listener.start()
        first = listener.pid
        assert first is not None
        os.kill(first, signal.SIGKILL)
        await asyncio.sleep(wait_s)
        await listener.stop()
        assert _servers({first, listener.pid or first}) == []

    asyncio.run(main())


def test_a_line_from_the_server_that_is_not_a_batch_is_skipped() -> None:
    """What the Listener reads from the process: a stray line is logged and skipped, and the
    batches after it are still routed."""
    s = Setup()
    batch = {"records": [["lake", "sales/orders/_delta_log/00000000000000000001.json"]]}
    lines = ["not json", '{"records": 7}', json.dumps(batch)]
    script = "".join(f"print({line!r})\n" for line in lines) + "import sys; sys.stdin.read()\n"

    async def main() -> None:
        process = await asyncio.create_subprocess_exec(
            sys.executable,
            "-c",
            script,
            stdin=asyncio.subprocess.PIPE,
            stdout=asyncio.subprocess.PIPE,
        )
        s.listener._process = process
        follow = asyncio.create_task(s.listener._follow())
        await until(lambda: s.listener.batches == 1, 10)
        assert process.stdin is not None
        process.stdin.close()
        await follow

    asyncio.run(main())
    assert s.woken == ["s3://lake/sales/orders"]


def test_the_server_sends_a_batch_once_it_has_batch_records_so_lines_stay_short() -> None:
    sent: list[bytes] = []
    settings = {"token": TOKEN, "rate": 1, "burst": 1, "max_pending": 10**6}
    record = ("lake", "k")

    async def main() -> None:
        server = webhook_server.Server(settings, sent.append)
        assert server._take([record] * webhook_server.BATCH_RECORDS)
        assert sent == []  # at the end of this turn of the loop
        assert server._take([record] * 5)
        assert [len(json.loads(line)["records"]) for line in sent] == [1000]
        await asyncio.sleep(0)
        assert [len(json.loads(line)["records"]) for line in sent] == [1000, 5]

    asyncio.run(main())
