"""What running a step gave: its Result and Outcome, and a run's Report. Each operation's
runner (maintenance/operations/) makes Outcomes; the front-ends report them."""

from __future__ import annotations

import enum
from collections import Counter
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from deltakeeper.compaction.launcher import Job, Launcher
from deltakeeper.delta.checkpoint import CheckpointResult
from deltakeeper.delta.crc import CrcResult
from deltakeeper.delta.errors import DeltaError
from deltakeeper.delta.stats import compute
from deltakeeper.delta.vacuum import plan
from deltakeeper.delta.vacuum.info import InfoStatus, LastVacuumInfo
from deltakeeper.delta.vacuum.modes import Mode
from deltakeeper.maintenance import compaction_plan
from deltakeeper.maintenance.operations import Operation
from deltakeeper.maintenance.policy import COMPACTION_RETRY_MS
from deltakeeper.units import format_bytes

Progress = Callable[[str, int, int], None]  # operation, done, total
AFTER_FAILURE = "an earlier step failed"  # the message of a step skipped because of one


class Result(enum.StrEnum):
    """What became of one step. SKIPPED_AFTER_FAILURE reads "skipped", as JSON, status and
    metrics have always shown it, but is its own member: tell the two apart with `is`."""

    def __new__(cls, text: str, name: str | None = None) -> Result:
        member = str.__new__(cls, text)
        member._value_ = name or text
        return member

    DONE = "done"
    DRY_RUN = "dry-run"
    SKIPPED = "skipped"
    SKIPPED_AFTER_FAILURE = "skipped", "skipped-after-failure"
    REFUSED = "refused"
    FAILED = "failed"
    STARTED = "started"  # compaction in the background: its end is reported later


class RunField(enum.StrEnum):
    """The names of a run's facts, wherever they are shown: the status's lastMaintenance
    (maintenance/record.py), the CLI's --json, the history's metrics, the status report."""

    TIME = "time"  # when the run was recorded
    RESULT = "result"
    VERSION = "version"  # the table's version it ran at (a checkpoint: the one written)
    DELETED_FILES = "deletedFiles"
    DELETED_BYTES = "deletedBytes"
    SECONDS = "seconds"
    MESSAGE = "message"
    REASON = "reason"  # a refusal's own reason: CatalogOwned (a catalog-managed table's)
    # Only some operations':
    WRITTEN_FILES = "writtenFiles"  # the writers (spec.writes)
    ENGINE = "engine"  # a run Delta Spark made (spec.spark): "spark"
    JOB_ID = "jobId"  # its Spark job
    # The CLI's --json of a run besides (Outcome.to_json):
    OPERATION = "operation"
    CHECKPOINT_VERSION = "checkpointVersion"
    FILES = "files"  # what a dry run would write or delete
    REPAIRED = "repairedCheckpoints"


@dataclass(frozen=True)
class Compactor:
    """How a caller runs compaction jobs: its launcher, the table's storage options (Spark
    reads the table itself), and whether the step waits for the job's end."""

    launcher: Launcher
    storage_options: Mapping[str, Any] = field(default_factory=dict, repr=False)
    wait: bool = True
    owner: tuple[str, str] | None = None  # the table's resource, where jobs belong to one
    retry_ms: int = COMPACTION_RETRY_MS  # the wait after a failed job, doubled per failure


@dataclass(slots=True)
class VacuumRun:
    """What a vacuum step did besides deleting: how it found its candidates, at what cost."""

    mode: Mode
    reason: str  # why this mode ran
    candidates: int  # files considered: listed, named by the log or inventoried
    listed: int  # objects a listing or an inventory returned (LITE: 0)
    requests: dict[str, int]  # storage requests by operation, planning included
    commits: tuple[int, int] | None  # LITE: the commits read
    info: LastVacuumInfo  # _last_vacuum_info as the run found it
    records: int | None  # the N it writes there (a dry run: would write); None: left alone

    def to_json(self) -> dict[str, Any]:
        found = self.info.version if self.info.status is InfoStatus.RECORDED else None
        return {
            "mode": self.mode,
            "modeReason": self.reason,
            "candidates": self.candidates,
            "listedObjects": self.listed,
            "requests": dict(sorted(self.requests.items())),
            "commitsRead": list(self.commits) if self.commits else None,
            "lastVacuumInfo": {"status": self.info.status, "before": found, "after": self.records},
        }


