"""The Delta protocol as a library: no Kubernetes, no Spark, no metrics, no policy."""

from deltakeeper.delta.errors import (
    CorruptLogError,
    DeltaError,
    InvalidInputError,
    NotADeltaTableError,
    StorageUnreachableError,
    UnsupportedProtocolError,
)

__all__ = [
    "CorruptLogError",
    "DeltaError",
    "InvalidInputError",
    "NotADeltaTableError",
    "StorageUnreachableError",
    "UnsupportedProtocolError",
]
