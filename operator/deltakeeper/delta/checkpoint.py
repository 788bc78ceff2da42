"""Write a classic (V1 spec) checkpoint, verify it, then move `_last_checkpoint`.

Order matters for crash safety: the checkpoint is written and read back before
`_last_checkpoint` points at it, and `_last_checkpoint` never moves backwards.
"""

from __future__ import annotations

import io
from dataclasses import dataclass
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from deltakeeper.delta import last_checkpoint, paths, schema
from deltakeeper.delta.errors import CorruptLogError, UnsupportedProtocolError
from deltakeeper.delta.snapshot import Snapshot
from deltakeeper.delta.table import Table

STRING_LIST = pa.list_(pa.string())
PROTOCOL = pa.struct(
    [
        ("minReaderVersion", pa.int32()),
        ("minWriterVersion", pa.int32()),
        ("readerFeatures", STRING_LIST),
        ("writerFeatures", STRING_LIST),
    ]
)
METADATA = pa.struct(
    [
        ("id", pa.string()),
        ("name", pa.string()),
        ("description", pa.string()),
        ("format", pa.struct([("provider", pa.string()), ("options", schema.STRING_MAP)])),
        ("schemaString", pa.string()),
        ("partitionColumns", STRING_LIST),
        ("configuration", schema.STRING_MAP),
        ("createdTime", pa.int64()),
    ]
)
TXN = pa.struct([("appId", pa.string()), ("version", pa.int64()), ("lastUpdated", pa.int64())])
DOMAIN = pa.struct(
    [("domain", pa.string()), ("configuration", pa.string()), ("removed", pa.bool_())]
)
# Removes in checkpoints are tombstones for VACUUM: no stats, no tags (spec).
CHECKPOINT_REMOVE = tuple(c for c in schema.FULL_REMOVE if c not in ("stats", "tags"))


@dataclass(frozen=True)
class CheckpointResult:
    version: int
    key: str
    rows: int
    adds: int
    tombstones: int
    expired_tombstones: int
    size_bytes: int
    last_checkpoint_moved: bool


def load_for_checkpoint(table: Table, version: int | None = None) -> Snapshot:
    """The snapshot with every column a checkpoint carries."""
    return table.snapshot(version=version, add_cols=schema.FULL_ADD, remove_cols=schema.FULL_REMOVE)


def write_checkpoint(
    table: Table,
    snap: Snapshot,
    now_ms: int,
    tombstone_retention_ms: int,
    txn_retention_ms: int | None = None,
    dry_run: bool = False,
) -> CheckpointResult:
    """Write `snap` as `<version>.checkpoint.parquet`; expire old tombstones and txns.

    With `dry_run` everything is computed and nothing is written.
    """
    if snap.unsupported_features:
        raise UnsupportedProtocolError(
            f"{table.uri}: refusing to write a checkpoint: this build does not support "
            f"{', '.join(snap.unsupported_features)}"
        )
    adds = _checkpoint_adds(snap)
    removes, expired = _live_tombstones(snap.tombstones, now_ms - tombstone_retention_ms)
    data = _build(snap, adds, removes, now_ms, txn_retention_ms)
    key = f"{paths.LOG_DIR}/{paths.checkpoint(snap.version)}"
    body = _to_parquet(data)
    moved = False
    if not dry_run:
        table.storage.overwrite(key, body)  # classic checkpoints: the latest writer wins (spec)
        _verify(table, key, data)
        moved = _move_last_checkpoint(table, snap.version, data, len(body), adds.num_rows)
    return CheckpointResult(
        snap.version, key, data.num_rows, adds.num_rows, removes.num_rows, expired, len(body), moved
    )


def _checkpoint_adds(snap: Snapshot) -> pa.Table:
    adds = snap.files
    # dataChange has no meaning in a checkpoint; Delta Spark writes false.
    adds = adds.set_column(
        adds.schema.get_field_index("dataChange"),
        pa.field("dataChange", pa.bool_()),
        pa.repeat(pa.scalar(False, pa.bool_()), adds.num_rows),
    )
    if snap.metadata.configuration.get("delta.checkpoint.writeStatsAsJson", "true") == "false":
        adds = adds.drop_columns(["stats"])
    return adds


def _live_tombstones(tombstones: pa.Table, expire_before_ms: int) -> tuple[pa.Table, int]:
    ts = pc.fill_null(tombstones["deletionTimestamp"], 0)
    keep = pc.greater_equal(ts, expire_before_ms)
    kept = tombstones.filter(keep).select(list(CHECKPOINT_REMOVE))
    return kept, tombstones.num_rows - kept.num_rows


