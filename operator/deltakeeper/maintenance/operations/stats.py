"""File statistics (COMPUTE STATS): where `stats.enabled`, the live files without statistics
get them, as Delta Spark computes them, in a commit (delta/stats/compute.py)."""

from __future__ import annotations

from deltakeeper.delta.stats import compute
from deltakeeper.maintenance.memory import per_action
from deltakeeper.maintenance.operations import Cadence, OnCatalogManaged, Operation
from deltakeeper.maintenance.operations.outcome import Outcome, Result
from deltakeeper.maintenance.operations.spec import OperationSpec, Planning, Running
from deltakeeper.maintenance.operations.steps import Step

STATS = Operation.STATS


def plan(p: Planning) -> Step:
    asked = "stats.enabled" if p.policy.stats_enabled else "asked for"
    reason = f"{asked}: files without statistics get them"
    return Step(STATS, True, reason, stats_since=p.stats_since, base=p.snap)


def run(r: Running) -> Outcome:
    step, dry_run = r.step, r.dry_run
    found = compute.compute_stats(
        r.table, dry_run, now_ms=r.plan.now_ms, base=step.base, since=step.stats_since
    )
    if found.unreadable:
        path, why = found.unreadable[0]
        more = f" (and {len(found.unreadable) - 1} more)" if len(found.unreadable) > 1 else ""
        return Outcome(STATS, Result.FAILED, f"{path}: not read: {why}{more}", detail=found)
    looked = f"{found.files} files"
    if found.since is not None:
        looked = f"the {looked} added since {found.since}"
    if not found.given:
        message = f"every file of {looked} has statistics"
        return Outcome(STATS, Result.SKIPPED, message, detail=found)
    verb = "would give" if dry_run else "gave"
    message = f"{verb} {found.given} of {looked} statistics"
    if found.commits:
        message += f" in versions {found.commits[0]}..{found.commits[-1]}"
    if found.deferred:
        message += f"; {found.deferred} wait for the next run (read budget)"
    result = Result.DRY_RUN if dry_run else Result.DONE
    return Outcome(STATS, result, message, written_files=found.given, detail=found)


SPEC = OperationSpec(
    STATS,
    "gives the live files without statistics their statistics, as Delta Spark computes them",
    Cadence.EACH_VERSION,
    plan,
    run,
    per_action(2048),
    "StatsComputed",
    lambda o: o.message,
    asked=lambda policy: policy.stats_enabled,
    writes=True,
    catalog=OnCatalogManaged.NEVER,
)
