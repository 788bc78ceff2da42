"""Open a table and build snapshots: latest, at a version, at a timestamp, or incrementally.

This is where the log's I/O happens: `_last_checkpoint`, listings and reads. What the files mean
is decided in log.py (segments) and replay.py (reconciliation).
"""

from __future__ import annotations

from bisect import bisect_right
from dataclasses import dataclass
from typing import Any

from deltakeeper.delta import last_checkpoint, paths, schema
from deltakeeper.delta.errors import (
    CorruptLogError,
    DamagedCheckpointError,
    InvalidInputError,
    MissingLogFileError,
    UnsupportedProtocolError,
)
from deltakeeper.delta.features import Protocol, unsupported_reader
from deltakeeper.delta.last_checkpoint import HintStatus
from deltakeeper.delta.log import (
    Listing,
    LogSegment,
    earliest_version,
    group,
    monotonic,
    segment_for,
    without,
)
from deltakeeper.delta.replay import Actions, read_actions, replay
from deltakeeper.delta.snapshot import DamagedCheckpoint, Metadata, Snapshot
from deltakeeper.delta.storage import Storage, open_storage

LOG = paths.LOG_DIR


@dataclass(frozen=True)
class Hint:
    """What `_last_checkpoint` said, and whether it could be trusted."""

    status: HintStatus
    checkpoint: last_checkpoint.LastCheckpoint | None = None
    detail: str = ""


def checked_hint(hint: Hint, listing: Listing) -> Hint:
    """`hint` judged against a listing that holds its version: "stale" when it names no
    complete checkpoint there (a version without one, beyond the table, a deleted file, or a
    multi-part checkpoint missing a part, which delta-rs and DuckDB cannot read past)."""
    cp = hint.checkpoint
    if cp is None or hint.status is not HintStatus.OK:
        return hint
    found = listing.checkpoints.get(cp.version, [])
    if cp.parts is not None and cp.parts > 1:
        found = [c for c in found if len(c.files) == cp.parts]
        what = f"complete {cp.parts}-part checkpoint"
    else:
        what = "complete checkpoint"
    if found:
        return hint
    return Hint(HintStatus.STALE, cp, f"it names version {cp.version}, where there is no {what}")


