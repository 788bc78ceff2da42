"""A background reader, so decoding the old checkpoint overlaps writing the new one."""

from __future__ import annotations

import queue
import threading
from collections.abc import Iterator
from typing import Any, TypeVar

_T = TypeVar("_T")


PREFETCH = 2  # batches read ahead of the writer


def prefetched(items: Iterator[_T], depth: int = PREFETCH) -> Iterator[_T]:
    """`items` produced by a background thread, at most `depth` ahead. Reading and decoding the
    old checkpoint then overlaps with encoding and compressing the new one (pyarrow releases
    the GIL in both); memory grows by `depth` batches. Errors surface in the consumer."""
    slots: queue.Queue[tuple[str, Any]] = queue.Queue(maxsize=depth)
    stop = threading.Event()

    def offer(entry: tuple[str, Any]) -> bool:
        while not stop.is_set():
            try:
                slots.put(entry, timeout=0.1)
                return True
            except queue.Full:
                continue
        return False

    def produce() -> None:
        try:
            for item in items:
                if not offer(("item", item)):
                    return
            offer(("done", None))
        except BaseException as e:  # handed to the consumer, raised there
            offer(("error", e))

    worker = threading.Thread(target=produce, name="checkpoint-prefetch", daemon=True)
    worker.start()
    try:
        while True:
            kind, value = slots.get()
            if kind == "done":
                return
            if kind == "error":
                raise value
            yield value
    finally:
        stop.set()
        worker.join()
