"""Open a table and build snapshots: latest, at a version, at a timestamp, or incrementally.

This is where the log's I/O happens: `_last_checkpoint`, listings and reads. What the files mean
is decided in log/segment.py (segments) and log/replay.py (reconciliation).
"""

from __future__ import annotations

from bisect import bisect_right
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from deltakeeper.delta import paths, schema
from deltakeeper.delta.errors import (
    CorruptLogError,
    DamagedCheckpointError,
    InvalidInputError,
    MissingLogFileError,
    UnsupportedProtocolError,
)
from deltakeeper.delta.features import Protocol, unsupported_reader
from deltakeeper.delta.log import last_checkpoint
from deltakeeper.delta.log.json_files import read_actions
from deltakeeper.delta.log.last_checkpoint import HintStatus
from deltakeeper.delta.log.reconcile import Actions
from deltakeeper.delta.log.replay import replay
from deltakeeper.delta.log.segment import (
    Listing,
    LogEntry,
    LogSegment,
    earliest_version,
    group,
    monotonic,
    segment_for,
    without,
)
from deltakeeper.delta.snapshot import (
    DamagedCheckpoint,
    FileActions,
    Metadata,
    Snapshot,
    SnapshotHeader,
    in_commit_timestamps,
)
from deltakeeper.delta.storage import FileInfo, Storage, open_storage

LOG = paths.LOG_DIR
KEEP_LISTING_FILES = 64  # the longest listing Table.list_log keeps for the next poll


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
        # The last listing grouped: (where it started, what the store returned, the grouping).
        # A quiet poll gets the same files again, and grouping them again was a large share of
        # the CPU a poll spends outside the request (benchmarks/quiet_poll.py).
        self._grouped: tuple[str, list[FileInfo], Listing] | None = None

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
        return self._list_log(_version_start(from_version))

    def _list_log(self, start: str) -> Listing:
        """List `_delta_log` after the key `start` ('': all of it)."""
        infos = self.storage.list_from(LOG, start)
        last = self._grouped
        if last is not None and last[0] == start and last[1] == infos:
            return last[2]  # nothing grouped is ever changed in place
        listing = group(infos)
        # Only a poll's short listing is kept: a whole log's could be large and is rarely
        # asked for twice.
        self._grouped = (start, infos, listing) if len(infos) <= KEEP_LISTING_FILES else None
        return listing

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
        listing: Listing | None = None,
    ) -> Snapshot:
        """`listing`: one `listing_for(version)` just made, used for the first attempt."""
        if timestamp_ms is not None:
            version = self.version_at(timestamp_ms)
        for attempt in (1, 2):
            if listing is None or attempt == 2:
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
                actions = replay(self.storage, segment, add_cols, remove_cols)
            except DamagedCheckpointError as e:
                assert segment.checkpoint is not None  # only a checkpoint read raises it
                damaged.append(DamagedCheckpoint(e.version, e.keys, str(e)))
                full = listing if len(damaged) > 1 else self.list_log()  # older ones too
                listing = without(full, segment.checkpoint)
                continue
            return self.build(segment, actions, damaged=tuple(damaged))

    def moved_on(self, snap: SnapshotHeader) -> bool:
        """Whether the log has a commit after `snap`, or a checkpoint at or after its version
        that `snap` does not use. One listing, from `snap`'s tip on: the cost of watching a
        quiet table."""
        listing = self._list_log(_watch_from(snap))
        latest = listing.latest_commit
        if (latest is not None and latest > snap.version) or not _same_tip(listing, snap):
            return True
        return _newer_checkpoint(listing, snap)

    def update(self, snap: Snapshot, listing: Listing | None = None) -> Snapshot:
        """The newest snapshot, reusing `snap`: one listing when nothing changed, and a read of
        each new commit when only commits were added, else read afresh (`new_commits` says
        when). `listing`: one the caller just made from `snap`'s version or earlier, used
        instead."""
        if listing is None:
            listing = self._list_log(_watch_from(snap))
        commits = self.new_commits(snap, listing)
        if commits is None:
            return self._reread(snap)
        if not commits:
            return snap
        actions = replay(
            self.storage,
            LogSegment(commits[-1].name.version, None, commits, commits[-1]),  # the new commits
            tuple(snap.files.column_names),
            tuple(snap.tombstones.column_names),
            base=(snap.files, snap.tombstones),
        )
        return self.build(extended(snap.segment, listing, commits), actions, previous=snap)

    def new_commits(self, snap: SnapshotHeader, listing: Listing) -> tuple[LogEntry, ...] | None:
        """The commits after `snap` in `listing` (made from `_watch_from(snap)` or earlier), for
        an update that reads only them: () when nothing changed; None when `snap` must be read
        afresh: the listing shows a checkpoint `snap` does not use (a fresh read leaves out the
        tombstones it expired), `snap` read past a damaged checkpoint (it may have been
        rewritten since), its tip was rewritten, or a commit in between is missing."""
        if snap.damaged_checkpoints or not _same_tip(listing, snap):
            return None
        if _newer_checkpoint(listing, snap):
            return None
        latest = listing.latest_commit
        if latest is None or latest <= snap.version:
            return ()
        new = [listing.commits.get(v) for v in range(snap.version + 1, latest + 1)]
        if any(e is None for e in new):
            return None
        return tuple(e for e in new if e is not None)

    def _reread(self, snap: Snapshot) -> Snapshot:
        """The newest snapshot with `snap`'s columns, read afresh."""
        cols = tuple(snap.files.column_names), tuple(snap.tombstones.column_names)
        return self.snapshot(add_cols=cols[0], remove_cols=cols[1])

    def build(
        self,
        segment: LogSegment,
        actions: Actions,
        previous: Snapshot | None = None,
        damaged: tuple[DamagedCheckpoint, ...] = (),
    ) -> Snapshot:
        """The snapshot that `actions`, reconciled over `segment`, make (with `previous`: the
        one they update; `damaged`: the checkpoints read past to get here)."""
        files = FileActions(actions.adds, actions.removes)
        return Snapshot.of(self.header(segment, actions, previous, damaged), files)

    def header(
        self,
        segment: LogSegment,
        actions: Actions,
        previous: SnapshotHeader | None = None,
        damaged: tuple[DamagedCheckpoint, ...] = (),
    ) -> SnapshotHeader:
        """The snapshot header (no file actions) that `actions` over `segment` make."""
        _require_table_actions(self.uri, segment, actions, previous)
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
        ict = in_commit_timestamps(protocol, metadata)
        return SnapshotHeader(
            uri=self.uri,
            version=segment.version,
            timestamp_ms=self._commit_timestamp(segment, actions.commit_info, ict),
            protocol=protocol,
            metadata=metadata,
            txns=txns,
            domains={d: a for d, a in domains.items() if not a.get("removed")},
            segment=segment,
            commit_info=actions.commit_info,
            damaged_checkpoints=damaged,
        )

    # -- time ---------------------------------------------------------------------------------
    def _commit_timestamp(
        self, segment: LogSegment, info: dict[str, Any] | None, in_commit_timestamps: bool
    ) -> int:
        if in_commit_timestamps:
            if info is None and segment.commit_at_version is not None:
                info = _commit_info(self.storage, segment.commit_at_version.key)
            if info is not None and isinstance(info.get("inCommitTimestamp"), int):
                return int(info["inCommitTimestamp"])
        entry = segment.commit_at_version
        if entry is not None:
            return entry.info.mtime_ms
        cp = segment.checkpoint
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
        commits = {v: e for v, e in listing.commits.items() if earliest <= v <= latest}
        found = self.commit_at(self.snapshot(latest), commits, timestamp_ms)
        if found is None:
            raise InvalidInputError(
                f"{self.uri} has no version committed at or before {timestamp_ms} ms; the earliest "
                f"available version is {min(commits, default=earliest)}"
            )
        return found

    def commit_at(
        self, header: SnapshotHeader, commits: Mapping[int, LogEntry], timestamp_ms: int
    ) -> int | None:
        """The newest of `commits` (version -> its file, none after `header`) committed at or
        before `timestamp_ms`, by the times time travel uses: in-commit timestamps from the
        version they were enabled at (they increase, so a binary search reads O(log n)
        commits), file times before it, made increasing as Delta Spark does. None when every
        one is newer."""
        versions = sorted(v for v in commits if v <= header.version)
        props = header.metadata.properties
        ict_version, ict_ts = props.ict_enablement_version, props.ict_enablement_timestamp
        if header.in_commit_timestamps and (ict_ts is None or timestamp_ms >= ict_ts):
            candidates = [v for v in versions if v >= ict_version]
            i = bisect_right(candidates, timestamp_ms, key=self.in_commit_timestamp)
        else:
            if header.in_commit_timestamps:
                versions = [v for v in versions if v < ict_version]
            adjusted = monotonic({v: commits[v].info.mtime_ms for v in versions})
            candidates = versions
            i = bisect_right([adjusted[v] for v in versions], timestamp_ms)
        return candidates[i - 1] if i else None


