"""What running a step gave: its Result and Outcome, and a run's Report. Each operation's
runner (maintenance/operations/) makes Outcomes; the front-ends report them."""

from __future__ import annotations

import enum
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any, TypeVar

from deltakeeper.compaction.launcher import Job, Launcher
from deltakeeper.delta.errors import DeltaError
from deltakeeper.maintenance.operations import Operation
from deltakeeper.maintenance.policy import COMPACTION_RETRY_MS
from deltakeeper.units import format_bytes

Progress = Callable[[str, int, int], None]  # operation, done, total
D = TypeVar("D")
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
    # The CLI's --json of a run besides (record.as_json):
    JOB = "job"  # the Spark job's own result line
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
class Outcome:
    """One step's run. Every operation's facts are the fields here; what only one operation
    knows (a vacuum's mode and cost, a checkpoint's files, a compaction's commits) is its
    `detail`, of a type its module defines, read back with `detail_as`."""

    operation: Operation
    result: Result
    message: str = ""
    seconds: float = 0.0
    deleted_files: int = 0
    deleted_bytes: int = 0
    written_files: int = 0  # writers: files given statistics, manifests or compaction files
    version: int | None = None  # the version it wrote at (a checkpoint's); None: the plan's
    files: list[str] = field(default_factory=list)  # what a dry run would write or delete
    error: DeltaError | None = field(default=None, repr=False)  # why it failed or was refused
    # A step Spark runs (compaction; a checkpoint or vacuum on spec.<op>.engine: spark)
    job: Job | None = field(default=None, repr=False)  # started, not waited for
    job_id: str | None = None
    job_result: dict[str, Any] | None = None  # the job's own JSON line
    detail: object = None  # its operation's own facts

    def detail_as(self, kind: type[D]) -> D | None:
        """Its detail when it is a `kind` (the operation's own type), else None."""
        return self.detail if isinstance(self.detail, kind) else None


@dataclass
class Report:
    uri: str
    version: int
    dry_run: bool
    outcomes: list[Outcome] = field(default_factory=list)
    seconds: float = 0.0
    # Why the run ended before its last step (the daemon is stopping): the steps after it, and
    # the one it interrupted, have no outcome; they run again at the next poll.
    stopped: str | None = None

    @property
    def failed(self) -> Outcome | None:
        return next((o for o in self.outcomes if o.result is Result.FAILED), None)

    def total(self, attr: str) -> int:
        return sum(int(getattr(o, attr)) for o in self.outcomes)

    def lines(self) -> list[str]:
        return [f"  {o.operation}: {o.result}: {o.message}" for o in self.outcomes]


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
