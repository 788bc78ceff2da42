"""The Delta protocol as a library: no Kubernetes, no Spark, no metrics, no policy."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from deltakeeper.delta.errors import (
    CorruptLogError,
    DeltaError,
    InvalidInputError,
    NotADeltaTableError,
    StorageUnreachableError,
    UnsupportedProtocolError,
)

if TYPE_CHECKING:
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


def __getattr__(name: str) -> Any:
    # Table loads pyarrow: imported on first use, so that importing a light module of this
    # package (errors, properties, paths) does not (the CLI's --help starts without it).
    if name in ("Table", "open_table"):
        from deltakeeper.delta import table

        return getattr(table, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
