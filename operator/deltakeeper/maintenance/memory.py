"""How much memory a maintenance step takes, estimated before it runs from what a poll already
knows (the table's live files, tombstones and log files), and the daemon's budget for them.

The fleet runs a table's due steps only when their estimate fits what the budget has left
(runtime/slots.py); a step whose estimate exceeds the whole budget runs as a Spark job (a
checkpoint or vacuum whose engine allows it) or is refused with both numbers, never started
to be killed by the kernel. The figures per action come from
BENCHMARKS.md's 1,000,000-file runs (peak RSS over the actions the step held): an
incremental checkpoint about 1.1 KiB an action, a checkpoint replayed from JSON commits about
2 KiB, a snapshot with statistics for compaction planning or statistics about 1.5 KiB, a vacuum's
listing and references about 0.6 KiB a file. They are rounded up, not fitted.
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
    Operation.CHECKPOINT: 384,  # streamed from the newest checkpoint
    Operation.COMPACTION: 1536,
    Operation.CLEANUP: 512,  # a log file
    Operation.VACUUM: 640,
    Operation.STATS: 2048,
    Operation.LOG_COMPACTION: 4096,  # a commit it reconciles
    Operation.MANIFEST: 512,
}
CHECKPOINT_LOADED = 2048  # a checkpoint of every file loaded: no earlier one, or N.crc
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
    operation: Operation, files: int, tombstones: int, log_files: int, streamed: bool
) -> int:
    """Bytes `operation` may take on a table with these counts (`streamed`: a checkpoint
    streams the newest one, not every file loaded)."""
    per = PER_ACTION[operation]
    held = files + tombstones
    if operation is Operation.CHECKPOINT and not streamed:
        per = CHECKPOINT_LOADED
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
