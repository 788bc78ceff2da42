"""The maintenance operations by name, in the order a plan runs them: a new checkpoint lets a
later cleanup drop the commits before it, an expiry removes what compaction would otherwise
rewrite (and statistics and manifests cover), compaction's tombstones become vacuumable
later, and cleanup never touches data files. Then what Delta Spark gives its own tables and other
writers' tables lack: file statistics (a commit), a log compaction file over the commits up
to the newest (statistics' commit included), symlink manifests of the files now live.

Light on purpose (the CLI's parser imports it as it starts): what each operation is and does
is in its own module in this package, and registry.py lists them."""

from __future__ import annotations

import enum


class Operation(enum.StrEnum):
    CHECKPOINT = "checkpoint"
    EXPIRE = "expire"
    COMPACTION = "compaction"
    CLEANUP = "cleanup"
    VACUUM = "vacuum"
    STATS = "stats"
    LOG_COMPACTION = "logCompaction"
    MANIFEST = "manifest"


class OnCatalogManaged(enum.Enum):
    """What an operation may do on a catalog-managed table (Delta's "Maintenance Operations on
    Catalog-managed Tables"): the catalog is the table's source of truth, and a client may run
    only the work every read and write relies on."""

    RUNS = "runs"  # checkpoints, log compaction files, checksums: for published versions
    IF_PERMITTED = "refused unless the catalog permits it"  # deletes, or writes beside the log
    NEVER = "refused: it commits, and commits go through the catalog"


class Cadence(enum.Enum):
    """When a watch loop plans an operation (maintenance/schedule.py)."""

    NEW_VERSION = "each time the table moves on"  # the planner decides whether it is due
    PERIODIC = "every so often"  # cleanup: CLEANUP_EVERY_MS
    SCHEDULED = "on its cron schedule, else periodically"  # vacuum
    EACH_VERSION = "once per version, where asked for"  # the writers
    JOBS = "as its job budget allows"  # compaction (runtime/jobs.py)
