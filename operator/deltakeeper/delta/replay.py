"""Action reconciliation: checkpoint + commits -> live files, tombstones and table-level actions.

The checkpoint (millions of rows) stays in Arrow end to end. Commits are read newest first, one
orjson parse per line to find each action's key; the winning file actions are kept as their raw
lines and turned into Arrow in batches by pyarrow.json. Newer actions win per
(path, deletionVector.uniqueId).
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import unquote

import orjson
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.json as pa_json
import pyarrow.parquet as pq

from deltakeeper.delta import paths, schema
from deltakeeper.delta.errors import (
    CorruptLogError,
    DamagedCheckpointError,
    MissingLogFileError,
)
from deltakeeper.delta.log import Checkpoint, LogSegment
from deltakeeper.delta.storage import Storage

NON_FILE_ACTIONS = (
    "protocol",
    "metaData",
    "txn",
    "domainMetadata",
    "sidecar",
    "checkpointMetadata",
)


@dataclass
class Actions:
    """Reconciled table-level actions (newest wins) and file actions as Arrow tables."""

    adds: pa.Table
    removes: pa.Table
    protocol: dict[str, Any] | None = None
    metadata: dict[str, Any] | None = None
    txns: dict[str, dict[str, Any]] = field(default_factory=dict)
    domains: dict[str, dict[str, Any]] = field(default_factory=dict)  # removed ones included
    commit_info: dict[str, Any] | None = None  # of the snapshot version only


def dv_unique_id(dv: dict[str, Any] | None) -> str | None:
    """The spec's derived `uniqueId`: storageType + pathOrInlineDv [+ '@' + offset]."""
    if not dv:
        return None
    base = f"{dv.get('storageType', '')}{dv.get('pathOrInlineDv', '')}"
    offset = dv.get("offset")
    return base if offset is None else f"{base}@{offset}"


def dv_unique_ids(table: pa.Table) -> pa.Array:
    """Vectorized `dv_unique_id` over a table with a `deletionVector` column."""
    if "deletionVector" not in table.column_names:
        return pa.nulls(table.num_rows, pa.string())
    dv = table["deletionVector"]
    base = pc.binary_join_element_wise(
        pc.struct_field(dv, "storageType"), pc.struct_field(dv, "pathOrInlineDv"), ""
    )
    offset = pc.cast(pc.struct_field(dv, "offset"), pa.string())
    return pc.coalesce(pc.binary_join_element_wise(base, offset, "@"), base)


# -- checkpoints ---------------------------------------------------------------------------------


def _open_parquet(storage: Storage, key: str) -> pq.ParquetFile:
    local = storage.local_path(key)
    try:
        if local is not None:
            storage.requests["read"] += 1
            return pq.ParquetFile(local)
        return pq.ParquetFile(pa.BufferReader(storage.read(key)))
    except FileNotFoundError as e:
        raise MissingLogFileError(f"{storage.uri}/{key} is missing") from e


def _project(struct: pa.ChunkedArray, wanted: tuple[str, ...], target: pa.Schema) -> pa.Table:
    """Columns `wanted` of a struct column, cast to our schema; absent sub-fields become null."""
    struct_type = struct.type
    present = {struct_type.field(i).name for i in range(struct_type.num_fields)}
    cols = []
    for name in wanted:
        typ = target.field(name).type
        if name in present:
            col = pc.struct_field(struct, name)
            cols.append(col if col.type == typ else _cast(col, typ))
        else:
            cols.append(pa.nulls(len(struct), typ))
    return pa.Table.from_arrays(cols, schema=target)


def _cast(col: pa.ChunkedArray | pa.Array, typ: pa.DataType) -> pa.ChunkedArray | pa.Array:
    if pa.types.is_struct(typ) and pa.types.is_struct(col.type):
        # Writers differ in which DV fields they store; rebuild the struct field by field.
        chunks = col.chunks if isinstance(col, pa.ChunkedArray) else [col]
        rebuilt = []
        for chunk in chunks:
            names = {chunk.type.field(i).name for i in range(chunk.type.num_fields)}
            children = [
                pc.cast(chunk.field(f.name), f.type)
                if f.name in names
                else pa.nulls(len(chunk), f.type)
                for f in typ
            ]
            rebuilt.append(
                pa.StructArray.from_arrays(children, fields=list(typ), mask=chunk.is_null())
            )
        return pa.chunked_array(rebuilt, type=typ)
    return pc.cast(col, typ)


