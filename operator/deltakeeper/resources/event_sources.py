"""spec.events.source: `webhook` or a queue URI, read here so that a table naming a queue this
build cannot read is refused by the spec (InvalidSpec), and the queue consumers
(runtime/queues/) start from the same reading.

    sqs://REGION/ACCOUNT/QUEUE[?endpoint=URL]        AWS SQS (S3 notifications, direct/SNS/EB)
    pubsub://projects/PROJECT/subscriptions/SUB[?endpoint=URL]   GCS Pub/Sub notifications
    azqueue://ACCOUNT/QUEUE[?endpoint=URL]           Event Grid BlobCreated in a storage queue

`endpoint` points the consumer at an SQS-, Pub/Sub- or Queue-compatible server instead of the
cloud's (ElasticMQ, the Pub/Sub emulator, Azurite): for sqs, the service endpoint (the queue
URL is ENDPOINT/ACCOUNT/QUEUE); for pubsub, the API root (no credentials are sent to it); for
azqueue, the account's queue endpoint (the queue URL is ENDPOINT/QUEUE).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from urllib.parse import parse_qs, urlsplit

from deltakeeper.delta import storage_options
from deltakeeper.maintenance.policy import EVENT_SOURCES, QUEUE_SCHEMES, PolicyError

_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,254}$")
_REGION = re.compile(r"^[a-z]{2}(-[a-z0-9]+)+-\d+$")
_ACCOUNT = re.compile(r"^\d{12}$")


@dataclass(frozen=True)
class QueueSource:
    """A queue URI, read: its scheme, where it is, and the endpoint override if any."""

    uri: str
    scheme: str  # sqs, pubsub, azqueue
    url: str  # sqs: the queue URL; pubsub: the subscription's path; azqueue: the queue URL
    region: str = ""  # sqs
    account: str = ""  # sqs: the AWS account; azqueue: the storage account
    endpoint: str | None = None

    @property
    def store(self) -> str:
        """The store whose storage options (delta/storage_options.py) carry its credentials."""
        return {"sqs": "s3", "pubsub": "gcs", "azqueue": "azure"}[self.scheme]


def is_queue(source: str) -> bool:
    return source.partition("://")[0] in QUEUE_SCHEMES and "://" in source


def check(source: str) -> None:
    """Refuse a source this build cannot read (PolicyError, saying what is expected)."""
    if source in EVENT_SOURCES:
        return
    if is_queue(source):
        parse(source)
        return
    raise PolicyError(
        f"events.source {source!r}: expected webhook or a queue URI "
        "(sqs://REGION/ACCOUNT/QUEUE, pubsub://projects/P/subscriptions/S, "
        "azqueue://ACCOUNT/QUEUE)"
    )


def check_store(source: str, table_uri: str) -> None:
    """Refuse a queue of another store than the table's: its events could never name it."""
    if not is_queue(source):
        return
    queue = parse(source)
    if storage_options.store_of(table_uri) != queue.store:
        raise PolicyError(
            f"events.source {source}: {queue.scheme} carries {queue.store} events; "
            f"{table_uri} is not a {queue.store} table"
        )


def parse(source: str) -> QueueSource:
    parts = urlsplit(source)
    query = parse_qs(parts.query)
    unknown = set(query) - {"endpoint"}
    if unknown or parts.fragment or parts.username or parts.password:
        raise PolicyError(f"events.source {source}: only ?endpoint=URL may follow the queue")
    endpoint = query["endpoint"][-1].rstrip("/") if "endpoint" in query else None
    if endpoint is not None and urlsplit(endpoint).scheme not in ("http", "https"):
        raise PolicyError(f"events.source {source}: endpoint must be an http(s) URL")
    segments = [parts.netloc, *parts.path.strip("/").split("/")] if parts.path else [parts.netloc]
    if parts.scheme == "sqs":
        return _sqs(source, segments, endpoint)
    if parts.scheme == "pubsub":
        return _pubsub(source, segments, endpoint)
    return _azqueue(source, segments, endpoint)


def _sqs(source: str, segments: list[str], endpoint: str | None) -> QueueSource:
    if len(segments) != 3 or not _REGION.match(segments[0]) or not _NAME.match(segments[2]):
        raise PolicyError(
            f"events.source {source}: expected sqs://REGION/ACCOUNT/QUEUE, "
            "e.g. sqs://eu-west-1/123456789012/lake-events"
        )
    region, account, queue = segments
    if not _ACCOUNT.match(account):
        raise PolicyError(f"events.source {source}: the AWS account is 12 digits")
    base = endpoint or f"https://sqs.{region}.amazonaws.com"
    return QueueSource(source, "sqs", f"{base}/{account}/{queue}", region, account, endpoint)


def _pubsub(source: str, segments: list[str], endpoint: str | None) -> QueueSource:
    ok = len(segments) == 4 and segments[0] == "projects" and segments[2] == "subscriptions"
    if not ok or not all(_NAME.match(s) for s in segments):
        raise PolicyError(
            f"events.source {source}: expected pubsub://projects/PROJECT/subscriptions/SUB"
        )
    return QueueSource(source, "pubsub", "/".join(segments), endpoint=endpoint)


def _azqueue(source: str, segments: list[str], endpoint: str | None) -> QueueSource:
    if len(segments) != 2 or not re.match(r"^[a-z0-9]{3,24}$", segments[0]):
        raise PolicyError(
            f"events.source {source}: expected azqueue://ACCOUNT/QUEUE (the storage account "
            "in lower case)"
        )
    account, queue = segments
    if not re.match(r"^[a-z0-9](-?[a-z0-9])+$", queue) or not 3 <= len(queue) <= 63:
        raise PolicyError(f"events.source {source}: {queue!r} is not an Azure queue name")
    base = endpoint or f"https://{account}.queue.core.windows.net"
    return QueueSource(source, "azqueue", f"{base}/{queue}", account=account, endpoint=endpoint)
