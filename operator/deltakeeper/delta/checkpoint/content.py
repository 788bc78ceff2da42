"""What goes into a checkpoint: header rows, then add/remove rows as record batches."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc

from deltakeeper.delta import schema
from deltakeeper.delta.checkpoint.stats import StatsColumns, struct_array
from deltakeeper.delta.log.reconcile import dv_unique_ids
from deltakeeper.delta.snapshot import Snapshot, SnapshotHeader

# Removes in checkpoints are tombstones for VACUUM: no stats, no tags (spec).
CHECKPOINT_REMOVE = tuple(c for c in schema.FULL_REMOVE if c not in ("stats", "tags"))


BATCH_ROWS = 16_384  # rows per record batch handed to a layout (memory: a few are in flight)


HeaderRow = tuple[str, dict[str, Any]]


@dataclass
class Content:
    """A checkpoint's rows: a few header rows, then add/remove rows as record batches.

    `batches` yields batches with exactly two columns, `add` and `remove` (one of them null in
    each row), in a deterministic order. The counts (and `expired`, the tombstones left out as
    expired) are known before the first batch, unless the source was asked not to count first
    (layouts that do not split by count); then they are final once `batches` is exhausted.
    """

    header: list[HeaderRow]
    add_type: pa.StructType
    remove_type: pa.StructType
    num_adds: int
    num_removes: int
    batches: Iterator[pa.RecordBatch] = field(repr=False)
    expired: int = 0


def snapshot_content(
    snap: Snapshot, now_ms: int, tombstone_retention_ms: int, txn_retention_ms: int | None
) -> tuple[Content, int]:
    """The checkpoint rows of a loaded snapshot, and how many tombstones expired."""
    adds = sorted_by_key(without_data_change(snap.files))
    removes, expired = live_tombstones(snap.tombstones, now_ms - tombstone_retention_ms)
    removes = sorted_by_key(removes)
    stats = StatsColumns.for_snapshot(snap)
    add_type = stats.add_type(adds.schema)
    remove_type = pa.struct(list(removes.schema))

    def batches() -> Iterator[pa.RecordBatch]:
        for lo in range(0, adds.num_rows, BATCH_ROWS):
            piece = stats.add_struct(adds.slice(lo, BATCH_ROWS))
            yield file_batch(piece, pa.nulls(len(piece), remove_type))
        for lo in range(0, removes.num_rows, BATCH_ROWS):
            piece = struct_array(removes.slice(lo, BATCH_ROWS))
            yield file_batch(pa.nulls(len(piece), add_type), piece)

    header = header_rows(snap, now_ms, txn_retention_ms)
    content = Content(
        header, add_type, remove_type, adds.num_rows, removes.num_rows, batches(), expired
    )
    return content, expired


def file_batch(add: pa.Array, remove: pa.Array) -> pa.RecordBatch:
    return pa.RecordBatch.from_arrays([add, remove], names=["add", "remove"])


def sorted_by_key(table: pa.Table) -> pa.Table:
    """Rows in (path, deletion vector id) order: the same snapshot gives the same bytes no
    matter whether it was read from commits or from an earlier checkpoint."""
    if table.num_rows < 2:
        return table
    keys = pa.table({"p": table["path"], "d": pc.fill_null(dv_unique_ids(table), "")})
    return table.take(pc.sort_indices(keys, sort_keys=[("p", "ascending"), ("d", "ascending")]))


def without_data_change(adds: pa.Table) -> pa.Table:
    # dataChange has no meaning in a checkpoint; Delta Spark writes false.
    return adds.set_column(
        adds.schema.get_field_index("dataChange"),
        pa.field("dataChange", pa.bool_()),
        pa.repeat(pa.scalar(False, pa.bool_()), adds.num_rows),
    )


def live_tombstones(tombstones: pa.Table, expire_before_ms: int) -> tuple[pa.Table, int]:
    kept = tombstones.filter(not_expired(tombstones, expire_before_ms)).select(
        list(CHECKPOINT_REMOVE)
    )
    return kept, tombstones.num_rows - kept.num_rows


def header_rows(snap: SnapshotHeader, now_ms: int, txn_retention_ms: int | None) -> list[HeaderRow]:
    """protocol, metaData, the txns still within retention, live domains."""
    rows: list[HeaderRow] = [
        ("protocol", _protocol_row(snap)),
        ("metaData", snap.metadata.action()),
    ]
    for app_id in sorted(snap.txns):
        txn = snap.txns[app_id]
        last = txn.get("lastUpdated")
        if txn_retention_ms is not None and last is not None and last < now_ms - txn_retention_ms:
            continue
        rows.append(("txn", txn))
    rows += [("domainMetadata", snap.domains[d]) for d in sorted(snap.domains)]
    return rows


def _protocol_row(snap: SnapshotHeader) -> dict[str, Any]:
    p = snap.protocol
    return {
        "minReaderVersion": p.min_reader_version,
        "minWriterVersion": p.min_writer_version,
        # Spec: non-null lists exactly when the versions support table features.
        "readerFeatures": list(p.reader_features or []) if p.min_reader_version >= 3 else None,
        "writerFeatures": list(p.writer_features or []) if p.min_writer_version >= 7 else None,
    }


def not_expired(tombstones: pa.Table, expire_before_ms: int) -> pa.Array:
    return pc.greater_equal(pc.fill_null(tombstones["deletionTimestamp"], 0), expire_before_ms)


def true_count(mask: pa.Array | pa.ChunkedArray) -> int:
    return int(pc.sum(pc.cast(mask, pa.int64())).as_py() or 0)
