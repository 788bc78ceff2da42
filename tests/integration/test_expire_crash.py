"""`deltakeeper expire` killed with SIGKILL before, after and in the middle of its one storage
mutation (the commit, tests/support/faults.py): the table reads as before the command or as
after it, never between, and the next run finishes the work: the same rows as an uninterrupted
run, read by delta-rs and DuckDB."""

from __future__ import annotations

import shutil
from pathlib import Path

import pyarrow as pa
import pytest
from deltalake import DeltaTable, write_deltalake

from deltakeeper.cli import main
from tests.support import faults
from tests.support.rows import deltars_digest, duckdb_digest

pytestmark = pytest.mark.integration

FLAGS = ["--column", "day", "--keep", "5d", "--now", "2026-01-10T12:00:00Z"]


def days(root: Path) -> None:
    for d in range(1, 9):
        rows = pa.table({"id": pa.array(range(d * 10, d * 10 + 5), pa.int64()),
                         "day": pa.array([f"2026-01-0{d}"] * 5)})  # fmt: skip
        write_deltalake(str(root), rows, partition_by=["day"], mode="append")


def rows(root: Path) -> tuple[int, str]:
    got = deltars_digest(str(root))
    assert got == duckdb_digest(str(root))
    assert isinstance(got, tuple)
    return got


@pytest.mark.parametrize("when", faults.WHEN)
def test_a_killed_expiry_leaves_before_or_after_and_the_rerun_finishes(
    tmp_path: Path, when: str
) -> None:
    made = tmp_path / "made"
    days(made)
    finished = tmp_path / "finished"
    shutil.copytree(made, finished)
    assert main(["expire", str(finished), *FLAGS]) == 0
    before, after = rows(made), rows(finished)
    assert before[0] == 40 and after[0] == 20
    counted = tmp_path / "counted"
    shutil.copytree(made, counted)
    steps = faults.count_steps(["expire", str(counted), *FLAGS])
    assert [(s.op, s.key) for s in steps] == [("put_if_absent", f"_delta_log/{8:020d}.json")]

    crashed = tmp_path / "crashed"
    shutil.copytree(made, crashed)
    faults.crash(["expire", str(crashed), *FLAGS], 1, when)
    landed = DeltaTable(str(crashed)).version()
    assert landed == (8 if when == "after" else 7)
    assert rows(crashed) == (after if when == "after" else before)
    assert main(["expire", str(crashed), *FLAGS]) == 0
    assert rows(crashed) == after
    assert DeltaTable(str(crashed)).version() == 8
