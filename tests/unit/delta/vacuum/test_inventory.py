"""delta/vacuum/inventory.py, and INVENTORY plans through delta/vacuum/plan.py: Delta's
inventory schema as Parquet files, a folder or a Delta table; rows outside the table, hidden and
nested ones skipped; a report that misses recent files deletes nothing of theirs; one of another
prefix is an error.
(S3 Inventory reports need s3:// URIs: tests/integration/test_vacuum_inventory.py.)"""

from __future__ import annotations

import gzip
import os
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from deltakeeper.delta.errors import InvalidInputError
from deltakeeper.delta.storage import open_storage
from deltakeeper.delta.table import open_table
from deltakeeper.delta.vacuum import inventory
from deltakeeper.delta.vacuum.inventory import Row
from deltakeeper.delta.vacuum.modes import InventoryFormat, Mode
from deltakeeper.delta.vacuum.plan import (
    Root,
    inventory_files,
    load_for_vacuum,
    plan_table_vacuum,
    row_key,
)
from tests.support.logbuilder import LogBuilder, add, metadata, protocol, remove

DAY = 86_400_000
NOW = 1_800_000_000_000
OLD = NOW - 30 * DAY


def table(root: Path) -> None:
    b = LogBuilder(root)
    b.commit(protocol(), metadata(), add("live.parquet"), add("gone.parquet"))
    b.commit(remove("gone.parquet", ts=OLD))
    for key in ("live.parquet", "gone.parquet", "stray.parquet", "new.parquet", "_tmp/x"):
        (root / key).parent.mkdir(parents=True, exist_ok=True)
        (root / key).write_bytes(b"x")


def rows_for(root: Path, keys: dict[str, int], extra: list[tuple[str, int]] = ()) -> pa.Table:
    """Delta's inventory schema: full URIs, sizes, isDir, modification times."""
    paths = [f"file:{root.resolve()}/{k}" for k in keys] + [p for p, _ in extra]
    times = list(keys.values()) + [t for _, t in extra]
    return pa.table(
        {
            "path": pa.array(paths, pa.string()),
            "length": pa.array([1] * len(paths), pa.int64()),
            "isDir": pa.array([False] * len(paths), pa.bool_()),
            "modificationTime": pa.array(times, pa.int64()),
            "extra": pa.array(["ignored"] * len(paths)),  # other columns are left alone
        }
    )


def vacuum_with(root: Path, uri: str, fmt: InventoryFormat = InventoryFormat.AUTO):
    t = open_table(str(root))
    found = inventory.open_inventory(uri, fmt)
    return plan_table_vacuum(t, load_for_vacuum(t), 7 * DAY, NOW, False, Mode.INVENTORY, found)


LOG = {"_delta_log/00000000000000000000.json": OLD, "_delta_log/00000000000000000001.json": OLD}


def test_only_listed_files_are_candidates_and_rows_outside_are_skipped(tmp_path):
    root = tmp_path / "t"
    table(root)
    listed = {**LOG, "live.parquet": OLD, "gone.parquet": OLD, "stray.parquet": OLD, "_tmp/x": OLD}
    outside = [(f"file:{tmp_path.resolve()}/t2/x.parquet", OLD), ("s3://lake/t/y.parquet", OLD)]
    pq.write_table(rows_for(root, listed, outside), tmp_path / "inv.parquet")
    p = vacuum_with(root, str(tmp_path / "inv.parquet"))
    # new.parquet is not in the report (made after it): it stays whatever its age
    assert [f.key for f in p.delete] == ["gone.parquet", "stray.parquet"]
    assert (p.listed, p.outside, p.hidden, p.in_use) == (8, 2, 3, 1)
    assert p.record is None and "stays as it is (an inventory may predate removes)" in str(p)


def test_a_report_that_misses_recent_files_deletes_nothing_of_theirs(tmp_path):
    root = tmp_path / "t"
    table(root)
    (root / "recent.parquet").write_bytes(b"x")  # written after the report was made
    pq.write_table(rows_for(root, {**LOG, "stray.parquet": OLD}), tmp_path / "inv.parquet")
    p = vacuum_with(root, str(tmp_path / "inv.parquet"), InventoryFormat.PARQUET)
    assert [f.key for f in p.delete] == ["stray.parquet"]


def test_a_folder_of_parquet_files_and_a_delta_table_are_read_too(tmp_path):
    from deltalake import write_deltalake

    root = tmp_path / "t"
    table(root)
    data = rows_for(root, {**LOG, "stray.parquet": OLD}).drop(["extra"])
    (tmp_path / "folder").mkdir()
    pq.write_table(data.slice(0, 1), tmp_path / "folder" / "a.parquet")
    pq.write_table(data.slice(1), tmp_path / "folder" / "b.parquet")
    pq.write_table(data.slice(0, 0), tmp_path / "folder" / "_hidden.parquet")
    assert [f.key for f in vacuum_with(root, str(tmp_path / "folder")).delete] == ["stray.parquet"]
    write_deltalake(str(tmp_path / "inv-table"), data)
    p = vacuum_with(root, str(tmp_path / "inv-table"))
    assert [f.key for f in p.delete] == ["stray.parquet"] and "Delta table" in p.source


