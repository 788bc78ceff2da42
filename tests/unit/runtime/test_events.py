"""runtime/events.py: object keys to tables, wakes, misses and the fallback; and the watch
loop's timing with events (fleet.py), with a fake clock and fake sleeps."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import pytest

from deltakeeper.resources.conditions import ConditionStatus, ConditionType, Reason
from deltakeeper.runtime import events
from deltakeeper.runtime.events import (
    MISSES_TO_DEGRADE,
    WEBHOOK,
    EventResult,
    Events,
    Trigger,
    key_path,
    table_place,
)
from deltakeeper.runtime.fleet import Fleet, Loop
from deltakeeper.runtime.metrics import Metrics
from deltakeeper.runtime.model import Observation, Target
from deltakeeper.runtime.watcher import TableWatcher
from tests.support.logbuilder import add, commit_info
from tests.support.tables import small_table


class Clock:
    def __init__(self) -> None:
        self.s = 100.0

    def __call__(self) -> float:
        return self.s


def target(uri: str = "s3://lake/sales/orders", **kw: Any) -> Target:
    kw.setdefault("events_source", WEBHOOK)
    kw.setdefault("poll_interval_s", 30)
    kw.setdefault("resync_interval_s", 3600)
    return Target("ns", "t", uri, **kw)


def obs(version: int | None) -> Observation:
    return Observation(polled_ms=0, conditions=[], counts={"version": version})


def hub_with(*uris: str) -> tuple[Events, dict[str, list[int]], Metrics]:
    """Events with one table per URI; each table's wakes counted by its URI."""
    m = Metrics()
    hub = Events(m, clock_ms=lambda: 1_000, monotonic=Clock())
    woken: dict[str, list[int]] = {}
    for uri in uris:
        woken[uri] = []
        table = hub.table(lambda uri=uri: woken[uri].append(1))  # type: ignore[misc]
        table.follow(target(uri))
    hub.set_up(WEBHOOK, True)
    for uri in uris:
        woken[uri].clear()  # the source coming up wakes them all once
    return hub, woken, m


def events_count(m: Metrics, result: str) -> float:
    value = m.registry.get_sample_value(
        "deltakeeper_events_total", {"source": WEBHOOK, "result": result}
    )
    assert value is not None
    return value


def test_places_are_the_uri_decoded_as_storage_opens_it() -> None:
    assert table_place("s3://lake/a%20b/c=1/") == ("lake", "a b/c=1")
    assert table_place("abfss://box@acct.dfs.core.windows.net/t") == ("box", "t")
    assert table_place("s3://lake") == ("lake", "")
    assert table_place("/data/t") is None
    assert table_place("file:///data/t") is None


def test_keys_are_url_decoded_as_s3_sends_them_and_odd_ones_refused() -> None:
    assert key_path("a+b/c%3D1/%C3%A9t%C3%A9%25/_delta_log/1.json") == (
        "a b/c=1/été%/_delta_log/1.json"
    )
    assert key_path("a%2Bb") == "a+b"
    for bad in ("", "/abs/_delta_log/1.json", "a/../b/_delta_log/1.json", "a/%2E%2E/b", "a/./b"):
        assert key_path(bad) is None, bad


def test_an_event_in_a_tables_log_wakes_it_by_the_longest_prefix() -> None:
    hub, woken, m = hub_with("s3://lake/a", "s3://lake/a/b", "s3://lake/a b/été=1%")
    assert hub.deliver(WEBHOOK, "lake", "a/b/_delta_log/00000000000000000001.json") == (
        EventResult.WOKE
    )
    assert (woken["s3://lake/a/b"], woken["s3://lake/a"]) == ([1], [])
    hub.deliver(WEBHOOK, "lake", "a/_delta_log/00000000000000000001.json")
    assert woken["s3://lake/a"] == [1]
    key = "a+b/%C3%A9t%C3%A9%3D1%25/_delta_log/00000000000000000003.json"
    assert hub.deliver(WEBHOOK, "lake", key) is EventResult.WOKE
    assert woken["s3://lake/a b/été=1%"] == [1]
    assert events_count(m, "woke") == 3


