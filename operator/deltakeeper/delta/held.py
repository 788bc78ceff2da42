"""A snapshot held between polls without its file actions: the header and the file counts.

A watcher keeps a table between polls to answer "did it move?" and to report its counts. A
million-file table's file actions take hundreds of MiB as Arrow; what the counts, health
(runtime/health.py) and an incremental update need is far less: per live file the 64-bit hash
of its key (path, deletion vector id), its size, the number of its partition and its record
count (24 bytes); per file with a deletion vector also the hash of its path and the rows it
hides; per tombstone the hashes of its key and path, its deletion time and its size. New
commits update the counts as `Table.update` updates a snapshot (the newest action per key
wins); operations that need the file actions read them when they run (`Table.snapshot`).

The hashes are Python's, so they are only compared within one process. Two keys with the same
hash would miscount one file: about one chance in 10**7 for a table of a million files.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass

import pyarrow as pa
import pyarrow.compute as pc

from deltakeeper.delta import schema
from deltakeeper.delta.errors import CorruptLogError
from deltakeeper.delta.log import checkpoint_files, json_files
from deltakeeper.delta.log.reconcile import Actions, key_column
from deltakeeper.delta.log.replay import after_checkpoint, replay
from deltakeeper.delta.log.segment import Listing, LogEntry, LogSegment, segment_for
from deltakeeper.delta.snapshot import (
    RecordCounts,
    SmallFiles,
    Snapshot,
    SnapshotHeader,
    earliest,
    expired,
    partition_names,
)
from deltakeeper.delta.table import Table, extended

# What a held snapshot is read with: what FileCounts keeps, nothing else.
HELD_ADD = ("path", "size", "partitionValues", "deletionVector", "numRecords")
HELD_REMOVE = ("path", "deletionTimestamp", "size", "deletionVector")
_CHUNK = 65_536  # keys turned into Python strings at a time, to hash them
# Checkpoint rows counted at a time: 32,768 took a 1,000,000-file first read's peak from 359
# to 231 MiB (131,072 a batch) for 8% more time.
_COUNT_ROWS = 32_768
# A log without a checkpoint is counted a run of commits at a time, up to this many bytes of
# JSON (at least one commit): a table of millions of files from JSON commits alone never has
# its file actions in memory together.
_COUNT_BYTES = 32 * 2**20
_MAX_CHUNKS = 32


@dataclass(frozen=True)
class FileCounts:
    """Three tables of integer columns, each row keyed by the hash of its action's key:
    `files` (key, size, partition number, record count or null) per live file; `dv_files`
    (key, path hash, rows deleted, whether the file has a record count) per live file with a
    deletion vector; `tombstones` (key, path hash, deletion time or null, size). A partition's
    number is its place in `partitions`, the names of those seen (few: one string each); the
    record count is 32-bit: no file holds 2**31 rows."""

    files: pa.Table
    dv_files: pa.Table
    tombstones: pa.Table
    partitions: pa.Array  # string: the partition names seen, numbered by place

    @classmethod
    def of(
        cls, adds: pa.Table, removes: pa.Table, partitions: pa.Array | None = None
    ) -> FileCounts:
        """`partitions`: the names already numbered (an update keeps their numbers)."""
        keys = key_hashes(adds)
        has_dv = pc.is_valid(adds["deletionVector"]) if adds.num_rows else pa.array([], pa.bool_())
        numbers, partitions = _numbered(partition_names(adds), partitions)
        return cls._of(
            pa.table(
                {
                    "key": keys,
                    "size": _int64(adds, "size", 0),
                    "partition": numbers,
                    "records": _records(adds),
                }
            ),
            pa.table(
                {
                    "key": keys,
                    "path": path_hashes(adds),
                    "deleted": deleted_rows(adds),
                    "counted": pc.is_valid(adds["numRecords"]) if adds.num_rows else _none(),
                }
            ).filter(has_dv),
            pa.table(
                {
                    "key": key_hashes(removes),
                    "path": path_hashes(removes),
                    "time": _int64(removes, "deletionTimestamp", None),
                    "size": _int64(removes, "size", 0),
                }
            ),
            partitions,
        )

    @classmethod
    def _of(
        cls, files: pa.Table, dv_files: pa.Table, tombstones: pa.Table, partitions: pa.Array
    ) -> FileCounts:
        return cls(_held(files), _held(dv_files), _held(tombstones), partitions)

    def updated(self, adds: pa.Table, removes: pa.Table) -> FileCounts:
        """These counts after commits whose reconciled actions are `adds` and `removes`: every
        key they name drops out, then their adds are live files and their removes tombstones."""
        new = FileCounts.of(adds, removes, self.partitions)
        touched = new.keys()
        if len(touched) == 0:
            return self

        def merged(mine: pa.Table, theirs: pa.Table) -> pa.Table:
            kept = mine.filter(pc.invert(pc.is_in(mine["key"], value_set=touched)))
            table = pa.concat_tables([kept, theirs])
            # Each update adds a chunk; a copy into one now and then keeps them few.
            return table.combine_chunks() if table["key"].num_chunks > _MAX_CHUNKS else table

        return FileCounts._of(
            merged(self.files, new.files),
            merged(self.dv_files, new.dv_files),
            merged(self.tombstones, new.tombstones),
            new.partitions,
        )

    def keys(self) -> pa.Array:
        """Every key these counts name: their live files' and their tombstones'."""
        return pa.concat_arrays([self.files["key"].combine_chunks(), _keys(self.tombstones)])

    @property
    def nbytes(self) -> int:
        tables = self.files.nbytes + self.dv_files.nbytes + self.tombstones.nbytes
        return tables + self.partitions.nbytes


def _numbered(names: pa.Array, known: pa.Array | None) -> tuple[pa.Array, pa.Array]:
    """Each name's number (its place in the known names, new ones appended), and the names
    known after: numbered in Arrow, no Python object per file."""
    known = pa.array([], pa.string()) if known is None else known
    numbers = pc.index_in(names, value_set=known)
    if numbers.null_count:
        new = pc.unique(names.filter(pc.is_null(numbers)))
        known = pa.concat_arrays([known, new])
        numbers = pc.index_in(names, value_set=known)
    return numbers, known


# One empty table per schema, shared: most tables have no deletion vectors, and many no
# tombstones; an empty Arrow table of its own costs a watched table about 2.7 KiB.
_EMPTY: dict[pa.Schema, pa.Table] = {}


def _held(table: pa.Table) -> pa.Table:
    if table.num_rows:
        return table
    return _EMPTY.setdefault(table.schema, table)


def _none() -> pa.Array:
    return pa.array([], pa.bool_())


def _keys(table: pa.Table) -> pa.Array:
    return table["key"].combine_chunks()


def _records(adds: pa.Table) -> pa.Array:
    """Each file's record count, capped at 2**31 - 1, as int32 (null without statistics)."""
    if not adds.num_rows:
        return pa.array([], pa.int32())
    records = adds["numRecords"].combine_chunks()
    return pc.cast(pc.min_element_wise(records, 2**31 - 1, skip_nulls=False), pa.int32())


