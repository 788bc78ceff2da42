"""Where a checkpoint's rows come from: a loaded snapshot, or the newest checkpoint streamed
and the commits after it (incremental)."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from deltakeeper.delta import features, schema
from deltakeeper.delta.checkpoint.content import (
    BATCH_ROWS,
    CHECKPOINT_REMOVE,
    Content,
    file_batch,
    header_rows,
    live_tombstones,
    not_expired,
    snapshot_content,
    sorted_by_key,
    true_count,
    without_data_change,
)
from deltakeeper.delta.checkpoint.prefetch import prefetched
from deltakeeper.delta.checkpoint.stats import (
    StatsColumns,
    fill_stats,
    parsed_stats,
    paths_without_stats,
    stats_from_struct,
    stats_missing,
    struct_array,
    with_stats,
)
from deltakeeper.delta.errors import (
    CorruptLogError,
    DeltaError,
)
from deltakeeper.delta.log import checkpoint_files
from deltakeeper.delta.log.reconcile import DropSet, keep
from deltakeeper.delta.log.replay import after_checkpoint, replay
from deltakeeper.delta.log.segment import segment_for
from deltakeeper.delta.snapshot import Snapshot, SnapshotHeader
from deltakeeper.delta.table import Table


def load_for_checkpoint(table: Table, version: int | None = None) -> Snapshot:
    """The snapshot with every column a checkpoint carries.

    When the checkpoint it starts from cannot be read (a truncated part, a missing sidecar),
    it is rebuilt from the next older checkpoint or from the commits, so that writing a good
    checkpoint repairs the table. Nothing is deleted.
    """
    try:
        snap = table.snapshot(
            version=version, add_cols=schema.FULL_ADD, remove_cols=schema.FULL_REMOVE
        )
    except CorruptLogError as first:
        snap = _skipping_bad_checkpoints(table, version, first)
    return stats_from_struct(table, snap)


def _skipping_bad_checkpoints(
    table: Table, version: int | None, first: CorruptLogError
) -> Snapshot:
    listing = table.list_log()
    while True:
        try:
            segment = segment_for(listing, table.uri, version)
        except DeltaError:
            raise first from None
        cp = segment.checkpoint
        try:
            actions = replay(table.storage, segment, schema.FULL_ADD, schema.FULL_REMOVE)
        except CorruptLogError:
            if cp is None:
                raise
            listing.checkpoints[cp.version].remove(cp)
            if not listing.checkpoints[cp.version]:
                del listing.checkpoints[cp.version]
            continue
        return table.build(segment, actions)


class CheckpointSource:
    """The rows of a checkpoint, from one of two places.

    Full: a snapshot loaded with every add column (`load_for_checkpoint`); rows sorted by key.
    Incremental: the newest checkpoint, streamed a batch at a time, plus the commits after it;
    `header` is then a SnapshotHeader, without file actions. Rows keep the old checkpoint's
    order (its files, then its sidecars) with the touched keys left out, followed by the
    commits' adds and tombstones sorted by key. Both orders depend only on the log, so the same
    log gives the same bytes; the two sources agree on the set of rows.
    """

    def __init__(
        self, table: Table, header: SnapshotHeader, incremental: _Incremental | None = None
    ) -> None:
        if incremental is None and not isinstance(header, Snapshot):
            raise TypeError("a full checkpoint source needs a Snapshot with its file actions")
        self.table = table
        self.header = header
        self.incremental = incremental

    @property
    def full(self) -> bool:
        """Whether `header` is a Snapshot with its file actions (needed e.g. for a checksum)."""
        return self.incremental is None

    @property
    def snapshot(self) -> Snapshot:
        """The loaded snapshot of a full source; TypeError for an incremental one."""
        if not isinstance(self.header, Snapshot):
            raise TypeError("an incremental checkpoint source has no file actions loaded")
        return self.header

    def content(
        self,
        now_ms: int,
        tombstone_retention_ms: int,
        txn_retention_ms: int | None,
        count_first: bool = True,
    ) -> Content:
        if self.incremental is not None:
            try:
                return self.incremental.content(
                    self.header, now_ms, tombstone_retention_ms, txn_retention_ms, count_first
                )
            except CorruptLogError:  # MissingLogFileError included
                # An unreadable old checkpoint: the full path rebuilds from an older one.
                self.header = load_for_checkpoint(self.table, self.header.version)
                self.incremental = None
        snap = self.snapshot
        return snapshot_content(snap, now_ms, tombstone_retention_ms, txn_retention_ms)[0]


def checkpoint_source(table: Table, version: int | None = None) -> CheckpointSource:
    """The incremental source when the newest checkpoint can be streamed, else a full one."""
    found = incremental_source(table, version)
    if found is not None:
        return found
    return CheckpointSource(table, load_for_checkpoint(table, version))


def incremental_content(
    table: Table,
    version: int | None,
    now_ms: int,
    tombstone_retention_ms: int,
    txn_retention_ms: int | None = None,
) -> tuple[Content, int] | None:
    """Checkpoint rows of `version` from the newest checkpoint and the commits after it, and
    how many tombstones expired; None when there is no checkpoint this can stream."""
    source = incremental_source(table, version)
    if source is None:
        return None
    features.require_writable(source.header, "checkpoint")
    assert source.incremental is not None
    try:
        content = source.incremental.content(
            source.header, now_ms, tombstone_retention_ms, txn_retention_ms
        )
    except CorruptLogError:  # MissingLogFileError included
        return None
    return content, content.expired


def incremental_source(table: Table, version: int | None = None) -> CheckpointSource | None:
    """Reads the commits after the newest checkpoint and that checkpoint's non-file rows; the
    file rows are read later, a batch at a time. None when there is no checkpoint, when it is
    a JSON V2 checkpoint with file actions inline, or when it cannot be read (the full path
    then rebuilds it from an older checkpoint or the commits)."""
    listing, _ = table.listing_for(version)
    segment = segment_for(listing, table.uri, version)
    try:
        read = after_checkpoint(table.storage, segment, schema.FULL_ADD, schema.FULL_REMOVE)
    except CorruptLogError:  # MissingLogFileError included
        return None
    if read is None:
        return None
    old, newer = read
    header = table.header(segment, checkpoint_files.after_header(old, newer))
    incremental = _Incremental(table, old.files, newer.adds, newer.removes)
    return CheckpointSource(table, header, incremental)


_KEY_ADD = ("path", "deletionVector")


_KEY_REMOVE = ("path", "deletionTimestamp", "deletionVector")


@dataclass
class _Counts:
    adds: int = 0
    removes: int = 0
    expired: int = 0


class _Incremental:
    """The old checkpoint's file rows, streamed, merged with the commits' net file actions."""

    def __init__(
        self,
        table: Table,
        files: list[checkpoint_files.PartFile],
        adds: pa.Table,
        removes: pa.Table,
    ) -> None:
        self.table = table
        self.files = files
        self.adds = adds  # the commits' winning adds, schema.FULL_ADD
        self.removes = removes  # the commits' winning removes, schema.FULL_REMOVE
        self.touched = DropSet(tables=[adds, removes])

    def content(
        self,
        snap: SnapshotHeader,
        now_ms: int,
        tombstone_retention_ms: int,
        txn_retention_ms: int | None,
        count_first: bool = True,
    ) -> Content:
        expire_before = now_ms - tombstone_retention_ms
        if count_first:
            old: _Counts | None = self._count(expire_before)
        else:
            old = None
            for part in self.files:  # a missing or truncated file: the caller falls back now
                _open_old(self.table, part)
        removes, expired = live_tombstones(self.removes, expire_before)
        stats = StatsColumns.for_snapshot(snap)
        add_type = stats.add_type(schema.add_schema(schema.FULL_ADD))
        remove_type = pa.struct(list(schema.remove_schema(CHECKPOINT_REMOVE)))
        header = header_rows(snap, now_ms, txn_retention_ms)
        content = Content(header, add_type, remove_type, 0, 0, iter(()), expired)
        if old is not None:
            content.num_adds = old.adds + self.adds.num_rows
            content.num_removes = old.removes + removes.num_rows
            content.expired += old.expired
        rows = self._batches(stats, content, expire_before, removes, old)
        content.batches = prefetched(rows)
        return content

    def _count(self, expire_before: int) -> _Counts:
        """First pass over the old rows, keys only: the counts the layouts need up front."""
        counts = _Counts()
        for part in self.files:
            pf = _open_old(self.table, part)
            for adds, removes, _ in _old_rows(
                self.table, part.key, pf, _KEY_ADD, _KEY_REMOVE, False
            ):
                counts.adds += keep(adds, self.touched.untouched(adds)).num_rows
                removes = keep(removes, self.touched.untouched(removes))
                live = true_count(not_expired(removes, expire_before))
                counts.removes += live
                counts.expired += removes.num_rows - live
        return counts

    def _batches(
        self,
        stats: StatsColumns,
        content: Content,
        expire_before: int,
        removes: pa.Table,
        expected: _Counts | None,
    ) -> Iterator[pa.RecordBatch]:
        """Second pass: the old rows still valid, then the commits' rows sorted by key. Without
        `expected` counts, the counts of `content` are set once the old rows are through."""
        add_type, remove_type = content.add_type, content.remove_type
        want = paths_without_stats(self.adds)
        found: dict[str, str] = {}  # stats JSON for those paths, from old stats_parsed
        seen = _Counts()
        for part in self.files:
            pf = _open_old(self.table, part)
            has_parsed = checkpoint_files.has_field(pf, "add", "stats_parsed")
            reuse = stats.as_struct and has_parsed
            parsed = reuse or (has_parsed and (bool(want) or stats_missing(pf)))
            for adds, old_removes, stats_parsed in _old_rows(
                self.table, part.key, pf, schema.FULL_ADD, CHECKPOINT_REMOVE, parsed
            ):
                if stats_parsed is not None:
                    found.update(parsed_stats(adds, stats_parsed, want))
                    adds = fill_stats(adds, stats_parsed)
                    if reuse:
                        adds = adds.append_column(StatsColumns.KNOWN, stats_parsed)
                adds = without_data_change(keep(adds, self.touched.untouched(adds)))
                old_removes = keep(old_removes, self.touched.untouched(old_removes))
                untouched = old_removes.num_rows
                old_removes = keep(old_removes, not_expired(old_removes, expire_before))
                seen.adds += adds.num_rows
                seen.removes += old_removes.num_rows
                seen.expired += untouched - old_removes.num_rows
                if adds.num_rows:
                    piece = stats.add_struct(adds)
                    yield file_batch(piece, pa.nulls(len(piece), remove_type))
                if old_removes.num_rows:
                    piece = struct_array(old_removes)
                    yield file_batch(pa.nulls(len(piece), add_type), piece)
        if expected is None:
            content.num_adds = seen.adds + self.adds.num_rows
            content.num_removes = seen.removes + removes.num_rows
            content.expired += seen.expired
        elif (seen.adds, seen.removes) != (expected.adds, expected.removes):
            raise CorruptLogError(
                f"{self.table.uri}: the checkpoint files changed while being read; nothing was "
                "written, so run the checkpoint again"
            )
        adds = sorted_by_key(without_data_change(with_stats(self.adds, found)))
        for lo in range(0, adds.num_rows, BATCH_ROWS):
            piece = stats.add_struct(adds.slice(lo, BATCH_ROWS))
            yield file_batch(piece, pa.nulls(len(piece), remove_type))
        removes = sorted_by_key(removes)
        for lo in range(0, removes.num_rows, BATCH_ROWS):
            piece = struct_array(removes.slice(lo, BATCH_ROWS))
            yield file_batch(pa.nulls(len(piece), add_type), piece)


def _open_old(table: Table, part: checkpoint_files.PartFile) -> pq.ParquetFile:
    return checkpoint_files.open_parquet(table.storage, part.key, part.size)


def _old_rows(
    table: Table,
    key: str,
    pf: pq.ParquetFile,
    add_cols: tuple[str, ...],
    remove_cols: tuple[str, ...],
    parsed: bool,
) -> Iterator[tuple[pa.Table, pa.Table, pa.ChunkedArray | None]]:
    """(adds, removes, the adds' stats_parsed when `parsed`) of an old checkpoint file, one
    record batch at a time, projected and cast to our columns."""
    columns = checkpoint_files.file_columns(pf, add_cols, remove_cols)
    columns += ["add.stats_parsed"] if parsed else []
    remove_schema = schema.remove_schema(remove_cols)
    for rows in checkpoint_files.batches(table.storage, key, pf, columns, BATCH_ROWS):
        adds, stats_parsed = _old_adds(rows, add_cols, parsed)
        removes = checkpoint_files.file_actions(rows, "remove", remove_cols, remove_schema)
        yield adds, removes, stats_parsed


def _old_adds(
    rows: pa.Table, cols: tuple[str, ...], parsed: bool
) -> tuple[pa.Table, pa.ChunkedArray | None]:
    target = schema.add_schema(cols)
    if "add" not in rows.column_names:
        return target.empty_table(), None
    struct = rows["add"]
    present = keep(struct, pc.is_valid(pc.struct_field(struct, "path")))
    stats_parsed = pc.struct_field(present, "stats_parsed") if parsed else None
    return schema.project(present, cols, target), stats_parsed