def test_keys_of_no_watched_table_are_counted_and_dropped() -> None:
    hub, woken, m = hub_with("s3://lake/a/b")
    for bucket, key in [
        ("other", "a/b/_delta_log/1.json"),  # another bucket
        ("lake", "a/_delta_log/1.json"),  # a prefix of a table, not a table
        ("lake", "a/bc/_delta_log/1.json"),  # a prefix by characters, not at a /
        ("lake", "a/b/../../x/_delta_log/1.json"),
        ("lake", "/a/b/_delta_log/1.json"),  # absolute
        ("lake", "a/b"),  # the table's own folder name
    ]:
        assert hub.deliver(WEBHOOK, bucket, key) is EventResult.UNKNOWN_TABLE, (bucket, key)
    assert hub.deliver("sqs", "lake", "a/b/_delta_log/1.json") is EventResult.UNKNOWN_TABLE
    assert hub.deliver(WEBHOOK, "lake", "a/b/part-0.parquet") is EventResult.IGNORED
    assert woken["s3://lake/a/b"] == []
    assert events_count(m, "unknown_table") == 6  # the sqs one is no source of this build
    assert events_count(m, "ignored") == 1


def test_a_burst_wakes_a_table_once_until_its_poll_starts() -> None:
    hub, woken, m = hub_with("s3://lake/t")
    table = next(iter(hub.tables(WEBHOOK)))
    results = [hub.deliver(WEBHOOK, "lake", f"t/_delta_log/{v:020}.json") for v in range(100)]
    assert results.count(EventResult.WOKE) == 1 and woken["s3://lake/t"] == [1]
    assert events_count(m, "duplicate") == 99
    assert table.begin() is Trigger.EVENT
    hub.deliver(WEBHOOK, "lake", "t/_delta_log/00000000000000000100.json")  # during the poll
    assert woken["s3://lake/t"] == [1, 1]  # one more poll after it


def test_a_stopped_table_is_unknown_and_a_moved_one_found_at_its_new_uri() -> None:
    hub, _woken, _ = hub_with("s3://lake/t")
    table = next(iter(hub.tables(WEBHOOK)))
    table.follow(target("s3://lake/u"))
    assert hub.deliver(WEBHOOK, "lake", "t/_delta_log/1.json") is EventResult.UNKNOWN_TABLE
    assert hub.deliver(WEBHOOK, "lake", "u/_delta_log/1.json") is EventResult.WOKE
    table.close()
    assert hub.deliver(WEBHOOK, "lake", "u/_delta_log/2.json") is EventResult.UNKNOWN_TABLE
    assert list(hub.tables(WEBHOOK)) == []


def test_resync_polls_finding_unannounced_commits_twice_fall_back_until_an_event() -> None:
    hub, _woken, _m = hub_with("s3://lake/t")
    table = next(iter(hub.tables(WEBHOOK)))
    t = target("s3://lake/t")
    assert table.interval_s(t) == 3600 and table.begin() is Trigger.RESYNC
    shown = table.polled(obs(5))
    assert shown.storage_events == {
        "source": WEBHOOK,
        "live": True,
        "lastEventTime": None,
        "missed": 0,
    }
    degraded = next(c for c in shown.conditions if c.type is ConditionType.EVENTS_DEGRADED)
    assert (degraded.status, degraded.reason) == (ConditionStatus.FALSE, Reason.EVENTS_LIVE)
    for n in range(1, MISSES_TO_DEGRADE + 1):
        table.begin()
        shown = table.polled(obs(5 + n))  # commits no event announced
        assert shown.storage_events is not None and shown.storage_events["missed"] == n
    assert not table.live and table.interval_s(t) == 30 and table.begin() is Trigger.FALLBACK
    degraded = next(c for c in shown.conditions if c.type is ConditionType.EVENTS_DEGRADED)
    assert (degraded.status, degraded.reason) == (ConditionStatus.TRUE, Reason.EVENTS_MISSED)
    # An event for it: live again, and its poll is the event's.
    assert hub.deliver(WEBHOOK, "lake", "t/_delta_log/00000000000000000009.json") is (
        EventResult.WOKE
    )
    assert table.live and table.begin() is Trigger.EVENT
    shown = table.polled(obs(9))
    assert shown.storage_events is not None and shown.storage_events["live"]
    assert table.interval_s(t) == 3600


