"""maintenance/schedule.py: which operations a watch loop plans on a poll, and cron schedules."""

from __future__ import annotations

import time
from datetime import UTC, datetime

import pytest

from deltakeeper.maintenance import schedule
from deltakeeper.maintenance.operations import Operation
from deltakeeper.maintenance.policy import CLEANUP_EVERY_MS, VACUUM_EVERY_MS, PolicyError

ALL = ("checkpoint", "cleanup", "vacuum")
NIGHTLY = "0 3 * * *"


def ms(when: str) -> int:
    """Epoch ms of a UTC time written as 2027-01-15T03:00:00."""
    return int(datetime.fromisoformat(when).replace(tzinfo=UTC).timestamp() * 1000)


NOW = ms("2027-01-15T08:00:00")


def plan(
    now: int,
    ran: dict[str, int],
    changed: bool = False,
    vacuum_schedule: str | None = None,
    watched_since_ms: int | None = None,
) -> tuple[str, ...]:
    schedules = {Operation.VACUUM: vacuum_schedule}
    return schedule.operations_to_plan(now, ran, changed, schedules, watched_since_ms)


def test_a_table_never_maintained_gets_everything_in_execution_order() -> None:
    assert plan(NOW, {}) == ALL
    assert plan(NOW, {}, changed=True) == ALL


def test_checkpoint_when_the_version_changed_or_never_ran() -> None:
    ran = {"checkpoint": NOW, "cleanup": NOW, "vacuum": NOW}
    assert plan(NOW + 1, ran) == ()
    assert plan(NOW + 1, ran, changed=True) == ("checkpoint",)
    no_checkpoint = {"cleanup": NOW, "vacuum": NOW}
    assert plan(NOW + 1, no_checkpoint) == ("checkpoint",)


def test_cleanup_is_hourly_when_its_last_run_did_not_say_when_to_look_again() -> None:
    ran = {"checkpoint": NOW, "cleanup": NOW, "vacuum": NOW}
    assert CLEANUP_EVERY_MS == 3_600_000
    assert "cleanup" not in plan(NOW + CLEANUP_EVERY_MS - 1, ran)
    assert plan(NOW + CLEANUP_EVERY_MS, ran) == ("cleanup",)
    assert plan(NOW + 5 * CLEANUP_EVERY_MS, ran) == ("cleanup",)


def test_cleanup_looks_again_when_its_last_run_said() -> None:
    ran = {"checkpoint": NOW, "cleanup": NOW, "vacuum": NOW}
    again = {"cleanup": NOW + 16 * CLEANUP_EVERY_MS}

    def at(now: int, **kw: bool) -> tuple[str, ...]:
        return schedule.operations_to_plan(now, ran, False, look_again_ms=again, **kw)

    assert at(NOW + 5 * CLEANUP_EVERY_MS) == ()  # not hourly
    assert at(again["cleanup"] - 1) == ()
    assert at(again["cleanup"]) == ("cleanup",)
    # While the log moves (new commits), hourly as before: a growing log is looked at.
    moved = schedule.operations_to_plan(NOW + CLEANUP_EVERY_MS, ran, True, look_again_ms=again)
    assert moved == ("checkpoint", "cleanup")
    early = schedule.operations_to_plan(NOW + CLEANUP_EVERY_MS - 1, ran, True, look_again_ms=again)
    assert early == ("checkpoint",)
    # A new policy (an edit: a retention, an interval) plans the checkpoint and cleanup now;
    # vacuum keeps its own time.
    assert at(NOW + 1, policy_changed=True) == ("checkpoint", "cleanup")


def test_vacuum_without_a_schedule_is_daily() -> None:
    ran = {"checkpoint": NOW, "cleanup": NOW, "vacuum": NOW}
    assert VACUUM_EVERY_MS == 86_400_000
    assert "vacuum" not in plan(NOW + VACUUM_EVERY_MS - 1, ran)
    assert "vacuum" in plan(NOW + VACUUM_EVERY_MS, ran)
    # watched_since_ms matters only with a schedule.
    assert "vacuum" in plan(NOW, {"checkpoint": NOW, "cleanup": NOW}, watched_since_ms=NOW)


def test_vacuum_on_a_cron_schedule_waits_for_0300_utc() -> None:
    ran = {"checkpoint": NOW, "cleanup": NOW, "vacuum": ms("2027-01-15T03:00:05")}
    before = ms("2027-01-16T02:59:59")
    at = ms("2027-01-16T03:00:00")
    assert "vacuum" not in plan(before, ran, vacuum_schedule=NIGHTLY)
    assert "vacuum" in plan(at, ran, vacuum_schedule=NIGHTLY)
    assert "vacuum" in plan(ms("2027-01-16T11:00:00"), ran, vacuum_schedule=NIGHTLY)
    # A day passed, but the schedule (not VACUUM_EVERY_MS) decides.
    assert "vacuum" not in plan(ms("2027-01-16T02:00:00"), ran, vacuum_schedule=NIGHTLY)
    # Run at 08:00: not an hour later, but at 03:00 the day after (19 hours later).
    at_eight = {"checkpoint": NOW, "cleanup": NOW, "vacuum": NOW}
    assert "vacuum" not in plan(NOW + 3_600_000, at_eight, vacuum_schedule=NIGHTLY)
    assert "vacuum" in plan(NOW + 19 * 3_600_000 + 1, at_eight, vacuum_schedule=NIGHTLY)