def _read_checkpoint_file(
    storage: Storage,
    key: str,
    add_cols: tuple[str, ...],
    remove_cols: tuple[str, ...],
    drop: _Dropper | None = None,
) -> tuple[pa.Table, pa.Table, list[dict[str, Any]]]:
    """One parquet checkpoint part or sidecar -> (adds, removes, non-file action rows).

    Read, projected and (with `drop`) rid of superseded rows batch by batch, so the whole
    file's decoded columns and a filtered copy of them are never in memory together.
    """
    keep = drop or (lambda t: t)
    add_schema, remove_schema = schema.add_schema(add_cols), schema.remove_schema(remove_cols)
    adds: list[pa.Table] = [add_schema.empty_table()]
    removes: list[pa.Table] = [remove_schema.empty_table()]
    others: list[dict[str, Any]] = []
    for table in _checkpoint_batches(storage, key, add_cols, remove_cols):
        adds.append(keep(_file_actions(table, "add", add_cols, add_schema)))
        removes.append(keep(_file_actions(table, "remove", remove_cols, remove_schema)))
        for action in NON_FILE_ACTIONS:
            if action in table.column_names:
                col = table[action]
                valid = col.filter(pc.is_valid(col))
                others.extend({action: _plain(row)} for row in valid.to_pylist())
    return pa.concat_tables(adds), pa.concat_tables(removes), others


CHECKPOINT_BATCH_ROWS = 131_072


def _checkpoint_batches(
    storage: Storage, key: str, add_cols: tuple[str, ...], remove_cols: tuple[str, ...]
) -> Iterator[pa.Table]:
    """The columns replay needs, a batch at a time; an unreadable file is a CorruptLogError."""
    try:
        pf = _open_parquet(storage, key)
        top = set(pf.schema_arrow.names)
        columns = [f"add.{c}" for c in add_cols if _has(pf, "add", c)]
        columns += [f"remove.{c}" for c in remove_cols if _has(pf, "remove", c)]
        columns += [a for a in NON_FILE_ACTIONS if a in top]
        for batch in pf.iter_batches(batch_size=CHECKPOINT_BATCH_ROWS, columns=columns):
            yield pa.Table.from_batches([batch])
    except (OSError, pa.ArrowInvalid) as e:
        raise CorruptLogError(f"{storage.uri}/{key}: unreadable checkpoint parquet: {e}") from e


def _has(pf: pq.ParquetFile, action: str, name: str) -> bool:
    if action not in pf.schema_arrow.names:
        return False
    typ = pf.schema_arrow.field(action).type
    return any(typ.field(i).name == name for i in range(typ.num_fields))


def _file_actions(
    table: pa.Table, action: str, cols: tuple[str, ...], target: pa.Schema
) -> pa.Table:
    if action not in table.column_names:
        return target.empty_table()
    struct = table[action]
    present = struct.filter(pc.is_valid(pc.struct_field(struct, "path")))
    return _project(present, cols, target)


def _plain(value: Any) -> Any:
    """Arrow's to_pylist gives maps as lists of (key, value) tuples; make them dicts."""
    if isinstance(value, dict):
        return {k: _plain(v) for k, v in value.items()}
    if isinstance(value, list):
        if value and all(isinstance(x, tuple) and len(x) == 2 for x in value):
            return {k: _plain(v) for k, v in value}
        return [_plain(x) for x in value]
    return value


def _read_checkpoint(
    storage: Storage,
    cp: Checkpoint,
    add_cols: tuple[str, ...],
    remove_cols: tuple[str, ...],
    drop: _Dropper | None = None,
) -> tuple[list[pa.Table], list[pa.Table], list[dict[str, Any]]]:
    """The checkpoint's file actions (less the rows `drop` removes) and its other actions."""
    keep = drop or (lambda t: t)
    adds: list[pa.Table] = []
    removes: list[pa.Table] = []
    others: list[dict[str, Any]] = []
    for entry in cp.files:
        if entry.name.fmt == "json":  # UUID-named V2 checkpoint in JSON
            actions = [a for _, a in read_actions(storage, entry.key)]
            a, r, o = _split_json_checkpoint(actions, add_cols, remove_cols)
            a, r = keep(a), keep(r)
        else:
            a, r, o = _read_checkpoint_file(storage, entry.key, add_cols, remove_cols, drop)
        adds.append(a)
        removes.append(r)
        others.extend(o)
    for sidecar in (o["sidecar"] for o in others if "sidecar" in o):
        key = _sidecar_key(sidecar["path"])
        a, r, _ = _read_checkpoint_file(storage, key, add_cols, remove_cols, drop)
        adds.append(a)
        removes.append(r)
    return adds, removes, others


