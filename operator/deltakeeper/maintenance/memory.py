"""How much memory a maintenance step takes, estimated before it runs from what a poll already
knows (the table's live files, tombstones and log files), and the daemon's budget for them.

The fleet runs a table's due steps only when their estimate fits what the budget has left
(runtime/slots.py); a step whose estimate exceeds the whole budget runs as a Spark job (a
checkpoint or vacuum whose engine allows it) or is refused with both numbers, never started
to be killed by the kernel. The figures per action (PER_ACTION) come from BENCHMARKS.md's
1,000,000-file runs (peak RSS over the actions the step held), rounded up, not fitted;
docs/health.md says what each step's peak depends on.
"""

from __future__ import annotations

import os
from collections.abc import Iterable
from pathlib import Path

from deltakeeper.delta.errors import InvalidInputError
from deltakeeper.maintenance.operations import Operation
from deltakeeper.units import format_bytes, parse_size

BASE_BYTES = 32 * 2**20  # any step: readers, writers and buffers
# Bytes per action held (live files and tombstones; log files for cleanup), by step.
PER_ACTION = {
    Operation.CHECKPOINT: 2048,  # every file loaded: no checkpoint to stream, or N.crc
    Operation.COMPACTION: 1536,
    Operation.CLEANUP: 512,  # a log file
    Operation.VACUUM: 640,
    Operation.STATS: 2048,
    Operation.LOG_COMPACTION: 4096,  # a commit it reconciles
    Operation.MANIFEST: 512,
}
# A checkpoint streamed from the newest one holds a bounded number of its rows at a time
# (batches read ahead, a row group being written), 131,072 rows of 1.5 KiB at most, and a
# little per row besides (16 bytes: found, not explained). Synthetic checkpoints of about 180
# bytes a row on disk peaked 172, 183 and 304 MiB above the process at 100,000, 1,000,000 and
# 10,000,000 files. Wider rows (statistics of many columns) cost more: a row is taken as at
# least EXPANSION times its share of the file.
STREAMED_ROWS = 131_072
STREAMED_ROW_BYTES = 1536
STREAMED_PER_ACTION = 16
EXPANSION = 8
# The budget left to the daemon itself when it comes from the container's limit: its tables'
# watchers, the event loop, metrics.
MARGIN_FRACTION = 0.25
MIN_MARGIN_BYTES = 256 * 2**20
# cgroup v2, then v1: the container's memory limit.
CGROUP_LIMITS = (
    Path("/sys/fs/cgroup/memory.max"),
    Path("/sys/fs/cgroup/memory/memory.limit_in_bytes"),
)
UNLIMITED = 2**60  # cgroup v1 says "no limit" with a number near 2**63


def estimate(
    operation: Operation,
    files: int,
    tombstones: int,
    log_files: int,
    streamed: bool,
    checkpoint_bytes: int | None = None,
) -> int:
    """Bytes `operation` may take on a table with these counts (`streamed`: a checkpoint
    streams the newest one, of `checkpoint_bytes` when known, not every file loaded)."""
    per = PER_ACTION[operation]
    held = files + tombstones
    if operation is Operation.CHECKPOINT and streamed:
        row = STREAMED_ROW_BYTES
        if checkpoint_bytes:
            row = max(row, EXPANSION * checkpoint_bytes // max(held, 1))
        return BASE_BYTES + min(held, STREAMED_ROWS) * row + STREAMED_PER_ACTION * held
    if operation in (Operation.CLEANUP, Operation.LOG_COMPACTION):
        held = log_files  # they read the log's listing, or some of its commits
    return BASE_BYTES + per * held


def largest(estimates: Iterable[int]) -> int:
    """What a table's steps need together: they run one after another."""
    return max(estimates, default=0)


def container_limit(paths: Iterable[Path] = CGROUP_LIMITS) -> int | None:
    """The container's memory limit in bytes, or None when there is none."""
    for path in paths:
        try:
            text = path.read_text().strip()
        except OSError:
            continue
        if text == "max" or not text.isdigit() or int(text) >= UNLIMITED:
            return None
        return int(text)
    return None


def default_budget(limit: int | None = None) -> int | None:
    """The budget when none is given: the container's limit less a margin (a quarter, at least
    256 MiB) for the daemon itself; None (no budget) outside a limited container."""
    limit = container_limit() if limit is None else limit
    if limit is None:
        return None
    return max(limit - max(int(limit * MARGIN_FRACTION), MIN_MARGIN_BYTES), 0)


def budget_from_env() -> int | None:
    """DELTAKEEPER_MEMORY_BUDGET (a size, or "none"), else the default."""
    return budget(os.environ.get("DELTAKEEPER_MEMORY_BUDGET", "").strip() or None)


def budget(text: str | None) -> int | None:
    """A budget as users write it: a size (2Gi) or `none`; the default when not given."""
    if text is None:
        return default_budget()
    if text.strip().lower() == "none":
        return None
    try:
        return parse_size(text)
    except ValueError as e:
        raise InvalidInputError(f"memory budget: {e}") from None


def over_budget(operation: Operation, need: int, budget: int) -> str:
    return (
        f"{operation} needs about {format_bytes(need)} and the memory budget is "
        f"{format_bytes(budget)}"
    )


# What a refused step's message goes on to say.
REFUSAL_HINT = (
    ": raise --memory-budget (and the container's memory limit), maintain this table apart "
    "(deltakeeper on a bigger machine), or let Spark run it (checkpoint and vacuum: engine "
    "auto or spark, with a Spark launcher configured)"
)
