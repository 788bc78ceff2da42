"""k8s/tables.py: which watch events start, change or stop a table's loop, no API server.

Loops run only while this replica acts (peering.py), and a status write or an Event that fails
does not stop a poll. The e2e layer runs the same against a real API server."""

from __future__ import annotations

import asyncio
import contextvars
import logging
from typing import Any

import kopf
import pytest
import urllib3
from kopf._core.engines import posting

from deltakeeper.k8s import api as k8s_api
from deltakeeper.k8s import tables as k8s_tables
from deltakeeper.k8s.options import Options
from deltakeeper.k8s.tables import Tables
from deltakeeper.resources.conditions import ConditionStatus
from deltakeeper.resources.manifests import PolicyResource
from deltakeeper.runtime.fleet import Loop
from deltakeeper.runtime.metrics import Metrics
from deltakeeper.runtime.model import Condition, Event, Observation, Target
from deltakeeper.runtime.targets import SecretUnreadable
from deltakeeper.runtime.watcher import TableWatcher


class Watching:
    """A fleet whose loops only sleep, recording which tables loop and with what target."""

    park_quiet = False  # its loops never park

    def __init__(self) -> None:
        self.looping: set[tuple[str, str]] = set()
        self.targets: list[Target] = []

    async def watch(
        self,
        current: Any,
        watcher: TableWatcher,
        sleep: Any,
        publish: Any,
        park: Any = None,
        owner: Any = None,
    ) -> None:
        target = await current()
        self.targets.append(target)
        self.looping.add(target.key)
        try:
            while not await sleep(0.01):
                self.targets.append(await current())
        finally:
            self.looping.discard(target.key)

    def give_up(self, task: Any) -> None:
        """Its loops never wait for a maintenance slot: nothing to give up."""


class Secrets:
    """What secrets.Secrets.get answers, set by the test."""

    def __init__(self) -> None:
        self.data: dict[tuple[str, str], Any] = {}

    async def get(self, namespace: str, name: str) -> Any:
        found = self.data.get((namespace, name))
        if isinstance(found, Exception):
            raise found
        return found


def body(
    name: str, generation: int = 1, uid: str = "u1", spec: Any = None, **status: Any
) -> kopf.Body:
    return kopf.Body(
        {
            "apiVersion": "deltakeeper.io/v1alpha1",
            "kind": "DeltaTable",
            "metadata": {"namespace": "ns", "name": name, "uid": uid, "generation": generation},
            "spec": spec or {"uri": f"file:///lake/{name}", "pollInterval": "10s"},
            "status": status,
        }
    )


def make() -> tuple[Tables, Watching, Metrics]:
    fleet, metrics = Watching(), Metrics()
    return Tables(None, Secrets(), metrics, Options(), fleet), fleet, metrics  # type: ignore[arg-type]


def test_loops_run_only_while_acting_and_metrics_go_when_paused() -> None:
    async def go() -> None:
        tables, fleet, m = make()
        tables.upsert(body("a"))
        await asyncio.sleep(0.05)
        assert fleet.looping == set()  # not acting yet: known, not polled
        tables.set_acting(True)
        tables.upsert(body("b"))
        await asyncio.sleep(0.05)
        assert fleet.looping == {("ns", "a"), ("ns", "b")}
        m.table("ns", "a", {"version": 3})
        tables.written[("ns", "a")] = (b"", 0)
        tables.set_acting(False)
        await asyncio.sleep(0.05)
        assert fleet.looping == set()
        assert (
            m.registry.get_sample_value(
                "deltakeeper_table_version", {"namespace": "ns", "table": "a"}
            )
            is None
        )
        assert tables.written == {}
        tables.set_acting(True)
        await asyncio.sleep(0.05)
        assert fleet.looping == {("ns", "a"), ("ns", "b")}
        await tables.stop()
        assert fleet.looping == set()

    asyncio.run(go())


