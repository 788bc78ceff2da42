"""The azqueue:// event source: Azure Event Grid `Microsoft.Storage.BlobCreated` events that an
Event Grid subscription delivers to a storage queue. Each message's text is the event's JSON in
base64 (Event Grid's schema, or CloudEvents': `type` instead of `eventType`), one event a
message; its `subject` is /blobServices/default/containers/CONTAINER/blobs/PATH, the blob's
name as it is (not URL-encoded), which is what is believed; `data.url` only when the subject is
missing.

The Queue service REST API, signed with the account's SharedKey (azure_storage_account_key), a
SAS (azure_storage_sas_token), or an Azure AD token: a service principal's secret
(azure_client_id, azure_client_secret, azure_tenant_id) or Workload Identity's federated token
(azure_federated_token_file, or AKS's AZURE_FEDERATED_TOKEN_FILE, AZURE_CLIENT_ID and
AZURE_TENANT_ID), exchanged at azure_authority_host (AZURE_AUTHORITY_HOST) as the Azure SDKs do;
with none of these, the managed identity of the VM, node or App Service the daemon runs on, asked
at its metadata endpoint (azure_msi_endpoint, IMDS by default; a user-assigned one by
azure_client_id, azure_object_id or azure_msi_resource_id), as object_store, and so the table's
own store, falls back to it.
A queue has no long poll: an empty receive waits IDLE_S before the next (about 86,400 requests a
day, $0.035 at $0.004 per 10,000).
"""

from __future__ import annotations

import asyncio
import base64
import binascii
import hashlib
import hmac
import logging
import os
import time
import xml.etree.ElementTree as ET
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
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
AUTHORITY = "https://login.microsoftonline.com"
SCOPE = "https://storage.azure.com/.default"
ASSERTION = "urn:ietf:params:oauth:client-assertion-type:jwt-bearer"
REFRESH_BEFORE_S = 300  # a token is renewed this long before it expires, as the SDKs do
IMDS = "http://169.254.169.254/metadata/identity/oauth2/token"
MSI_API_VERSION = "2019-08-01"
STORAGE_RESOURCE = "https://storage.azure.com"
# Off Azure the metadata address does not answer: the source is down with the reason soon.
MSI_TIMEOUT_S = 5.0


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


@dataclass(frozen=True)
class AzureAd:
    """An Azure AD application to get a storage token for: with its secret, or with a
    federated token file (Workload Identity), read again for each token since it rotates."""

    tenant: str
    client_id: str
    secret: str = ""
    token_file: str = ""
    authority: str = AUTHORITY

    def form(self) -> dict[str, str]:
        """The client-credentials request's body."""
        body = {"grant_type": "client_credentials", "client_id": self.client_id, "scope": SCOPE}
        if self.secret:
            return {**body, "client_secret": self.secret}
        with open(self.token_file, encoding="utf-8") as f:
            assertion = f.read().strip()
        return {**body, "client_assertion_type": ASSERTION, "client_assertion": assertion}

    @property
    def url(self) -> str:
        return f"{self.authority.rstrip('/')}/{self.tenant}/oauth2/v2.0/token"


def azure_ad(options: Mapping[str, Any], environ: Mapping[str, str] = os.environ) -> AzureAd | None:
    """The Azure AD application the options name (object_store's spellings), else the one the
    environment names (AKS Workload Identity's variables); None when neither names one."""

    def pick(env: str, *names: str) -> str:
        return _setting(options, environ, names, (env,))

    client_id = pick("AZURE_CLIENT_ID", "azure_client_id", "azure_storage_client_id")
    tenant = pick(
        "AZURE_TENANT_ID", "azure_tenant_id", "azure_storage_tenant_id", "azure_authority_id"
    )
    secret = pick("AZURE_CLIENT_SECRET", "azure_client_secret", "azure_storage_client_secret")
    token_file = pick("AZURE_FEDERATED_TOKEN_FILE", "azure_federated_token_file")
    authority = pick("AZURE_AUTHORITY_HOST", "azure_authority_host", "azure_storage_authority_host")
    if not (client_id and tenant and (secret or token_file)):
        return None
    return AzureAd(tenant, client_id, secret, token_file, authority or AUTHORITY)


@dataclass(frozen=True)
class ManagedIdentity:
    """A managed identity's token from the metadata endpoint where the daemon runs (IMDS on a
    VM or AKS node; App Service's IDENTITY_ENDPOINT with its IDENTITY_HEADER)."""

    endpoint: str = IMDS
    identity: tuple[str, str] | None = None  # (client_id | object_id | msi_res_id, value)
    header: str = ""  # App Service's IDENTITY_HEADER, sent as x-identity-header

    def query(self) -> dict[str, str]:
        query = {"api-version": MSI_API_VERSION, "resource": STORAGE_RESOURCE}
        if self.identity is not None:
            query[self.identity[0]] = self.identity[1]
        return query

    def headers(self) -> dict[str, str]:
        headers = {"Metadata": "true"}
        if self.header:
            headers["x-identity-header"] = self.header
        return headers


