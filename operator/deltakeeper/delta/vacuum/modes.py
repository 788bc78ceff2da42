"""The names of vacuum's modes and of the inventory formats it reads, in a module that imports
nothing heavy: the command line's parser, the CRDs and the policy name them."""

from __future__ import annotations

import enum


class Mode(enum.StrEnum):
    """How a vacuum finds its candidates (delta/vacuum/plan.py). AUTO is the caller's choice between
    LITE and FULL (maintenance/planner.py); delta/ plans the other three."""

    AUTO = "auto"
    LITE = "lite"  # the files the commits since the last vacuum name
    FULL = "full"  # every file a listing of the table finds
    INVENTORY = "inventory"  # every file a storage inventory lists


class InventoryFormat(enum.StrEnum):
    """What an inventory URI holds (delta/vacuum/inventory.py)."""

    AUTO = "auto"  # by what is there: a manifest -> s3, a _delta_log -> delta, else parquet
    S3 = "s3"  # an S3 Inventory report: manifest.json and its CSV or Parquet files
    PARQUET = "parquet"  # Parquet in Delta's inventory schema: a file, or a folder of them
    DELTA = "delta"  # a Delta table in Delta's inventory schema
