"""Arrow schemas for Delta actions as deltakeeper holds them in memory and writes them.

File actions live in Arrow tables; these schemas are the single definition of their columns.
"""

from __future__ import annotations

import pyarrow as pa
import pyarrow.compute as pc

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

_ADD_BY_NAME = {f.name: f for f in ADD_FIELDS}
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
        if name in present:
            col = pc.struct_field(struct, name)
            cols.append(col if col.type == typ else cast(col, typ))
        else:
            cols.append(pa.nulls(len(struct), typ))
    return pa.Table.from_arrays(cols, schema=target)


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
