"""A Plan and its Steps: what maintenance is due for one table, as plain data. The planner
makes them (each operation plans its own step, maintenance/operations/), the executor carries
them out, and a dry run prints them."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Protocol

from deltakeeper.delta import cleanup
from deltakeeper.delta.checkpoint import CheckpointSource
from deltakeeper.delta.errors import DeltaError
from deltakeeper.delta.snapshot import SnapshotHeader
from deltakeeper.maintenance import compaction_plan
from deltakeeper.maintenance.operations import Operation
from deltakeeper.maintenance.policy import Policy
from deltakeeper.units import format_ms


class Planned(Protocol):
    """What every operation's plan says: the files and bytes it would delete or commit."""

    @property
    def files(self) -> int: ...

    @property
    def bytes(self) -> int: ...


@dataclass
class Step:
    operation: Operation
    due: bool
    reason: str
    # What its operation planned (delta/'s plan of what it would delete or commit: a
    # CleanupPlan, a VacuumPlan, ...), of a type that operation's module knows.
    detail: Planned | None = None
    refused: bool = False  # not due because running it would be unsafe or against policy
    # not due because planning it failed (an input it reads cannot be read): it fails alone,
    # and the other steps run, as nothing was done
    failed: bool = False
    error: DeltaError | None = field(default=None, repr=False)  # a refusal's or failure's cause
    classic_v2: bool = False  # checkpoint: a classic-named V2 checkpoint for older readers
    # checkpoint: damaged checkpoints to rewrite first (classic-named, one file each)
    repair: tuple[int, ...] = ()
    regular: bool = True  # checkpoint: also the one at the plan's version (not only repairs)
    # cleanup after a checkpoint this run writes: `detail` counts that checkpoint as written (a
    # dry run shows it so); a real run plans again with `replan()` once it is there.
    replan: Callable[[], cleanup.CleanupPlan] | None = field(default=None, repr=False)
    # checkpoint: the source a front-end opened already (to read the table's policy); else the
    # executor opens one.
    source: CheckpointSource | None = field(default=None, repr=False)
    # compaction: the job's input (compaction_plan.job_spec) when due; a Spark checkpoint's
    # or vacuum's (_spark_spec)
    job_spec: dict[str, Any] | None = field(default=None, repr=False)
    # logCompaction: the commits the file reconciles (first, last)
    log_range: tuple[int, int] | None = None
    # stats: a version at which every live file had its statistics (a watcher's last complete
    # run); only the commits after it, up to `base` (the plan's snapshot), are looked at.
    stats_since: int | None = None
    base: SnapshotHeader | None = field(default=None, repr=False)
    # A failure of this step is reported and the steps after it still run (the checkpoint
    # before `compact`'s job: without it the job replays the JSON log, slower but right).
    optional: bool = False
    # A step that follows another: it runs once that one is done, whatever became of the steps
    # between, and is planned only then (`plan_later`); not reported when that one is not done.
    after: Operation | None = None
    plan_later: Callable[[], Step] | None = field(default=None, repr=False)
    # checkpoint, vacuum: why Delta Spark runs it, as a Spark job (None: deltakeeper does)
    spark: str | None = None

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {
            "operation": self.operation,
            "due": self.due,
            "refused": self.refused,
            "failed": self.failed,
            "reason": self.reason,
        }
        if self.detail is not None:
            out["files"] = self.detail.files
            out["bytes"] = self.detail.bytes
        if isinstance(self.detail, compaction_plan.CompactionPlan):
            out["plan"] = self.detail.to_json()
        return out


@dataclass
class Plan:
    uri: str
    version: int
    now_ms: int
    policy: Policy
    steps: list[Step] = field(default_factory=list)
    refusal: str | None = None  # the table as a whole must not be touched

    @property
    def due(self) -> list[Step]:
        return [s for s in self.steps if s.due]

    def lines(self) -> list[str]:
        head = f"{self.uri} at version {self.version}, now {format_ms(self.now_ms)}"
        if self.refusal:
            return [head, f"refused: {self.refusal}"]
        marks = {True: "due", False: "not due"}
        body = [f"  {s.operation}: {_state(s, marks)}: {s.reason}" for s in self.steps]
        return [head, *body]

    def to_json(self) -> dict[str, Any]:
        return {
            "uri": self.uri,
            "version": self.version,
            "now": self.now_ms,
            "refusal": self.refusal,
            "steps": [s.to_json() for s in self.steps],
        }


def _state(step: Step, marks: dict[bool, str]) -> str:
    return "refused" if step.refused else "failed" if step.failed else marks[step.due]


def unplanned(operation: Operation, e: Exception) -> Step:
    """The step of an operation whose planning raised `e`: failed, with `e` as a DeltaError
    (its own when it is one; else an unexpected one, exit 1, that names it)."""
    error = e if isinstance(e, DeltaError) else DeltaError(f"{type(e).__name__}: {e}")
    if error is not e:
        error.__cause__ = e
    return Step(
        operation, False, f"{operation} could not be planned: {error}", failed=True, error=error
    )


def spark_job(snap: SnapshotHeader, operation: Operation, now_ms: int) -> dict[str, Any]:
    """The input of a Spark job that runs `operation` for the plan (compaction/job.py)."""
    return {
        # One plan may run two on Spark: each its own id (and SparkApplication name).
        "jobId": f"{compaction_plan.job_id(snap.metadata.id, now_ms)}-{operation}",
        "operation": str(operation),
        "plannedVersion": snap.version,
    }
