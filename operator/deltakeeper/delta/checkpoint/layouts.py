"""The checkpoint layouts (classic, multi-part, V2 with sidecars): parquet files written into
uploads (streamed where the store can), put, and read back to verify."""

from __future__ import annotations

import contextlib
import enum
import functools
import math
import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from deltakeeper.delta import paths, schema, spark_hash
from deltakeeper.delta.checkpoint.content import Content, HeaderRow
from deltakeeper.delta.errors import CorruptLogError
from deltakeeper.delta.log import checkpoint_files
from deltakeeper.delta.storage.base import BufferedUpload, Upload
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


CHECKPOINT_METADATA = pa.struct([("version", pa.int64()), ("tags", schema.STRING_MAP)])


SIDECAR = pa.struct(
    [
        ("path", pa.string()),
        ("sizeInBytes", pa.int64()),
        ("modificationTime", pa.int64()),
        ("tags", schema.STRING_MAP),
    ]
)


class Layout(enum.StrEnum):
    CLASSIC = "classic"
    MULTIPART = "multipart"
    V2 = "v2"


V2_PART_SIZE = 50_000  # Delta Spark's sidecar size when checkpoint.partSize is not set


ROW_GROUP_ROWS = 32_768  # row groups cut by count alone, so bytes depend only on the rows


def num_parts(content: Content, part_size: int) -> int:
    return max(1, math.ceil((content.num_adds + content.num_removes) / part_size))


@dataclass
class _File:
    key: str
    size: int  # bytes
    rows: int
    schema: pa.Schema
    mtime_ms: int = 0


# Leaves whose values differ from file to file: arrow tries a dictionary, overflows its page
# limit and falls back to plain, which costs time (a third of the write on 1M files) and bytes.
PER_FILE_COLUMNS = frozenset(
    {
        "add.path",
        "add.stats",
        "remove.path",
        "add.size",
        "add.modificationTime",
        "add.stats_parsed.numRecords",
    }
)
PER_FILE_PREFIXES = ("add.stats_parsed.minValues.", "add.stats_parsed.maxValues.")


def dictionary_columns(leaves: list[str]) -> list[str]:
    """The leaves worth a dictionary: those whose values repeat across files."""
    return [c for c in leaves if c not in PER_FILE_COLUMNS and not c.startswith(PER_FILE_PREFIXES)]


def _leaf_columns(schema_: pa.Schema) -> list[str]:
    """Parquet column paths of an Arrow schema (maps as key_value, lists as list.element)."""

    def walk(name: str, typ: pa.DataType) -> list[str]:
        if pa.types.is_struct(typ):
            return [
                c
                for i in range(typ.num_fields)
                for c in walk(f"{name}.{typ.field(i).name}", typ.field(i).type)
            ]
        if pa.types.is_map(typ):
            return [
                *walk(f"{name}.key_value.key", typ.key_type),
                *walk(f"{name}.key_value.value", typ.item_type),
            ]
        if pa.types.is_list(typ):
            return walk(f"{name}.list.element", typ.value_type)
        return [name]

    return [c for f in schema_ for c in walk(f.name, f.type)]


class _ParquetOut:
    """One parquet file written into an Upload; row groups are cut every ROW_GROUP_ROWS rows."""

    def __init__(self, key: str, schema_: pa.Schema, sink: Upload) -> None:
        self.key = key
        self.schema = schema_
        self.sink = sink
        leaves = _leaf_columns(schema_)
        self.writer = pq.ParquetWriter(
            self.sink,
            schema_,
            compression="snappy",
            use_dictionary=dictionary_columns(leaves),
            # min/max of stats JSON help no reader.
            write_statistics=[c for c in leaves if c != "add.stats"],
        )
        self.pending: list[pa.Table] = []
        self.pending_rows = 0
        self.rows = 0

    def write(self, table: pa.Table) -> None:
        if table.num_rows == 0:
            return
        self.pending.append(table)
        self.pending_rows += table.num_rows
        self.rows += table.num_rows
        if self.pending_rows >= ROW_GROUP_ROWS:
            self._flush(final=False)

    def _flush(self, final: bool) -> None:
        data = pa.concat_tables(self.pending) if self.pending else self.schema.empty_table()
        whole = data.num_rows if final else data.num_rows - data.num_rows % ROW_GROUP_ROWS
        for lo in range(0, whole, ROW_GROUP_ROWS):
            self.writer.write_table(data.slice(lo, min(ROW_GROUP_ROWS, whole - lo)))
        rest = data.slice(whole)
        self.pending = [rest] if rest.num_rows else []
        self.pending_rows = rest.num_rows

    def finish(self) -> int:
        """Write the footer; returns the file's size."""
        self._flush(final=True)
        self.writer.close()
        return self.sink.size


