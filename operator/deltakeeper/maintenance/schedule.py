"""Which operations to plan on this poll of a watched table.

Planning a checkpoint is cheap (it reads the snapshot's log position); planning cleanup lists
the log, and planning vacuum reads the commits since the last one (a FULL one lists the whole
table), so a watch loop plans those only when they can have become due, by each operation's
cadence: cleanup every CLEANUP_EVERY_MS while the log moves, when its last plan's cut-off
moves on while it does not (about once a day), and after a new checkpoint (the planner's rule),
vacuum and expire on their cron schedules or else every VACUUM_EVERY_MS and EXPIRE_EVERY_MS.
A new policy (an edit) plans the checkpoint and cleanup at once; a schedule still waits for its
time. Pure: the caller passes the clock and the last run times.
"""

from __future__ import annotations

from collections.abc import Mapping
from datetime import UTC, datetime

from croniter import croniter

from deltakeeper.maintenance.operations import Cadence, Operation
from deltakeeper.maintenance.operations.registry import REGISTRY
from deltakeeper.maintenance.operations.spec import OperationSpec
from deltakeeper.maintenance.policy import Policy, PolicyError, effective


def check_cron(expression: str, key: str = "vacuum.schedule") -> None:
    """PolicyError unless `expression` is a cron schedule croniter accepts."""
    valid = croniter.is_valid(expression)
    if valid:
        try:
            next_run_ms(expression, 0)  # '0 0 30 2 *' parses but never fires
        except (ValueError, KeyError):
            valid = False
    if not valid:
        raise PolicyError(
            f"{key} {expression!r} is not a cron expression; use five fields "
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
    schedules: Mapping[str, str | None] | None = None,
    watched_since_ms: int | None = None,
    policy: Policy | None = None,
    look_again_ms: Mapping[str, int] | None = None,
    policy_changed: bool = False,
) -> tuple[Operation, ...]:
    """The operations worth planning now, in execution order, each by its cadence.

    `last_run_ms` holds, per operation, when it last ran to an end (done, nothing to do, dry
    run or failed); an operation never run is always planned. A checkpoint is planned when the
    table moved on; the planner decides whether the lag makes one due. `schedules`: the cron
    schedule of an operation that has one (vacuum.schedule). With a schedule and no run on
    record, the first run waits for the schedule's first time after `watched_since_ms` (a user
    who wrote '0 3 * * *' expects 03:00, not now). The writers and compaction have rules of
    their own (`writers_to_plan`, the job tracker). An operation the table's `policy` does not
    ask for (an expiry without dataRetention) is never planned; None: Delta's defaults.
    `look_again_ms`: per PERIODIC operation, when its last run said planning it again can find
    more (spec.look_again); `policy_changed`: the table's settings are new since the last poll.
    """
    crons, again = schedules or {}, look_again_ms or {}
    wants = policy if policy is not None else effective({})
    return tuple(
        op
        for op, spec in REGISTRY.items()
        if spec.asked(wants)
        and _worth_planning(
            spec,
            now_ms,
            last_run_ms.get(op),
            version_changed,
            crons.get(op),
            watched_since_ms,
            again.get(op),
            policy_changed,
        )
    )


def _worth_planning(
    spec: OperationSpec,
    now_ms: int,
    last_ms: int | None,
    version_changed: bool,
    cron: str | None,
    watched_since_ms: int | None,
    again_ms: int | None = None,
    policy_changed: bool = False,
) -> bool:
    cadence = spec.cadence
    if cadence is Cadence.NEW_VERSION:
        return version_changed or policy_changed or last_ms is None
    if cadence is Cadence.PERIODIC:
        if last_ms is None or policy_changed:
            return True
        if again_ms is not None and not version_changed:
            return now_ms >= again_ms  # a quiet log: nothing new until then
        return now_ms - last_ms >= spec.every_ms
    if cadence is not Cadence.SCHEDULED:
        return False
    if last_ms is None and cron:
        last_ms = now_ms if watched_since_ms is None else watched_since_ms
    if last_ms is None:
        return True
    if cron:
        return next_run_ms(cron, last_ms) <= now_ms
    return now_ms - last_ms >= spec.every_ms