def test_a_quiet_resync_poll_or_an_announced_commit_is_no_miss() -> None:
    hub, _, _ = hub_with("s3://lake/t")
    table = next(iter(hub.tables(WEBHOOK)))
    table.begin()
    table.polled(obs(5))
    table.begin()
    table.polled(obs(5))  # nothing new
    hub.deliver(WEBHOOK, "lake", "t/_delta_log/00000000000000000006.json")
    table.park()  # a resync poll that ran as the event came: the event announced it
    table.polled(obs(6))
    assert table.misses == 0


def test_the_event_to_poll_lag_is_measured_from_the_first_event() -> None:
    clock = Clock()
    m = Metrics()
    hub = Events(m, monotonic=clock)
    table = hub.table(lambda: None)
    table.follow(target())
    hub.set_up(WEBHOOK, True)
    hub.deliver(WEBHOOK, "lake", "sales/orders/_delta_log/00000000000000000001.json")
    clock.s += 0.25
    hub.deliver(WEBHOOK, "lake", "sales/orders/_delta_log/00000000000000000002.json")
    table.begin()
    clock.s += 0.5
    table.polled(obs(2))
    lag = m.registry.get_sample_value("deltakeeper_event_poll_lag_seconds_sum", {})
    assert lag == 0.75


def test_a_source_down_polls_at_poll_interval_with_the_condition_and_wakes_its_tables() -> None:
    hub, woken, m = hub_with("s3://lake/t")
    table = next(iter(hub.tables(WEBHOOK)))
    up = m.registry.get_sample_value("deltakeeper_event_source_up", {"source": WEBHOOK})
    assert up == 1
    hub.set_up(WEBHOOK, False, "listener failed")
    assert woken["s3://lake/t"] == [1]  # polled at once: what was missed meanwhile
    assert table.interval_s(target("s3://lake/t")) == 30 and table.begin() is Trigger.FALLBACK
    shown = table.polled(obs(1))
    degraded = next(c for c in shown.conditions if c.type is ConditionType.EVENTS_DEGRADED)
    assert (degraded.status, degraded.reason) == (ConditionStatus.TRUE, Reason.EVENT_SOURCE_DOWN)
    assert "listener failed" in degraded.message
    assert m.registry.get_sample_value("deltakeeper_event_source_up", {"source": WEBHOOK}) == 0