def managed_identity(
    options: Mapping[str, Any], environ: Mapping[str, str] = os.environ
) -> ManagedIdentity:
    """The managed identity object_store would ask, from the options (its spellings) or the
    environment (their AZURE_* forms); a user-assigned one when an id names it (the most
    specific of resource id, object id, client id)."""

    def pick(*names: str, env: tuple[str, ...] = ()) -> str:  # env: beside the AZURE_* forms
        return _setting(options, environ, names, (*(n.upper() for n in names), *env))

    identity = None
    for kind, names in (
        ("client_id", ("azure_client_id", "azure_storage_client_id")),
        ("object_id", ("azure_object_id",)),
        ("msi_res_id", ("azure_msi_resource_id",)),
    ):
        value = pick(*names)
        if value:
            identity = (kind, value)
    endpoint = pick("azure_msi_endpoint", "azure_identity_endpoint", env=("IDENTITY_ENDPOINT",))
    return ManagedIdentity(endpoint or IMDS, identity, environ.get("IDENTITY_HEADER", ""))


def _setting(
    options: Mapping[str, Any], environ: Mapping[str, str], names: Iterable[str], env: Iterable[str]
) -> str:
    """The first of `names` the table's options set, else the first of `env` the environment
    sets; "" when none is."""
    for name in names:
        if options.get(name):
            return str(options[name])
    return next((environ[e] for e in env if environ.get(e)), "")


class QueueClient:
    """One storage queue: SharedKey from azure_storage_account_key, else the SAS of
    azure_storage_sas_token, both only when the table's account is the queue's; else an Azure AD
    token (azure_ad), else the managed identity's (managed_identity)."""

    def __init__(self, queue: QueueSource, options: Mapping[str, Any]) -> None:
        self.queue = queue
        account = options.get("azure_storage_account_name")
        mine = not account or account == queue.account  # a key or SAS is one account's
        self.key = options.get("azure_storage_account_key") if mine else None
        self.sas = str(options.get("azure_storage_sas_token") or "").lstrip("?") if mine else ""
        self.ad = None if self.key or self.sas else azure_ad(options)
        self.msi: ManagedIdentity | None = None
        if not self.key and not self.sas and self.ad is None:
            self.msi = managed_identity(options)
        self._token: tuple[str, float] | None = None  # token, renew after (monotonic)
        self._session: aiohttp.ClientSession | None = None

    def _client(self) -> aiohttp.ClientSession:
        if self._session is None:
            self._session = aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(total=30))
        return self._session

    async def _bearer(self) -> str:
        if self._token is None or self._token[1] < time.monotonic():
            doc = await (self._ad_token(self.ad) if self.ad is not None else self._msi_token())
            lifetime = _seconds(doc.get("expires_in"))
            renew = max(lifetime - REFRESH_BEFORE_S, lifetime / 2)
            self._token = (str(doc["access_token"]), time.monotonic() + renew)
        return self._token[0]

    async def _ad_token(self, ad: AzureAd) -> dict[str, Any]:
        async with self._client().post(ad.url, data=ad.form()) as response:
            doc = await _json(response)
            if response.status != 200 or not doc.get("access_token"):
                raise PermissionError(
                    f"Azure AD gave no token for client {ad.client_id} ({response.status} "
                    f"{doc.get('error', '')}): check azure_client_id, azure_tenant_id and the "
                    "secret or federated token"
                )
        return doc

    async def _msi_token(self) -> dict[str, Any]:
        msi = self.msi
        assert msi is not None  # no key, SAS or Azure AD application: __init__ set it
        why = (
            f"no credential for storage account {self.queue.account}: no "
            "azure_storage_account_key or azure_storage_sas_token (the table's account only), "
            "no Azure AD application (azure_client_id and azure_tenant_id with "
            "azure_client_secret or azure_federated_token_file, or Workload Identity's AZURE_* "
            f"variables), and the managed identity endpoint {msi.endpoint}"
        )
        timeout = aiohttp.ClientTimeout(total=MSI_TIMEOUT_S)
        try:
            async with self._client().get(
                msi.endpoint, params=msi.query(), headers=msi.headers(), timeout=timeout
            ) as response:
                doc = await _json(response)
                status = response.status
        except (aiohttp.ClientError, TimeoutError) as e:
            raise PermissionError(f"{why} did not answer ({type(e).__name__})") from None
        if status != 200 or not doc.get("access_token"):
            raise PermissionError(f"{why} gave no token ({status} {doc.get('error', '')})")
        return doc

    async def _request(self, method: str, path: str, query: dict[str, str]) -> bytes:
        url = f"{self.queue.url}{path}?{urlencode(query)}"
        if self.sas and not self.key:
            url += f"&{self.sas}"
        headers = {"x-ms-date": formatdate(usegmt=True), "x-ms-version": API_VERSION}
        if self.key:
            headers["Authorization"] = sign(self.queue.account, str(self.key), method, url, headers)
        elif not self.sas:  # an Azure AD application's token, or the managed identity's
            headers["Authorization"] = f"Bearer {await self._bearer()}"
        async with self._client().request(method, url, headers=headers) as response:
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


def _seconds(value: Any) -> float:
    """A token's lifetime: a number from Azure AD, a string from the metadata service; an hour
    when it says none."""
    try:
        return float(value) if value else 3600.0
    except (TypeError, ValueError):
        return 3600.0


async def _json(response: aiohttp.ClientResponse) -> dict[str, Any]:
    """A token endpoint's answer as a dict ({} for an HTML error page from a proxy, say)."""
    try:
        doc = await response.json(content_type=None)
    except ValueError:
        return {}
    return doc if isinstance(doc, dict) else {}


def _message(element: ET.Element) -> Message:
    message_id = element.findtext("MessageId") or "?"
    receipt = element.findtext("PopReceipt") or ""
    parsed = parse(element.findtext("MessageText") or "")
    objects = parsed.objects if parsed is not None else None
    ignored = parsed.ignored if parsed is not None else 0
    return Message(message_id, (message_id, receipt), objects, ignored)