def _build(
    snap: Snapshot, adds: pa.Table, removes: pa.Table, now_ms: int, txn_retention_ms: int | None
) -> pa.Table:
    """One row per action: protocol, metaData, txns, domains, adds, removes."""
    head: list[tuple[str, dict[str, Any]]] = [
        ("protocol", _protocol_row(snap)),
        ("metaData", _metadata_row(snap)),
    ]
    for txn in snap.txns.values():
        last = txn.get("lastUpdated")
        if txn_retention_ms is not None and last is not None and last < now_ms - txn_retention_ms:
            continue
        head.append(("txn", txn))
    head += [("domainMetadata", d) for d in snap.domains.values()]
    n_head, n_add, n_remove = len(head), adds.num_rows, removes.num_rows
    total = n_head + n_add + n_remove
    columns: dict[str, pa.Array | pa.ChunkedArray] = {}
    for name, typ in (("protocol", PROTOCOL), ("metaData", METADATA), ("txn", TXN)):
        columns[name] = pa.array(
            [row if kind == name else None for kind, row in head] + [None] * (n_add + n_remove),
            type=typ,
        )
    if snap.domains or snap.protocol.has("domainMetadata"):
        columns["domainMetadata"] = pa.array(
            [row if kind == "domainMetadata" else None for kind, row in head]
            + [None] * (n_add + n_remove),
            type=DOMAIN,
        )
    columns["add"] = _place(adds, n_head, n_remove, total)
    columns["remove"] = _place(removes, n_head + n_add, 0, total)
    return pa.table(columns)


def _place(actions: pa.Table, before: int, after: int, total: int) -> pa.ChunkedArray:
    """A struct column holding `actions` at rows [before, before + n) and nulls elsewhere."""
    typ = pa.struct(list(actions.schema))
    body = actions.combine_chunks().to_struct_array() if actions.num_rows else pa.array([], typ)
    parts = [pa.nulls(before, typ), body, pa.nulls(after, typ)]
    out = pa.chunked_array([p for p in parts if len(p)], type=typ)
    assert len(out) == total
    return out


def _protocol_row(snap: Snapshot) -> dict[str, Any]:
    p = snap.protocol
    return {
        "minReaderVersion": p.min_reader_version,
        "minWriterVersion": p.min_writer_version,
        # Spec: non-null lists exactly when the versions support table features.
        "readerFeatures": list(p.reader_features or []) if p.min_reader_version >= 3 else None,
        "writerFeatures": list(p.writer_features or []) if p.min_writer_version >= 7 else None,
    }


def _metadata_row(snap: Snapshot) -> dict[str, Any]:
    m = snap.metadata
    fmt = m.raw.get("format") or {}
    return {
        "id": m.id,
        "name": m.name,
        "description": m.description,
        "format": {"provider": m.provider, "options": dict(fmt.get("options") or {})},
        "schemaString": m.schema_string,
        "partitionColumns": list(m.partition_columns),
        "configuration": dict(m.configuration),
        "createdTime": m.created_time,
    }


def _to_parquet(data: pa.Table) -> bytes:
    sink = io.BytesIO()
    pq.write_table(data, sink, compression="snappy")
    return sink.getvalue()


def _verify(table: Table, key: str, written: pa.Table) -> None:
    """Read the checkpoint back: same row count and schema, or it must not be used."""
    try:
        local = table.storage.local_path(key)
        source = local if local is not None else pa.BufferReader(table.storage.read(key))
        meta = pq.ParquetFile(source)
        ok = meta.metadata.num_rows == written.num_rows and meta.schema_arrow.equals(written.schema)
    except (OSError, pa.ArrowInvalid) as e:
        raise CorruptLogError(f"{table.uri}/{key}: checkpoint unreadable after writing: {e}") from e
    if not ok:
        raise CorruptLogError(
            f"{table.uri}/{key}: checkpoint read back differs from what was written"
        )


def _move_last_checkpoint(table: Table, version: int, data: pa.Table, size: int, adds: int) -> bool:
    current = table.read_hint().checkpoint
    if current is not None and current.version > version:
        return False  # never move backwards
    body = last_checkpoint.serialize(
        {"version": version, "size": data.num_rows, "sizeInBytes": size, "numOfAddFiles": adds}
    )
    table.storage.overwrite(f"{paths.LOG_DIR}/{paths.LAST_CHECKPOINT}", body)
    return True
