"""The pubsub:// event source: Cloud Storage's Pub/Sub notifications (a bucket's notification
configuration, `gcloud storage buckets notifications create`), pulled from a subscription with
the Pub/Sub REST API (`:pull`, which waits a while for messages, and `:acknowledge`).

What is believed is the message's attributes, as GCS documents them: `eventType`
(OBJECT_FINALIZE wakes; OBJECT_DELETE, OBJECT_METADATA_UPDATE, OBJECT_ARCHIVE are `ignored`),
`bucketId` and `objectId` (the object's name as it is, not URL-encoded); the payload (the
object's JSON resource, `name` and `bucket`) only when those attributes are missing.

Credentials: with `?endpoint=` (an emulator) none; else the table's service-account key
(google_service_account_key, read with google-auth) or, without one, the metadata server's
token (GKE workload identity, a VM's service account).
"""

from __future__ import annotations

import base64
import binascii
import time
from collections.abc import Mapping
from typing import Any
from urllib.parse import quote

import aiohttp
import orjson

from deltakeeper.resources.event_sources import QueueSource
from deltakeeper.runtime.queues.messages import Message, Parsed

API = "https://pubsub.googleapis.com/v1"
METADATA_TOKEN = (
    "http://metadata.google.internal/computeMetadata/v1/instance/service-accounts/default/token"
)
SCOPE = "https://www.googleapis.com/auth/pubsub"
BATCH = 100
FINALIZE = "OBJECT_FINALIZE"
PULL_TIMEOUT_S = 90  # a pull waits for messages up to about a minute, then answers empty


def parse(message: Mapping[str, Any]) -> Parsed | None:
    """The object a Pub/Sub message (its `attributes` and base64 `data`) names; None when it
    is no Cloud Storage notification."""
    attributes = message.get("attributes") or {}
    if not isinstance(attributes, dict):
        return None
    kind = attributes.get("eventType")
    bucket, name = attributes.get("bucketId"), attributes.get("objectId")
    if not isinstance(bucket, str) or not isinstance(name, str):
        resource = _payload(message.get("data"))
        bucket, name = resource.get("bucket"), resource.get("name")
    if not isinstance(kind, str) or not isinstance(bucket, str) or not isinstance(name, str):
        return None
    if kind != FINALIZE:
        return Parsed(ignored=1)
    return Parsed(objects=[(bucket, quote(name, safe="/"))])  # deliver decodes keys


def _payload(data: Any) -> dict[str, Any]:
    try:
        doc = orjson.loads(base64.b64decode(str(data or ""), validate=True))
    except (binascii.Error, ValueError):
        return {}
    return doc if isinstance(doc, dict) else {}


class PubSubClient:
    def __init__(self, queue: QueueSource, options: Mapping[str, Any]) -> None:
        self.queue = queue
        self.base = f"{queue.endpoint or API}".rstrip("/")
        if queue.endpoint and not queue.endpoint.rstrip("/").endswith("/v1"):
            self.base += "/v1"
        self.key = options.get("google_service_account_key")
        self._session: aiohttp.ClientSession | None = None
        self._token: tuple[str, float] | None = None  # token, expiry (monotonic)
        self._credentials: Any = None

    async def _headers(self) -> dict[str, str]:
        if self.queue.endpoint:
            return {}
        if self._token is None or self._token[1] < time.monotonic() + 60:
            self._token = await self._fetch_token()
        return {"Authorization": f"Bearer {self._token[0]}"}

    async def _fetch_token(self) -> tuple[str, float]:
        if self.key:
            return await self._key_token()
        assert self._session is not None
        async with self._session.get(
            METADATA_TOKEN, headers={"Metadata-Flavor": "Google"}
        ) as response:
            if response.status != 200:
                raise PermissionError(f"the metadata server gave no token ({response.status})")
            doc = await response.json()
        return str(doc["access_token"]), time.monotonic() + float(doc.get("expires_in", 300))

    async def _key_token(self) -> tuple[str, float]:
        import asyncio

        try:
            from google.auth.transport.requests import Request
            from google.oauth2 import service_account
        except ImportError:
            raise PermissionError(
                "a google_service_account_key needs google-auth (pip install google-auth); "
                "or leave it out and use the metadata server (workload identity)"
            ) from None

        if self._credentials is None:
            info = self.key if isinstance(self.key, dict) else orjson.loads(str(self.key))
            self._credentials = service_account.Credentials.from_service_account_info(
                info, scopes=[SCOPE]
            )
        await asyncio.to_thread(self._credentials.refresh, Request())
        return str(self._credentials.token), time.monotonic() + 3000

    async def _call(self, method: str, verb: str = "", body: Any = None) -> Any:
        if self._session is None:
            self._session = aiohttp.ClientSession(
                timeout=aiohttp.ClientTimeout(total=PULL_TIMEOUT_S)
            )
        url = f"{self.base}/{self.queue.url}{verb}"
        headers = await self._headers()
        async with self._session.request(method, url, headers=headers, json=body) as response:
            text = await response.read()
            if response.status >= 300:
                raise ConnectionError(f"Pub/Sub answered {response.status} to {verb or 'GET'}")
            return orjson.loads(text) if text else {}

    async def check(self) -> None:
        await self._call("GET")

    async def receive(self) -> list[Message]:
        answer = await self._call("POST", ":pull", {"maxMessages": BATCH})
        return [_message(r) for r in answer.get("receivedMessages") or []]

    async def ack(self, handles: list[Any]) -> None:
        await self._call("POST", ":acknowledge", {"ackIds": handles})

    async def close(self) -> None:
        if self._session is not None:
            await self._session.close()
            self._session = None


def _message(received: Mapping[str, Any]) -> Message:
    message = received.get("message") or {}
    parsed = parse(message) if isinstance(message, dict) else None
    objects = parsed.objects if parsed is not None else None
    ignored = parsed.ignored if parsed is not None else 0
    return Message(str(message.get("messageId", "?")), received.get("ackId"), objects, ignored)
