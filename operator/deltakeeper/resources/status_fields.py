"""The fields of a DeltaTable's status: the one list that the CRD's schema (crd.py), the status
the daemon writes (runtime/status.py), the metrics (runtime/metrics.py) and the printers
(`deltakeeper status`) all read. The list sits with the CRD because the resource defines its
status; the runtime, one layer up, fills it in. The same for a DeltaLake's status and a
DeltaMaintenancePolicy's, and the two keys standalone mode's status file adds to a table's.
"""

from __future__ import annotations

import enum


class StatusField(enum.StrEnum):
    OBSERVED_GENERATION = "observedGeneration"
    VERSION = "version"
    LAST_COMMIT_TIME = "lastCommitTime"
    LAST_CHECKPOINT_VERSION = "lastCheckpointVersion"
    COMMITS_SINCE_CHECKPOINT = "commitsSinceCheckpoint"
    LOG_FILES = "logFiles"
    LOG_BYTES = "logBytes"
    FILES = "files"
    BYTES = "bytes"
    SMALL_FILES = "smallFiles"
    TOMBSTONES = "tombstones"
    POLICY = "policy"
    RETENTION = "retention"
    LAST_POLL = "lastPoll"
    LAST_MAINTENANCE = "lastMaintenance"
    COMPACTION = "compaction"
    HEALTH = "health"
    EVENTS = "events"  # only on tables with spec.events
    CONDITIONS = "conditions"


class LakeStatusField(enum.StrEnum):
    """A DeltaLake's status (runtime/discovery.py builds it)."""

    OBSERVED_GENERATION = "observedGeneration"
    TABLES = "tables"  # found by the last good scan
    MANAGED_TABLES = "managedTables"
    MISSING_TABLES = "missingTables"  # managed, but not found by the last scan
    HEALTH = "health"
    LAST_SCAN = "lastScan"
    CONDITIONS = "conditions"


class PolicyStatusField(enum.StrEnum):
    """A DeltaMaintenancePolicy's status (k8s/handlers.py writes it)."""

    OBSERVED_GENERATION = "observedGeneration"
    TABLES = "tables"  # the DeltaTables it governs


# Standalone mode only, in a table's status in the status file (no CRD has them): the lake that
# made the table and whether its last scan found it (the operator says that in the TableFound
# condition), and the digest of the spec the status was written for (hidden: keys starting
# with _ are not shown).
DISCOVERY = "discovery"
SPEC_DIGEST = "_specDigest"

# The counts a poll reads from the table's log, and the `inspect --json` key each comes from
# (delta/summary.py). Each is also a gauge (runtime/metrics.py names them).
COUNTS = {
    StatusField.VERSION: "version",
    StatusField.LAST_CHECKPOINT_VERSION: "lastCheckpointVersion",
    StatusField.COMMITS_SINCE_CHECKPOINT: "commitsSinceCheckpoint",
    StatusField.LOG_FILES: "logFiles",
    StatusField.LOG_BYTES: "logBytes",
    StatusField.FILES: "numFiles",
    StatusField.BYTES: "sizeBytes",
    StatusField.SMALL_FILES: "smallFiles",
    StatusField.TOMBSTONES: "numTombstones",
}
# Written every poll, but not worth a status write by itself (10,000 tables at 30 s would be
# 333 writes a second).
VOLATILE = (StatusField.LAST_POLL,)
# The same inside the events status: every event moves lastEventTime, and at 1,000 events a
# second a write for each would swamp the API server (a table's first event too: 1,000 events
# a second to 50,000 tables are mostly first ones). A commit's event is written with the
# version it announced; a duplicate's only with the next write.
VOLATILE_EVENTS = ("lastEventTime",)
