"""Stats in checkpoints: JSON and/or typed structs, and `stats_parsed` turned back into JSON."""

from __future__ import annotations

import datetime as dt
import json
import math
import re
from dataclasses import dataclass
from decimal import Decimal
from typing import Any, ClassVar

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from deltakeeper.delta import schema, types
from deltakeeper.delta.log import checkpoint_files
from deltakeeper.delta.snapshot import Snapshot, SnapshotHeader
from deltakeeper.delta.table import Table


def stats_from_struct(table: Table, snap: Snapshot) -> Snapshot:
    """Stats of files whose checkpoint row has only `stats_parsed` (writeStatsAsJson=false),
    turned back into JSON so that rewriting the checkpoint does not lose them."""
    cp = snap.segment.checkpoint
    files = snap.files
    if cp is None or files.num_rows == 0 or not pc.any(pc.is_null(files["stats"])).as_py():
        return snap
    found: dict[str, str] = {}
    for key in _checkpoint_keys(table, [f.key for f in cp.files]):
        found.update(_parsed_stats_as_json(table, key))
    if not found:
        return snap
    return snap.with_adds(with_stats(files, found))


def _checkpoint_keys(table: Table, keys: list[str]) -> list[str]:
    """Checkpoint files and the sidecars they name."""
    out = list(keys)
    for key in keys:
        out += map(checkpoint_files.sidecar_key, checkpoint_files.sidecar_paths(table.storage, key))
    return out


def _parsed_stats_as_json(table: Table, key: str) -> dict[str, str]:
    if key.endswith(".json"):
        return {}
    pf = checkpoint_files.open_parquet(table.storage, key)
    names = pf.schema_arrow.names
    if "add" not in names or pf.schema_arrow.field("add").type.get_field_index("stats_parsed") < 0:
        return {}
    col = pf.read(columns=["add.path", "add.stats_parsed"])["add"]
    col = col.filter(pc.is_valid(pc.struct_field(col, "stats_parsed")))
    return {row["path"]: _dumps(_stats_json(row["stats_parsed"])) for row in col.to_pylist()}


_EXACT = "\0"


_EXACT_NUMBER = re.compile(r'"\\u0000([^"\\]*)\\u0000"')


def _dumps(value: Any) -> str:
    return _EXACT_NUMBER.sub(r"\1", json.dumps(value, separators=(",", ":")))


def _stats_json(value: Any) -> Any:
    """A `stats_parsed` value as Delta's stats JSON: nulls left out, dates and times as text."""
    if isinstance(value, dict):
        return {k: _stats_json(v) for k, v in value.items() if v is not None}
    if isinstance(value, dt.datetime):
        if value.tzinfo is not None:
            value = value.astimezone(dt.UTC).replace(tzinfo=None)
        return value.isoformat(timespec="microseconds") + "Z"
    if isinstance(value, dt.date):
        return value.isoformat()
    if isinstance(value, Decimal):
        return f"{_EXACT}{value}{_EXACT}"  # unquoted by _dumps: exact, not via float
    if isinstance(value, float) and not math.isfinite(value):
        return str(value).replace("inf", "Infinity").replace("nan", "NaN")
    return value


def struct_array(table: pa.Table) -> pa.StructArray:
    typ = pa.struct(list(table.schema))
    if table.num_rows == 0:
        return pa.array([], typ)
    return table.combine_chunks().to_struct_array().combine_chunks()


def stats_missing(pf: pq.ParquetFile) -> bool:
    """Whether some add row may lack JSON stats, judged from the row groups' null counts."""
    meta = pf.metadata
    for g in range(meta.num_row_groups):
        group = meta.row_group(g)
        nulls: dict[str, int] = {}
        for i in range(group.num_columns):
            col = group.column(i)
            if col.path_in_schema in ("add.path", "add.stats"):
                st = col.statistics
                if st is None or not st.has_null_count:
                    return True
                nulls[col.path_in_schema] = st.null_count
        if nulls.get("add.stats") != nulls.get("add.path"):
            return True
    return False


def fill_stats(adds: pa.Table, stats_parsed: pa.ChunkedArray) -> pa.Table:
    """Null `stats` filled from the row's own `stats_parsed`, as the full path does."""
    need = pc.and_(pc.is_null(adds["stats"]), pc.is_valid(stats_parsed))
    if not pc.any(need).as_py():
        return adds
    stats = adds["stats"].to_pylist()
    for i in pc.indices_nonzero(need).to_pylist():
        stats[i] = _dumps(_stats_json(stats_parsed[i].as_py()))
    i = adds.schema.get_field_index("stats")
    return adds.set_column(i, "stats", pa.array(stats, pa.string()))


def parsed_stats(adds: pa.Table, stats_parsed: pa.ChunkedArray, want: set[str]) -> dict[str, str]:
    """`stats_parsed` as JSON for the rows whose path is in `want`."""
    if not want:
        return {}
    hit = pc.is_in(adds["path"], value_set=pa.array(sorted(want), pa.string()))
    hit = pc.and_(hit, pc.is_valid(stats_parsed))
    if not pc.any(hit).as_py():
        return {}
    rows = zip(
        adds["path"].filter(hit).to_pylist(), stats_parsed.filter(hit).to_pylist(), strict=True
    )
    return {p: _dumps(_stats_json(v)) for p, v in rows}


