"""A hand-built table planned as `deltakeeper maintain` plans it, for the planner's and the
executor's tests."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from deltakeeper.delta.table import Table, open_table
from deltakeeper.maintenance import planner
from deltakeeper.maintenance.policy import effective


def plan_for(root: Path, now: int, **settings: Any) -> tuple[Table, steps.Plan]:
    """The table at `root` and its plan at `now`; `settings` as effective() takes them."""
    table = open_table(str(root))
    snap = table.snapshot()
    pol = effective(snap.metadata.configuration, **settings)
    return table, planner.plan(table, snap, pol, now)


def steps(plan: steps.Plan) -> dict[str, steps.Step]:
    """The plan's steps by operation name."""
    return {s.operation: s for s in plan.steps}