def deleted_rows(adds: pa.Table) -> pa.Array:
    """Rows each file's deletion vector hides (0 without one), as int64."""
    if not adds.num_rows:
        return pa.array([], pa.int64())
    dv = adds["deletionVector"].combine_chunks()
    return pc.fill_null(pc.cast(pc.struct_field(dv, "cardinality"), pa.int64()), 0)


def path_hashes(table: pa.Table) -> pa.Array:
    """The hash of each row's path as the key of a file without a deletion vector, so that a
    tombstone's path meets the key of the live file that still uses it."""
    if not table.num_rows:
        return pa.array([], pa.int64())
    return _hashed_all(pc.binary_join_element_wise(table["path"], "", "\0").combine_chunks())


def _int64(table: pa.Table, name: str, null: int | None) -> pa.Array:
    """`table`'s column `name` as one int64 array, nulls as `null` (kept null when None)."""
    if not table.num_rows:
        return pa.array([], pa.int64())
    col = table[name].combine_chunks().cast(pa.int64())
    return col if null is None else pc.fill_null(col, null)


def key_hashes(table: pa.Table) -> pa.Array:
    """The hash of each row's (path, deletion vector id) key, as int64."""
    if table.num_rows == 0:
        return pa.array([], pa.int64())
    return _hashed_all(key_column(table))


