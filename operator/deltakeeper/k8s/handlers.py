"""kopf handlers: DeltaTables arrive as watch events, each gets a watch loop (fleet.py) while
this replica acts; policies are kept in a kopf index.

One handler for every DeltaTable event (`kopf.on.event`), not a kopf daemon per table: a
daemon brings kopf's per-object machinery (a task, a finalizer patch, copies of the body), which
took about 60 KiB a table, more than 10,000 tables can afford. The table set, its loops and its
status writes are tables.py's; the handlers only feed it. State lives in kopf's memo, and each
part gets what it uses from there explicitly.
"""

from __future__ import annotations

import asyncio
import contextvars
import functools
import logging
from typing import Any

import kopf

from deltakeeper.compaction.launcher import Limited
from deltakeeper.k8s import api, secrets
from deltakeeper.k8s.options import PEERING, SPARK_TEMPLATE, Options
from deltakeeper.k8s.spark_launcher import Lookup, SparkApplicationLauncher, default_template
from deltakeeper.k8s.tables import Tables
from deltakeeper.maintenance.operations.outcome import Compactor
from deltakeeper.resources.crd import GROUP, POLICIES, TABLES, VERSION
from deltakeeper.resources.manifests import select_policy
from deltakeeper.resources.status_fields import PolicyStatusField
from deltakeeper.runtime import credentials, metrics, queues, webhook
from deltakeeper.runtime.events import Events
from deltakeeper.runtime.fleet import Fleet
from deltakeeper.runtime.heap import HEAP
from deltakeeper.runtime.history import History

log = logging.getLogger("deltakeeper.operator")


class SharedMemo(kopf.Memo):
    """The operator's memo, which kopf gives each object as a shallow copy of its own (a dict
    of every key here, half a kilobyte per DeltaTable). The handlers only read the operator's
    state from it and keep nothing per object there, so every object gets this one."""

    def __copy__(self) -> SharedMemo:
        return self


@kopf.on.startup()
async def start(settings: kopf.OperatorSettings, memo: kopf.Memo, **_: Any) -> None:
    # `deltakeeper operator` passes its options in the memo; `kopf run` reads the environment.
    options: Options = memo.setdefault("options", Options())
    credentials.install_log_scrubbing()
    configure(settings, options)
    if logging.getLogger().getEffectiveLevel() > logging.DEBUG:
        # kopf logs each handler call ("Handler 'table_event' succeeded.") at INFO: a line for
        # every DeltaTable event, thousands a minute; its warnings and errors still show.
        logging.getLogger("kopf.objects").setLevel(logging.WARNING)
    memo.api = await asyncio.to_thread(api.api_client)
    await asyncio.to_thread(api.ensure_peering, memo.api, PEERING, options.namespaces)
    memo.secrets = secrets.Secrets(functools.partial(api.read_secret, memo.api))
    memo.metrics = metrics.Metrics()
    memo.fleet = Fleet(
        max_concurrent=options.max_concurrent,
        memory_budget=options.memory_budget,
        events=Events(memo.metrics),
    )
    # Queue sources are read by the replica with table loops only: the active one.
    memo.queues = queues.install(memo.fleet.events)
    launcher = functools.partial(_compactor, memo.api, options)
    memo.tables = Tables(memo.api, memo.secrets, memo.metrics, options, memo.fleet, launcher)
    memo.background = [
        asyncio.create_task(memo.fleet.heartbeat(heap=HEAP)),
        asyncio.create_task(memo.tables.follow_peering()),
        asyncio.create_task(memo.tables.registry.watch_stalls()),
    ]
    memo.history = None
    if options.history_uri:
        memo.history = History(options.history_uri, options.history_options)
        memo.tables.registry.history = memo.history
        memo.history_stop = asyncio.Event()
        memo.background.append(asyncio.create_task(memo.history.keep(memo.history_stop)))
    memo.server = metrics.serve(
        memo.metrics, options.metrics_port, options.metrics_bind_address, memo.fleet.healthy
    )
    log.info("metrics: %s, peering priority %d", metrics.url(memo.server), options.priority)
    memo.listener = None
    if options.events is not None:
        # Every replica listens; a standby has no loops, so its events are unknown tables
        # (counted, answered 200) and the active replica's resync polls catch up.
        memo.listener = webhook.Listener(memo.fleet.events, options.events)
        await memo.listener.start()


