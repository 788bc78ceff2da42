"""Action reconciliation: checkpoint + commits -> live files, tombstones and table-level actions.

The checkpoint (millions of rows) stays in Arrow end to end. Commits are read newest first, one
orjson parse per line to find each action's key; the winning file actions are kept as their raw
lines and turned into Arrow in batches by pyarrow.json. Newer actions win per
(path, deletionVector.uniqueId).
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any

import orjson
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.json as pa_json

from deltakeeper.delta import schema
from deltakeeper.delta.bulk import collector_paused
from deltakeeper.delta.errors import CorruptLogError, DamagedCheckpointError, MissingLogFileError
from deltakeeper.delta.log import checkpoint_files
from deltakeeper.delta.log.json_files import commit_lines, read_in_order
from deltakeeper.delta.log.reconcile import Actions, DropSet, Key, dv_unique_id
from deltakeeper.delta.log.segment import LogSegment
from deltakeeper.delta.storage import Storage


@collector_paused()  # a dict per commit line, none in a cycle
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
    seen: set[Key] = set()
    kept = {
        "add": _Kept("add", add_cols, storage.uri),
        "remove": _Kept("remove", remove_cols, storage.uri),
    }
    result = Actions(
        schema.add_schema(add_cols).empty_table(), schema.remove_schema(remove_cols).empty_table()
    )
    newest_first = segment.commits[::-1]
    contents = read_in_order(storage, [e.key for e in newest_first])
    for entry, data in zip(newest_first, contents, strict=True):
        for lineno, line, kind, body in commit_lines(storage, entry.key, data):
            if kind == "add" or kind == "remove":
                dv = body.get("deletionVector")
                key = (body["path"], dv_unique_id(dv) if dv else None)
                if key not in seen:  # commits are read newest first: the first one seen wins
                    seen.add(key)
                    kept[kind].keep(line, body, entry.key, lineno)
            elif kind == "commitInfo" and entry.name.version == segment.version:
                result.commit_info = result.commit_info or body
            else:
                result.take(kind, body)
    drop = DropSet(seen)
    cp_adds: list[pa.Table] = []
    cp_removes: list[pa.Table] = []
    if base is not None:
        cp_adds, cp_removes = [drop(base[0])], [drop(base[1])]
    elif segment.checkpoint is not None:
        cp = segment.checkpoint
        try:
            cp_adds, cp_removes, others = checkpoint_files.read_checkpoint(
                storage, cp, add_cols, remove_cols, drop
            )
        except MissingLogFileError:
            raise  # deleted underneath us: the caller lists again
        except CorruptLogError as e:
            keys = tuple(f.key for f in cp.files)
            raise DamagedCheckpointError(str(e), cp.version, keys) from e
        for action in others:
            kind, body = next(iter(action.items()))
            result.take(kind, body)
    result.adds = pa.concat_tables([*cp_adds, kept["add"].table()])
    result.removes = pa.concat_tables([*cp_removes, kept["remove"].table()])
    return result


def after_checkpoint(
    storage: Storage,
    segment: LogSegment,
    add_cols: tuple[str, ...],
    remove_cols: tuple[str, ...],
) -> tuple[checkpoint_files.Header, Actions] | None:
    """A streamed read of `segment`: its checkpoint's header (no file rows) and the commits
    after it, replayed. None when it has no checkpoint, or one whose file rows cannot be
    streamed (a JSON V2 checkpoint with file actions inline). A CorruptLogError
    (MissingLogFileError included) when either cannot be read."""
    if segment.checkpoint is None:
        return None
    old = checkpoint_files.read_header(storage, segment.checkpoint)
    if old is None:
        return None
    commits = replace(segment, checkpoint=None)
    return old, replay(storage, commits, add_cols, remove_cols)


class _Kept:
    """The winning add (or remove) actions of the commits, kept as their raw JSON lines.

    Lines are turned into Arrow in batches, columnar (pyarrow.json), so no Python object per
    action outlives its batch. Whatever the columnar reader cannot reproduce exactly goes
    through the row-by-row converter, which also names a bad line.
    """

    BATCH = 65_536

    def __init__(self, action: str, cols: tuple[str, ...], uri: str) -> None:
        self.action, self.cols, self.uri = action, cols, uri
        self.target = schema.schema_for(action, cols)
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
            table = checkpoint_files.rows_to_table(rows, self.cols, self.action, where)
        self.tables.append(table)
        self._clear()

    def table(self) -> pa.Table:
        self._flush()
        if not self.tables:
            return self.target.empty_table()
        return pa.concat_tables(self.tables) if len(self.tables) > 1 else self.tables[0]


MAP_FIELDS = ("partitionValues", "tags")
RECORDS = schema.NUM_RECORDS.name


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
        if f.name == RECORDS:  # read from stats, not a field of the action
            if "stats" not in target.names:
                fields.append(pa.field("stats", pa.string()))
            continue
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
        if f.name == RECORDS and "stats" in names:
            cols.append(schema.records_from_stats(struct.field("stats")))
            continue
        if f.name not in names or (f.name in MAP_FIELDS and shapes[f.name] == {None}):
            cols.append(pa.nulls(len(lines), f.type))
            continue
        child = struct.field(f.name)
        try:
            if f.name in MAP_FIELDS:
                child = _struct_to_map(child)
            elif child.type != f.type:
                child = schema.cast(child, f.type)
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