def _hashed_all(values: pa.Array) -> pa.Array:
    if not len(values):
        return pa.array([], pa.int64())
    return pa.concat_arrays(list(_hashed(values)))


def _hashed(keys: pa.Array) -> Iterator[pa.Array]:
    for start in range(0, len(keys), _CHUNK):
        chunk = keys.slice(start, _CHUNK).to_pylist()
        yield pa.array([hash(k) for k in chunk], pa.int64())


@dataclass(frozen=True, kw_only=True)
class HeldSnapshot(SnapshotHeader):
    """A table at one version: its header and its file counts, not its file actions."""

    counts: FileCounts

    @classmethod
    def of(cls, header: SnapshotHeader, counts: FileCounts) -> HeldSnapshot:
        return cls(**header.header_fields(), counts=counts)

    @classmethod
    def counted(cls, snap: Snapshot) -> HeldSnapshot:
        """`snap` held: its header, and its file actions counted."""
        return cls.of(snap, FileCounts.of(snap.files, snap.tombstones))

    @property
    def num_files(self) -> int:
        return self.counts.files.num_rows

    @property
    def size_bytes(self) -> int:
        return int(pc.sum(self.counts.files["size"]).as_py() or 0) if self.num_files else 0

    @property
    def num_tombstones(self) -> int:
        return self.counts.tombstones.num_rows

    def small_files(self, threshold_bytes: int) -> SmallFiles:
        f = self.counts.files
        below = pc.less(f["size"], threshold_bytes)
        sizes, parts = pc.filter(f["size"], below), pc.filter(f["partition"], below)
        return SmallFiles.of(sizes, parts, threshold_bytes)

    def record_counts(self) -> RecordCounts:
        f, dv = self.counts.files, self.counts.dv_files
        # Rows deleted from files whose records are counted: the ratio's numerator.
        return RecordCounts(
            records=int(pc.sum(pc.cast(f["records"], pa.int64())).as_py() or 0),
            deleted=int(pc.sum(dv.filter(dv["counted"])["deleted"]).as_py() or 0),
            without=f["records"].null_count,
        )

    def expired_tombstones(self, before_ms: int) -> tuple[int, int]:
        t = self.counts.tombstones
        old = t.filter(expired(t["time"], before_ms))
        if not old.num_rows:
            return 0, 0
        # A live file without a deletion vector has its path's hash as key; one with, in
        # dv_files: a tombstone's path hash found in either is a file still in use. The few
        # old paths are the set looked up, not the million keys.
        paths = old["path"].combine_chunks()
        keys, dv = self.counts.files["key"], self.counts.dv_files["path"]
        used = pa.concat_arrays(
            [
                keys.filter(pc.is_in(keys, value_set=paths)).combine_chunks(),
                dv.filter(pc.is_in(dv, value_set=paths)).combine_chunks(),
            ]
        )
        gone = old.filter(pc.invert(pc.is_in(paths, value_set=used)))
        return gone.num_rows, int(pc.sum(gone["size"]).as_py() or 0)

    def next_deletion(self, from_ms: int) -> int | None:
        return earliest(self.counts.tombstones["time"], from_ms)


def read_held(table: Table) -> HeldSnapshot:
    """The newest snapshot, held: read with only the columns the counts need. From a parquet
    checkpoint it is counted a batch at a time and the commits after it applied as an update,
    so the checkpoint's file actions are never in memory together (a million-file table's
    first read peaked near 800 MiB loaded whole); without one, a long log of commits is
    counted a run of commits at a time."""
    listing, _ = table.listing_for(None)
    streamed = read_streamed(table, listing) or read_commits_streamed(table, listing)
    if streamed is not None:
        return streamed
    read = table.snapshot(add_cols=HELD_ADD, remove_cols=HELD_REMOVE, listing=listing)
    return HeldSnapshot.counted(read)


