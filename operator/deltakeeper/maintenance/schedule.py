"""Which operations to plan on this poll of a watched table.

Planning a checkpoint is cheap (it reads the snapshot's log position); planning cleanup lists the
log, and planning vacuum reads the commits since the last one (a FULL one lists the whole
table), so a watch loop plans those only when they can have become due: cleanup every
CLEANUP_EVERY_MS (and after a new checkpoint: the planner's rule), vacuum on its cron schedule
or else every VACUUM_EVERY_MS. Pure: the caller passes the clock and the last run times.
"""

from __future__ import annotations

from collections.abc import Mapping
from datetime import UTC, datetime

from croniter import croniter

from deltakeeper.maintenance.operations import Operation
from deltakeeper.maintenance.policy import CLEANUP_EVERY_MS, VACUUM_EVERY_MS, PolicyError


def check_cron(expression: str) -> None:
    """PolicyError unless `expression` is a cron schedule croniter accepts."""
    valid = croniter.is_valid(expression)
    if valid:
        try:
            next_run_ms(expression, 0)  # '0 0 30 2 *' parses but never fires
        except (ValueError, KeyError):
            valid = False
    if not valid:
        raise PolicyError(
            f"vacuum.schedule {expression!r} is not a cron expression; use five fields "
            "like '0 3 * * *' (03:00 UTC daily) or @daily"
        )


def next_run_ms(expression: str, after_ms: int) -> int:
    """The first time the cron `expression` fires strictly after `after_ms` (UTC)."""
    start = datetime.fromtimestamp(after_ms / 1000, tz=UTC)
    nxt = croniter(expression, start).get_next(datetime)
    return int(nxt.timestamp() * 1000)


def writers_to_plan(
    wanted: tuple[Operation, ...], planned_at: Mapping[str, int], version: int
) -> tuple[Operation, ...]:
    """Of the writers a table asks for (statistics, log compaction files, manifests), those
    worth planning: each follows the table's versions, so each once per version, ours (the
    statistics' commit) included. `planned_at`: the version each was last planned at."""
    return tuple(op for op in wanted if planned_at.get(op) != version)


def operations_to_plan(
    now_ms: int,
    last_run_ms: Mapping[str, int],
    version_changed: bool,
    vacuum_schedule: str | None = None,
    watched_since_ms: int | None = None,
) -> tuple[Operation, ...]:
    """The operations worth planning now, in execution order.

    `last_run_ms` holds, per operation, when it last ran to an end (done, nothing to do, dry
    run or failed); an operation never run is always planned. A checkpoint is planned when the
    table moved on; the planner decides whether the lag makes one due. With a vacuum schedule
    and no vacuum on record, the first vacuum waits for the schedule's first time after
    `watched_since_ms` (a user who wrote '0 3 * * *' expects 03:00, not now).
    """
    ops: list[Operation] = []
    if version_changed or Operation.CHECKPOINT not in last_run_ms:
        ops.append(Operation.CHECKPOINT)
    cleanup_at = last_run_ms.get(Operation.CLEANUP)
    if cleanup_at is None or now_ms - cleanup_at >= CLEANUP_EVERY_MS:
        ops.append(Operation.CLEANUP)
    vacuum_at = last_run_ms.get(Operation.VACUUM)
    if vacuum_at is None and vacuum_schedule:
        vacuum_at = now_ms if watched_since_ms is None else watched_since_ms
    if vacuum_at is None:
        ops.append(Operation.VACUUM)
    elif vacuum_schedule:
        if next_run_ms(vacuum_schedule, vacuum_at) <= now_ms:
            ops.append(Operation.VACUUM)
    elif now_ms - vacuum_at >= VACUUM_EVERY_MS:
        ops.append(Operation.VACUUM)
    return tuple(ops)