def paths_without_stats(adds: pa.Table) -> set[str]:
    return set(adds["path"].filter(pc.is_null(adds["stats"])).to_pylist())


def with_stats(adds: pa.Table, found: dict[str, str]) -> pa.Table:
    """Adds without stats take those `found` has for their path (JSON from an old row's
    `stats_parsed`)."""
    if not found:
        return adds
    paths_ = adds["path"].to_pylist()
    stats = adds["stats"].to_pylist()
    filled = [s if s is not None else found.get(p) for p, s in zip(paths_, stats, strict=True)]
    i = adds.schema.get_field_index("stats")
    return adds.set_column(i, "stats", pa.array(filled, pa.string()))


@dataclass(frozen=True)
class StatsColumns:
    """Which of `stats`, `partitionValues_parsed` and `stats_parsed` an add row carries.

    `delta.checkpoint.writeStatsAsJson` (default true) keeps the JSON;
    `delta.checkpoint.writeStatsAsStruct` (default true, as in Delta Spark) adds the typed
    columns (physical names under column mapping). When the JSON is turned off, a stats string
    that does not parse is still kept as JSON in that row, so no statistics are lost.
    """

    KNOWN: ClassVar[str] = "_known_stats_parsed"

    as_json: bool
    as_struct: bool
    schema_string: str
    partition_columns: tuple[str, ...]
    mapping_mode: str | None

    @classmethod
    def for_snapshot(cls, snap: SnapshotHeader) -> StatsColumns:
        props = snap.metadata.properties
        return cls(
            as_json=props.write_stats_as_json,
            as_struct=props.write_stats_as_struct,
            schema_string=snap.metadata.schema_string,
            partition_columns=snap.metadata.partition_columns,
            mapping_mode=props.column_mapping_mode,
        )

    @property
    def keeps_stats(self) -> bool:
        return self.as_json or self.as_struct

    def add_type(self, adds: pa.Schema) -> pa.StructType:
        fields = [f for f in adds if f.name != "stats" or self.keeps_stats]
        if self.as_struct:
            if self.partition_columns:
                fields.append(pa.field("partitionValues_parsed", self._partition_type()))
            fields.append(pa.field("stats_parsed", self._stats_type()))
        return pa.struct(fields)

    def add_struct(self, adds: pa.Table) -> pa.StructArray:
        """The add rows as checkpoint structs. A `KNOWN` column holds `stats_parsed` an old
        checkpoint already had for these rows: it is taken as is where its type is ours."""
        known = None
        if self.KNOWN in adds.column_names:
            known = adds[self.KNOWN]
            adds = adds.drop_columns([self.KNOWN])
        if not self.as_struct:
            return struct_array(adds if self.keeps_stats else adds.drop_columns(["stats"]))
        stats = adds["stats"]
        parsed = self._stats_parsed(stats, known)
        if not self.as_json:
            unparsed = pc.and_(pc.is_valid(stats), pc.is_null(parsed))
            kept = pc.if_else(unparsed, stats, pa.scalar(None, pa.string()))
            adds = adds.set_column(adds.schema.get_field_index("stats"), "stats", kept)
        if self.partition_columns:
            pv = types.partition_values_parsed(
                adds["partitionValues"],
                self.schema_string,
                self.partition_columns,
                self.mapping_mode,
            )
            adds = adds.append_column("partitionValues_parsed", pv)
        return struct_array(adds.append_column("stats_parsed", parsed))

    def _stats_parsed(self, stats: pa.ChunkedArray, known: pa.ChunkedArray | None) -> pa.Array:
        """`stats` parsed, except rows whose `known` value (of our exact type) can be kept:
        an old checkpoint's rows then cost a copy, not a JSON parse."""
        if known is None or known.type != self._stats_type():
            return self._parse(stats)
        known = known.combine_chunks()
        missing = pc.and_(pc.is_null(known), pc.is_valid(stats))
        if not pc.any(missing).as_py():
            return known
        fresh = self._parse(stats.filter(missing))
        # Row i comes from `known`, or from `fresh` at its rank among the missing rows.
        rank = pc.subtract(pc.cumulative_sum(pc.cast(missing, pa.int64())), 1)
        index = pc.if_else(missing, pc.add(rank, len(known)), pa.array(range(len(known))))
        return pa.concat_arrays([known, fresh]).take(index)

    def _parse(self, stats: pa.ChunkedArray) -> pa.Array:
        return types.stats_parsed(
            stats, self.schema_string, self.mapping_mode, self.partition_columns
        )

    def _partition_type(self) -> pa.DataType:
        empty = pa.array([], schema.STRING_MAP)
        return types.partition_values_parsed(
            empty, self.schema_string, self.partition_columns, self.mapping_mode
        ).type

    def _stats_type(self) -> pa.DataType:
        return types.stats_type(self.schema_string, self.mapping_mode, self.partition_columns)