def test_a_new_tables_first_commit_under_a_lakes_prefix_tells_the_lake() -> None:
    hub, woken, m = hub_with("s3://lake/raw/known")
    heard: list[str] = []
    stop = hub.lake(WEBHOOK, "s3://lake/raw", lambda path: heard.append(path) or True)
    commit = "_delta_log/00000000000000000000.json"
    assert hub.deliver(WEBHOOK, "lake", f"raw/new+one/%C3%A9/{commit}") is EventResult.NEW_TABLE
    assert hub.deliver(WEBHOOK, "lake", f"raw/{commit}") is EventResult.NEW_TABLE  # the prefix
    cp = "_delta_log/00000000000000000010.checkpoint.parquet"
    assert hub.deliver(WEBHOOK, "lake", f"raw/b/{cp}") is EventResult.NEW_TABLE
    assert heard == ["new one/é", ".", "b"]
    assert hub.deliver(WEBHOOK, "lake", f"raw/known/{commit}") is EventResult.WOKE  # watched
    assert woken["s3://lake/raw/known"] == [1]
    for key in (
        "raw/c/part-0.parquet",  # a data file: no table's first commit
        "raw/c/_delta_log/_last_checkpoint",
        "raw/c/_delta_log/_commits/00000000000000000001.0a1b2c3d-0000-0000-0000-000000000000.json",
        "raw/c/_delta_log/00000000000000000001.crc",
        f"other/{commit}",  # outside the lake's prefix
        f"rawer/{commit}",
    ):
        assert hub.deliver(WEBHOOK, "lake", key) is EventResult.UNKNOWN_TABLE, key
    assert hub.deliver("sqs", "lake", f"raw/x/{commit}") is EventResult.UNKNOWN_TABLE
    stop()
    assert hub.deliver(WEBHOOK, "lake", f"raw/x/{commit}") is EventResult.UNKNOWN_TABLE
    assert heard == ["new one/é", ".", "b"]
    assert events_count(m, "new_table") == 3
    refusing = hub.lake(WEBHOOK, "s3://lake", lambda path: False)  # a path its scan skips
    assert hub.deliver(WEBHOOK, "lake", f"_x/{commit}") is EventResult.UNKNOWN_TABLE
    refusing()
    assert hub.lake(WEBHOOK, "/local/lake", lambda path: True) is not None  # hears nothing


def test_every_series_is_at_zero_from_the_start() -> None:
    m = Metrics()
    Events(m)
    for result in EventResult:
        assert events_count(m, result) == 0
    for trigger in Trigger:
        value = m.registry.get_sample_value("deltakeeper_polls_total", {"trigger": trigger})
        assert value == 0
    assert m.registry.get_sample_value("deltakeeper_event_source_up", {"source": WEBHOOK}) == 0
    assert m.registry.get_sample_value("deltakeeper_event_poll_lag_seconds_count", {}) == 0
    text = "".join(m.exposition())
    assert "deltakeeper_event_poll_lag_seconds_count 0.0\n" in text
    assert 'deltakeeper_polls_total{trigger="resync"} 0.0\n' in text


# -- the watch loop's timing (fleet.py), on a real local table with fake sleeps -----------------


class FakeTimer:
    """A Loop's sleeps and parkings recorded instead of waited; `on_wait` acts at each."""

    def __init__(self, loop: Loop, stop_after: int) -> None:
        self.loop = loop
        self.waits: list[tuple[str, float]] = []
        self.stop_after = stop_after
        self.on_wait: Any = None

    async def sleep(self, seconds: float) -> bool:
        self.waits.append(("sleep", seconds))
        if self.on_wait is not None:
            self.on_wait(len(self.waits))
        await asyncio.sleep(0)
        self.loop._woken = False
        return len(self.waits) >= self.stop_after