def test_a_replica_that_resumes_acting_lists_the_jobs_to_adopt_afresh() -> None:
    """Another replica may have started jobs while this one paused: the listing adopt()
    shares is dropped, not used for up to ADOPT_LISTING_S."""
    from deltakeeper.compaction.launcher import Found
    from deltakeeper.maintenance.operations.outcome import Compactor

    class Listing:
        def __init__(self) -> None:
            self.forgotten = 0

        def start(self, request: Any) -> Any:
            raise AssertionError("no job is started here")

        def adopt(self, owner: Any, deadline_s: float, since_ms: int | None) -> Found | None:
            return None

        def forget(self) -> None:
            self.forgotten += 1

    launcher = Listing()

    async def go() -> None:
        fleet = Watching()
        tables = Tables(None, Secrets(), Metrics(), Options(), fleet, lambda _: Compactor(launcher))  # type: ignore[arg-type]
        tables.set_acting(True)
        tables.set_acting(False)
        assert launcher.forgotten == 1
        tables.set_acting(True)
        assert launcher.forgotten == 2
        await tables.stop()

    asyncio.run(go())


def test_a_change_keeps_the_loop_a_removal_stops_it_and_a_new_uid_restarts_it() -> None:
    async def go() -> None:
        tables, fleet, _ = make()
        tables.set_acting(True)
        tables.upsert(body("a"))
        await asyncio.sleep(0.05)
        first = tables.entries[("ns", "a")]
        resource = first.resource
        # A status-only event (our own write) changes nothing but the kept lastMaintenance.
        done = {"vacuum": {"time": "2027-01-15T07:00:00Z", "result": "done"}}
        tables.upsert(body("a", lastMaintenance=done))
        assert tables.entries[("ns", "a")].resource is resource
        assert tables.entries[("ns", "a")].last_maintenance == done
        # A new generation is a new resource, picked up by the next poll, same loop.
        loop = first.loop
        tables.upsert(body("a", generation=2))
        assert tables.entries[("ns", "a")].loop is loop
        await asyncio.sleep(0.05)
        assert fleet.targets[-1].generation == 2
        # Re-created under the same name (a new uid): a new loop, the old one stopped.
        tables.upsert(body("a", generation=1, uid="u2"))
        await asyncio.sleep(0.05)
        second = tables.entries[("ns", "a")]
        assert second is not first and second.loop is not loop
        assert loop is not None and loop.task is not None and loop.task.done()
        assert fleet.looping == {("ns", "a")}
        tables.remove(("ns", "a"))
        await asyncio.sleep(0.05)
        assert fleet.looping == set() and tables.entries == {}

    asyncio.run(go())


def test_a_target_is_resolved_again_only_when_its_resource_policy_or_secret_changes() -> None:
    async def go() -> None:
        tables, _, _ = make()
        secrets: Secrets = tables.secrets
        spec = {"uri": "s3://bucket/a", "storage": {"secretRef": {"name": "s3"}}}
        tables.upsert(body("a", spec=spec))
        entry = tables.entries[("ns", "a")]
        first = await tables.target(("ns", "a"), entry)
        assert first.problem is not None and first.problem.reason == "SecretNotFound"
        keys = {"AWS_ACCESS_KEY_ID": "id", "AWS_SECRET_ACCESS_KEY": "k1"}
        secrets.data[("ns", "s3")] = keys
        found = await tables.target(("ns", "a"), entry)
        assert found.problem is None and found.storage_options["aws_secret_access_key"] == "k1"
        assert await tables.target(("ns", "a"), entry) is found  # nothing changed: cached
        # Equal data in a new object (the cache gives the same object while unchanged).
        secrets.data[("ns", "s3")] = {**keys, "AWS_SECRET_ACCESS_KEY": "k2"}
        rotated = await tables.target(("ns", "a"), entry)
        assert rotated.storage_options["aws_secret_access_key"] == "k2"
        # Unreadable (forbidden, API server away with nothing read before): the table's
        # problem, not an exception that would end its loop.
        secrets.data[("ns", "s3")] = SecretUnreadable("HTTP 403 Forbidden")
        refused = await tables.target(("ns", "a"), entry)
        assert refused.problem is not None and refused.problem.reason == "SecretUnreadable"
        assert "403" in refused.problem.message
        # A policy arriving in the namespace is a new input.
        secrets.data[("ns", "s3")] = keys
        again = await tables.target(("ns", "a"), entry)
        assert again.poll_interval_s == 30 and again.policy_name is None
        policy = PolicyResource("ns", "p", {}, 1, {"pollInterval": "5s"}, selector={})
        tables.policies = {"ns": [policy]}
        governed = await tables.target(("ns", "a"), entry)
        assert governed.policy_name == "p" and governed.poll_interval_s == 5

    asyncio.run(go())