def _sidecar_key(path: str) -> str:
    # Sidecars always live in _delta_log/_sidecars; writers may store a name or a full URI.
    name = unquote(path).rsplit("/", 1)[-1]
    return f"{paths.LOG_DIR}/{paths.sidecar(name)}"


def _split_json_checkpoint(
    actions: list[dict[str, Any]], add_cols: tuple[str, ...], remove_cols: tuple[str, ...]
) -> tuple[pa.Table, pa.Table, list[dict[str, Any]]]:
    adds = [a["add"] for a in actions if "add" in a]
    removes = [a["remove"] for a in actions if "remove" in a]
    others = [a for a in actions if any(k in a for k in NON_FILE_ACTIONS)]
    return (
        _rows_to_table(adds, add_cols, "add"),
        _rows_to_table(removes, remove_cols, "remove"),
        others,
    )


def _rows_to_table(
    rows: list[dict[str, Any]], cols: tuple[str, ...], action: str, where: list[str] | None = None
) -> pa.Table:
    """Rows to Arrow; `where[i]` ("file: line n") names row i when a field has the wrong type."""
    target = schema.add_schema(cols) if action == "add" else schema.remove_schema(cols)
    try:
        return pa.Table.from_pylist(rows, schema=target)  # keys outside `cols` are ignored
    except (pa.ArrowInvalid, pa.ArrowTypeError) as e:
        for i, row in enumerate(rows):  # slow path, errors only: find the offending row
            try:
                pa.Table.from_pylist([row], schema=target)
            except (pa.ArrowInvalid, pa.ArrowTypeError) as row_error:
                place = where[i] if where else f"{action} action {row.get('path')!r}"
                raise CorruptLogError(
                    f"{place}: {action} has a field of the wrong type: {row_error}"
                ) from e
        raise CorruptLogError(f"{action} actions could not be converted: {e}") from e


# -- commits -------------------------------------------------------------------------------------


def read_actions(storage: Storage, key: str) -> list[tuple[int, dict[str, Any]]]:
    """(line number, action) pairs of a JSON log file; a bad line is a CorruptLogError naming it."""
    return [(lineno, {kind: body}) for lineno, _, kind, body in _commit_lines(storage, key)]


def _commit_lines(storage: Storage, key: str) -> Iterator[tuple[int, bytes, str, Any]]:
    """(line number, raw line, action name, action body) for each line of a JSON log file."""
    try:
        data = storage.read(key)
    except FileNotFoundError as e:
        raise MissingLogFileError(f"{storage.uri}/{key} was listed but is gone") from e
    for lineno, line in enumerate(data.split(b"\n"), start=1):
        if not line.strip():
            continue
        try:
            action = orjson.loads(line)
        except orjson.JSONDecodeError as e:
            raise CorruptLogError(f"{storage.uri}/{key}: line {lineno}: not valid JSON: {e}") from e
        try:
            ((kind, body),) = action.items()  # exactly one action per line
        except (AttributeError, ValueError):
            raise CorruptLogError(
                f"{storage.uri}/{key}: line {lineno}: expected one action object per line"
            ) from None
        if (kind == "add" or kind == "remove") and not (
            type(body) is dict and type(body.get("path")) is str
        ):
            raise CorruptLogError(f"{storage.uri}/{key}: line {lineno}: {kind} without a path")
        yield lineno, line, kind, body


