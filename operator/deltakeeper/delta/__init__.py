"""The Delta protocol as a library: no Kubernetes, no Spark, no metrics, no policy."""

from deltakeeper.delta.errors import (
    CorruptLogError,
    DeltaError,
    InvalidInputError,
    NotADeltaTableError,
    StorageUnreachableError,
    UnsupportedProtocolError,
)
from deltakeeper.delta.table import Table, open_table

__all__ = [
    "CorruptLogError",
    "DeltaError",
    "InvalidInputError",
    "NotADeltaTableError",
    "StorageUnreachableError",
    "Table",
    "UnsupportedProtocolError",
    "open_table",
]
