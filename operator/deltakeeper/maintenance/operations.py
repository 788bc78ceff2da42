"""The maintenance operations by name, in the order a plan runs them: a new checkpoint lets a
later cleanup drop the commits before it, compaction's tombstones become vacuumable later,
and cleanup never touches data files."""

from __future__ import annotations

import enum


class Operation(enum.StrEnum):
    CHECKPOINT = "checkpoint"
    COMPACTION = "compaction"
    CLEANUP = "cleanup"
    VACUUM = "vacuum"


# What each deleting operation deletes, as metrics and reports name it.
DELETES = {Operation.CLEANUP: "log", Operation.VACUUM: "data"}
