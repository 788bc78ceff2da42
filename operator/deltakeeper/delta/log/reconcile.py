"""The rules by which newer actions win: `(path, dvId)` keys, drop sets, table-level actions.

Used by replay (a snapshot) and by the incremental checkpoint alike: both read the newest
actions first and let them decide which older rows still count.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from functools import cached_property
from typing import Any, TypeVar

import pyarrow as pa
import pyarrow.compute as pc

# Checkpoint columns that are neither an add nor a remove.
NON_FILE_ACTIONS = (
    "protocol",
    "metaData",
    "txn",
    "domainMetadata",
    "sidecar",
    "checkpointMetadata",
)

Key = tuple[str, str | None]  # (path, deletion vector uniqueId)
Rows = TypeVar("Rows", pa.Table, pa.ChunkedArray)


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

    def take(self, kind: str, body: Any) -> None:
        """Apply a non-file action seen newest-first: the first one seen for each key wins."""
        if not isinstance(body, dict):
            return
        if kind == "protocol":
            self.protocol = self.protocol or body
        elif kind == "metaData":
            self.metadata = self.metadata or body
        elif kind == "txn" and isinstance(body.get("appId"), str):
            self.txns.setdefault(body["appId"], body)
        elif kind == "domainMetadata" and isinstance(body.get("domain"), str):
            self.domains.setdefault(body["domain"], body)


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


def key_column(table: pa.Table) -> pa.Array:
    """Each row's key as one string; "\\0" occurs in neither a path nor a DV id."""
    ids = pc.fill_null(dv_unique_ids(table), "")
    joined = pc.binary_join_element_wise(table["path"], ids, "\0")
    return joined.combine_chunks() if isinstance(joined, pa.ChunkedArray) else joined


def _joined(key: Key) -> str:
    return f"{key[0]}\0{key[1] or ''}"


class DropSet:
    """The keys newer actions touched: older rows with one of them no longer count.

    Built from Python keys (replay reads commits line by line) or from Arrow tables (the
    incremental checkpoint holds the commits' actions as Arrow); the Arrow sets are made on
    first use, so a replay without a checkpoint never builds them.
    """

    def __init__(self, keys: set[Key] | None = None, tables: list[pa.Table] | None = None):
        self._keys = keys or set()
        self._tables = [t for t in tables or [] if t.num_rows]

    @cached_property
    def _sets(self) -> tuple[pa.Array, pa.Array]:
        paths = [pa.array([p for p, _ in self._keys], pa.string())]
        keys = [pa.array([_joined(k) for k in self._keys], pa.string())]
        paths += [t["path"].combine_chunks() for t in self._tables]
        keys += [key_column(t) for t in self._tables]
        return pc.unique(pa.concat_arrays(paths)), pc.unique(pa.concat_arrays(keys))

    def untouched(self, table: pa.Table) -> pa.Array | None:
        """A mask: True for rows whose key was not touched; None when that is every row."""
        if table.num_rows == 0 or not (self._keys or self._tables):
            return None
        paths, keys = self._sets
        same_path = pc.is_in(table["path"].combine_chunks(), value_set=paths)
        rows = pc.indices_nonzero(same_path)
        if len(rows) == 0:
            return None
        # Full keys only for the few rows whose path matches: building them all is costly.
        hit = pc.is_in(key_column(table.take(rows)), value_set=keys)
        every = pa.repeat(pa.scalar(True), table.num_rows)
        return pc.replace_with_mask(every, same_path, pc.invert(hit))  # in row order

    def __call__(self, table: pa.Table) -> pa.Table:
        """`table` without the touched rows."""
        return keep(table, self.untouched(table))


def keep(rows: Rows, mask: pa.Array | pa.ChunkedArray | None) -> Rows:
    """`rows` where `mask` is true; the rows themselves (no copy) when it is true throughout."""
    if mask is None or pc.all(mask).as_py():
        return rows
    return rows.filter(mask)
