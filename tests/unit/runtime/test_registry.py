"""runtime/registry.py: the tables a daemon watches, and which of them name the same storage."""

from __future__ import annotations

import asyncio
import dataclasses
import logging
from pathlib import Path

from deltakeeper.resources.conditions import ConditionStatus, ConditionType, Reason
from deltakeeper.resources.manifests import TableResource
from deltakeeper.runtime.metrics import Metrics
from deltakeeper.runtime.model import Condition, Event, Observation, Target
from deltakeeper.runtime.poller import Settled
from deltakeeper.runtime.registry import Entry, Key, Registry, Watched, same_table


class NoSink:
    async def write_status(self, entry: Entry, target: Target, obs: Observation) -> bool:
        return True

    def post_event(self, entry: Entry, event: Event) -> None:
        pass

    def forget(self, key: Key) -> None:
        pass


async def no_resolve(key: Key, entry: Entry) -> Target:
    raise AssertionError("not resolved here")


def registry() -> Registry[Entry]:
    return Registry(Metrics(), NoSink(), no_resolve, logging.getLogger("test"))


def table(namespace: str, name: str, uri: str) -> TableResource:
    return TableResource(namespace, name, {}, 1, {"uri": uri})


def add(r: Registry[Entry], namespace: str, name: str, uri: str) -> Key:
    r.add((namespace, name), Entry(table(namespace, name, uri)))
    return (namespace, name)


def test_every_spelling_of_a_uri_names_one_table() -> None:
    for uri in ("/lake/t", "/lake/t/", "file:/lake/t", "file:///lake/t", "file:///lake/t/"):
        assert same_table(uri) == "/lake/t", uri
    assert same_table("s3://lake/t/") == "s3://lake/t"
    assert same_table("/") == "/"
    assert same_table("s3://lake/t") != same_table("s3://lake/u")


def test_local_paths_compare_as_their_real_folder(tmp_path: Path) -> None:
    """Issue 49, section 2, item 7: `/x//t0` and `/x/a/../t0` were other tables than `/x/t0`."""
    (tmp_path / "t0").mkdir()
    (tmp_path / "a").mkdir()
    (tmp_path / "link").symlink_to(tmp_path / "t0")
    real = same_table(str(tmp_path / "t0"))
    for uri in (
        f"{tmp_path}//t0",
        f"{tmp_path}/a/../t0",
        f"{tmp_path}/./t0/",
        f"file://{tmp_path}/link",
        f"file://{tmp_path}/t%30",
    ):
        assert same_table(uri) == real, uri
    r = registry()
    a = add(r, "lake", "a", f"{tmp_path}/t0")
    add(r, "lake", "b", f"{tmp_path}//t0")
    add(r, "lake", "c", f"file:{tmp_path}/a/../t0")
    assert r.duplicates(a) == ("lake/b", "lake/c")


def test_tables_naming_one_uri_name_each_other() -> None:
    r = registry()
    a = add(r, "lake", "a", "file:///lake/t")
    assert r.duplicates(a) == ()
    b = add(r, "lake", "b", "file:/lake/t/")
    c = add(r, "other", "c", "/lake/t")
    add(r, "lake", "d", "/lake/elsewhere")
    assert r.duplicates(a) == ("lake/b", "other/c")
    assert r.duplicates(b) == ("lake/a", "other/c")
    assert r.duplicates(c) == ("lake/a", "lake/b")
    assert r.duplicates(("lake", "d")) == ()


def test_duplicates_follow_changes_and_removals() -> None:
    r = registry()
    a = add(r, "lake", "a", "s3://lake/t")
    b = add(r, "lake", "b", "s3://lake/t")
    seen = r.duplicates(a)
    assert seen == ("lake/b",)
    add(r, "lake", "x", "s3://lake/x")  # another table: a's answer is the same object
    assert r.duplicates(a) is seen
    r.change(b, table("lake", "b", "s3://lake/u"))  # b now names another table
    assert r.duplicates(a) == () and r.duplicates(b) == ()
    r.change(b, table("lake", "b", "s3://lake/t/"))
    assert r.duplicates(a) == ("lake/b",) and r.duplicates(b) == ("lake/a",)
    r.remove(b)
    assert r.duplicates(a) == () and r.duplicates(b) == ()
    assert r.entries.keys() == {a, ("lake", "x")}


def test_a_table_without_uri_names_no_other() -> None:
    r = registry()
    a = add(r, "lake", "a", "")
    b = add(r, "lake", "b", "")
    assert r.duplicates(a) == r.duplicates(b) == ()


class RecordingSink(NoSink):
    def __init__(self) -> None:
        self.statuses: list[Observation] = []
        self.events: list[Event] = []

    async def write_status(self, entry: Entry, target: Target, obs: Observation) -> bool:
        self.statuses.append(obs)
        return True

    def post_event(self, entry: Entry, event: Event) -> None:
        self.events.append(event)


def degraded(obs: Observation) -> tuple[str, str]:
    (c,) = [c for c in obs.conditions if c.type is ConditionType.DEGRADED]
    return c.status, c.reason