class _Discard(Upload):
    """A dry run's upload: counts the bytes, keeps none."""

    def _write(self, data: Any) -> None:
        pass

    def commit(self) -> None:
        pass

    def abort(self) -> None:
        pass


class Writer:
    """Collects the files of one checkpoint, puts them (unless a dry run) and verifies them."""

    def __init__(self, table: Table, version: int, now_ms: int, dry_run: bool) -> None:
        self.table = table
        self.version = version
        self.now_ms = now_ms
        self.dry_run = dry_run
        self.files: list[_File] = []
        self.sidecars: list[_File] = []
        self.main_key = ""
        self.unput: list[_ParquetOut] = []  # opened, not put yet: what `abort` drops

    def open(self, key: str, schema_: pa.Schema, *, unique: bool = False) -> _ParquetOut:
        """A file to fill, then `put`. `unique` names (UUIDs) are created once, never
        replaced: held in memory and created whole. Other names are overwritten (the spec:
        the latest writer wins; parts are deterministic, so a retry rewrites the same bytes)
        through the store's streamed upload."""
        storage = self.table.storage
        sink: Upload
        if self.dry_run:
            sink = _Discard()
        elif unique:
            sink = BufferedUpload(functools.partial(storage.put_if_absent, key))
        else:
            sink = storage.open_upload(key)
        out = _ParquetOut(key, schema_, sink)
        self.unput.append(out)
        return out

    def put(self, out: _ParquetOut, *, sidecar: bool = False) -> _File:
        """Finish a file and make it visible (unless a dry run)."""
        f = _File(out.key, out.finish(), out.rows, out.schema, self.now_ms)
        if not self.dry_run:
            out.sink.commit()
            info = self.table.storage.head(out.key)
            f.mtime_ms = info.mtime_ms if info is not None else self.now_ms
        self.unput.remove(out)
        (self.sidecars if sidecar else self.files).append(f)
        return f

    def abort(self) -> None:
        """After a failure: drop what was written of the files not put."""
        for out in self.unput:
            # The failure being raised is the one to report; an upload never completed is
            # invisible to readers either way.
            with contextlib.suppress(Exception):
                out.sink.abort()
        self.unput.clear()

    @property
    def rows(self) -> int:
        return sum(f.rows for f in [*self.sidecars, *self.files])

    @property
    def size_bytes(self) -> int:
        return sum(f.size for f in [*self.sidecars, *self.files])

    def verify(self) -> None:
        for f in [*self.sidecars, *self.files]:
            _verify(self.table, f)


def _table_schema(columns: list[tuple[str, pa.DataType]]) -> pa.Schema:
    return pa.schema([pa.field(n, t) for n, t in columns])


def _header_columns(content: Content, kinds: list[str]) -> list[tuple[str, pa.DataType]]:
    """The non-file action columns of a checkpoint file, in a fixed order."""
    types_ = {
        "checkpointMetadata": CHECKPOINT_METADATA,
        "sidecar": SIDECAR,
        "protocol": PROTOCOL,
        "metaData": METADATA,
        "txn": TXN,
        "domainMetadata": DOMAIN,
    }
    present = {kind for kind, _ in content.header} | set(kinds)
    order = ["checkpointMetadata", "sidecar", "protocol", "metaData", "txn", "domainMetadata"]
    return [(k, types_[k]) for k in order if k in present]


def _rows_table(schema_: pa.Schema, rows: list[HeaderRow]) -> pa.Table:
    """Header rows as a table of `schema_`: each row fills its own column, the rest null."""
    arrays = [
        pa.array([body if kind == f.name else None for kind, body in rows], type=f.type)
        for f in schema_
    ]
    return pa.Table.from_arrays(arrays, schema=schema_)


def _batch_table(schema_: pa.Schema, batch: pa.RecordBatch) -> pa.Table:
    """A file-action batch widened to `schema_` (header columns all null)."""
    n = batch.num_rows
    arrays = [
        batch.column(f.name) if f.name in batch.schema.names else pa.nulls(n, f.type)
        for f in schema_
    ]
    return pa.Table.from_arrays(arrays, schema=schema_)