def read_header(table: Table) -> SnapshotHeader:
    """The newest snapshot's header alone, for planning work another engine (Spark) does: the
    checkpoint's non-file rows and the commits' table-level actions, their file actions not
    parsed (a 10,000,000-file log counted took minutes). A checkpoint that cannot give its
    header so (JSON with files inline, damaged) is read as read_held reads it."""
    listing, _ = table.listing_for(None)
    segment = segment_for(listing, table.uri, None)
    actions = _table_actions(table, segment)
    if segment.checkpoint is None:
        return table.header(segment, actions)
    try:
        old = checkpoint_files.read_header(table.storage, segment.checkpoint)
    except CorruptLogError:  # MissingLogFileError included
        old = None
    if old is None:
        return read_held(table)
    return table.header(segment, checkpoint_files.after_header(old, actions))


def _table_actions(table: Table, segment: LogSegment) -> Actions:
    """The table-level actions of `segment`'s commits (those after its checkpoint)."""
    add, remove = schema.add_schema(HELD_ADD), schema.remove_schema(HELD_REMOVE)
    actions = Actions(add.empty_table(), remove.empty_table())
    for entry in reversed(segment.commits):  # newest first: the first one seen wins
        for kind, body in json_files.table_action_lines(table.storage, entry.key):
            if kind != "commitInfo":
                actions.take(kind, body)
            elif entry.name.version == segment.version:
                actions.commit_info = actions.commit_info or body
    return actions


def read_streamed(table: Table, listing: Listing) -> HeldSnapshot | None:
    """The newest snapshot in `listing` counted from its checkpoint's rows, streamed; None when
    it has no checkpoint that streams (none, a JSON V2 one with files inline, or one that
    cannot be read: the full read then goes past it, as Table.snapshot does)."""
    segment = segment_for(listing, table.uri, None)
    try:
        read = after_checkpoint(table.storage, segment, HELD_ADD, HELD_REMOVE)
        if read is None:
            return None
        old, newer = read
        counts = _counted_rows(table, old.files, FileCounts.of(newer.adds, newer.removes))
    except CorruptLogError:  # MissingLogFileError included
        return None
    header = table.header(segment, checkpoint_files.after_header(old, newer))
    return HeldSnapshot.of(header, counts)


def read_commits_streamed(table: Table, listing: Listing) -> HeldSnapshot | None:
    """The newest snapshot in `listing`, which has no checkpoint, counted from its commits a
    run of up to _COUNT_BYTES at a time (each run applied to the counts as an update); None
    when it has a checkpoint or its commits are fewer bytes (read whole then)."""
    segment = segment_for(listing, table.uri, None)
    if segment.checkpoint is not None:
        return None
    runs = _runs(segment.commits)
    if len(runs) < 2:
        return None
    counts: FileCounts | None = None
    table_actions: Actions | None = None  # the runs' non-file actions, newest winning
    for commits in runs:
        run = LogSegment(commits[-1].name.version, None, commits, commits[-1])
        actions = replay(table.storage, run, HELD_ADD, HELD_REMOVE)
        counts = (
            FileCounts.of(actions.adds, actions.removes)
            if counts is None
            else counts.updated(actions.adds, actions.removes)
        )
        table_actions = _newer(table_actions, actions)
    assert counts is not None and table_actions is not None
    # Checked once, at the newest version: an older run may lack what a newer one adds.
    return HeldSnapshot.of(table.header(segment, table_actions), counts)


def _newer(older: Actions | None, newer: Actions) -> Actions:
    """The table-level actions of two runs of commits, one after the other (no file actions)."""
    empty = newer.adds.schema.empty_table(), newer.removes.schema.empty_table()
    if older is None:
        return Actions(
            *empty, newer.protocol, newer.metadata, newer.txns, newer.domains, newer.commit_info
        )
    return Actions(
        *empty,
        newer.protocol or older.protocol,
        newer.metadata or older.metadata,
        {**older.txns, **newer.txns},
        {**older.domains, **newer.domains},
        newer.commit_info,
    )