def replay(
    storage: Storage,
    segment: LogSegment,
    add_cols: tuple[str, ...] = schema.LEAN_ADD,
    remove_cols: tuple[str, ...] = schema.LEAN_REMOVE,
    base: tuple[pa.Table, pa.Table] | None = None,
) -> Actions:
    """Reconcile the segment's checkpoint and commits into the snapshot's actions.

    `base` (files, tombstones) of an earlier snapshot stands in for the checkpoint when the
    segment's commits follow that snapshot directly (incremental update).
    """
    seen: set[tuple[str, str | None]] = set()
    kept = {
        "add": _Kept("add", add_cols, storage.uri),
        "remove": _Kept("remove", remove_cols, storage.uri),
    }
    result = Actions(
        schema.add_schema(add_cols).empty_table(), schema.remove_schema(remove_cols).empty_table()
    )
    for entry in reversed(segment.commits):
        for lineno, line, kind, body in _commit_lines(storage, entry.key):
            if kind == "add" or kind == "remove":
                dv = body.get("deletionVector")
                key = (body["path"], dv_unique_id(dv) if dv else None)
                if key not in seen:  # commits are read newest first: the first one seen wins
                    seen.add(key)
                    kept[kind].keep(line, body, entry.key, lineno)
            elif kind == "commitInfo" and entry.name.version == segment.version:
                result.commit_info = result.commit_info or body
            else:
                _take_table_action(result, kind, body)
    drop = _Dropper(seen)
    cp_adds: list[pa.Table] = []
    cp_removes: list[pa.Table] = []
    if base is not None:
        cp_adds, cp_removes = [drop(base[0])], [drop(base[1])]
    elif segment.checkpoint is not None:
        cp = segment.checkpoint
        try:
            cp_adds, cp_removes, others = _read_checkpoint(storage, cp, add_cols, remove_cols, drop)
        except MissingLogFileError:
            raise  # deleted underneath us: the caller lists again
        except CorruptLogError as e:
            keys = tuple(f.key for f in cp.files)
            raise DamagedCheckpointError(str(e), cp.version, keys) from e
        for action in others:
            kind, body = next(iter(action.items()))
            _take_table_action(result, kind, body)
    result.adds = pa.concat_tables([*cp_adds, kept["add"].table()])
    result.removes = pa.concat_tables([*cp_removes, kept["remove"].table()])
    return result


class _Kept:
    """The winning add (or remove) actions of the commits, kept as their raw JSON lines.

    Lines are turned into Arrow in batches, columnar (pyarrow.json), so no Python object per
    action outlives its batch. Whatever the columnar reader cannot reproduce exactly goes
    through the row-by-row converter, which also names a bad line.
    """

    BATCH = 65_536

    def __init__(self, action: str, cols: tuple[str, ...], uri: str) -> None:
        self.action, self.cols, self.uri = action, cols, uri
        self.target = schema.add_schema(cols) if action == "add" else schema.remove_schema(cols)
        self.tables: list[pa.Table] = []
        self._clear()

    def _clear(self) -> None:
        self.lines: list[bytes] = []
        self.places: list[tuple[str, int]] = []
        # The key tuples of each map field's JSON objects in this batch; None: null or absent.
        self.shapes: dict[str, set[tuple[str, ...] | None]] = {n: set() for n in MAP_FIELDS}
        self.pv_shapes, self.tag_shapes = self.shapes["partitionValues"], self.shapes["tags"]

    def keep(self, line: bytes, body: dict[str, Any], key: str, lineno: int) -> None:
        # Called once per kept action: spelled out rather than looped, it is the hot path.
        self.lines.append(line)
        self.places.append((key, lineno))
        pv, tags = body.get("partitionValues"), body.get("tags")
        self.pv_shapes.add(tuple(pv) if type(pv) is dict else None)
        self.tag_shapes.add(tuple(tags) if type(tags) is dict else None)
        if len(self.lines) >= self.BATCH:
            self._flush()

    def _flush(self) -> None:
        if not self.lines:
            return
        table = _lines_to_table(self.lines, self.action, self.target, self.shapes)
        if table is None:
            rows = [orjson.loads(line)[self.action] for line in self.lines]
            where = [f"{self.uri}/{key}: line {n}" for key, n in self.places]
            table = _rows_to_table(rows, self.cols, self.action, where)
        self.tables.append(table)
        self._clear()

    def table(self) -> pa.Table:
        self._flush()
        if not self.tables:
            return self.target.empty_table()
        return pa.concat_tables(self.tables) if len(self.tables) > 1 else self.tables[0]


MAP_FIELDS = ("partitionValues", "tags")


