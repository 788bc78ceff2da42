"""A delta-rs writer appending while an expiry plans: no row it wrote is lost. An append into
an expiring partition makes the expiry give up with nothing written; an append elsewhere lets
it commit after the append, which stays whole."""

from __future__ import annotations

from pathlib import Path

import pyarrow as pa
import pytest
from deltalake import DeltaTable, write_deltalake

from deltakeeper.delta.errors import CommitConflictError
from deltakeeper.delta.expire.run import Expiry, commit_plan, plan_expiry
from deltakeeper.delta.table import open_table
from tests.support.expire_tables import KEEP_MS, NOW_MS  # cutoff 2026-01-05T12:00:00Z


def batch(day: str, ids: range) -> pa.Table:
    return pa.table({"id": pa.array(ids, pa.int64()), "day": pa.array([day] * len(ids))})


def days(root: Path) -> None:
    for d in range(1, 9):
        write_deltalake(str(root), batch(f"2026-01-0{d}", range(d * 10, d * 10 + 5)),
                        partition_by=["day"], mode="append")  # fmt: skip


def ids(root: Path) -> set[int]:
    return set(DeltaTable(str(root)).to_pyarrow_table().column("id").to_pylist())


def test_an_append_into_an_expiring_partition_loses_no_row(tmp_path: Path) -> None:
    days(tmp_path)
    table = open_table(str(tmp_path))
    plan = plan_expiry(table, Expiry("day", KEEP_MS, 1.0), NOW_MS)
    assert plan.files == 4
    late = range(1000, 1003)
    write_deltalake(str(tmp_path), batch("2026-01-02", late), partition_by=["day"], mode="append")
    with pytest.raises(CommitConflictError, match="may hold rows this DELETE reads"):
        commit_plan(table, plan)
    assert DeltaTable(str(tmp_path)).version() == 8  # ours was never written
    assert set(late) <= ids(tmp_path) and len(ids(tmp_path)) == 43
    # The next run plans from the table as it is: the late rows are old, and go with the rest.
    again = commit_plan(table, plan_expiry(table, Expiry("day", KEEP_MS, 1.0), NOW_MS))
    assert again.version == 9 and again.plan.rows == 23
    assert min(ids(tmp_path)) == 50


def test_an_append_elsewhere_commits_after_it_and_stays_whole(tmp_path: Path) -> None:
    days(tmp_path)
    table = open_table(str(tmp_path))
    plan = plan_expiry(table, Expiry("day", KEEP_MS, 1.0), NOW_MS)
    fresh = range(2000, 2004)
    write_deltalake(str(tmp_path), batch("2026-01-09", fresh), partition_by=["day"], mode="append")
    done = commit_plan(table, plan)
    assert done.version == 9 and done.plan.rows == 20
    assert set(fresh) <= ids(tmp_path)
    assert ids(tmp_path) == {i for d in range(5, 9) for i in range(d * 10, d * 10 + 5)} | set(fresh)
