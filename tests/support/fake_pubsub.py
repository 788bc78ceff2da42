"""A small Pub/Sub server for the pubsub:// event source's tests: no Pub/Sub emulator can be
installed here (it ships only with Google's Cloud SDK, whose download host is unreachable), so
this answers the REST calls deltakeeper makes, as the Pub/Sub v1 REST reference documents them:

    PUT  /v1/projects/P/topics/T                      create a topic
    PUT  /v1/projects/P/subscriptions/S               {"topic", "ackDeadlineSeconds"}
    GET  /v1/projects/P/subscriptions/S               the subscription (404 when none)
    POST /v1/projects/P/topics/T:publish              {"messages": [{"data", "attributes"}]}
    POST /v1/projects/P/subscriptions/S:pull          {"maxMessages"}: waits up to WAIT_S
    POST /v1/projects/P/subscriptions/S:acknowledge   {"ackIds"}
    GET  /_unacked/P/S                                messages not acknowledged (the tests')

A pulled message not acknowledged within its subscription's ack deadline is delivered again
(with a new ackId), as Pub/Sub does. Run: python -m tests.support.fake_pubsub PORT
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import sys
import time
from dataclasses import dataclass, field
from typing import Any

from aiohttp import web

WAIT_S = 5.0


@dataclass
class Subscription:
    name: str
    topic: str
    ack_deadline_s: float
    pending: list[dict[str, Any]] = field(default_factory=list)  # not yet delivered
    leased: dict[str, tuple[float, dict[str, Any]]] = field(default_factory=dict)  # ackId ->
    arrived: asyncio.Event = field(default_factory=asyncio.Event)

    def expire(self) -> None:
        now = time.monotonic()
        for ack_id, (until, message) in list(self.leased.items()):
            if until <= now:
                del self.leased[ack_id]
                self.pending.append(message)


class Server:
    def __init__(self) -> None:
        self.topics: set[str] = set()
        self.subscriptions: dict[str, Subscription] = {}
        self.ids = itertools.count(1)

    def app(self) -> web.Application:
        app = web.Application()
        app.router.add_put("/v1/projects/{p}/topics/{t}", self.create_topic)
        app.router.add_put("/v1/projects/{p}/subscriptions/{s}", self.create_subscription)
        app.router.add_get("/v1/projects/{p}/subscriptions/{s}", self.get_subscription)
        app.router.add_post("/v1/projects/{p}/{kind}/{call}", self.call)
        app.router.add_get("/_unacked/{p}/{s}", self.unacked)
        return app

    async def create_topic(self, request: web.Request) -> web.Response:
        name = f"projects/{request.match_info['p']}/topics/{request.match_info['t']}"
        self.topics.add(name)
        return web.json_response({"name": name})

    async def create_subscription(self, request: web.Request) -> web.Response:
        body = await request.json()
        name = f"projects/{request.match_info['p']}/subscriptions/{request.match_info['s']}"
        if body.get("topic") not in self.topics:
            return web.json_response({"error": {"code": 404, "status": "NOT_FOUND"}}, status=404)
        deadline = float(body.get("ackDeadlineSeconds", 10))
        self.subscriptions[name] = Subscription(name, body["topic"], deadline)
        return web.json_response({"name": name, "topic": body["topic"]})

    def _subscription(self, request: web.Request, name: str) -> Subscription | None:
        return self.subscriptions.get(f"projects/{request.match_info['p']}/subscriptions/{name}")

    async def get_subscription(self, request: web.Request) -> web.Response:
        sub = self._subscription(request, request.match_info["s"])
        if sub is None:
            return web.json_response({"error": {"code": 404, "status": "NOT_FOUND"}}, status=404)
        return web.json_response(
            {"name": sub.name, "topic": sub.topic, "ackDeadlineSeconds": sub.ack_deadline_s}
        )

    async def call(self, request: web.Request) -> web.Response:
        name, _, verb = request.match_info["call"].partition(":")
        body = await request.json()
        if request.match_info["kind"] == "topics" and verb == "publish":
            return self.publish(f"projects/{request.match_info['p']}/topics/{name}", body)
        sub = self._subscription(request, name)
        if sub is None or request.match_info["kind"] != "subscriptions":
            return web.json_response({"error": {"code": 404, "status": "NOT_FOUND"}}, status=404)
        if verb == "pull":
            return await self.pull(sub, int(body.get("maxMessages", 1)))
        if verb == "acknowledge":
            for ack_id in body.get("ackIds", []):
                sub.leased.pop(ack_id, None)
            return web.json_response({})
        return web.json_response({"error": {"code": 400}}, status=400)

    def publish(self, topic: str, body: dict[str, Any]) -> web.Response:
        ids = []
        for message in body.get("messages", []):
            message_id = str(next(self.ids))
            ids.append(message_id)
            stamped = {**message, "messageId": message_id, "publishTime": _now()}
            for sub in self.subscriptions.values():
                if sub.topic == topic:
                    sub.pending.append(stamped)
                    sub.arrived.set()
        return web.json_response({"messageIds": ids})

    async def pull(self, sub: Subscription, most: int) -> web.Response:
        deadline = time.monotonic() + WAIT_S
        while True:
            sub.expire()
            if sub.pending or time.monotonic() >= deadline:
                break
            sub.arrived.clear()
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(sub.arrived.wait(), 0.2)
        out = []
        for message in sub.pending[:most]:
            ack_id = f"ack-{next(self.ids)}"
            sub.leased[ack_id] = (time.monotonic() + sub.ack_deadline_s, message)
            out.append({"ackId": ack_id, "message": message})
        del sub.pending[: len(out)]
        return web.json_response({"receivedMessages": out} if out else {})

    async def unacked(self, request: web.Request) -> web.Response:
        sub = self._subscription(request, request.match_info["s"])
        assert sub is not None
        return web.json_response({"unacked": len(sub.pending) + len(sub.leased)})


def _now() -> str:
    return time.strftime("%Y-%m-%dT%H:%M:%S.000Z", time.gmtime())


if __name__ == "__main__":
    web.run_app(Server().app(), host="127.0.0.1", port=int(sys.argv[1]), print=None)