class NoDiffBase(kopf.DiffBaseStorage):
    """kopf's diff base for change handlers (on.create, on.update, ...), of which this operator
    has none: every handler here is an event handler, an index or a timer. kopf still builds
    one from every event it gets (a deep copy of the object, then another), and most of those
    events are the echoes of our own status writes, so it is skipped: the essence is empty and
    never changes. tests/unit/k8s/test_handlers.py checks that no change handler is registered."""

    def build(self, *, body: kopf.Body, extra_fields: Any = None) -> Any:
        return {}

    def fetch(self, *, body: kopf.Body) -> Any:
        return {}

    def store(self, *, body: kopf.Body, patch: kopf.Patch, essence: Any) -> None:
        pass


def configure(settings: kopf.OperatorSettings, options: Options) -> None:
    """kopf's settings for this operator."""
    settings.peering.name = PEERING
    settings.peering.priority = options.priority
    settings.peering.stealth = True
    # kopf turns handler log lines into Events from this level; ours are posted explicitly.
    settings.posting.level = logging.ERROR
    # No handler needs a finalizer; kopf removes this one, which earlier versions added.
    settings.persistence.finalizer = f"{GROUP}/finalizer"
    settings.persistence.progress_storage = kopf.AnnotationsProgressStorage(prefix=GROUP)
    settings.persistence.diffbase_storage = NoDiffBase()
    settings.watching.server_timeout = 300
    # The first listing stays one response (kopf's default). Paged, kopf handles a page's
    # objects before it asks for the next, and gives up, stopping the operator, when the next
    # page's continue token has expired (410 after the API server's 5-minute compaction): at
    # 50,000 DeltaTables it did, 30,500 objects in.
    settings.watching.chunk_size = None
    # The namespaces are named and the CRDs exist before the operator starts: kopf need not
    # list and watch every namespace and CRD, which would take cluster-wide rights.
    settings.scanning.disabled = True


def _compactor(api_client: Any, options: Options, lookup: Lookup) -> Compactor:
    """SparkApplications for tables with compaction enabled, at most --max-compaction-jobs at
    once; the daemon never waits for one."""
    required = options.spark_application != SPARK_TEMPLATE  # named explicitly
    template = default_template(options.spark_application, required)
    launcher = SparkApplicationLauncher(api_client, template, lookup)
    limited = Limited(launcher, options.max_compaction_jobs, options.compaction_cores)
    return Compactor(limited, wait=False, retry_ms=options.compaction_retry_ms)


@kopf.on.cleanup()
async def stop(memo: kopf.Memo, **_: Any) -> None:
    memo.fleet.begin_stop()
    for task in memo.background:
        task.cancel()
    # The loops end first: a listener that stops takes its source down, which wakes every
    # table it still indexes for a poll at once (at 50,000 tables, minutes of polls to stop).
    await memo.tables.stop()
    if getattr(memo, "listener", None) is not None:
        await memo.listener.stop()
    memo.server.shutdown()
    if getattr(memo, "queues", None) is not None:
        await memo.queues.close()
    await asyncio.to_thread(memo.fleet.close)
    if memo.history is not None:  # what the last polls and maintenance did, too
        await asyncio.to_thread(memo.history.flush)


@kopf.index(GROUP, VERSION, POLICIES)  # type: ignore[arg-type]
def policies(namespace: str, body: kopf.Body, **_: Any) -> dict[str, Any]:
    return {namespace: api.policy_resource(body)}


@kopf.on.event(GROUP, VERSION, TABLES)  # type: ignore[arg-type]
async def table_event(
    type: str | None,
    body: kopf.Body,
    namespace: str,
    name: str,
    memo: kopf.Memo,
    policies: kopf.Index[str, Any],
    **_: Any,
) -> None:
    tables: Tables = memo.tables
    tables.policies = policies
    if tables.context is None:
        tables.context = contextvars.copy_context()
    if type == "DELETED":
        tables.remove((namespace, name))
    else:
        tables.upsert(body)


@kopf.timer(GROUP, VERSION, POLICIES, interval=30.0, initial_delay=1.0)  # type: ignore[arg-type]
def policy_status(
    namespace: str,
    name: str,
    meta: kopf.Meta,
    status: kopf.Status,
    patch: kopf.Patch,
    memo: kopf.Memo,
    policies: kopf.Index[str, Any],
    **_: Any,
) -> None:
    """How many tables a policy governs (`kubectl get dmp` shows it), and its generation."""
    local = list(policies.get(namespace, []))
    governed = sum(
        1
        for (ns, _), entry in list(memo.tables.entries.items())
        if ns == namespace
        if (chosen := select_policy(entry.resource, local)[0]) is not None and chosen.name == name
    )
    generation = meta.get("generation")
    tables, observed = str(PolicyStatusField.TABLES), str(PolicyStatusField.OBSERVED_GENERATION)
    if status.get(tables) != governed or status.get(observed) != generation:
        patch.status[tables] = governed
        patch.status[observed] = generation
