"""How much memory a maintenance step takes, estimated before it runs from what a poll already
knows (the table's live files, tombstones and log files), and the daemon's budget for them.

The fleet runs a table's due steps only when their estimate fits what the budget has left
(runtime/slots.py); a step whose estimate exceeds the whole budget runs as a Spark job (a
checkpoint or vacuum whose engine allows it) or is refused with both numbers, never started
to be killed by the kernel. The figures per action come from BENCHMARKS.md's
1,000,000-file runs (peak RSS over the actions the step held), rounded up, not fitted;
docs/health.md says what each step's peak depends on. Each operation names its
figure (maintenance/operations/); this module has the arithmetic.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from pathlib import Path

from deltakeeper.delta.errors import InvalidInputError
from deltakeeper.units import format_bytes, parse_size

BASE_BYTES = 32 * 2**20  # any step: readers, writers and buffers
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


@dataclass(frozen=True, slots=True)
class Holding:
    """What a poll knows of a table that a step's memory follows: its live files and
    tombstones, its log files, and whether a checkpoint would stream the newest one (of
    `checkpoint_bytes`, when known) rather than load every file."""

    files: int
    tombstones: int
    log_files: int
    streamed: bool = False
    checkpoint_bytes: int | None = None

    @property
    def actions(self) -> int:
        return self.files + self.tombstones


Estimate = Callable[[Holding], int]


def per_action(per: int) -> Estimate:
    """A step that holds `per` bytes for each live file and tombstone."""
    return lambda h: BASE_BYTES + per * h.actions


def per_log_file(per: int) -> Estimate:
    """A step that holds `per` bytes for each log file (it reads the listing, or commits)."""
    return lambda h: BASE_BYTES + per * h.log_files


def streamed_checkpoint(loaded: int) -> Estimate:
    """A checkpoint: streamed from the newest one where it can be, else every file loaded at
    `loaded` bytes an action (no checkpoint to stream, or N.crc needs them all)."""

    def estimate(h: Holding) -> int:
        if not h.streamed:
            return BASE_BYTES + loaded * h.actions
        row = STREAMED_ROW_BYTES
        if h.checkpoint_bytes:
            row = max(row, EXPANSION * h.checkpoint_bytes // max(h.actions, 1))
        return BASE_BYTES + min(h.actions, STREAMED_ROWS) * row + STREAMED_PER_ACTION * h.actions

    return estimate


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
    text = os.environ.get("DELTAKEEPER_MEMORY_BUDGET", "").strip() or None
    return budget(text, "$DELTAKEEPER_MEMORY_BUDGET")


def budget(text: str | None, name: str = "memory budget") -> int | None:
    """A budget as users write it: a size (2Gi) or `none`; the default when not given.
    `name`: where it was written (a flag, a variable), for the error."""
    if text is None:
        return default_budget()
    if text.strip().lower() == "none":
        return None
    try:
        return parse_size(text)
    except ValueError as e:
        raise InvalidInputError(f"{name}: {e}") from None


def over_budget(operation: str, need: int, budget: int) -> str:
    return (
        f"{operation} needs about {format_bytes(need)} and the memory budget is "
        f"{format_bytes(budget)}"
    )


# The `reason` of a lastMaintenance entry refused over the budget: the daemon's budget, not
# the table, refused it, so a restart (perhaps with a bigger budget) plans the step again.
REFUSED_REASON = "OverMemoryBudget"

# What a refused step's message goes on to say.
REFUSAL_HINT = (
    ": raise --memory-budget (and the container's memory limit), maintain this table apart "
    "(deltakeeper on a bigger machine), or let Spark run it (checkpoint and vacuum: engine "
    "auto or spark, with a Spark launcher configured)"
)
