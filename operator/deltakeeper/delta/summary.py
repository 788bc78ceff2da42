"""A table's health at a glance: what `inspect`, status and metrics report."""

from __future__ import annotations

from typing import Any

from deltakeeper.delta import features, paths
from deltakeeper.delta.held import HeldSnapshot
from deltakeeper.delta.log.segment import group
from deltakeeper.delta.paths import Kind
from deltakeeper.delta.snapshot import SmallFiles, Snapshot
from deltakeeper.delta.storage import FileInfo
from deltakeeper.delta.table import Table, checked_hint


def log_listing(table: Table) -> list[FileInfo]:
    """Everything under `_delta_log`, as the summary (and health) read it."""
    return list(table.storage.walk(paths.LOG_DIR))


def staged_commits(table: Table, version: int) -> int:
    """How many staged commits (`_delta_log/_staged_commits/<v>.<uuid>.json`) propose a version
    after `version`, the newest published one: one listing of that folder from v + 1 on. A
    catalog-managed table's catalog may have ratified some of them; the others are failed or
    running attempts. None is read as part of the table."""
    folder = f"{paths.LOG_DIR}/{paths.STAGED_DIRS[0]}"
    count = 0
    for info in table.storage.list_from(folder, f"{folder}/{version + 1:020d}"):
        name = paths.parse(info.key[len(paths.LOG_DIR) + 1 :])
        if name is not None and name.kind is Kind.STAGED_COMMIT and name.version > version:
            count += 1
    return count


def summarize(
    table: Table,
    snap: Snapshot | HeldSnapshot,
    small_file_bytes: int,
    infos: list[FileInfo] | None = None,
) -> dict[str, Any]:
    """The documented `inspect --json` object (keys are a contract; see README), of a snapshot
    with its file actions or a held one (the same numbers). `infos`: the log's listing when
    the caller made it (`log_listing`)."""
    log_files = log_bytes = unpublished = 0
    if infos is None:
        infos = log_listing(table)
    for info in infos:
        log_files += 1
        log_bytes += info.size
        name = paths.parse(info.key[len(paths.LOG_DIR) + 1 :])
        if name is not None and name.kind is Kind.STAGED_COMMIT and name.version > snap.version:
            unpublished += 1
    cp = snap.segment.checkpoint
    hint = checked_hint(table.read_hint(), group(infos))
    m = snap.metadata
    return {
        "uri": snap.uri,
        "version": snap.version,
        "timestamp": snap.timestamp_ms,
        "protocol": snap.protocol.to_json(),
        "catalogManaged": features.catalog_managed(snap.protocol),
        "unsupportedFeatures": snap.unsupported_features,
        "tableId": m.id,
        "name": m.name,
        "description": m.description,
        "partitionColumns": list(m.partition_columns),
        "configuration": m.configuration,
        "createdTime": m.created_time,
        "numFiles": snap.num_files,
        "sizeBytes": snap.size_bytes,
        "numTombstones": snap.num_tombstones,
        "numTxns": len(snap.txns),
        "numDomains": len(snap.domains),
        "lastCheckpointVersion": cp.version if cp else None,
        "lastCheckpointFile": hint.status,
        "commitsSinceCheckpoint": snap.commits_since_checkpoint,
        "logFiles": log_files,
        "logBytes": log_bytes,
        **_small(snap.small_files(small_file_bytes)),
        **_records(snap),
        "smallFileThreshold": small_file_bytes,
        "unpublishedCommits": unpublished,
        "damagedCheckpoints": [d.to_json() for d in snap.damaged_checkpoints],
    }


def _small(s: SmallFiles) -> dict[str, int]:
    return {"smallFiles": s.files, "smallBytes": s.bytes, "removableSmallFiles": s.removable}


def _records(snap: Snapshot | HeldSnapshot) -> dict[str, int | None]:
    counts = snap.record_counts()
    return {
        "numRecords": counts.records if counts else None,
        "deletedRows": counts.deleted if counts else None,
        "filesWithoutStats": counts.without if counts else None,
    }
