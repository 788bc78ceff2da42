"""The garbage collector and a daemon's long-lived state.

A daemon holds its tables' state for as long as it runs: about 1.8 million objects the collector
tracks at 10,000 tables. Python walks all of them in a full collection, holding the GIL, each
time a quarter as many again have reached its oldest generation, which polls under load do
within seconds (their objects outlive two young collections while a request is out, then go).
At 10,000 tables and 1,000 events a second that was 3 full collections in 30 s, the longest
1.6 s, and the webhook's answers waited them out (p99 2.2 s); 50,000 tables make each five times
longer. Those collections found nothing: the polls leave no cyclic garbage, their objects go
when their last reference does.

So whatever has lived through the young generations is frozen (`gc.freeze`: the collector no
longer walks it) once there are MIN_OBJECTS of it, checked every CHECK_S: a freeze collects the
unfrozen objects first (no garbage of the moment is frozen) and costs milliseconds. Frozen
objects are still freed when their last reference goes. Cyclic garbage among them (a removed
table's loop, what a start leaves) waits for a thaw: an hour after the start, and then hourly
while tables are being removed, everything is thawed, collected in full, and frozen again.
With nothing left to find but young objects, the young collections run a tenth as often.
A daemon that never holds MIN_OBJECTS keeps Python's collector as it is.
"""

from __future__ import annotations

import gc
import logging
import time
from collections.abc import Callable

log = logging.getLogger("deltakeeper.heap")

CHECK_S = 10.0  # how often the unfrozen old objects are counted (a walk of that list)
MIN_OBJECTS = 100_000
THAW_S = 3600.0
YOUNG_THRESHOLD = 7_000  # allocations between young collections (Python's default: 700)


class Heap:
    """When to freeze the daemon's state and when to thaw it; `tend` from a periodic task."""

    def __init__(self, clock: Callable[[], float] = time.monotonic) -> None:
        self.clock = clock
        self.checked = float("-inf")
        self.collected = clock()  # the last full collection we made
        self.removed = 1  # tables removed since then; a start's leftovers count as one
        # Whether this froze anything: gc.get_freeze_count() walks every frozen object (0.18 s
        # at 10,000 tables, five times the objects at 50,000), too dear every CHECK_S.
        self.frozen = False

    def forgotten(self) -> None:
        """A table was removed: its frozen state may be cyclic garbage now."""
        self.removed += 1

    def tend(self) -> str | None:
        """Freeze or thaw when due (at most one check every CHECK_S); what was done."""
        now = self.clock()
        if now - self.checked < CHECK_S:
            return None
        self.checked = now
        if self.removed and self.frozen and now - self.collected >= THAW_S:
            started = time.perf_counter()
            gc.unfreeze()
            gc.collect()
            gc.freeze()
            self.collected, self.removed = now, 0
            log.info(
                "heap: thawed, collected in full (%.2f s) and frozen again: %d objects",
                time.perf_counter() - started,
                gc.get_freeze_count(),
            )
            return "thawed"
        if len(gc.get_objects(generation=2)) < MIN_OBJECTS:
            return None
        gc.collect()  # the unfrozen ones only
        gc.freeze()
        self.frozen = True
        gc.set_threshold(YOUNG_THRESHOLD, *gc.get_threshold()[1:])
        return "frozen"


HEAP = Heap()  # the collector is the process's: one for every fleet in it
