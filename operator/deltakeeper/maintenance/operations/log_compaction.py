"""Log compaction files: every `logCompaction.interval` commits past the checkpoint, one
`x.y.compacted.json` reconciling them, which readers may use instead of the commits
(delta/log_compaction.py)."""

from __future__ import annotations

from deltakeeper.delta import log_compaction
from deltakeeper.maintenance.memory import per_log_file
from deltakeeper.maintenance.operations import Cadence, OnCatalogManaged, Operation
from deltakeeper.maintenance.operations.outcome import Outcome, Result
from deltakeeper.maintenance.operations.spec import OperationSpec, Planning, Running
from deltakeeper.maintenance.operations.steps import Step

LOG_COMPACTION = Operation.LOG_COMPACTION


def plan(p: Planning) -> Step:
    snap, every = p.snap, p.policy.log_compaction_interval
    if not every:  # named (maintain --only) without an interval: nothing says which commits
        reason = "logCompaction.interval is not set (or run `deltakeeper compact-log`)"
        return Step(LOG_COMPACTION, False, reason)
    cp = snap.segment.checkpoint
    floor = cp.version if cp is not None else -1
    found = [
        r
        for r in log_compaction.ranges(max(floor, snap.version - every), snap.version, every)
        if r[0] > floor
    ]
    if not found:
        reason = f"no {every} commits past the checkpoint end a range at version {snap.version}"
        return Step(LOG_COMPACTION, False, reason)
    start, end = found[-1]
    reason = f"commits {start}..{end} (every {every})"
    return Step(LOG_COMPACTION, True, reason, log_range=found[-1])


def run(r: Running) -> Outcome:
    assert r.step.log_range is not None
    done = log_compaction.compact_log(r.table, *r.step.log_range, r.dry_run)
    if done.existed:
        return Outcome(LOG_COMPACTION, Result.SKIPPED, f"{done.key} exists already")
    verb = "would write" if r.dry_run else "wrote"
    message = f"{verb} {done.key}: {done.actions} actions, {done.size_bytes} bytes"
    files = [done.key] if r.dry_run else []
    result = Result.DRY_RUN if r.dry_run else Result.DONE
    return Outcome(LOG_COMPACTION, result, message, written_files=1, files=files)


SPEC = OperationSpec(
    LOG_COMPACTION,
    "writes a log compaction file over every logCompaction.interval commits",
    Cadence.EACH_VERSION,
    plan,
    run,
    per_log_file(4096),  # a commit it reconciles
    "LogCompacted",
    lambda o: o.message,
    asked=lambda policy: bool(policy.log_compaction_interval),
    writes=True,
    catalog=OnCatalogManaged.RUNS,
)
