"""Work that builds many small acyclic objects (a log's actions as dicts) at once.

Each few hundred new dicts wake Python's cycle collector, and every so often it walks every
object the process holds: on a 10,000-file expiry that took ~70 ms of ~190 (benchmarks/expire.py).
Action dicts hold no cycles, so pausing the collector around such work frees nothing later
than it would have been freed anyway; reference counting still frees them as they go.
"""

from __future__ import annotations

import gc
import threading
from collections.abc import Iterator
from contextlib import contextmanager

_lock = threading.Lock()
_holders = 0  # the pauses open now, in any thread
_was_enabled = False  # whether the collector ran before the first of them


@contextmanager
def collector_paused() -> Iterator[None]:
    """The cycle collector off while the block runs, back to how it was after the last
    concurrent block ends (the collector is process-wide, so the pauses are counted)."""
    global _holders, _was_enabled
    with _lock:
        if _holders == 0:
            _was_enabled = gc.isenabled()
            gc.disable()
        _holders += 1
    try:
        yield
    finally:
        with _lock:
            _holders -= 1
            if _holders == 0 and _was_enabled:
                gc.enable()