def test_a_table_whose_polls_stop_is_degraded_within_two_intervals_until_it_polls() -> None:
    sink, now = RecordingSink(), [1_000_000]
    metrics = Metrics()
    r = Registry(metrics, sink, no_resolve, logging.getLogger("test"), clock=lambda: now[0])
    key = add(r, "ns", "t", "/t")
    target = Target("ns", "t", "/t", poll_interval_s=30)
    fine = Condition(ConditionType.DEGRADED, ConditionStatus.FALSE, Reason.AS_EXPECTED, "ok")
    ready = Condition(ConditionType.READY, ConditionStatus.TRUE, Reason.WATCHING, "ok")
    obs = Observation(now[0], [ready, fine])

    async def scenario() -> None:
        await r.publish(target, obs)
        for _ in range(5):  # polls every 30 s: never stalled
            now[0] += 30_000
            assert await r.check_stalls() == []
            await r.publish(target, obs)
        now[0] += 59_999
        assert await r.check_stalls() == []
        now[0] += 1
        assert await r.check_stalls() == [key]  # 60 s: two intervals without a poll
        assert await r.check_stalls() == []  # shown once
        now[0] += 600_000
        assert await r.check_stalls() == []  # still stalled: not shown again
        await r.publish(target, obs)  # polls again
        now[0] += 60_000
        assert await r.check_stalls() == [key]  # and can stall again

    asyncio.run(scenario())
    shown = sink.statuses[6]
    assert degraded(shown) == ("True", "PollsStalled")
    assert "no poll has finished for 60 s (poll interval 30 s)" in shown.conditions[1].message
    assert shown.conditions[0] == ready  # the others as of the last poll
    assert [degraded(o) for o in sink.statuses[5:9]] == [
        ("False", "AsExpected"),
        ("True", "PollsStalled"),
        ("False", "AsExpected"),
        ("True", "PollsStalled"),
    ]
    assert [e.reason for e in sink.events] == ["PollsStalled", "PollsStalled"]
    assert (
        metrics.registry.get_sample_value(
            "deltakeeper_table_condition",
            {"namespace": "ns", "table": "t", "condition": "Degraded"},
        )
        == 1.0
    )


def test_a_short_interval_stalls_after_the_floor_not_two_intervals() -> None:
    sink, now = RecordingSink(), [0]
    r = Registry(Metrics(), sink, no_resolve, logging.getLogger("test"), clock=lambda: now[0])
    key = add(r, "ns", "t", "/t")
    target = Target("ns", "t", "/t", poll_interval_s=1)
    fine = Condition(ConditionType.DEGRADED, ConditionStatus.FALSE, Reason.AS_EXPECTED, "ok")

    async def scenario() -> list[list[Key]]:
        await r.publish(target, Observation(0, [fine]))
        found = []
        for at in (2_000, 29_999, 30_000):
            now[0] = at
            found.append(await r.check_stalls())
        return found

    assert asyncio.run(scenario()) == [[], [], [key]]


def test_a_removed_table_is_never_shown_stalled() -> None:
    sink, now = RecordingSink(), [0]
    r = Registry(Metrics(), sink, no_resolve, logging.getLogger("test"), clock=lambda: now[0])
    key = add(r, "ns", "t", "/t")
    target = Target("ns", "t", "/t", poll_interval_s=1)

    async def scenario() -> None:
        await r.publish(target, Observation(0, []))
        r.remove(key)
        now[0] += 100_000
        assert await r.check_stalls() == []

    asyncio.run(scenario())
    assert len(sink.statuses) == 1


class QuietSink(RecordingSink):
    """A sink for which every quiet poll may be settled off the table's loop."""

    def fresh(self, key: Key, entry: Entry, target: Target) -> bool:
        return True

    def quiet(self, entry: Entry, target: Target, obs: Observation) -> bool:
        return True


def test_a_settled_quiet_poll_keeps_the_published_series_and_adds_its_requests() -> None:
    sink, metrics = QuietSink(), Metrics()
    r = Registry(metrics, sink, no_resolve, logging.getLogger("test"), clock=lambda: 0)
    key = add(r, "ns", "t", "/t")
    target = Target("ns", "t", "/t", poll_interval_s=30)
    ready = Condition(ConditionType.READY, ConditionStatus.TRUE, Reason.WATCHING, "ok")
    published = Observation(0, [ready], counts={"version": 3, "logFiles": 4})
    published.requests = {"list": 1}
    labels = {"namespace": "ns", "table": "t"}

    def value(name: str, **extra: str) -> float | None:
        return metrics.registry.get_sample_value(name, labels | extra)

    table = Watched(r, key, r.entries[key])
    asyncio.run(table.publish(target, published))
    # A quiet poll shares the published poll's counts and conditions (TableWatcher._quiet).
    quiet = dataclasses.replace(published, requests={"list": 1}, quiet=True)
    assert table.settle(target, quiet) is Settled.SHOWN
    assert value("deltakeeper_table_version") == 3.0
    assert value("deltakeeper_table_log_files") == 4.0
    assert value("deltakeeper_table_condition", condition="Ready") == 1.0
    assert value("deltakeeper_storage_requests_total", operation="list") == 2.0
    # Counts of their own (not the published poll's objects) are recorded.
    moved = dataclasses.replace(quiet, counts={"version": 3, "logFiles": 5})
    assert table.settle(target, moved) is Settled.SHOWN
    assert value("deltakeeper_table_log_files") == 5.0
    assert value("deltakeeper_storage_requests_total", operation="list") == 3.0
