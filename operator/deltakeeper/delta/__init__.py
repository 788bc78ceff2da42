"""The Delta protocol as a library: no Kubernetes, no Spark, no metrics, no policy.

    from deltakeeper.delta import open_table
    table = open_table("s3://lake/events", {"endpoint_url": "http://127.0.0.1:9000"})
    snap = table.snapshot()               # the latest version; version=N or timestamp_ms=T travel
    snap.version, snap.num_files          # snap.files: the live adds as an Arrow table
    if table.moved_on(snap):              # one listing
        snap = table.update(snap)         # reads only the new commits

    from deltakeeper.delta import cleanup
    from deltakeeper.delta.checkpoint import checkpoint_table
    from deltakeeper.delta.vacuum import plan as vacuum
    checkpoint_table(table, None, now_ms, tombstone_retention_ms)   # writes, then _last_checkpoint
    plan = cleanup.plan_table_cleanup(table, snap, retention_ms, now_ms)   # reads only
    cleanup.execute_cleanup(table, plan)                            # deletes what the plan lists
    plan = vacuum.plan_table_vacuum(table, snap, retention_ms, now_ms)
    vacuum.execute_vacuum(table, plan)

Every write refuses a table with a feature this build does not know (features.py); errors are
typed (errors.py). ARCHITECTURE.md has the module map.
"""

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