def test_a_report_of_another_prefix_or_schema_is_a_clear_error(tmp_path):
    root = tmp_path / "t"
    table(root)
    other = tmp_path / "other"
    table(other)
    pq.write_table(rows_for(other, {**LOG, "stray.parquet": OLD}), tmp_path / "inv.parquet")
    with pytest.raises(InvalidInputError, match="does not cover the table's prefix"):
        vacuum_with(root, str(tmp_path / "inv.parquet"))
    pq.write_table(pa.table({"path": ["x"], "size": [1]}), tmp_path / "bad.parquet")
    with pytest.raises(InvalidInputError, match="not in Delta's inventory schema"):
        vacuum_with(root, str(tmp_path / "bad.parquet"))
    with pytest.raises(InvalidInputError, match="not found"):
        vacuum_with(root, str(tmp_path / "missing.parquet"))


def test_nested_tables_in_a_report_are_skipped(tmp_path):
    root = tmp_path / "t"
    table(root)
    listed = {**LOG, "inner/_delta_log/00000000000000000000.json": OLD, "inner/a.parquet": OLD}
    pq.write_table(rows_for(root, listed), tmp_path / "inv.parquet")
    p = vacuum_with(root, str(tmp_path / "inv.parquet"))
    assert p.delete == [] and p.nested == ["inner"]


def test_row_keys_are_taken_as_spelled_not_decoded():
    root = Root("s3", "lake", ("/t",))
    assert row_key("s3://lake/t/p=a%25b/x#y.parquet", root) == "p=a%25b/x#y.parquet"
    assert row_key("s3a://lake/t/x", root) == "x"
    assert row_key("s3://lake/t2/x", root) is None and row_key("gs://lake/t/x", root) is None
    rows = [Row("s3://lake/t/a", 1, 5), Row("s3://lake/t/a", 1, 9), Row("s3://lake/u/b", 1, 1)]
    found, count, outside = inventory_files(rows, root)
    assert [(f.key, f.mtime_ms) for f in found] == [("a", 9)] and (count, outside) == (3, 1)


def test_s3_csv_rows_decode_keys_and_skip_old_versions_and_delete_markers(tmp_path):
    schema = "Bucket, Key, VersionId, IsLatest, IsDeleteMarker, Size, LastModifiedDate"
    lines = [
        '"lake","t/a+b%25.parquet","v1","true","false","5","2024-01-02T03:04:05.000Z"',
        '"lake","t/old.parquet","v0","false","false","5","2024-01-02T03:04:05.000Z"',
        '"lake","t/marker.parquet","v2","true","true","","2024-01-02T03:04:05.000Z"',
    ]
    (tmp_path / "f.csv.gz").write_bytes(gzip.compress("\n".join(lines).encode()))
    storage = open_storage(str(tmp_path))
    rows = list(inventory._csv_rows(storage, "f.csv.gz", schema, "s3"))
    assert rows == [Row("s3://lake/t/a b%.parquet", 5, 1704164645000)]
    assert os.path.exists(tmp_path / "f.csv.gz")


def test_a_folder_row_whose_live_files_the_report_misses_is_not_left_empty(tmp_path):
    """Issue 49, section 2, item 11: isDir rows of folders holding live files (written after
    the report) were reported as "folders left empty"."""
    root = tmp_path / "t"
    b = LogBuilder(root)
    b.commit(protocol(), metadata(), add("p=1/live.parquet"), add("p=1/q=2/live.parquet"))
    for key in ("p=1/live.parquet", "p=1/q=2/live.parquet"):
        (root / key).parent.mkdir(parents=True, exist_ok=True)
        (root / key).write_bytes(b"x")
    (root / "p=3").mkdir()  # really empty
    data = rows_for(root, LOG)
    dirs = [f"file:{root.resolve()}/{d}" for d in ("p=1", "p=1/q=2/", "p=3")]
    folders = pa.table(
        {
            "path": pa.array(dirs, pa.string()),
            "length": pa.array([0] * 3, pa.int64()),
            "isDir": pa.array([True] * 3, pa.bool_()),
            "modificationTime": pa.array([OLD] * 3, pa.int64()),
        }
    )
    pq.write_table(pa.concat_tables([data.drop(["extra"]), folders]), tmp_path / "inv.parquet")
    p = vacuum_with(root, str(tmp_path / "inv.parquet"))
    assert p.folders == ["p=3/"]
    assert p.delete == []
