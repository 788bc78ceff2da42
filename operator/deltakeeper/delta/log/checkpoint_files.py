"""The one reader of checkpoint files: parts, V2 files and their sidecars.

Parquet files are opened through `Storage.open_input`, so only the footer and the projected
columns are fetched, on every store. Sidecar references are decoded by one rule (the spec: a
sidecar action's `path` is a URI-encoded name or path, always in `_delta_log/_sidecars/`).
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import dataclass, replace
from typing import Any
from urllib.parse import unquote

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from deltakeeper.delta import paths, schema
from deltakeeper.delta.errors import CorruptLogError, MissingLogFileError
from deltakeeper.delta.log.json_files import read_actions
from deltakeeper.delta.log.reconcile import NON_FILE_ACTIONS, Actions, DropSet
from deltakeeper.delta.log.segment import Checkpoint
from deltakeeper.delta.storage import Storage

BATCH_ROWS = 131_072
FileRows = tuple[pa.Table, pa.Table, list[dict[str, Any]]]  # adds, removes, other actions


def open_parquet(storage: Storage, key: str, size: int | None = None) -> pq.ParquetFile:
    """A checkpoint file's parquet reader: MissingLogFileError when gone, CorruptLogError when
    it is not parquet."""
    try:
        return pq.ParquetFile(storage.open_input(key, size))
    except FileNotFoundError as e:
        raise MissingLogFileError(f"{storage.uri}/{key} is missing") from e
    except (OSError, pa.ArrowInvalid) as e:
        raise CorruptLogError(f"{storage.uri}/{key}: unreadable checkpoint parquet: {e}") from e


def has_field(pf: pq.ParquetFile, action: str, name: str) -> bool:
    if action not in pf.schema_arrow.names:
        return False
    typ = pf.schema_arrow.field(action).type
    return any(typ.field(i).name == name for i in range(typ.num_fields))


def file_columns(
    pf: pq.ParquetFile, add_cols: tuple[str, ...], remove_cols: tuple[str, ...]
) -> list[str]:
    """The `add.x` and `remove.x` columns of `pf` among those asked for (the record count
    from `stats_parsed` when the file has it there, else from `stats`)."""
    columns = [f"add.{c}" for c in add_cols if has_field(pf, "add", c)]
    if schema.NUM_RECORDS.name in add_cols:
        columns.append(_records_column(pf))
    return columns + [f"remove.{c}" for c in remove_cols if has_field(pf, "remove", c)]


def _records_column(pf: pq.ParquetFile) -> str:
    if has_field(pf, "add", "stats_parsed"):
        parsed = pf.schema_arrow.field("add").type.field("stats_parsed").type
        if pa.types.is_struct(parsed) and parsed.get_field_index("numRecords") >= 0:
            return "add.stats_parsed.numRecords"
    return "add.stats"


def batches(
    storage: Storage, key: str, pf: pq.ParquetFile, columns: list[str], rows: int = BATCH_ROWS
) -> Iterator[pa.Table]:
    """`columns` of `pf`, `rows` at a time; an unreadable file is a CorruptLogError."""
    if not columns:
        return
    try:
        # A row group at a time: one iter_batches over them all held up to three row groups'
        # buffers (229 MiB against 82 MiB on a 1,000,000-file checkpoint of ten).
        leaves = _leaves(pf, columns)
        for group in range(pf.num_row_groups):
            if _all_null(pf.metadata.row_group(group), leaves):
                continue  # no action of these columns in this row group: nothing to fetch
            for batch in pf.iter_batches(batch_size=rows, columns=columns, row_groups=[group]):
                yield pa.Table.from_batches([batch])
    except (OSError, pa.ArrowInvalid) as e:
        raise CorruptLogError(f"{storage.uri}/{key}: unreadable checkpoint parquet: {e}") from e


def _leaves(pf: pq.ParquetFile, columns: list[str]) -> list[int]:
    """The indexes of `pf`'s leaf columns that make up `columns` ("add", "add.path")."""
    schema_ = pf.metadata.schema
    return [
        i
        for i in range(len(schema_))
        if any((p := schema_.column(i).path) == c or p.startswith(c + ".") for c in columns)
    ]


def _all_null(group: pq.RowGroupMetaData, leaves: list[int]) -> bool:
    """Whether the footer's statistics say every value of `leaves` is null in `group`, as
    the non-file actions are in all but a checkpoint's first rows (a leaf without a null
    count is read)."""
    for i in leaves:
        leaf = group.column(i)
        stats = leaf.statistics
        if stats is None or not stats.has_null_count or stats.null_count != leaf.num_values:
            return False
    return bool(leaves)