@dataclass(slots=True)
class Outcome:
    operation: Operation
    result: Result
    message: str = ""
    seconds: float = 0.0
    deleted_files: int = 0
    deleted_bytes: int = 0
    written_files: int = 0  # writers: files given statistics, manifests or compaction files
    checkpoint_version: int | None = None
    files: list[str] = field(default_factory=list)  # what a dry run would write or delete
    repaired: list[int] = field(default_factory=list)  # checkpoint: damaged versions rewritten
    # In full, for a front-end that reports more than the counts (the CLI); not in to_json.
    error: DeltaError | None = field(default=None, repr=False)  # why it failed or was refused
    written: CheckpointResult | None = field(default=None, repr=False)  # checkpoint
    checksum: CrcResult | None = field(default=None, repr=False)  # checkpoint
    deleted_folders: int = 0  # vacuum
    vacuum: VacuumRun | None = None  # vacuum: its mode, candidates and requests
    stats: compute.StatsRun | None = field(default=None, repr=False)  # stats: its run
    job: Job | None = field(default=None, repr=False)  # compaction started, not waited for
    job_id: str | None = None  # compaction
    job_result: dict[str, Any] | None = None  # compaction: the job's own JSON line
    compacted: compaction_plan.Compacted | None = None  # compaction: its commits, read from the log

    def to_json(self) -> dict[str, Any]:
        out = self._json()
        if self.vacuum is not None:
            out["vacuum"] = self.vacuum.to_json()
        if self.operation is Operation.COMPACTION:
            out["jobId"] = self.job_id
            out["job"] = self.job_result
            out["compacted"] = self.compacted.to_json() if self.compacted else None
        elif self.job_id is not None:  # a checkpoint or vacuum Delta Spark ran
            out.update(engine="spark", jobId=self.job_id, job=self.job_result)
        return out

    def _json(self) -> dict[str, Any]:
        fields = {
            RunField.OPERATION: self.operation,
            RunField.RESULT: self.result,
            RunField.MESSAGE: self.message,
            RunField.SECONDS: round(self.seconds, 3),
            RunField.CHECKPOINT_VERSION: self.checkpoint_version,
            RunField.DELETED_FILES: self.deleted_files,
            RunField.DELETED_BYTES: self.deleted_bytes,
            RunField.WRITTEN_FILES: self.written_files,
            RunField.FILES: self.files,
            RunField.REPAIRED: self.repaired,
        }
        return {str(k): v for k, v in fields.items()}


@dataclass
class Report:
    uri: str
    version: int
    dry_run: bool
    outcomes: list[Outcome] = field(default_factory=list)
    seconds: float = 0.0

    @property
    def failed(self) -> Outcome | None:
        return next((o for o in self.outcomes if o.result is Result.FAILED), None)

    def total(self, attr: str) -> int:
        return sum(int(getattr(o, attr)) for o in self.outcomes)

    def lines(self) -> list[str]:
        return [f"  {o.operation}: {o.result}: {o.message}" for o in self.outcomes]


def vacuum_run(detail: plan.VacuumPlan, spent: Counter[str]) -> VacuumRun:
    """The facts of a vacuum step: its plan's, and the requests planning and running sent."""
    window = detail.window
    return VacuumRun(
        detail.mode,
        detail.why,
        detail.scanned,
        detail.listed,
        dict(detail.requests + spent),
        None if window is None or window.empty else (window.start, window.end),
        detail.last_info,
        detail.record,
    )


def deleting(
    operation: Operation, files: int, size: int, deleted: int, planned: list[Any], dry_run: bool
) -> Outcome:
    """The Outcome of a step that deletes (cleanup, vacuum)."""
    if dry_run:
        message = f"would delete {files} files ({format_bytes(size)})"
        return Outcome(operation, Result.DRY_RUN, message, files=[f.key for f in planned])
    # Bytes are the plan's: a planned file someone else removed first is gone all the same.
    message = f"deleted {deleted} files ({format_bytes(size)})"
    return Outcome(operation, Result.DONE, message, deleted_files=deleted, deleted_bytes=size)