def extended(old: LogSegment, listing: Listing, new: tuple[LogEntry, ...]) -> LogSegment:
    """`old` carried on through the commits `new` that follow it, on its own checkpoint."""
    latest = new[-1].name.version
    return LogSegment(latest, old.checkpoint, (*old.commits, *new), listing.commits.get(latest))


def _require_table_actions(
    uri: str, segment: LogSegment, actions: Actions, previous: SnapshotHeader | None
) -> None:
    """CorruptLogError when the version has no protocol or metaData, or a metaData without
    its required fields."""
    if actions.protocol is None and previous is None:
        raise CorruptLogError(f"{uri}: no protocol action at version {segment.version}")
    if actions.metadata is None and previous is None:
        raise CorruptLogError(f"{uri}: no metaData action at version {segment.version}")
    if actions.metadata is not None:
        missing = [
            k for k in ("id", "schemaString") if not isinstance(actions.metadata.get(k), str)
        ]
        if missing:
            raise CorruptLogError(
                f"{uri}: the metaData action in effect at version {segment.version} lacks "
                f"the required {', '.join(missing)}"
            )


def _newer_checkpoint(listing: Listing, snap: SnapshotHeader) -> bool:
    """Whether `listing` has a checkpoint newer than the one `snap` uses."""
    used = snap.segment.checkpoint.version if snap.segment.checkpoint else -1
    return any(v > used for v in listing.checkpoints)


def _watch_from(snap: SnapshotHeader) -> str:
    """Where `moved_on` lists from: after the checkpoint `snap` uses when that is at its
    version (a tip the table's keeper just checkpointed), else at its version's files. A
    quiet poll then lists the tip commit and what follows it, and no more: every entry is
    parsed by the store's client and grouped here."""
    cp = snap.segment.checkpoint
    if cp is not None and cp.version == snap.version:
        return max(f.key for f in cp.files)  # the other checkpoints at it change nothing
    return _version_start(snap.version)


def _version_start(version: int | None) -> str:
    """The listing start that takes in `version`'s files and what follows ('': the whole log,
    for version 0 or None)."""
    return f"{LOG}/{paths.version_prefix(version)}" if version else ""


def _same_tip(listing: Listing, snap: SnapshotHeader) -> bool:
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
