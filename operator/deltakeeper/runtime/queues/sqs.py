"""The sqs:// event source: AWS S3 event notifications in an SQS queue, as S3 sends them
directly, wrapped by SNS (a Notification whose `Message` is the S3 event JSON; raw message
delivery sends the S3 event itself) or by EventBridge (`detail-type` "Object Created",
`detail.bucket.name`, `detail.object.key`). Long-polled (WaitTimeSeconds 20) with aiobotocore.

Keys arrive URL-encoded (S3 encodes them in every shape) and go as they are to Events.deliver.
S3's `s3:TestEvent` (sent when a notification is configured) and events that are no object
creation (ObjectRemoved, ...) are counted `ignored`.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from typing import Any

import orjson

from deltakeeper.resources.event_sources import QueueSource
from deltakeeper.runtime.queues.messages import Message, Parsed

log = logging.getLogger("deltakeeper.events")

WAIT_S = 20  # SQS's longest long poll
BATCH = 10  # SQS's most messages per receive and per delete
# The EventBridge detail-types that are an object written.
CREATED = "Object Created"


def parse(body: str) -> Parsed | None:
    """The objects an SQS message body names; None when it is no S3 event in a known shape."""
    try:
        doc = orjson.loads(body)
    except orjson.JSONDecodeError:
        return None
    if isinstance(doc, dict) and doc.get("Type") == "Notification":  # SNS
        message = doc.get("Message")
        if not isinstance(message, str):
            return None
        try:
            doc = orjson.loads(message)
        except orjson.JSONDecodeError:
            return None
    if not isinstance(doc, dict):
        return None
    if doc.get("Event") == "s3:TestEvent":
        return Parsed(ignored=1)
    if "Records" in doc:
        return _records(doc["Records"])
    if doc.get("source") == "aws.s3" and isinstance(doc.get("detail"), dict):
        return _eventbridge(doc)
    return None


def _records(records: Any) -> Parsed | None:
    if not isinstance(records, list):
        return None
    out = Parsed()
    for record in records:
        s3 = record.get("s3") if isinstance(record, dict) else None
        bucket = (s3.get("bucket") or {}).get("name") if isinstance(s3, dict) else None
        key = (s3.get("object") or {}).get("key") if isinstance(s3, dict) else None
        if not isinstance(bucket, str) or not isinstance(key, str):
            return None
        name = record.get("eventName", "ObjectCreated:")
        if isinstance(name, str) and name.startswith(("ObjectCreated:", "s3:ObjectCreated:")):
            out.objects.append((bucket, key))
        else:
            out.ignored += 1
    return out


def _eventbridge(doc: dict[str, Any]) -> Parsed | None:
    detail = doc["detail"]
    bucket = (detail.get("bucket") or {}).get("name")
    key = (detail.get("object") or {}).get("key")
    if not isinstance(bucket, str) or not isinstance(key, str):
        return None
    if doc.get("detail-type") != CREATED:
        return Parsed(ignored=1)
    return Parsed(objects=[(bucket, key)])


def message(raw: Mapping[str, Any]) -> Message:
    parsed = parse(str(raw.get("Body", "")))
    objects = parsed.objects if parsed is not None else None
    ignored = parsed.ignored if parsed is not None else 0
    return Message(str(raw.get("MessageId", "?")), raw["ReceiptHandle"], objects, ignored)


class SqsClient:
    """One queue through aiobotocore: the table's AWS keys (aws_access_key_id,
    aws_secret_access_key, aws_session_token) or botocore's default chain (environment, IRSA's
    web identity, instance profile); the region is the URI's."""

    def __init__(self, queue: QueueSource, options: Mapping[str, Any]) -> None:
        from aiobotocore.config import AioConfig
        from aiobotocore.session import get_session

        self.queue = queue
        keys = {
            name: options[name]
            for name in ("aws_access_key_id", "aws_secret_access_key", "aws_session_token")
            if options.get(name)
        }
        config = AioConfig(
            connect_timeout=10, read_timeout=WAIT_S + 10, retries={"max_attempts": 2}
        )
        self._context = get_session().create_client(
            "sqs", region_name=queue.region, endpoint_url=queue.endpoint, config=config, **keys
        )
        self._client: Any = None

    async def check(self) -> None:
        self._client = await self._context.__aenter__()
        await self._client.get_queue_attributes(
            QueueUrl=self.queue.url, AttributeNames=["VisibilityTimeout"]
        )

    async def receive(self) -> list[Message]:
        answer = await self._client.receive_message(
            QueueUrl=self.queue.url, MaxNumberOfMessages=BATCH, WaitTimeSeconds=WAIT_S
        )
        return [message(m) for m in answer.get("Messages", [])]

    async def ack(self, handles: list[Any]) -> None:
        for start in range(0, len(handles), BATCH):
            entries = [
                {"Id": str(i), "ReceiptHandle": h}
                for i, h in enumerate(handles[start : start + BATCH])
            ]
            answer = await self._client.delete_message_batch(
                QueueUrl=self.queue.url, Entries=entries
            )
            failed = answer.get("Failed") or []
            if failed:  # they come back after the visibility timeout: one more wake each
                log.warning(
                    "events: %s: SQS did not delete %d messages (%s); they will be read again",
                    self.queue.uri,
                    len(failed),
                    failed[0].get("Code"),
                )

    async def close(self) -> None:
        if self._client is not None:
            self._client = None
            await self._context.__aexit__(None, None, None)
