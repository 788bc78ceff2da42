"""The fields of a DeltaTable's status: the one list that the CRD's schema (crd.py), the status
the daemon writes (runtime/status.py), the metrics (runtime/metrics.py) and the printers
(`deltakeeper status`) all read. The list sits with the CRD because the resource defines its
status; the runtime, one layer up, fills it in.
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
    CONDITIONS = "conditions"


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