def _runs(commits: tuple[LogEntry, ...]) -> list[tuple[LogEntry, ...]]:
    """`commits` cut into runs of up to _COUNT_BYTES (a bigger commit is a run alone)."""
    runs: list[tuple[LogEntry, ...]] = []
    start, size = 0, 0
    for n, entry in enumerate(commits):
        if n > start and size + entry.info.size > _COUNT_BYTES:
            runs.append(commits[start:n])
            start, size = n, 0
        size += entry.info.size
    if start < len(commits):
        runs.append(commits[start:])
    return runs


def _counted_rows(
    table: Table, files: list[checkpoint_files.PartFile], newer: FileCounts
) -> FileCounts:
    """The counts of a checkpoint's file rows, a batch at a time, and then `newer` (the commits
    after it): each batch drops the keys they name as it is counted, so the rows are copied
    once, a column at a time, into the counts (10,000,000 files: 769 MiB peak counted, then
    updated)."""
    add_schema, remove_schema = schema.add_schema(HELD_ADD), schema.remove_schema(HELD_REMOVE)
    touched = newer.keys()
    kept: dict[str, list[pa.Table]] = {name: [] for name in _PARTS}
    partitions = newer.partitions
    for part in files:
        pf = checkpoint_files.open_parquet(table.storage, part.key, part.size)
        columns = checkpoint_files.file_columns(pf, HELD_ADD, HELD_REMOVE)
        for rows in checkpoint_files.batches(table.storage, part.key, pf, columns, _COUNT_ROWS):
            adds = checkpoint_files.file_actions(rows, "add", HELD_ADD, add_schema)
            removes = checkpoint_files.file_actions(rows, "remove", HELD_REMOVE, remove_schema)
            piece = FileCounts.of(adds, removes, partitions)
            partitions = piece.partitions
            for name, tables in kept.items():
                tables.append(_without(getattr(piece, name), touched))
    for name, tables in kept.items():
        tables.append(getattr(newer, name))
    files, dv_files, tombstones = (_joined(kept[name]) for name in _PARTS)
    return FileCounts._of(files, dv_files, tombstones, partitions)


_PARTS = ("files", "dv_files", "tombstones")  # FileCounts' tables, in its order


def _without(table: pa.Table, keys: pa.Array) -> pa.Table:
    if not len(keys) or not table.num_rows:
        return table
    return table.filter(pc.invert(pc.is_in(table["key"], value_set=keys)))


def _joined(tables: list[pa.Table]) -> pa.Table:
    """`tables` as one, emptying the list: a column is copied, then dropped from the pieces,
    so the copy never holds more than the counts and one column besides."""
    table_schema = tables[0].schema
    columns: list[pa.Array] = []
    for field in table_schema:
        chunks = [c for t in tables for c in t[field.name].chunks]
        columns.append(pa.chunked_array(chunks, field.type).combine_chunks())
        tables[:] = [t.drop_columns([field.name]) for t in tables]
    tables.clear()
    return pa.Table.from_arrays(columns, schema=table_schema)


def update_held(table: Table, held: HeldSnapshot, listing: Listing | None = None) -> HeldSnapshot:
    """The newest snapshot, held, as `Table.update` finds it: one listing when nothing
    changed, a read of each new commit when only commits were added, else read afresh.
    `listing`: one the caller just made from `held`'s version or earlier, used instead."""
    if listing is None:
        listing = table.list_log(held.version)
    commits = table.new_commits(held, listing)
    if commits is None:
        return read_held(table)
    if not commits:
        return held
    segment = LogSegment(commits[-1].name.version, None, commits, commits[-1])
    actions = replay(table.storage, segment, HELD_ADD, HELD_REMOVE)
    header = table.header(extended(held.segment, listing, commits), actions, previous=held)
    return HeldSnapshot.of(header, held.counts.updated(actions.adds, actions.removes))