def file_actions(
    table: pa.Table, action: str, cols: tuple[str, ...], target: pa.Schema
) -> pa.Table:
    """The rows of `action` (those with a path), projected and cast to `target`."""
    if action not in table.column_names:
        return target.empty_table()
    struct = table[action]
    present = struct.filter(pc.is_valid(pc.struct_field(struct, "path")))
    return schema.project(present, cols, target)


def other_actions(table: pa.Table) -> list[dict[str, Any]]:
    """The non-file actions of a batch, as `{kind: body}` dicts."""
    out: list[dict[str, Any]] = []
    for action in NON_FILE_ACTIONS:
        if action in table.column_names:
            col = table[action]
            valid = col.filter(pc.is_valid(col))
            out.extend({action: _plain(row)} for row in valid.to_pylist())
    return out


def _plain(value: Any) -> Any:
    """Arrow's to_pylist gives maps as lists of (key, value) tuples; make them dicts."""
    if isinstance(value, dict):
        return {k: _plain(v) for k, v in value.items()}
    if isinstance(value, list):
        if value and all(isinstance(x, tuple) and len(x) == 2 for x in value):
            return {k: _plain(v) for k, v in value}
        return [_plain(x) for x in value]
    return value


def read_file(
    storage: Storage,
    key: str,
    add_cols: tuple[str, ...],
    remove_cols: tuple[str, ...],
    drop: DropSet | None = None,
    size: int | None = None,
) -> FileRows:
    """One parquet checkpoint part or sidecar -> (adds, removes, non-file actions).

    Read, projected and (with `drop`) rid of superseded rows batch by batch, so the whole
    file's decoded columns and a filtered copy of them are never in memory together.
    """
    keep = drop or (lambda t: t)
    add_schema, remove_schema = schema.add_schema(add_cols), schema.remove_schema(remove_cols)
    adds: list[pa.Table] = [add_schema.empty_table()]
    removes: list[pa.Table] = [remove_schema.empty_table()]
    others: list[dict[str, Any]] = []
    pf = open_parquet(storage, key, size)
    top = set(pf.schema_arrow.names)
    columns = file_columns(pf, add_cols, remove_cols) + [a for a in NON_FILE_ACTIONS if a in top]
    for table in batches(storage, key, pf, columns):
        adds.append(keep(file_actions(table, "add", add_cols, add_schema)))
        removes.append(keep(file_actions(table, "remove", remove_cols, remove_schema)))
        others.extend(other_actions(table))
    return pa.concat_tables(adds), pa.concat_tables(removes), others


def read_json_file(
    storage: Storage, key: str, add_cols: tuple[str, ...], remove_cols: tuple[str, ...]
) -> FileRows:
    """A JSON V2 checkpoint (UUID-named) -> (adds, removes, non-file actions)."""
    actions = [a for _, a in read_actions(storage, key)]
    adds = [a["add"] for a in actions if "add" in a]
    removes = [a["remove"] for a in actions if "remove" in a]
    others = [a for a in actions if any(k in a for k in NON_FILE_ACTIONS)]
    return (
        rows_to_table(adds, add_cols, "add"),
        rows_to_table(removes, remove_cols, "remove"),
        others,
    )


def rows_to_table(
    rows: list[dict[str, Any]],
    cols: tuple[str, ...],
    action: str,
    where: Callable[[int], str] | None = None,
) -> pa.Table:
    """Rows to Arrow; `where(i)` ("file: line n") names row i when a field has the wrong type."""
    target = schema.schema_for(action, cols)
    records = action == "add" and schema.NUM_RECORDS.name in cols
    read = pa.schema([f for f in target if f.name != schema.NUM_RECORDS.name])  # from stats
    try:
        table = pa.Table.from_pylist(rows, schema=read)  # other keys are ignored
    except (pa.ArrowInvalid, pa.ArrowTypeError) as e:
        for i, row in enumerate(rows):  # slow path, errors only: find the offending row
            try:
                pa.Table.from_pylist([row], schema=read)
            except (pa.ArrowInvalid, pa.ArrowTypeError) as row_error:
                place = where(i) if where else f"{action} action {row.get('path')!r}"
                raise CorruptLogError(
                    f"{place}: {action} has a field of the wrong type: {row_error}"
                ) from e
        raise CorruptLogError(f"{action} actions could not be converted: {e}") from e
    if not records:
        return table
    if "stats" in table.column_names:
        stats = table["stats"]
    else:
        stats = pa.array(
            [t if isinstance(t := r.get("stats"), str) else None for r in rows], pa.string()
        )
    counts = schema.records_from_stats(stats)
    return pa.Table.from_arrays(
        [counts if f.name == schema.NUM_RECORDS.name else table[f.name] for f in target],
        schema=target,
    )


