"""kopf's settings as the operator sets them (k8s/handlers.configure)."""

from __future__ import annotations

import asyncio

import kopf

from deltakeeper.k8s import handlers
from deltakeeper.k8s.options import PEERING, Options


def test_the_first_listing_is_one_response_and_peering_is_ours():
    settings = kopf.OperatorSettings()
    settings.watching.chunk_size = 500
    handlers.configure(settings, Options(priority=7))
    # Paged, kopf stops the operator when a page's continue token expires while it handles
    # the page before (it did at 50,000 DeltaTables): one response, as kopf's default.
    assert settings.watching.chunk_size is None
    assert (settings.peering.name, settings.peering.priority) == (PEERING, 7)
    assert settings.peering.stealth and settings.scanning.disabled


class _Step:
    """A part of the memo that notes in `done` when it was stopped."""

    def __init__(self, name: str, done: list[str]) -> None:
        self.name, self.done = name, done

    async def stop(self) -> None:
        self.done.append(self.name)

    def shutdown(self) -> None:
        self.done.append(self.name)

    def close(self) -> None:
        self.done.append(self.name)

    def begin_stop(self) -> None:
        self.done.append(f"{self.name} told")


def test_the_tables_loops_stop_before_the_listener_takes_its_source_down():
    """A listener that stops marks the webhook source down, which wakes every table it still
    indexes for a poll at once: a 5,000-table operator spent 27 s polling on its way out.
    Running maintenance is told first, so it ends at its next safe point while the rest stop."""
    done: list[str] = []
    memo = kopf.Memo()
    memo.background, memo.queues, memo.history = [], None, None
    for name in ("tables", "listener", "server", "fleet"):
        setattr(memo, name, _Step(name, done))
    asyncio.run(handlers.stop(memo=memo))
    assert done == ["fleet told", "tables", "listener", "server", "fleet"]


def test_every_object_shares_the_operators_memo():
    """kopf gives each object a shallow copy of the operator's memo: a dict of every key, half
    a kilobyte per DeltaTable. The operator's is shared instead, as kopf's own inventory
    recalls it."""
    from kopf._core.reactor.inventory import ResourceMemories

    memo = handlers.SharedMemo(options=Options())
    memo.tables = object()
    memories = ResourceMemories()
    bodies = [{"metadata": {"namespace": "ns", "name": f"t{i}", "uid": str(i)}} for i in (1, 2)]
    recalled = [asyncio.run(memories.recall(b, memobase=memo)).memo for b in bodies]
    assert recalled[0] is memo and recalled[1] is memo
    assert recalled[1].tables is memo.tables


def test_no_change_handler_is_registered_so_kopf_keeps_no_diff_base():
    """configure() gives kopf an empty diff base (NoDiffBase): an on.create/on.update/on.resume
    handler added here would never see a change, so there must be none."""
    from deltakeeper.k8s import lake_handlers  # noqa: F401 (registers the DeltaLake handlers)

    registry = kopf.get_default_registry()
    assert registry._changing.get_all_handlers() == []
    names = {h.id for h in registry._watching.get_all_handlers()}
    assert {"table_event", "lake_event"} <= names
    settings = kopf.OperatorSettings()
    handlers.configure(settings, Options())
    storage = settings.persistence.diffbase_storage
    body = kopf.Body({"metadata": {"name": "t"}, "spec": {"uri": "file:///lake/t"}})
    assert storage.build(body=body) == storage.fetch(body=body) == {}
