"""runtime/watcher.py: a step refused over the memory budget (issue 49, 2.8), whether refused
here or because Spark could not take it either, is recorded with the reason OverMemoryBudget;
a watcher restarted from that status plans it again at its first poll, and a run that then
finds nothing to do clears the refusal."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest

from deltakeeper.delta.errors import InvalidInputError
from deltakeeper.maintenance.operations import Operation
from deltakeeper.maintenance.operations.outcome import Compactor
from deltakeeper.runtime import status
from deltakeeper.runtime.model import Target
from deltakeeper.runtime.watcher import TableWatcher
from tests.support.jobs import StandIn, StandInLauncher
from tests.support.logbuilder import LogBuilder, add, metadata, protocol
from tests.support.observed import status_of

T0 = 1_800_000_000_000
TOO_BIG = "needs about 2 GiB and the memory budget is 1 B"


class NoSpark(StandInLauncher):
    def start(self, request: Any) -> StandIn:
        raise InvalidInputError("spark-submit not found: pip install 'deltakeeper[spark]'")


def table(root: Path) -> None:
    log = LogBuilder(root)
    log.commit(protocol(), metadata(), add("0.parquet"))
    for i in range(1, 12):
        log.commit(add(f"{i}.parquet"))


@pytest.mark.parametrize("spark", [False, True], ids=["no launcher", "spark cannot run it"])
def test_a_refusal_over_the_budget_is_planned_again_after_a_restart(
    tmp_path: Path, spark: bool
) -> None:
    table(tmp_path)
    compactor = Compactor(NoSpark(), wait=False) if spark else None
    target = Target("lake", "t", str(tmp_path))
    watcher = TableWatcher(T0, compactor=compactor)
    obs = watcher.observe(target, T0)
    assert Operation.VACUUM in obs.due
    refused = {op: f"{op} {TOO_BIG}" for op in (Operation.CHECKPOINT, Operation.VACUUM)}
    obs = replace(obs, due=tuple(op for op in obs.due if op not in refused))
    after = watcher.maintain(target, obs, T0, refused=refused)
    runs = status_of(after)["lastMaintenance"]
    for op in ("checkpoint", "vacuum"):
        assert runs[op]["result"] == "refused" and runs[op]["reason"] == "OverMemoryBudget"

    # Restarted an hour later (with a bigger budget): both are due again at the first poll.
    later = T0 + 3_600_000
    restarted = TableWatcher(later, status.last_maintenance(status_of(after)), compactor)
    again = restarted.observe(target, later)
    assert {Operation.CHECKPOINT, Operation.VACUUM} <= set(again.due), again.due
    done = restarted.maintain(target, again, later)
    runs = status_of(done)["lastMaintenance"]
    assert runs["checkpoint"]["result"] == "done", runs
    assert "vacuum" not in runs or runs["vacuum"]["result"] == "done", runs  # nothing to delete
    assert "1 B" not in str(status_of(done))


def test_a_run_the_budget_did_not_refuse_keeps_its_schedule_after_a_restart(tmp_path: Path) -> None:
    table(tmp_path)
    target = Target("lake", "t", str(tmp_path))
    watcher = TableWatcher(T0)
    obs = watcher.observe(target, T0)
    after = watcher.maintain(target, obs, T0)
    kept = status.last_maintenance(status_of(after))
    assert kept["vacuum"]["result"] in ("done", "refused")
    restarted = TableWatcher(T0 + 60_000, kept)
    assert Operation.VACUUM not in restarted.observe(target, T0 + 60_000).due
