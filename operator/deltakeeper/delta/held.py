"""A snapshot held between polls without its file actions: the header and the file counts.

A watcher keeps a table between polls to answer "did it move?" and to report its counts. A
million-file table's file actions take hundreds of MiB as Arrow; what the counts and an
incremental update need is far less: per live file the 64-bit hash of its key
(path, deletion vector id) and its size, and per tombstone the hash of its key. New commits
update the counts as `Table.update` updates a snapshot (the newest action per key wins);
operations that need the file actions read them when they run (`Table.snapshot`).

The hashes are Python's, so they are only compared within one process. Two keys with the same
hash would miscount one file: about one chance in 10**7 for a table of a million files.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass

import pyarrow as pa
import pyarrow.compute as pc

from deltakeeper.delta.log import Listing, LogSegment
from deltakeeper.delta.reconcile import key_column
from deltakeeper.delta.replay import replay
from deltakeeper.delta.snapshot import Snapshot, SnapshotHeader
from deltakeeper.delta.table import Table, extended

# What a held snapshot is read with: the key and the size, nothing else.
HELD_ADD = ("path", "size", "deletionVector")
HELD_REMOVE = ("path", "deletionVector")
_CHUNK = 65_536  # keys turned into Python strings at a time, to hash them


@dataclass(frozen=True)
class FileCounts:
    """Live files as (key hash, size), tombstones as key hashes."""

    keys: pa.Array  # int64
    sizes: pa.Array  # int64, aligned with keys
    tombstone_keys: pa.Array  # int64

    @classmethod
    def of(cls, adds: pa.Table, removes: pa.Table) -> FileCounts:
        sizes = adds["size"].combine_chunks() if adds.num_rows else pa.array([], pa.int64())
        return cls(key_hashes(adds), pc.fill_null(sizes.cast(pa.int64()), 0), key_hashes(removes))

    def updated(self, adds: pa.Table, removes: pa.Table) -> FileCounts:
        """These counts after commits whose reconciled actions are `adds` and `removes`: every
        key they name drops out, then their adds are live files and their removes tombstones."""
        new = FileCounts.of(adds, removes)
        touched = pa.concat_arrays([new.keys, new.tombstone_keys])
        if len(touched) == 0:
            return self
        live = pc.invert(pc.is_in(self.keys, value_set=touched))
        dead = pc.invert(pc.is_in(self.tombstone_keys, value_set=touched))
        return FileCounts(
            pa.concat_arrays([self.keys.filter(live), new.keys]),
            pa.concat_arrays([self.sizes.filter(live), new.sizes]),
            pa.concat_arrays([self.tombstone_keys.filter(dead), new.tombstone_keys]),
        )

    @property
    def nbytes(self) -> int:
        return self.keys.nbytes + self.sizes.nbytes + self.tombstone_keys.nbytes


def key_hashes(table: pa.Table) -> pa.Array:
    """The hash of each row's (path, deletion vector id) key, as int64."""
    if table.num_rows == 0:
        return pa.array([], pa.int64())
    keys = key_column(table)
    return pa.concat_arrays(list(_hashed(keys)))


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
        return len(self.counts.keys)

    @property
    def size_bytes(self) -> int:
        return int(pc.sum(self.counts.sizes).as_py() or 0) if self.num_files else 0

    @property
    def num_tombstones(self) -> int:
        return len(self.counts.tombstone_keys)

    def small_files(self, threshold_bytes: int) -> int:
        if not self.num_files:
            return 0
        return int(pc.sum(pc.less(self.counts.sizes, threshold_bytes)).as_py() or 0)


def read_held(table: Table) -> HeldSnapshot:
    """The newest snapshot, held: read with only the columns the counts need."""
    return HeldSnapshot.counted(table.snapshot(add_cols=HELD_ADD, remove_cols=HELD_REMOVE))


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