def test_tables_naming_one_uri_get_each_others_names_until_one_goes() -> None:
    async def go() -> None:
        tables, _, _ = make()
        tables.upsert(body("a", spec={"uri": "file:///lake/t"}))
        tables.upsert(body("b", uid="u2", spec={"uri": "file:/lake/t/"}))
        a, b = tables.entries[("ns", "a")], tables.entries[("ns", "b")]
        first = await tables.target(("ns", "a"), a)
        assert first.duplicates == ("ns/b",)
        assert (await tables.target(("ns", "b"), b)).duplicates == ("ns/a",)
        assert await tables.target(("ns", "a"), a) is first  # nothing changed: cached
        tables.remove(("ns", "b"))
        alone = await tables.target(("ns", "a"), a)
        assert alone is not first and alone.duplicates == ()
        # A new generation that moves a table onto another's URI names it too.
        tables.upsert(body("c", uid="u3", spec={"uri": "file:///lake/c"}))
        tables.upsert(body("c", generation=2, uid="u3", spec={"uri": "/lake/t"}))
        assert (await tables.target(("ns", "a"), a)).duplicates == ("ns/c",)

    asyncio.run(go())


def test_the_operators_default_poll_interval_is_for_tables_and_policies_that_set_none() -> None:
    async def go() -> None:
        tables, _, _ = make()
        tables.options.default_poll_interval_ms = 120_000
        tables.upsert(body("a", spec={"uri": "file:///lake/a"}))
        tables.upsert(body("b", uid="u2"))  # pollInterval: 10s
        a, b = tables.entries[("ns", "a")], tables.entries[("ns", "b")]
        assert (await tables.target(("ns", "a"), a)).poll_interval_s == 120
        assert (await tables.target(("ns", "b"), b)).poll_interval_s == 10
        tables.policies = {"ns": [PolicyResource("ns", "p", {}, 1, {"pollInterval": "5s"}, {})]}
        assert (await tables.target(("ns", "a"), a)).poll_interval_s == 5

    asyncio.run(go())


TIMED_OUT = urllib3.exceptions.ReadTimeoutError(None, "/status", "timed out")  # type: ignore[arg-type]


def _status_api(
    monkeypatch: pytest.MonkeyPatch, answer: list[Any]
) -> tuple[list[str], list[float]]:
    """Status writes that answer `answer[0]` (raised when an exception), noted by table name
    in the list returned, with the monotonic clock the list returned second sets."""
    calls: list[str] = []
    clock = [1000.0]

    def write_status(api: Any, namespace: str, name: str, new: Any) -> bool:
        calls.append(name)
        if isinstance(answer[0], Exception):
            raise answer[0]
        return bool(answer[0])

    monkeypatch.setattr(k8s_api, "write_status", write_status)
    monkeypatch.setattr(k8s_tables.time, "monotonic", lambda: clock[0])
    return calls, clock


def _one_table() -> tuple[Tables, Any, Target]:
    """An acting Tables with table "a", its loop stopped: polls are published by the test."""
    tables, _, _ = make()
    tables.set_acting(True)
    tables.upsert(body("a"))
    entry = tables.entries[("ns", "a")]
    assert entry.loop is not None
    entry.loop.stop()
    return tables, entry, Target("ns", "a", "file:///lake/a")


