"""The maintenance operations by name, in the order a plan runs them: a new checkpoint lets a
later cleanup drop the commits before it, compaction's tombstones become vacuumable later,
and cleanup never touches data files. Then what Delta Spark gives its own tables and other
writers' tables lack: file statistics (a commit), a log compaction file over the commits up
to the newest (statistics' commit included), symlink manifests of the files now live."""

from __future__ import annotations

import enum


class Operation(enum.StrEnum):
    CHECKPOINT = "checkpoint"
    COMPACTION = "compaction"
    CLEANUP = "cleanup"
    VACUUM = "vacuum"
    STATS = "stats"
    LOG_COMPACTION = "logCompaction"
    MANIFEST = "manifest"


# Steps of a plan only where the policy (or, for manifests, the table) asks for them. Each
# counts what it wrote (Outcome.written_files): files given statistics, log compaction files,
# manifests.
WRITERS = (Operation.STATS, Operation.LOG_COMPACTION, Operation.MANIFEST)


# What each deleting operation deletes, as metrics and reports name it.
DELETES = {Operation.CLEANUP: "log", Operation.VACUUM: "data"}
