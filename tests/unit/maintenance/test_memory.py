"""maintenance/memory.py: each step's memory estimate and the daemon's budget."""

from __future__ import annotations

from pathlib import Path

import pytest

from deltakeeper.delta.errors import InvalidInputError
from deltakeeper.maintenance import memory
from deltakeeper.maintenance.operations import Operation
from deltakeeper.maintenance.operations.registry import estimate

MIB = 2**20


def test_estimates_grow_with_what_each_step_holds() -> None:
    # A streamed checkpoint holds a bounded number of rows at a time, and 16 bytes a row more
    cp = estimate(Operation.CHECKPOINT, memory.Holding(1_000_000, 0, 20, streamed=True))
    assert cp == memory.BASE_BYTES + 131_072 * 1536 + 16 * 1_000_000  # 239 MiB
    big = estimate(Operation.CHECKPOINT, memory.Holding(10_000_000, 0, 20, True))
    assert big == memory.BASE_BYTES + 131_072 * 1536 + 16 * 10_000_000  # 377 MiB
    small = estimate(Operation.CHECKPOINT, memory.Holding(1_000, 10, 20, streamed=True))
    assert small == memory.BASE_BYTES + 1_010 * (1536 + 16)
    # rows wider than 1.5 KiB decoded (statistics of many columns): 8 times their file share
    wide = estimate(Operation.CHECKPOINT, memory.Holding(1_000_000, 0, 20, True, 2_000_000_000))
    assert wide == memory.BASE_BYTES + 131_072 * 16_000 + 16 * 1_000_000
    loaded = estimate(Operation.CHECKPOINT, memory.Holding(1_000_000, 0, 20, streamed=False))
    assert loaded == memory.BASE_BYTES + 2048 * 1_000_000  # every file in memory holds more
    # cleanup and log compaction follow the log, not the files
    cleanup = estimate(Operation.CLEANUP, memory.Holding(1_000_000, 0, 100, streamed=True))
    assert cleanup == memory.BASE_BYTES + 512 * 100
    assert (
        estimate(Operation.VACUUM, memory.Holding(10, 5, 3, True)) == memory.BASE_BYTES + 640 * 15
    )
    assert memory.largest([1, 5, 3]) == 5 and memory.largest([]) == 0


def test_the_default_budget_is_the_containers_limit_less_a_margin(tmp_path: Path) -> None:
    assert memory.default_budget(4096 * MIB) == 3072 * MIB  # a quarter
    assert memory.default_budget(512 * MIB) == 256 * MIB  # at least 256 MiB kept back
    v2, v1 = tmp_path / "memory.max", tmp_path / "limit_in_bytes"
    assert memory.container_limit([v2, v1]) is None  # neither file: no container limit
    v1.write_text("9223372036854771712\n")  # cgroup v1's "unlimited"
    assert memory.container_limit([v2, v1]) is None
    v2.write_text("max\n")
    assert memory.container_limit([v2, v1]) is None
    v2.write_text(f"{1024 * MIB}\n")
    assert memory.container_limit([v2, v1]) == 1024 * MIB


def test_budgets_as_written(monkeypatch: pytest.MonkeyPatch) -> None:
    assert memory.budget("2Gi") == 2048 * MIB
    assert memory.budget("none") is None
    with pytest.raises(InvalidInputError, match="memory budget: 'lots' is not a size"):
        memory.budget("lots")
    monkeypatch.setenv("DELTAKEEPER_MEMORY_BUDGET", "512Mi")
    assert memory.budget_from_env() == 512 * MIB


def test_a_refusal_names_both_figures() -> None:
    text = memory.over_budget(Operation.CHECKPOINT, 1200 * MIB, 768 * MIB)
    assert text == "checkpoint needs about 1.2 GiB and the memory budget is 768.0 MiB"
    assert "--memory-budget" in memory.REFUSAL_HINT and "Spark" in memory.REFUSAL_HINT