def test_the_loop_waits_its_resync_interval_while_events_are_live(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Loop timing with fake sleeps: live events, resync; a miss twice, pollInterval; an
    event, an event poll at once and resync again."""
    b = small_table(tmp_path)
    # A local table has no place in a bucket: found as if it were s3://lake/t.
    monkeypatch.setattr(events, "table_place", lambda uri: ("lake", "t"))
    m = Metrics()
    fleet = Fleet(events=Events(m), park_quiet=False)
    fleet.events.set_up(WEBHOOK, True)
    t = target(str(tmp_path), poll_interval_s=30, resync_interval_s=3600)
    owner = Loop()
    timer = FakeTimer(owner, stop_after=7)
    published: list[Observation] = []

    async def current() -> Target:
        return t

    async def publish(_: Target, o: Observation) -> None:
        published.append(o)

    def on_wait(n: int) -> None:
        if n in (2, 3):  # commits no event announces, found by resync polls
            b.commit(add(f"m{n}.parquet"), commit_info())
        if n == 5:  # an event: the loop is woken (its sleep returns at once)
            b.commit(add("e.parquet"), commit_info())
            fleet.events.deliver(WEBHOOK, "lake", "t/_delta_log/00000000000000000009.json")

    timer.on_wait = on_wait

    async def scenario() -> None:
        owner.fleet = fleet
        await fleet.watch(current, TableWatcher(0), timer.sleep, publish, None, owner)

    try:
        asyncio.run(scenario())
    finally:
        fleet.close()

    def kind(seconds: float) -> str:
        if 3600 * 0.9 <= seconds <= 3600 * 1.1:
            return "resync"
        return "poll" if 30 * 0.9 <= seconds <= 30 * 1.1 else str(seconds)

    # after the first poll, resync (miss 1), miss 2 -> pollInterval, a quiet fallback poll, the
    # event's poll -> resync, resync
    # (the first poll's wait drawn from the whole resync interval: a start's tables spread)
    assert 0 <= timer.waits[1][1] <= 3600, timer.waits
    kinds = [kind(s) for _, s in timer.waits[2:]]
    assert kinds == ["resync", "poll", "poll", "resync", "resync"], timer.waits
    polls = {
        trig: m.registry.get_sample_value("deltakeeper_polls_total", {"trigger": trig})
        for trig in Trigger
    }
    assert polls == {"event": 1, "interval": 0, "resync": 4, "fallback": 1}
    assert published[-1].storage_events is not None and published[-1].storage_events["live"]
    assert owner.events is None  # closed as its loop ended: its events are unknown from now


def test_a_starting_loop_is_indexed_before_its_start_spread(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A store sending again what it queued while the daemon was down reaches a table whose
    loop waits out its start spread (woken, not an unknown table); a loop stopped there leaves
    the index."""
    small_table(tmp_path)
    monkeypatch.setattr(events, "table_place", lambda uri: ("lake", "t"))
    fleet = Fleet(events=Events(Metrics()), park_quiet=False)
    owner = Loop()
    key = "t/_delta_log/00000000000000000001.json"
    results: list[EventResult] = []

    async def current() -> Target:
        await asyncio.sleep(0.05)  # resolving takes a while (a Secret, a credentials file)
        return target(str(tmp_path), poll_interval_s=3600)

    delivered = asyncio.Event()

    async def sleep(seconds: float) -> bool:  # the start spread: events come
        await delivered.wait()
        results.append(fleet.events.deliver(WEBHOOK, "lake", key))
        return True  # stopped before its first poll

    async def publish(_: Target, o: Observation) -> None:
        pass

    async def scenario() -> None:
        owner.fleet = fleet
        task = asyncio.create_task(
            fleet.watch(current, TableWatcher(0), sleep, publish, None, owner)
        )
        assert await fleet.resolved(5)  # counts the loop before it ran at all
        results.append(fleet.events.deliver(WEBHOOK, "lake", key))
        delivered.set()
        await task

    try:
        asyncio.run(scenario())
    finally:
        fleet.close()
    assert results == [EventResult.WOKE, EventResult.DUPLICATE] and owner._woken
    assert fleet.polls == 0 and owner.events is None
    assert fleet.events.deliver(WEBHOOK, "lake", key) is EventResult.UNKNOWN_TABLE


def test_an_event_alone_does_not_make_the_shown_status_differ() -> None:
    """A duplicate's poll finds nothing new: its lastEventTime alone must not make the table
    publish (at 1,000 events a second, one status write each)."""
    now = [1_000]
    hub = Events(Metrics(), clock_ms=lambda: now[0], monotonic=Clock())
    table = hub.table(lambda: None)
    table.follow(target("s3://lake/t"))
    table.begin()
    before = table.polled(obs(5))  # no event yet
    assert hub.deliver(WEBHOOK, "lake", "t/_delta_log/00000000000000000005.json") is (
        EventResult.WOKE
    )
    assert not table.shown_differs(before)  # not even the first: 50,000 tables' first events
    table.begin()
    shown = table.polled(obs(5))
    now[0] = 9_000
    hub.deliver(WEBHOOK, "lake", "t/_delta_log/00000000000000000005.json")
    assert table.status()["lastEventTime"] != shown.storage_events["lastEventTime"]
    assert not table.shown_differs(shown)