class Table:
    def __init__(self, storage: Storage) -> None:
        self.storage = storage
        self.uri = storage.uri

    # -- log discovery ------------------------------------------------------------------------
    def read_hint(self) -> Hint:
        try:
            data = self.storage.read(f"{LOG}/{paths.LAST_CHECKPOINT}")
        except FileNotFoundError:
            return Hint(HintStatus.MISSING)
        try:
            return Hint(HintStatus.OK, last_checkpoint.parse(data))
        except last_checkpoint.InvalidLastCheckpoint as e:
            return Hint(HintStatus.CORRUPT, detail=str(e))

    def list_log(self, from_version: int | None = None) -> Listing:
        """List `_delta_log` from `from_version` (inclusive) on, or all of it."""
        start = f"{LOG}/{paths.version_prefix(from_version)}" if from_version else ""
        return group(self.storage.list_from(LOG, start))

    def listing_for(self, version: int | None) -> tuple[Listing, Hint]:
        """The cheapest listing that still holds the segment for `version` (latest when None)."""
        hint = self.read_hint()
        cp = hint.checkpoint
        if cp is not None and (version is None or cp.version <= version):
            listing = self.list_log(cp.version)
            if cp.version in listing.checkpoints:
                return listing, checked_hint(hint, listing)
            hint = checked_hint(hint, listing)
        return self.list_log(), hint

    def latest_version(self) -> int:
        """The newest published version, without reading any checkpoint or commit.

        Costs one read of `_last_checkpoint` and one listing from its version on (more only
        when the hint is missing, stale or corrupt).
        """
        listing, _ = self.listing_for(None)
        return segment_for(listing, self.uri).version

    # -- snapshots ----------------------------------------------------------------------------
    def snapshot(
        self,
        version: int | None = None,
        timestamp_ms: int | None = None,
        add_cols: tuple[str, ...] = schema.LEAN_ADD,
        remove_cols: tuple[str, ...] = schema.LEAN_REMOVE,
    ) -> Snapshot:
        if timestamp_ms is not None:
            version = self.version_at(timestamp_ms)
        for attempt in (1, 2):
            listing, _ = self.listing_for(version)
            try:
                return self._read_past_damage(listing, version, add_cols, remove_cols)
            except MissingLogFileError:
                # A cleanup may have deleted old files between our listing and our reads;
                # a fresh listing finds the newer checkpoint it kept.
                if attempt == 2:
                    raise
        raise AssertionError("unreachable")

    def _read_past_damage(
        self,
        listing: Listing,
        version: int | None,
        add_cols: tuple[str, ...],
        remove_cols: tuple[str, ...],
    ) -> Snapshot:
        """The snapshot from the newest checkpoint that can be read: a damaged (truncated,
        empty) one is read past, as Delta Spark does, and recorded in the snapshot."""
        damaged: list[DamagedCheckpoint] = []
        while True:
            segment = segment_for(listing, self.uri, version)
            try:
                snap = self._build(segment, replay(self.storage, segment, add_cols, remove_cols))
            except DamagedCheckpointError as e:
                assert segment.checkpoint is not None  # only a checkpoint read raises it
                damaged.append(DamagedCheckpoint(e.version, e.keys, str(e)))
                full = listing if len(damaged) > 1 else self.list_log()  # older ones too
                listing = without(full, segment.checkpoint)
                continue
            snap.damaged_checkpoints = damaged
            return snap

    def moved_on(self, snap: Snapshot) -> bool:
        """Whether the log has a commit after `snap`, or a checkpoint at or after its version
        that `snap` does not use. One listing, from `snap`'s version on: the cost of watching a
        quiet table."""
        listing = self.list_log(snap.version)
        latest = listing.latest_commit
        if (latest is not None and latest > snap.version) or not _same_tip(listing, snap):
            return True
        used = snap.segment.checkpoint.version if snap.segment.checkpoint else -1
        return any(v > used for v in listing.checkpoints)

    def update(self, snap: Snapshot) -> Snapshot:
        """The newest snapshot, reusing `snap`: one listing when nothing changed."""
        listing = self.list_log(snap.version)
        if not _same_tip(listing, snap):
            return self.snapshot(add_cols=tuple(snap.files.column_names))
        latest = listing.latest_commit
        if latest is None or latest <= snap.version:
            return snap
        new = [listing.commits.get(v) for v in range(snap.version + 1, latest + 1)]
        if any(e is None for e in new):
            return self.snapshot(add_cols=tuple(snap.files.column_names))
        commits = tuple(e for e in new if e is not None)
        segment = LogSegment(latest, None, commits, listing.commits.get(latest))
        actions = replay(
            self.storage,
            segment,
            tuple(snap.files.column_names),
            tuple(snap.tombstones.column_names),
            base=(snap.files, snap.tombstones),
        )
        fresh = self._build(segment, actions, previous=snap)
        fresh.damaged_checkpoints = snap.damaged_checkpoints
        return fresh

    def _build(
        self, segment: LogSegment, actions: Actions, previous: Snapshot | None = None
    ) -> Snapshot:
        if actions.protocol is None and previous is None:
            raise CorruptLogError(f"{self.uri}: no protocol action at version {segment.version}")
        if actions.metadata is None and previous is None:
            raise CorruptLogError(f"{self.uri}: no metaData action at version {segment.version}")
        if actions.metadata is not None:
            missing = [
                k for k in ("id", "schemaString") if not isinstance(actions.metadata.get(k), str)
            ]
            if missing:
                raise CorruptLogError(
                    f"{self.uri}: the metaData action in effect at version {segment.version} lacks "
                    f"the required {', '.join(missing)}"
                )
        protocol = Protocol.from_action(actions.protocol) if actions.protocol else previous.protocol  # type: ignore[union-attr]
        metadata = Metadata.from_action(actions.metadata) if actions.metadata else previous.metadata  # type: ignore[union-attr]
        blocked = unsupported_reader(protocol)
        if blocked:
            raise UnsupportedProtocolError(
                f"{self.uri} needs reader support for {', '.join(blocked)}, which this deltakeeper "
                "does not have; upgrade deltakeeper before reading this table"
            )
        txns = {**(previous.txns if previous else {}), **actions.txns}
        domains = {**(previous.domains if previous else {}), **actions.domains}
        snap = Snapshot(
            uri=self.uri,
            version=segment.version,
            timestamp_ms=0,
            protocol=protocol,
            metadata=metadata,
            files=actions.adds,
            tombstones=actions.removes,
            txns=txns,
            domains={d: a for d, a in domains.items() if not a.get("removed")},
            segment=segment,
            commit_info=actions.commit_info,
        )
        snap.timestamp_ms = self._commit_timestamp(snap)
        return snap

    # -- time ---------------------------------------------------------------------------------
    def _commit_timestamp(self, snap: Snapshot) -> int:
        info = snap.commit_info
        if snap.in_commit_timestamps:
            if info is None and snap.segment.commit_at_version is not None:
                info = _commit_info(self.storage, snap.segment.commit_at_version.key)
            if info is not None and isinstance(info.get("inCommitTimestamp"), int):
                return int(info["inCommitTimestamp"])
        entry = snap.segment.commit_at_version
        if entry is not None:
            return entry.info.mtime_ms
        cp = snap.segment.checkpoint
        return cp.files[0].info.mtime_ms if cp else 0

    def in_commit_timestamp(self, version: int) -> int:
        """The `inCommitTimestamp` of a commit's commitInfo; CorruptLogError when it has none."""
        info = _commit_info(self.storage, f"{LOG}/{paths.commit(version)}")
        ts = info.get("inCommitTimestamp") if info else None
        if not isinstance(ts, int):
            raise CorruptLogError(f"{self.uri}: commit {version} has no inCommitTimestamp")
        return ts

    def version_at(self, timestamp_ms: int) -> int:
        """The newest version committed at or before `timestamp_ms`."""
        listing = self.list_log()
        latest = segment_for(listing, self.uri).version  # raises the not-a-table error
        earliest = earliest_version(listing) or 0
        versions = [v for v in range(earliest, latest + 1) if v in listing.commits]
        current = self.snapshot(latest)
        props = current.metadata.properties
        ict_version, ict_ts = props.ict_enablement_version, props.ict_enablement_timestamp
        if current.in_commit_timestamps and (ict_ts is None or timestamp_ms >= ict_ts):
            candidates = [v for v in versions if v >= ict_version]
            # In-commit timestamps increase strictly, so a binary search reads O(log n) commits.
            i = bisect_right(candidates, timestamp_ms, key=self.in_commit_timestamp)
        else:
            if current.in_commit_timestamps:
                versions = [v for v in versions if v < ict_version]
            adjusted = monotonic({v: listing.commits[v].info.mtime_ms for v in versions})
            stamps = [adjusted[v] for v in versions]
            candidates = versions
            i = bisect_right(stamps, timestamp_ms)
        if i == 0:
            raise InvalidInputError(
                f"{self.uri} has no version committed at or before {timestamp_ms} ms; the earliest "
                f"available version is {candidates[0] if candidates else earliest}"
            )
        return candidates[i - 1]


def _same_tip(listing: Listing, snap: Snapshot) -> bool:
    """Whether the commit `snap` ends at is still the same file. A table deleted and written
    again in place, with fewer versions, has no newer commit to show; trusting the old snapshot
    then would make its live files look unreferenced to vacuum."""
    known = snap.segment.commit_at_version
    here = listing.commits.get(snap.version)
    if known is None or here is None:
        return known is None and here is None
    return (here.info.size, here.info.mtime_ms) == (known.info.size, known.info.mtime_ms)


def _commit_info(storage: Storage, key: str) -> dict[str, Any] | None:
    for _, action in read_actions(storage, key):
        if "commitInfo" in action:
            body = action["commitInfo"]
            return body if isinstance(body, dict) else None
    return None


def open_table(uri: str, storage_options: dict[str, Any] | None = None) -> Table:
    if not uri:
        raise InvalidInputError("a table URI is required, e.g. s3://bucket/path or ./my-table")
    return Table(open_storage(uri, storage_options))
