"""The azqueue:// event source: Azure Event Grid `Microsoft.Storage.BlobCreated` events that an
Event Grid subscription delivers to a storage queue. Each message's text is the event's JSON in
base64 (Event Grid's schema, or CloudEvents': `type` instead of `eventType`), one event a
message; its `subject` is /blobServices/default/containers/CONTAINER/blobs/PATH, the blob's
name as it is (not URL-encoded), which is what is believed; `data.url` only when the subject is
missing.

The Queue service REST API, signed with the account's SharedKey (azure_storage_account_key) or
a SAS (azure_storage_sas_token). A queue has no long poll: an empty receive waits IDLE_S before
the next (about 86,400 requests a day, $0.035 at $0.004 per 10,000).
"""

from __future__ import annotations

import asyncio
import base64
import binascii
import hashlib
import hmac
import logging
import xml.etree.ElementTree as ET
from collections.abc import Mapping
from email.utils import formatdate
from typing import Any
from urllib.parse import parse_qsl, quote, unquote, urlencode, urlsplit

import aiohttp
import orjson

from deltakeeper.resources.event_sources import QueueSource
from deltakeeper.runtime.queues.messages import Message, Parsed

log = logging.getLogger("deltakeeper.events")

API_VERSION = "2021-12-02"
BATCH = 32  # the Queue service's most messages per receive
VISIBILITY_S = 30  # a received message is hidden this long, then read again unless deleted
IDLE_S = 1.0
CREATED = "Microsoft.Storage.BlobCreated"
_SUBJECT = "/blobServices/default/containers/"


def parse(text: str) -> Parsed | None:
    """The blob a queue message's text names; None when it is no Event Grid event."""
    try:
        doc = orjson.loads(base64.b64decode(text, validate=True))
    except (binascii.Error, ValueError):
        try:  # a queue written without base64 (the Queue service takes any text)
            doc = orjson.loads(text)
        except orjson.JSONDecodeError:
            return None
    events = doc if isinstance(doc, list) else [doc]
    out = Parsed()
    for event in events:
        if not isinstance(event, dict):
            return None
        kind = event.get("eventType") or event.get("type")
        place = _subject(event.get("subject")) or _url((event.get("data") or {}).get("url"))
        if not isinstance(kind, str) or place is None:
            return None
        if kind != CREATED:
            out.ignored += 1
            continue
        container, name = place
        out.objects.append((container, quote(name, safe="/")))  # deliver decodes keys
    return out


def _subject(subject: Any) -> tuple[str, str] | None:
    if not isinstance(subject, str) or not subject.startswith(_SUBJECT):
        return None
    container, sep, name = subject[len(_SUBJECT) :].partition("/blobs/")
    return (container, name) if sep and container and name else None


def _url(url: Any) -> tuple[str, str] | None:
    if not isinstance(url, str):
        return None
    container, _, name = unquote(urlsplit(url).path).lstrip("/").partition("/")
    return (container, name) if container and name else None


def sign(
    account: str, key: str, method: str, url: str, headers: Mapping[str, str], length: int = 0
) -> str:
    """The SharedKey Authorization header of a Queue service request."""
    parts = urlsplit(url)
    canonical_headers = "".join(
        f"{k.lower()}:{v.strip()}\n"
        for k, v in sorted(headers.items())
        if k.lower().startswith("x-ms-")
    )
    resource = f"/{account}{parts.path or '/'}"
    for name, value in sorted((k.lower(), v) for k, v in parse_qsl(parts.query)):
        resource += f"\n{name}:{value}"
    to_sign = "\n".join(
        [
            method,
            "",  # Content-Encoding
            "",  # Content-Language
            str(length) if length else "",
            "",  # Content-MD5
            headers.get("Content-Type", ""),
            "",  # Date (x-ms-date is sent)
            "",
            "",
            "",
            "",
            "",  # If-*, Range
            canonical_headers + resource,
        ]
    )
    digest = hmac.new(base64.b64decode(key), to_sign.encode(), hashlib.sha256).digest()
    return f"SharedKey {account}:{base64.b64encode(digest).decode()}"


class QueueClient:
    """One storage queue: SharedKey from azure_storage_account_key, else the SAS of
    azure_storage_sas_token."""

    def __init__(self, queue: QueueSource, options: Mapping[str, Any]) -> None:
        self.queue = queue
        self.key = options.get("azure_storage_account_key")
        self.sas = str(options.get("azure_storage_sas_token") or "").lstrip("?")
        if not self.key and not self.sas:
            raise PermissionError(
                "no azure_storage_account_key or azure_storage_sas_token in the table's "
                "storage options to read the queue with"
            )
        self._session: aiohttp.ClientSession | None = None

    async def _request(self, method: str, path: str, query: dict[str, str]) -> bytes:
        if self._session is None:
            self._session = aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(total=30))
        url = f"{self.queue.url}{path}?{urlencode(query)}"
        if not self.key:
            url += f"&{self.sas}"
        headers = {"x-ms-date": formatdate(usegmt=True), "x-ms-version": API_VERSION}
        if self.key:
            headers["Authorization"] = sign(self.queue.account, str(self.key), method, url, headers)
        async with self._session.request(method, url, headers=headers) as response:
            body = await response.read()
            if response.status >= 300:
                code = response.headers.get("x-ms-error-code", "")
                raise ConnectionError(f"the Queue service answered {response.status} {code}")
            return body

    async def check(self) -> None:
        await self._request("GET", "", {"comp": "metadata"})

    async def receive(self) -> list[Message]:
        body = await self._request(
            "GET",
            "/messages",
            {"numofmessages": str(BATCH), "visibilitytimeout": str(VISIBILITY_S)},
        )
        messages = [_message(m) for m in ET.fromstring(body).iter("QueueMessage")]
        if not messages:
            await asyncio.sleep(IDLE_S)
        return messages

    async def ack(self, handles: list[Any]) -> None:
        for message_id, receipt in handles:
            try:
                await self._request("DELETE", f"/messages/{message_id}", {"popreceipt": receipt})
            except ConnectionError as e:  # read again after its visibility timeout
                log.warning("events: %s: message %s not deleted: %s", self.queue.uri, message_id, e)

    async def close(self) -> None:
        if self._session is not None:
            await self._session.close()
            self._session = None


def _message(element: ET.Element) -> Message:
    message_id = element.findtext("MessageId") or "?"
    receipt = element.findtext("PopReceipt") or ""
    parsed = parse(element.findtext("MessageText") or "")
    objects = parsed.objects if parsed is not None else None
    ignored = parsed.ignored if parsed is not None else 0
    return Message(message_id, (message_id, receipt), objects, ignored)