def read_checkpoint(
    storage: Storage,
    cp: Checkpoint,
    add_cols: tuple[str, ...],
    remove_cols: tuple[str, ...],
    drop: DropSet | None = None,
) -> tuple[list[pa.Table], list[pa.Table], list[dict[str, Any]]]:
    """The checkpoint's file actions (less the rows `drop` removes) and its other actions."""
    keep = drop or (lambda t: t)
    adds: list[pa.Table] = []
    removes: list[pa.Table] = []
    others: list[dict[str, Any]] = []
    for entry in cp.files:
        if entry.name.fmt == "json":
            a, r, o = read_json_file(storage, entry.key, add_cols, remove_cols)
            a, r = keep(a), keep(r)
        else:
            size = entry.info.size
            a, r, o = read_file(storage, entry.key, add_cols, remove_cols, drop, size)
        adds.append(a)
        removes.append(r)
        others.extend(o)
    for key in sidecar_keys(others):
        a, r, _ = read_file(storage, key, add_cols, remove_cols, drop)
        adds.append(a)
        removes.append(r)
    return adds, removes, others


def sidecar_name(path: str) -> str:
    """The file name a sidecar action's `path` (URI-encoded; a name or a full path) names."""
    return unquote(path).rsplit("/", 1)[-1]


def sidecar_key(path: str) -> str:
    # Sidecars always live in _delta_log/_sidecars, whatever folder the path names.
    return f"{paths.LOG_DIR}/{paths.sidecar(sidecar_name(path))}"


def sidecar_keys(actions: list[dict[str, Any]]) -> list[str]:
    """The keys of the sidecars that `sidecar` actions name, in order."""
    bodies = [a["sidecar"] for a in actions if "sidecar" in a]
    return [sidecar_key(b["path"]) for b in bodies if isinstance(b, dict) and _is_str(b, "path")]


def _is_str(body: dict[str, Any], name: str) -> bool:
    return isinstance(body.get(name), str)


def sidecar_paths(storage: Storage, key: str) -> list[str]:
    """The `path` of each sidecar action in one checkpoint file, as written."""
    if key.endswith(".json"):
        rows = [a["sidecar"] for _, a in read_actions(storage, key) if "sidecar" in a]
    else:
        pf = open_parquet(storage, key)
        if not has_field(pf, "sidecar", "path"):
            return []
        rows = [row for t in batches(storage, key, pf, ["sidecar.path"]) for row in _rows(t)]
    return [r["path"] for r in rows if isinstance(r, dict) and _is_str(r, "path")]


def _rows(table: pa.Table) -> list[Any]:
    col = table["sidecar"]
    return col.filter(pc.is_valid(col)).to_pylist()


@dataclass(frozen=True)
class PartFile:
    """A parquet file that holds checkpoint rows; `size` when a listing gave it (it saves a
    head request on object stores)."""

    key: str
    size: int | None = None


@dataclass
class Header:
    """A checkpoint's non-file actions, and the parquet files that hold its file rows."""

    files: list[PartFile]  # the checkpoint's own parquet files, then its sidecars
    actions: Actions  # its protocol, metaData, txns and domains


def after_header(old: Header, newer: Actions) -> Actions:
    """The actions of the commits after a checkpoint, with what they leave unset (protocol,
    metadata, and the txns and domains they do not name) taken from the checkpoint's header."""
    return replace(
        newer,
        protocol=newer.protocol or old.actions.protocol,
        metadata=newer.metadata or old.actions.metadata,
        txns={**old.actions.txns, **newer.txns},
        domains={**old.actions.domains, **newer.domains},
    )


def read_header(storage: Storage, cp: Checkpoint) -> Header | None:
    """The checkpoint's non-file actions, reading no file rows; None for a JSON checkpoint
    with file actions inline (those rows cannot be streamed from parquet)."""
    actions = Actions(pa.table({}), pa.table({}))
    files: list[PartFile] = []
    rows: list[dict[str, Any]] = []
    for entry in cp.files:
        if entry.name.fmt == "json":
            found = [a for _, a in read_actions(storage, entry.key)]
            if any("add" in a or "remove" in a for a in found):
                return None
            rows += found
        else:
            rows += read_file(storage, entry.key, (), (), size=entry.info.size)[2]
            files.append(PartFile(entry.key, entry.info.size))
    for row in rows:
        kind, body = next(iter(row.items()))
        actions.take(kind, body)
    return Header(files + [PartFile(key) for key in sidecar_keys(rows)], actions)