def _lines_to_table(
    lines: list[bytes],
    action: str,
    target: pa.Schema,
    shapes: dict[str, set[tuple[str, ...] | None]],
) -> pa.Table | None:
    """Columnar parse of `{"<action>": {...}}` lines; None when it would not be exact.

    A map field is read as a struct of strings, exact only when all its objects in the batch
    have the same keys in the same order (partitionValues always do; tags mostly are absent).
    Its struct is spelled out, or pyarrow would read date-like strings as timestamps.
    """
    fields = []
    for f in target:  # only the columns asked for: a lean load does not decode stats
        if f.name not in MAP_FIELDS:
            fields.append(f)
            continue
        seen = [shape for shape in shapes[f.name] if shape is not None]
        if len(seen) > 1:
            return None
        if seen:
            fields.append(pa.field(f.name, pa.struct([(k, pa.string()) for k in seen[0]])))
    data = b"\n".join(lines)
    options = pa_json.ParseOptions(
        explicit_schema=pa.schema([pa.field(action, pa.struct(fields))]),
        unexpected_field_behavior="ignore",
    )
    try:
        read = pa_json.read_json(
            pa.BufferReader(data),
            read_options=pa_json.ReadOptions(block_size=len(data) + 1),  # one block, one schema
            parse_options=options,
        )
        struct = read.column(action).combine_chunks()
    except (pa.ArrowInvalid, pa.ArrowTypeError):
        return None
    names = {struct.type.field(i).name for i in range(struct.type.num_fields)}
    cols = []
    for f in target:
        if f.name not in names or (f.name in MAP_FIELDS and shapes[f.name] == {None}):
            cols.append(pa.nulls(len(lines), f.type))
            continue
        child = struct.field(f.name)
        try:
            if f.name in MAP_FIELDS:
                child = _struct_to_map(child)
            elif child.type != f.type:
                child = _cast(child, f.type)
            cols.append(child)
        except (pa.ArrowInvalid, pa.ArrowNotImplementedError, pa.ArrowTypeError):
            return None
    return pa.Table.from_arrays(cols, schema=target)


def _struct_to_map(col: pa.Array) -> pa.Array:
    """A struct of strings (valid rows have every key) as map<string, string>, key order kept."""
    k = col.type.num_fields
    valid = col.is_valid()
    children = [col.field(i).filter(valid) for i in range(k)]
    m = len(children[0]) if k else int(pc.sum(valid.cast(pa.int64())).as_py() or 0)
    offsets = pa.concat_arrays(
        [pa.array([0], pa.int64()), pc.cumulative_sum(pc.if_else(valid, k, 0).cast(pa.int64()))]
    )
    names = pa.array([col.type.field(i).name for i in range(k)], pa.string())
    keys = names.take(pa.array([f for _ in range(m) for f in range(k)], pa.int64()))
    if k:
        stacked = pa.concat_arrays(children)
        items = stacked.take(pa.array([j + f * m for j in range(m) for f in range(k)], pa.int64()))
    else:
        items = pa.array([], pa.string())
    return pa.MapArray.from_arrays(
        offsets.cast(pa.int32()), keys, items, type=schema.STRING_MAP, mask=pc.invert(valid)
    )


def _take_table_action(result: Actions, kind: str, body: Any) -> None:
    """Apply a non-file action seen newest-first: the first one seen for each key wins."""
    if not isinstance(body, dict):
        return
    if kind == "protocol":
        result.protocol = result.protocol or body
    elif kind == "metaData":
        result.metadata = result.metadata or body
    elif kind == "txn" and isinstance(body.get("appId"), str):
        result.txns.setdefault(body["appId"], body)
    elif kind == "domainMetadata" and isinstance(body.get("domain"), str):
        result.domains.setdefault(body["domain"], body)


class _Dropper:
    """Drops the rows whose (path, DV uniqueId) key a newer commit touched."""

    def __init__(self, keys: set[tuple[str, str | None]]) -> None:
        self.keys = keys
        self.sets: tuple[pa.Array, pa.Array] | None = None  # built on first use

    def __call__(self, table: pa.Table) -> pa.Table:
        if not self.keys or table.num_rows == 0:
            return table
        if self.sets is None:
            # "\0" cannot occur in a path or DV id, so it separates the key's parts safely.
            paths_touched = pa.array(sorted({p for p, _ in self.keys}), pa.string())
            key_set = pa.array(sorted(f"{p}\0{d or ''}" for p, d in self.keys), pa.string())
            self.sets = paths_touched, key_set
        paths_touched, key_set = self.sets
        if not pc.any(pc.is_in(table["path"], value_set=paths_touched)).as_py():
            return table
        key_col = pc.binary_join_element_wise(
            table["path"], pc.coalesce(dv_unique_ids(table), ""), "\0"
        )
        return table.filter(pc.invert(pc.is_in(key_col, value_set=key_set)))
