"""Arrow schemas for Delta actions as deltakeeper holds them in memory and writes them.

File actions live in Arrow tables; these schemas are the single definition of their columns.
"""

from __future__ import annotations

import pyarrow as pa

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