def test_status_writes_failing_do_not_stop_the_poll_and_are_retried(
    monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    answer: list[Any] = [TIMED_OUT]
    calls, clock = _status_api(monkeypatch, answer)
    caplog.set_level(logging.INFO, "deltakeeper.operator")

    async def go() -> None:
        tables, _, _ = make()
        tables.set_acting(True)
        tables.upsert(body("a"))
        tables.upsert(body("b"))
        for entry in tables.entries.values():
            assert entry.loop is not None
            entry.loop.stop()
        obs = Observation(
            0, counts={"version": 4}, conditions=[Condition("Ready", "True", "Watching", "")]
        )

        async def publish(name: str) -> None:
            await tables.registry.publish(Target("ns", name, f"file:///lake/{name}"), obs)

        await publish("a")  # the API server does not answer: no exception, nothing written
        assert calls == ["a"] and tables.written == {}
        await publish("b")  # for a while, no other table waits out the same deadline
        assert calls == ["a"]
        clock[0] += k8s_tables.WRITE_BACKOFF_S
        await publish("b")  # still away: tried again after the backoff
        assert calls == ["a", "b"]
        answer[0] = True  # back
        clock[0] += k8s_tables.WRITE_BACKOFF_S
        await publish("a")  # written, but a write that timed out may still land after it
        await publish("b")
        assert calls == ["a", "b", "a", "b"]
        assert tables.written == {}
        clock[0] += k8s_tables.REWRITE_AFTER_OUTAGE_S - 1
        await publish("a")  # so each poll writes again for a while, the newest landing last
        await publish("b")
        assert calls == ["a", "b", "a", "b", "a", "b"] and tables.written == {}
        clock[0] += 1
        await publish("a")  # then a write is final: the next quiet poll writes nothing
        await publish("a")
        assert calls == ["a", "b", "a", "b", "a", "b", "a"]
        assert set(tables.written) == {("ns", "a")}
        answer[0] = False  # deleted while nobody watched: dropped
        tables.written.clear()
        await publish("a")
        assert ("ns", "a") not in tables.entries

    asyncio.run(go())
    warnings = [r for r in caplog.records if "cannot write DeltaTable status" in r.getMessage()]
    assert len(warnings) == 1 and "ReadTimeoutError" in warnings[0].getMessage()
    assert "status writes work again" in caplog.text


def test_a_status_that_did_not_land_is_written_by_the_next_quiet_poll(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Not an hour later: a table parked right after a poll whose write failed is polled by
    the Poller, which writes only when `quiet` says so."""
    answer: list[Any] = [True]
    calls, clock = _status_api(monkeypatch, answer)

    async def go() -> None:
        tables, entry, target = _one_table()

        def seen(version: int) -> Observation:
            ready = [Condition("Ready", "True", "Watching", "")]
            return Observation(0, counts={"version": version}, conditions=ready)

        await tables.registry.publish(target, seen(4))
        assert calls == ["a"] and tables.quiet(entry, target, seen(4))
        answer[0] = TIMED_OUT
        await tables.registry.publish(target, seen(5))  # the API server away: not written
        assert calls == ["a", "a"] and not tables.quiet(entry, target, seen(5))
        await tables.registry.publish(target, seen(5))  # within the backoff: not even tried
        assert calls == ["a", "a"] and not tables.quiet(entry, target, seen(5))
        answer[0] = True
        clock[0] += k8s_tables.WRITE_BACKOFF_S
        await tables.registry.publish(target, seen(5))  # back: written (again for a while)
        assert calls == ["a", "a", "a"] and not tables.quiet(entry, target, seen(5))
        clock[0] += k8s_tables.REWRITE_AFTER_OUTAGE_S
        await tables.registry.publish(target, seen(5))  # final: quiet again
        assert calls == ["a", "a", "a", "a"] and tables.quiet(entry, target, seen(5))

    asyncio.run(go())


def test_a_quiet_tables_refresh_comes_less_often_in_a_big_fleet(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Each refresh is an API write and a watch event back: at most status.REFRESH_PER_S
    across the fleet, so here, with that at one table per two hours, every two hours."""
    calls, _ = _status_api(monkeypatch, [True])
    now = [0]
    monkeypatch.setattr(k8s_tables, "now_ms", lambda: now[0])
    monkeypatch.setattr(k8s_tables.status, "REFRESH_PER_S", 1 / 7200)

    async def go() -> None:
        tables, entry, target = _one_table()
        ready = [Condition("Ready", "True", "Watching", "")]
        obs = Observation(0, counts={"version": 1}, conditions=ready)
        await tables.registry.publish(target, obs)
        assert calls == ["a"]
        now[0] = 3_601_000  # an hour on: not due in this fleet
        assert tables.quiet(entry, target, obs)
        await tables.registry.publish(target, obs)
        assert calls == ["a"]
        now[0] = 7_200_000
        assert not tables.quiet(entry, target, obs)
        await tables.registry.publish(target, obs)
        assert calls == ["a", "a"]

    asyncio.run(go())


def test_an_event_that_cannot_be_posted_does_not_fail_the_poll(
    monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    monkeypatch.setattr(k8s_api, "write_status", lambda *_: True)
    caplog.set_level(logging.INFO, "deltakeeper.operator")

    async def go() -> None:
        tables, _, target = _one_table()
        events = [Event("Normal", "Checkpointed", "wrote the checkpoint at version 3")]
        obs = Observation(0, counts={"version": 3}, conditions=[], events=events)
        # Outside kopf's handlers kopf.event finds none of its context (no poster here).
        for _ in range(3):
            await tables.registry.publish(target, obs)
        assert ("ns", "a") in tables.written

    asyncio.run(go())
    warnings = [r for r in caplog.records if "cannot post Kubernetes Events" in r.getMessage()]
    assert len(warnings) == 1
    assert "a: Checkpointed: wrote the checkpoint at version 3" in caplog.text


def test_a_restarted_loop_waits_for_the_previous_one() -> None:
    async def go() -> list[str]:
        order: list[str] = []
        release = asyncio.Event()

        class Slow:
            async def watch(
                self,
                current: Any,
                watcher: Any,
                sleep: Any,
                publish: Any,
                park: Any,
                owner: Any = None,
            ) -> None:
                order.append("start")
                await release.wait()
                order.append("end")

        first, second = Loop(), Loop()
        first.start(Slow(), lambda: None, TableWatcher(0), None, "t")  # type: ignore[arg-type]
        await asyncio.sleep(0.01)
        second.start(Slow(), lambda: None, TableWatcher(0), None, "t", after=first.task)  # type: ignore[arg-type]
        await asyncio.sleep(0.01)
        assert order == ["start"]
        release.set()
        await asyncio.gather(first.task, second.task)  # type: ignore[arg-type]
        return order

    assert asyncio.run(go()) == ["start", "end", "start", "end"]


def test_a_condition_set_elsewhere_is_written_with_the_watchers_at_the_next_poll(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A DeltaLake's TableFound rides on the watcher's status write: a merge patch replaces
    the whole list of conditions, so a separate write would be undone by the next poll."""
    written: list[dict[str, Any]] = []

    def write_status(api: Any, namespace: str, name: str, new: Any) -> bool:
        written.append(new)
        return True

    monkeypatch.setattr(k8s_api, "write_status", write_status)

    async def go() -> None:
        tables, _, _ = make()
        tables.set_acting(True)
        tables.upsert(body("a"))
        loop = tables.entries[("ns", "a")].loop
        assert loop is not None
        loop.stop()
        obs = Observation(
            0, counts={"version": 4}, conditions=[Condition("Ready", "True", "Watching", "")]
        )
        target = Target("ns", "a", "file:///lake/a")
        await tables.registry.publish(target, obs)
        await tables.registry.publish(target, obs)  # nothing new: not written again
        assert [[c["type"] for c in w["conditions"]] for w in written] == [["Ready"]]
        gone = Condition("TableFound", ConditionStatus.FALSE, "NotFound", "not found")
        tables.set_condition(("ns", "a"), gone)
        tables.set_condition(("ns", "a"), gone)  # the same again: nothing more to write
        await tables.registry.publish(target, obs)
        await tables.registry.publish(target, obs)
        assert len(written) == 2
        found = {c["type"]: c for c in written[-1]["conditions"]}
        assert found["TableFound"]["status"] == "False" and found["Ready"]["status"] == "True"
        # The Ready condition kept its transition time: only TableFound is new.
        assert (
            found["Ready"]["lastTransitionTime"]
            == written[0]["conditions"][0]["lastTransitionTime"]
        )
        tables.remove(("ns", "a"))
        assert ("ns", "a") not in tables.extra

    asyncio.run(go())


def test_a_status_written_once_is_not_written_again_for_the_same_poll(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Any
) -> None:
    """The status last written is held as JSON; what a real poll publishes (health, retention,
    lastMaintenance, conditions) compares equal to it, so the same poll writes once."""
    import deltalake
    import pyarrow as pa

    deltalake.write_deltalake(str(tmp_path), pa.table({"a": [1, 2]}))
    sent: list[dict[str, Any]] = []
    monkeypatch.setattr(k8s_api, "write_status", lambda api, ns, name, new: sent.append(new) or 1)
    target = Target("ns", "a", f"file://{tmp_path}")
    now = k8s_tables.now_ms()
    ran = {"vacuum": {"time": "x", "timeMs": now - 60_000, "result": "done"}}
    obs = TableWatcher(now, last_maintenance=ran).observe(target, now)
    assert obs.health is not None and obs.last_maintenance and obs.retention

    async def go() -> None:
        tables, _, _ = make()
        tables.set_acting(True)
        tables.upsert(body("a", lastMaintenance={"vacuum": {"time": "2026-01-01T00:00:00Z"}}))
        entry = tables.entries[("ns", "a")]
        assert entry.last_maintenance == {"vacuum": {"time": "2026-01-01T00:00:00Z"}}
        assert entry.loop is not None
        entry.loop.stop()
        await tables.registry.publish(target, obs)
        await tables.registry.publish(target, obs)
        assert len(sent) == 1 and sent[0]["health"] == obs.health.status()  # type: ignore[union-attr]
        assert sent[0]["version"] == 0 and sent[0]["lastMaintenance"]

    asyncio.run(go())


def test_tables_with_equal_spec_objects_share_them() -> None:
    """A spec's storage or events object is most of a kilobyte a table parsed, and a store's or
    a lake's tables mostly have the same one."""
    storage = {"secretRef": {"name": "minio"}, "options": {"endpoint_url": "http://m:9000"}}
    tables, _, _ = make()
    for name, endpoint in (("a", "http://m:9000"), ("b", "http://m:9000"), ("c", "http://n:9000")):
        spec = {
            "uri": f"s3://lake/{name}",
            "storage": {**storage, "options": {"endpoint_url": endpoint}},
        }
        tables.upsert(body(name, spec=spec))
    a, b, c = (tables.entries[("ns", n)].resource.spec for n in "abc")
    assert a["storage"] is b["storage"] and a["storage"] == storage
    assert (
        c["storage"] is not a["storage"]
        and c["storage"]["options"]["endpoint_url"] == "http://n:9000"
    )
    assert (a["uri"], b["uri"]) == ("s3://lake/a", "s3://lake/b")


def test_an_event_posted_outside_any_handler_goes_through_a_handlers_context() -> None:
    """kopf's Event queue is in context variables it sets only while it handles an object;
    the stall watch posts from a task started at startup. Its PollsStalled Event once failed
    with LookupError there: it now goes through the context a table event saved."""

    async def run() -> list[Any]:
        queue: asyncio.Queue[Any] = asyncio.Queue()

        def a_handler() -> contextvars.Context:
            posting.event_queue_loop_var.set(asyncio.get_running_loop())
            posting.event_queue_var.set(queue)
            posting.settings_var.set(kopf.OperatorSettings())
            return contextvars.copy_context()

        tables, _, _ = make()
        tables.upsert(body("a"))
        stalled = Event("Warning", "PollsStalled", "no poll has finished for 30 s")
        outside = contextvars.Context()
        outside.run(tables.post_event, tables.entries[("ns", "a")], stalled)
        assert tables.events_failing and queue.empty()  # as it was
        tables.context = contextvars.Context().run(a_handler)
        outside.run(tables.post_event, tables.entries[("ns", "a")], stalled)
        assert not tables.events_failing
        return [queue.get_nowait() for _ in range(queue.qsize())]

    (posted,) = asyncio.run(run())
    assert (posted.type, posted.reason, posted.ref["name"]) == ("Warning", "PollsStalled", "a")


def test_an_event_names_the_deltatable_by_its_uid(monkeypatch: pytest.MonkeyPatch) -> None:
    posted: list[Any] = []
    monkeypatch.setattr(k8s_tables.kopf, "event", lambda ref, **kw: posted.append((ref, kw)))
    tables, _, _ = make()
    tables.upsert(body("a", uid="u-7"))
    tables.post_event(tables.entries[("ns", "a")], Event("Normal", "Checkpointed", "at 3"))
    ref, kw = posted[0]
    assert ref == {
        "apiVersion": "deltakeeper.io/v1alpha1",
        "kind": "DeltaTable",
        "metadata": {"namespace": "ns", "name": "a", "uid": "u-7"},
    }
    assert kw == {"type": "Normal", "reason": "Checkpointed", "message": "at 3"}
