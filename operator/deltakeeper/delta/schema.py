"""Arrow schemas for Delta actions as deltakeeper holds them in memory and writes them.

File actions live in Arrow tables; these schemas are the single definition of their columns.
"""

from __future__ import annotations

import json

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.json as pa_json

STRING_MAP = pa.map_(pa.string(), pa.string())

DELETION_VECTOR = pa.struct(
    [
        ("storageType", pa.string()),
        ("pathOrInlineDv", pa.string()),
        ("offset", pa.int32()),
        ("sizeInBytes", pa.int32()),
        ("cardinality", pa.int64()),
        ("maxRowIndex", pa.int64()),
    ]
)

ADD_FIELDS = [
    pa.field("path", pa.string()),
    pa.field("partitionValues", STRING_MAP),
    pa.field("size", pa.int64()),
    pa.field("modificationTime", pa.int64()),
    pa.field("dataChange", pa.bool_()),
    pa.field("stats", pa.string()),
    pa.field("tags", STRING_MAP),
    pa.field("deletionVector", DELETION_VECTOR),
    pa.field("baseRowId", pa.int64()),
    pa.field("defaultRowCommitVersion", pa.int64()),
    pa.field("clusteringProvider", pa.string()),
]

REMOVE_FIELDS = [
    pa.field("path", pa.string()),
    pa.field("deletionTimestamp", pa.int64()),
    pa.field("dataChange", pa.bool_()),
    pa.field("extendedFileMetadata", pa.bool_()),
    pa.field("partitionValues", STRING_MAP),
    pa.field("size", pa.int64()),
    pa.field("stats", pa.string()),
    pa.field("tags", STRING_MAP),
    pa.field("deletionVector", DELETION_VECTOR),
    pa.field("baseRowId", pa.int64()),
    pa.field("defaultRowCommitVersion", pa.int64()),
]

# What a snapshot loads by default: enough to list, count, size and vacuum.
# Checkpoint writing asks for everything (stats, tags) explicitly.
LEAN_ADD = ("path", "partitionValues", "size", "modificationTime", "deletionVector")
LEAN_REMOVE = ("path", "deletionTimestamp", "size", "deletionVector")
FULL_ADD = tuple(f.name for f in ADD_FIELDS)
FULL_REMOVE = tuple(f.name for f in REMOVE_FIELDS)

# Not a field of the add action: each file's record count, from its statistics (a checkpoint's
# `stats_parsed.numRecords` when it has them, else the `stats` JSON); null without them. Read on
# request only (health); never written.
NUM_RECORDS = pa.field("numRecords", pa.int64())

_ADD_BY_NAME = {f.name: f for f in [*ADD_FIELDS, NUM_RECORDS]}
_REMOVE_BY_NAME = {f.name: f for f in REMOVE_FIELDS}


def add_schema(columns: tuple[str, ...]) -> pa.Schema:
    return pa.schema([_ADD_BY_NAME[c] for c in columns])


def remove_schema(columns: tuple[str, ...]) -> pa.Schema:
    return pa.schema([_REMOVE_BY_NAME[c] for c in columns])


def schema_for(action: str, columns: tuple[str, ...]) -> pa.Schema:
    return add_schema(columns) if action == "add" else remove_schema(columns)


def project(struct: pa.ChunkedArray, wanted: tuple[str, ...], target: pa.Schema) -> pa.Table:
    """Columns `wanted` of a struct column, cast to `target`; absent sub-fields become null."""
    struct_type = struct.type
    present = {struct_type.field(i).name for i in range(struct_type.num_fields)}
    cols = []
    for name in wanted:
        typ = target.field(name).type
        if name == NUM_RECORDS.name and name not in present:
            cols.append(_num_records(struct, present))
        elif name in present:
            col = pc.struct_field(struct, name)
            cols.append(col if col.type == typ else cast(col, typ))
        else:
            cols.append(pa.nulls(len(struct), typ))
    return pa.Table.from_arrays(cols, schema=target)


def _num_records(struct: pa.ChunkedArray, present: set[str]) -> pa.ChunkedArray | pa.Array:
    parsed = struct.type.field("stats_parsed").type if "stats_parsed" in present else None
    if (
        parsed is not None
        and pa.types.is_struct(parsed)
        and parsed.get_field_index("numRecords") >= 0
    ):
        return cast(
            pc.struct_field(pc.struct_field(struct, "stats_parsed"), "numRecords"), pa.int64()
        )
    if "stats" in present:
        return records_from_stats(pc.struct_field(struct, "stats"))
    return pa.nulls(len(struct), pa.int64())


def records_from_stats(stats: pa.ChunkedArray | pa.Array) -> pa.Array:
    """`numRecords` of each stats JSON string (null when absent, null or not JSON). Writers put
    it first (Delta Spark, delta-rs, Kernel), where a pattern finds it at the top level; the
    other rows are parsed as JSON by Arrow, exact whatever the key order."""
    if isinstance(stats, pa.ChunkedArray):
        stats = stats.combine_chunks()
    if not len(stats):
        return pa.array([], pa.int64())
    first = pc.struct_field(pc.extract_regex(stats, _FIRST_KEY), "n")
    records = pc.cast(first, pa.int64())
    rest = pc.and_(pc.is_null(records), pc.is_valid(stats))
    if not pc.any(rest).as_py():
        return records
    parsed = _parsed_records(pc.filter(stats, rest))
    return pc.replace_with_mask(records, rest, parsed)


_FIRST_KEY = r'^\s*\{\s*"numRecords"\s*:\s*(?P<n>[0-9]{1,18})\s*[,}]'


def _parsed_records(stats: pa.Array) -> pa.Array:
    # One JSON object a line: line breaks outside strings are whitespace, inside them invalid.
    one_line = pc.replace_substring_regex(pc.fill_null(stats, "{}"), "[\r\n]", " ")
    data = _text(pc.binary_join_element_wise(one_line, "", "\n"))
    options = pa_json.ParseOptions(
        explicit_schema=pa.schema([NUM_RECORDS]), unexpected_field_behavior="ignore"
    )
    try:
        read = pa_json.read_json(
            pa.BufferReader(data),
            read_options=pa_json.ReadOptions(block_size=len(data) + 1),
            parse_options=options,
        )
        if read.num_rows == len(stats):
            return read["numRecords"].combine_chunks()
    except (pa.ArrowInvalid, pa.ArrowTypeError):
        pass
    return pa.array([_records(s) for s in stats.to_pylist()], pa.int64())  # a bad one: per row


def _text(lines: pa.Array) -> pa.Buffer:
    """The characters of a string array's rows, back to back."""
    _, offsets_buffer, data = lines.buffers()
    offsets = pa.Array.from_buffers(
        pa.int32(), len(lines) + 1, [None, offsets_buffer], offset=lines.offset
    )
    start, end = offsets[0].as_py(), offsets[len(lines)].as_py()
    return data[start:end]


def _records(stats: str | None) -> int | None:
    try:
        value = json.loads(stats).get("numRecords") if stats else None
    except (ValueError, AttributeError):
        return None
    return value if isinstance(value, int) and not isinstance(value, bool) else None


def cast(col: pa.ChunkedArray | pa.Array, typ: pa.DataType) -> pa.ChunkedArray | pa.Array:
    """`col` as `typ`; structs field by field, missing fields null."""
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