def test_first_vacuum_on_a_schedule_waits_for_the_first_fire_after_watching_began() -> None:
    # Nothing ran yet: checkpoint and cleanup are due at once, vacuum is not.
    first = plan(NOW, {}, vacuum_schedule=NIGHTLY, watched_since_ms=NOW)
    assert "vacuum" not in first and first == ("checkpoint", "cleanup")
    ran = {"checkpoint": NOW, "cleanup": NOW}
    since = NOW  # 08:00: the first 03:00 after it is tomorrow's
    for now in (NOW, ms("2027-01-15T23:00:00"), ms("2027-01-16T02:59:59")):
        assert "vacuum" not in plan(now, ran, vacuum_schedule=NIGHTLY, watched_since_ms=since)
    assert "vacuum" in plan(
        ms("2027-01-16T03:00:00"), ran, vacuum_schedule=NIGHTLY, watched_since_ms=since
    )
    # Watching since 02:00: today's 03:00 is the first fire.
    early = ms("2027-01-15T02:00:00")
    assert "vacuum" not in plan(
        ms("2027-01-15T02:30:00"), ran, vacuum_schedule=NIGHTLY, watched_since_ms=early
    )
    assert "vacuum" in plan(
        ms("2027-01-15T03:00:00"), ran, vacuum_schedule=NIGHTLY, watched_since_ms=early
    )


def test_next_run_is_strictly_after_and_in_utc(monkeypatch: pytest.MonkeyPatch) -> None:
    assert schedule.next_run_ms(NIGHTLY, ms("2027-01-15T02:59:59")) == ms("2027-01-15T03:00:00")
    assert schedule.next_run_ms(NIGHTLY, ms("2027-01-15T03:00:00")) == ms("2027-01-16T03:00:00")
    assert schedule.next_run_ms("@daily", NOW) == ms("2027-01-16T00:00:00")
    # The process's local time zone does not move the schedule.
    monkeypatch.setenv("TZ", "America/New_York")
    time.tzset()
    try:
        assert schedule.next_run_ms(NIGHTLY, NOW) == ms("2027-01-16T03:00:00")
    finally:
        monkeypatch.undo()
        time.tzset()


@pytest.mark.parametrize(
    "expression",
    ["every night", "", "0 3 * *", "0 25 * * *", "61 3 * * *", "0 3 * * 8", "H 3 * * *"],
)
def test_check_cron_rejects_what_is_not_a_cron_expression(expression: str) -> None:
    with pytest.raises(PolicyError) as raised:
        schedule.check_cron(expression)
    assert repr(expression) in str(raised.value)


@pytest.mark.parametrize("expression", [NIGHTLY, "@daily", "@hourly", "*/15 2-4 * * mon-fri"])
def test_check_cron_accepts_schedules(expression: str) -> None:
    schedule.check_cron(expression)
    assert schedule.next_run_ms(expression, NOW) > NOW


def test_check_cron_rejects_a_schedule_that_never_fires() -> None:
    with pytest.raises(PolicyError):
        schedule.check_cron("0 0 30 2 *")


def test_expiry_is_planned_only_where_the_policy_sets_data_retention() -> None:
    from deltakeeper.maintenance.policy import DAY_MS, DataRetention, effective

    plain = effective({})
    daily = effective({}, data_retention=DataRetention("day", 90 * DAY_MS))
    nightly = effective({}, data_retention=DataRetention("day", 90 * DAY_MS, schedule=NIGHTLY))

    def due(now: int, ran: dict[str, int], pol, since: int | None = None) -> tuple[str, ...]:
        crons = {Operation.EXPIRE: pol.data_retention.schedule if pol.data_retention else None}
        return schedule.operations_to_plan(now, ran, False, crons, since, pol)

    assert "expire" not in due(NOW, {}, plain)
    assert due(NOW, {}, daily) == ("checkpoint", "expire", "cleanup", "vacuum")
    assert "expire" not in due(NOW + DAY_MS - 1, {"expire": NOW}, daily)
    assert "expire" in due(NOW + DAY_MS, {"expire": NOW}, daily)
    # On its cron (UTC): not before its first time after watching began, 03:00.
    assert "expire" not in due(NOW, {}, nightly, since=NOW)
    assert "expire" in due(ms("2027-01-16T03:00:00"), {}, nightly, since=NOW)
