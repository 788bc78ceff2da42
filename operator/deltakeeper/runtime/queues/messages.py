"""What the queue sources' clients hand the consumer (runtime/queues/__init__.py): messages with
the objects they name, and the client's four calls."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Protocol


@dataclass
class Message:
    """One message received: `handle` acknowledges it; `objects` are the (bucket, key) it
    names, keys URL-encoded as S3 sends them (Events.deliver decodes them); None: malformed."""

    id: str
    handle: Any
    objects: list[tuple[str, str]] | None
    ignored: int = 0  # events it carries that wake nothing (deletes, S3's test event)


@dataclass
class Parsed:
    """What a message body names (the sources' parse functions return it)."""

    objects: list[tuple[str, str]] = field(default_factory=list)
    ignored: int = 0


class Client(Protocol):
    """One queue's client (sqs.py, azqueue.py, pubsub.py)."""

    async def check(self) -> None:
        """Raise unless the queue can be read with these credentials."""

    async def receive(self) -> list[Message]:
        """The next messages; waits a while (long poll) when there are none."""

    async def ack(self, handles: list[Any]) -> None:
        """Delete (acknowledge) these messages."""

    async def close(self) -> None: ...
