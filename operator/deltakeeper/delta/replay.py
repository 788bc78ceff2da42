"""Action reconciliation: checkpoint + commits -> live files, tombstones and table-level actions.

The checkpoint (millions of rows) stays in Arrow end to end; only the commits after it, which are
few, are parsed row by row. Newer actions win per (path, deletionVector.uniqueId).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any
from urllib.parse import unquote

import orjson
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from deltakeeper.delta import paths, schema
from deltakeeper.delta.errors import CorruptLogError, MissingLogFileError
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
    storage: Storage, key: str, add_cols: tuple[str, ...], remove_cols: tuple[str, ...]
) -> tuple[pa.Table, pa.Table, list[dict[str, Any]]]:
    """One parquet checkpoint part or sidecar -> (adds, removes, non-file action rows)."""
    try:
        pf = _open_parquet(storage, key)
        top = set(pf.schema_arrow.names)
        columns = [f"add.{c}" for c in add_cols if _has(pf, "add", c)]
        columns += [f"remove.{c}" for c in remove_cols if _has(pf, "remove", c)]
        columns += [a for a in NON_FILE_ACTIONS if a in top]
        table = pf.read(columns=columns)
    except (OSError, pa.ArrowInvalid) as e:
        raise CorruptLogError(f"{storage.uri}/{key}: unreadable checkpoint parquet: {e}") from e
    adds = _file_actions(table, "add", add_cols, schema.add_schema(add_cols))
    removes = _file_actions(table, "remove", remove_cols, schema.remove_schema(remove_cols))
    others: list[dict[str, Any]] = []
    for action in NON_FILE_ACTIONS:
        if action in table.column_names:
            col = table[action]
            valid = col.filter(pc.is_valid(col))
            others.extend({action: _plain(row)} for row in valid.to_pylist())
    return adds, removes, others


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
    storage: Storage, cp: Checkpoint, add_cols: tuple[str, ...], remove_cols: tuple[str, ...]
) -> tuple[list[pa.Table], list[pa.Table], list[dict[str, Any]]]:
    adds: list[pa.Table] = []
    removes: list[pa.Table] = []
    others: list[dict[str, Any]] = []
    for entry in cp.files:
        if entry.name.fmt == "json":  # UUID-named V2 checkpoint in JSON
            actions = [a for _, a in read_actions(storage, entry.key)]
            a, r, o = _split_json_checkpoint(actions, add_cols, remove_cols)
        else:
            a, r, o = _read_checkpoint_file(storage, entry.key, add_cols, remove_cols)
        adds.append(a)
        removes.append(r)
        others.extend(o)
    for sidecar in (o["sidecar"] for o in others if "sidecar" in o):
        key = _sidecar_key(sidecar["path"])
        a, r, _ = _read_checkpoint_file(storage, key, add_cols, remove_cols)
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
    try:
        data = storage.read(key)
    except FileNotFoundError as e:
        raise MissingLogFileError(f"{storage.uri}/{key} was listed but is gone") from e
    out = []
    for lineno, line in enumerate(data.split(b"\n"), start=1):
        if not line.strip():
            continue
        try:
            action = orjson.loads(line)
        except orjson.JSONDecodeError as e:
            raise CorruptLogError(f"{storage.uri}/{key}: line {lineno}: not valid JSON: {e}") from e
        if not isinstance(action, dict) or len(action) != 1:
            raise CorruptLogError(
                f"{storage.uri}/{key}: line {lineno}: expected one action object per line"
            )
        body = next(iter(action.values()))
        kind = next(iter(action))
        if kind in ("add", "remove") and not (
            isinstance(body, dict) and isinstance(body.get("path"), str)
        ):
            raise CorruptLogError(f"{storage.uri}/{key}: line {lineno}: {kind} without a path")
        out.append((lineno, action))
    return out


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
    newest: dict[tuple[str, str | None], tuple[str, dict[str, Any], str]] = {}
    result = Actions(
        schema.add_schema(add_cols).empty_table(), schema.remove_schema(remove_cols).empty_table()
    )
    for entry in reversed(segment.commits):
        for lineno, action in read_actions(storage, entry.key):
            kind, body = next(iter(action.items()))
            if kind in ("add", "remove"):
                key = (body["path"], dv_unique_id(body.get("deletionVector")))
                if key not in newest:
                    newest[key] = (kind, body, f"{storage.uri}/{entry.key}: line {lineno}")
            elif kind == "commitInfo" and entry.name.version == segment.version:
                result.commit_info = result.commit_info or body
            else:
                _take_table_action(result, kind, body)
    cp_adds: list[pa.Table] = []
    cp_removes: list[pa.Table] = []
    if base is not None:
        cp_adds, cp_removes = [base[0]], [base[1]]
    elif segment.checkpoint is not None:
        cp_adds, cp_removes, others = _read_checkpoint(
            storage, segment.checkpoint, add_cols, remove_cols
        )
        for action in others:
            kind, body = next(iter(action.items()))
            _take_table_action(result, kind, body)
    touched = set(newest)
    adds = [v for v in newest.values() if v[0] == "add"]
    removes = [v for v in newest.values() if v[0] == "remove"]
    result.adds = _merge(cp_adds, touched, adds, add_cols, "add")
    result.removes = _merge(cp_removes, touched, removes, remove_cols, "remove")
    return result


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


def _merge(
    checkpoint_parts: list[pa.Table],
    touched: set[tuple[str, str | None]],
    newer: list[tuple[str, dict[str, Any], str]],
    cols: tuple[str, ...],
    action: str,
) -> pa.Table:
    """Checkpoint rows whose key no newer commit touched, plus the newer (kind, body, where)."""
    kept = [_drop_keys(t, touched) for t in checkpoint_parts]
    kept.append(_rows_to_table([b for _, b, _ in newer], cols, action, [w for _, _, w in newer]))
    return pa.concat_tables(kept) if len(kept) > 1 else kept[0]


def _drop_keys(table: pa.Table, keys: set[tuple[str, str | None]]) -> pa.Table:
    if not keys or table.num_rows == 0:
        return table
    paths_touched = pa.array(sorted({p for p, _ in keys}), pa.string())
    if not pc.any(pc.is_in(table["path"], value_set=paths_touched)).as_py():
        return table
    # "\0" cannot occur in a path or DV id, so it separates the two parts of the key safely.
    key_col = pc.binary_join_element_wise(
        table["path"], pc.coalesce(dv_unique_ids(table), ""), "\0"
    )
    key_set = pa.array(sorted(f"{p}\0{d or ''}" for p, d in keys), pa.string())
    return table.filter(pc.invert(pc.is_in(key_col, value_set=key_set)))
