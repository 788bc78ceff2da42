"""runtime/status.py: the status built from an observation, in one place; conditions keep their
lastTransitionTime while their status holds; a status that only moved lastPoll is not worth a
write until it is old."""

from __future__ import annotations

import dataclasses

from deltakeeper.resources.conditions import ConditionStatus, ConditionType, Reason
from deltakeeper.resources.status_fields import COUNTS, StatusField
from deltakeeper.runtime import status
from deltakeeper.runtime.model import Condition, Observation, Target

TARGET = Target("ns", "t", "file:///t", generation=3, policy_name="standard")
READY = Condition(ConditionType.READY, ConditionStatus.TRUE, Reason.WATCHING, "watching")
SECOND = 1000


def observed(at_ms: int, *conditions: Condition, **fields: object) -> Observation:
    return Observation(at_ms, list(conditions or [READY]), **fields)  # type: ignore[arg-type]


def test_counts_are_the_summarys_numbers_under_their_status_names() -> None:
    summary = {key: i for i, key in enumerate(COUNTS.values())}
    summary["timestamp"] = 1_700_000_000_123
    counts = status.counts(summary)
    assert {k: counts[k] for k in COUNTS} == {f: summary[key] for f, key in COUNTS.items()}
    assert counts[StatusField.LAST_COMMIT_TIME] == "2023-11-14T22:13:20Z"
    assert status.counts({**summary, "timestamp": None})[StatusField.LAST_COMMIT_TIME] is None


def test_build_puts_every_piece_of_the_observation_in_the_status() -> None:
    obs = observed(
        5 * SECOND,
        counts={"version": 7, "files": 2},
        retention={"logRetention": {"ms": 1, "source": "default"}},
        last_maintenance={"vacuum": {"time": "t", "timeMs": 9, "result": "done"}},
        compaction={"running": None},
    )
    body = status.build(TARGET, obs, None, 6 * SECOND)
    assert body == {
        "lastPoll": "1970-01-01T00:00:05Z",
        "policy": "standard",
        "version": 7,
        "files": 2,
        "retention": {"logRetention": {"ms": 1, "source": "default"}},
        "lastMaintenance": {"vacuum": {"time": "t", "result": "done"}},  # timeMs is ours
        "compaction": {"running": None},
        "observedGeneration": 3,
        "conditions": [
            {
                "type": "Ready",
                "status": "True",
                "reason": "Watching",
                "message": "watching",
                "lastTransitionTime": "1970-01-01T00:00:06Z",
                "observedGeneration": 3,
            }
        ],
    }
    assert set(body) <= set(StatusField)  # nothing the CRD does not declare
    assert all(type(k) is str for k in body)  # plain keys: every JSON writer takes them


def test_a_table_that_could_not_be_read_has_no_numbers_retention_or_compaction() -> None:
    body = status.build(TARGET, observed(0), None, 0)
    assert set(body) == {
        "lastPoll",
        "policy",
        "lastMaintenance",
        "observedGeneration",
        "conditions",
    }


def test_extra_conditions_follow_the_polls_own() -> None:
    found = Condition(ConditionType.TABLE_FOUND, ConditionStatus.TRUE, Reason.FOUND, "found")
    body = status.build(TARGET, observed(0), None, 0, [found])
    assert [c["type"] for c in body["conditions"]] == ["Ready", "TableFound"]


def test_a_transition_time_moves_only_when_the_status_does() -> None:
    first = status.build(TARGET, observed(0), None, 10 * SECOND)
    same = status.build(TARGET, observed(0), first, 20 * SECOND)
    assert same["conditions"][0]["lastTransitionTime"] == "1970-01-01T00:00:10Z"
    failed = Condition(ConditionType.READY, ConditionStatus.FALSE, Reason.CORRUPT_LOG, "bad")
    moved = status.build(TARGET, observed(0, failed), same, 30 * SECOND)
    assert moved["conditions"][0]["lastTransitionTime"] == "1970-01-01T00:00:30Z"


def test_only_a_new_last_poll_is_not_worth_a_write_until_the_refresh() -> None:
    old = status.build(TARGET, observed(0, counts={"version": 1}), None, 0)
    polled = status.build(TARGET, observed(60 * SECOND, counts={"version": 1}), old, 60 * SECOND)
    assert not status.worth_writing(old, polled, 60 * SECOND, 0)
    late = status.REFRESH_S * SECOND
    assert status.worth_writing(old, polled, late, 0)
    moved = status.build(TARGET, observed(60 * SECOND, counts={"version": 2}), old, 60 * SECOND)
    assert status.worth_writing(old, moved, 60 * SECOND, 0)
    assert status.worth_writing(None, polled, 60 * SECOND, 0)


def test_a_big_fleets_quiet_refreshes_are_spread_to_at_most_two_writes_a_second() -> None:
    assert status.refresh_ms(1) == status.refresh_ms(7_200) == 3_600 * SECOND
    assert status.refresh_ms(50_000) == 25_000 * SECOND  # 2 a second, each table every ~7 h
    old = status.build(TARGET, observed(0, counts={"version": 1}), None, 0)
    hour = status.REFRESH_S * SECOND
    polled = status.build(TARGET, observed(hour, counts={"version": 1}), old, hour)
    assert not status.worth_writing(old, polled, hour, 0, status.refresh_ms(50_000))
    assert status.worth_writing(old, polled, 25_000 * SECOND, 0, status.refresh_ms(50_000))


def test_an_event_alone_is_not_worth_a_write_but_going_down_or_a_miss_is() -> None:
    def with_events(events: dict | None) -> dict:
        polled = observed(60 * SECOND, counts={"version": 1})
        obs = dataclasses.replace(polled, storage_events=events)
        return status.build(TARGET, obs, None, 60 * SECOND)

    live = {"source": "webhook", "live": True, "lastEventTime": "2026-01-01T00:00:00Z", "missed": 0}
    old = with_events(live)
    later = with_events({**live, "lastEventTime": "2026-01-01T00:00:05Z"})
    assert not status.worth_writing(old, later, 60 * SECOND, 0)
    assert status.worth_writing(old, later, status.REFRESH_S * SECOND, 0)
    first = with_events({**live, "lastEventTime": None})
    assert not status.worth_writing(first, old, 60 * SECOND, 0)  # a first event: the same
    assert status.worth_writing(old, with_events({**live, "live": False}), 60 * SECOND, 0)
    assert status.worth_writing(old, with_events({**live, "missed": 1}), 60 * SECOND, 0)
    assert status.worth_writing(old, with_events(None), 60 * SECOND, 0)


def test_a_stored_last_maintenance_gets_its_time_in_ms_back() -> None:
    stored = {
        "lastMaintenance": {
            "cleanup": {"time": "1970-01-01T00:01:00Z", "result": "done"},
            "vacuum": {"time": "not a time"},
            "checkpoint": "not an entry",
        }
    }
    assert status.last_maintenance(stored) == {
        "cleanup": {"time": "1970-01-01T00:01:00Z", "result": "done", "timeMs": 60_000}
    }
