"""maintenance/operations.py: the operations by name, in the order a plan runs them."""

from __future__ import annotations

from deltakeeper.maintenance.operations import Operation
from deltakeeper.maintenance.operations.registry import DELETES


def test_a_plan_runs_the_operations_in_their_order() -> None:
    assert list(Operation) == [
        "checkpoint",
        "compaction",
        "cleanup",
        "vacuum",
        "stats",
        "logCompaction",
        "manifest",
    ]
    assert tuple(Operation) == tuple(Operation)


def test_only_cleanup_and_vacuum_delete_and_each_names_what() -> None:
    assert DELETES == {Operation.CLEANUP: "log", Operation.VACUUM: "data"}