def _route(
    batches: Iterator[pa.RecordBatch],
    buffers: list[_ParquetOut],
    widen: Callable[[pa.RecordBatch], pa.Table],
) -> None:
    """Send each row to buffer pmod(hash(add.path or remove.path), n), as Delta Spark does."""
    n = len(buffers)
    for batch in batches:
        table = widen(batch)
        if n == 1:
            buffers[0].write(table)
            continue
        key = pc.coalesce(
            pc.struct_field(batch.column("add"), "path"),
            pc.struct_field(batch.column("remove"), "path"),
        )
        part = spark_hash.pmod(spark_hash.hash_strings(key), n)
        for p in pc.unique(part).to_pylist():
            buffers[p].write(table.filter(pc.equal(part, p)))


def _header_part(n: int) -> int:
    # Non-file actions have a null key, which Spark hashes to the seed.
    return spark_hash.SEED % n


def write_classic(writer: Writer, content: Content, n: int) -> None:
    """A classic file (n == 1) or n multi-part files, all with the same schema."""
    cols = _header_columns(content, ["protocol", "metaData", "txn"])
    schema_ = _table_schema([*cols, ("add", content.add_type), ("remove", content.remove_type)])
    v = writer.version
    names = (
        [paths.checkpoint(v)]
        if n == 1
        else [paths.multipart_checkpoint(v, i + 1, n) for i in range(n)]
    )
    buffers = [writer.open(f"{paths.LOG_DIR}/{name}", schema_) for name in names]
    buffers[_header_part(n)].write(_rows_table(schema_, content.header))
    _route(content.batches, buffers, lambda b: _batch_table(schema_, b))
    for buf in buffers:
        writer.put(buf)
    writer.main_key = writer.files[0].key


def write_v2(writer: Writer, content: Content, part_size: int) -> None:
    """Sidecars with the add/remove rows, then the UUID-named file that lists them."""
    n = num_parts(content, part_size)
    file_schema = _table_schema([("add", content.add_type), ("remove", content.remove_type)])
    v = writer.version
    names = [
        f"{paths.version_prefix(v)}.checkpoint.{i + 1:010d}.{n:010d}.{uuid.uuid4()}.parquet"
        for i in range(n)
    ]
    buffers = [
        writer.open(f"{paths.LOG_DIR}/{paths.sidecar(name)}", file_schema, unique=True)
        for name in names
    ]
    _route(content.batches, buffers, lambda b: pa.Table.from_batches([b]))
    for buf in buffers:
        writer.put(buf, sidecar=True)
    tags = {
        "sidecarNumActions": str(sum(f.rows for f in writer.sidecars)),
        "sidecarSizeInBytes": str(sum(f.size for f in writer.sidecars)),
        "numOfAddFiles": str(content.num_adds),
    }
    header: list[HeaderRow] = [("checkpointMetadata", checkpoint_metadata(v, tags))]
    header += [("sidecar", sidecar_row(f)) for f in writer.sidecars]
    header += content.header
    content.header = header
    cols = _header_columns(content, ["protocol", "metaData", "txn"])
    # add/remove stay in the schema (all null) for readers that expect the columns.
    top_schema = _table_schema([*cols, ("add", content.add_type), ("remove", content.remove_type)])
    key = f"{paths.LOG_DIR}/{paths.uuid_checkpoint(v, str(uuid.uuid4()))}"
    top = writer.open(key, top_schema, unique=True)
    top.write(_rows_table(top_schema, header))
    writer.main_key = writer.put(top).key


def checkpoint_metadata(version: int, tags: dict[str, str]) -> dict[str, Any]:
    return {"version": version, "tags": tags}


def sidecar_row(f: _File) -> dict[str, Any]:
    name = f.key.rsplit("/", 1)[-1]  # spec: store the name only
    return {"path": name, "sizeInBytes": f.size, "modificationTime": f.mtime_ms, "tags": None}


def _verify(table: Table, f: _File) -> None:
    """Read a written file back: same row count and schema, or it must not be used."""
    try:
        meta = checkpoint_files.open_parquet(table.storage, f.key, f.size)
        ok = meta.metadata.num_rows == f.rows and meta.schema_arrow.equals(f.schema)
    except CorruptLogError as e:  # missing or not parquet
        raise CorruptLogError(
            f"{table.uri}/{f.key}: checkpoint unreadable after writing: {e}; nothing points at "
            "it yet, so run the checkpoint again"
        ) from e
    if not ok:
        raise CorruptLogError(
            f"{table.uri}/{f.key}: checkpoint read back differs from what was written; nothing "
            "points at it yet, so run the checkpoint again"
        )
