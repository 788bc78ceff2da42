"""Action reconciliation: checkpoint + commits -> live files, tombstones and table-level actions.

The checkpoint (millions of rows) stays in Arrow end to end. Commits are read newest first, one
orjson parse per line; the winning file actions are kept as parsed and turned into Arrow in
batches (one parse of each line: a second, columnar one cost as much again). Newer actions win
per (path, deletionVector.uniqueId).
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any

import pyarrow as pa

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
        name = entry.key
        for lineno, _, kind, body in commit_lines(storage, name, data):
            if kind == "add" or kind == "remove":
                dv = body.get("deletionVector")
                key = (body["path"], dv_unique_id(dv) if dv else None)
                if key not in seen:  # commits are read newest first: the first one seen wins
                    seen.add(key)
                    kept[kind].keep(body, name, lineno)
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
    """The winning add (or remove) actions of the commits, turned into Arrow in batches, so
    no Python object per action outlives its batch. A field of the wrong type is a
    CorruptLogError naming its file and line."""

    BATCH = 16_384  # actions: about 20 MB of parsed adds at a time

    def __init__(self, action: str, cols: tuple[str, ...], uri: str) -> None:
        self.action, self.cols, self.uri = action, cols, uri
        self.tables: list[pa.Table] = []
        self.bodies: list[dict[str, Any]] = []
        self.places: list[tuple[str, int]] = []

    def keep(self, body: dict[str, Any], key: str, lineno: int) -> None:
        self.bodies.append(body)
        self.places.append((key, lineno))
        if len(self.bodies) >= self.BATCH:
            self._flush()

    def _flush(self) -> None:
        if not self.bodies:
            return
        places, uri = self.places, self.uri

        def where(i: int) -> str:  # written out only for the line an error names
            key, lineno = places[i]
            return f"{uri}/{key}: line {lineno}"

        self.tables.append(
            checkpoint_files.rows_to_table(self.bodies, self.cols, self.action, where)
        )
        self.bodies, self.places = [], []

    def table(self) -> pa.Table:
        self._flush()
        if not self.tables:
            return schema.schema_for(self.action, self.cols).empty_table()
        return pa.concat_tables(self.tables) if len(self.tables) > 1 else self.tables[0]
