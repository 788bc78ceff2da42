"""kopf handlers: DeltaTables arrive as watch events, each gets a watch loop (fleet.py) while
this replica acts; policies are kept in a kopf index.

One handler for every DeltaTable event (`kopf.on.event`), not a kopf daemon per table: a
daemon brings kopf's per-object machinery (a task, a finalizer patch, copies of the body), which
took about 60 KiB a table, more than 10,000 tables can afford. The loops run while this replica
acts by kopf's peering rule (peering.py, checked every few seconds); while another replica acts
they stop, and this one exports nothing about the tables. Each loop publishes to the status
subresource and as Kubernetes Events. Deleting a DeltaTable stops its loop and drops its
metrics; the table's data is never touched.
"""

from __future__ import annotations

import asyncio
import contextvars
import functools
import logging
import os
import random
import time
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

import kopf

from deltakeeper.k8s import api, peering, secrets
from deltakeeper.resources.manifests import select_policy
from deltakeeper.runtime import credentials, metrics, status
from deltakeeper.runtime.fleet import Fleet, now_ms
from deltakeeper.runtime.registry import Entry, Key, Registry
from deltakeeper.runtime.targets import SecretUnreadable, resolve, secret_name
from deltakeeper.runtime.watcher import Event, Observation, TableWatcher, Target

log = logging.getLogger("deltakeeper.operator")
PEERING = "deltakeeper"
PEERING_CHECK_S = 3.0
WRITE_BACKOFF_S = 10.0  # after a status write failed


@dataclass
class Options:
    """Set by `deltakeeper operator`; from the environment under `kopf run -m deltakeeper.k8s`."""

    metrics_port: int = int(os.environ.get("DELTAKEEPER_METRICS_PORT", metrics.DEFAULT_PORT))
    metrics_bind_address: str = field(
        default_factory=lambda: (
            os.environ.get("DELTAKEEPER_METRICS_BIND_ADDRESS") or metrics.DEFAULT_BIND_ADDRESS
        )
    )
    max_concurrent: int = int(os.environ.get("DELTAKEEPER_MAX_CONCURRENT", "2"))
    # kopf pauses every replica that sees a peer of higher or equal priority, so each replica
    # draws its own: the highest acts, the others wait until it is gone.
    priority: int = field(default_factory=lambda: random.randint(1, 2**30))
    # Empty: cluster-wide.
    namespaces: list[str] = field(
        default_factory=lambda: [
            n for n in os.environ.get("DELTAKEEPER_NAMESPACE", "").split(",") if n
        ]
    )


@dataclass(kw_only=True)
class TableEntry(Entry):
    """A DeltaTable as the last watch event showed it, and its loop while this replica acts."""

    ref: kopf.Body  # what Events name: apiVersion, kind, namespace, name, uid
    last_maintenance: Any = None  # the status's, so a new loop keeps the schedules


class Tables:
    """The DeltaTables of watch events in the runtime's registry, looping while this replica
    acts; the Sink that writes their status subresource and posts Kubernetes Events."""

    def __init__(self, memo: kopf.Memo) -> None:
        self.memo = memo
        self.registry: Registry[TableEntry] = Registry(memo.metrics, self, self.target, log)
        self.registry.publishing = False  # until peering says this replica acts
        self.policies: Any = {}  # kopf's live index of policies, by namespace
        self.written: dict[Key, tuple[dict[str, Any], int]] = {}
        self.writes_failing = False
        self.writes_resume = 0.0  # time.monotonic() before which no status is written
        self.events_failing = False
        # kopf.event needs context variables kopf sets only while it handles an object: loops
        # started outside a handler (on a peering change) run in a copy of a handler's context.
        self.context: contextvars.Context | None = None

    @property
    def entries(self) -> dict[Key, TableEntry]:
        return self.registry.entries

    @property
    def acting(self) -> bool:
        return self.registry.publishing

    # -- fed by watch events --------------------------------------------------------------------
    def upsert(self, body: kopf.Body) -> None:
        meta = body.get("metadata") or {}
        key = (meta.get("namespace") or "default", meta["name"])
        entry = self.entries.get(key)
        last = (body.get("status") or {}).get("lastMaintenance")
        if entry is not None and entry.ref.metadata.uid == meta.get("uid"):
            entry.last_maintenance = last
            if (entry.resource.generation, entry.resource.labels) != (
                int(meta.get("generation") or 1),
                dict(meta.get("labels") or {}),
            ):
                self.registry.change(key, api.table_resource(body))  # at the next poll
            return
        if entry is not None:  # re-created under the same name
            self.remove(key)
        ref: Any = {k: body.get(k) for k in ("apiVersion", "kind")}
        ref["metadata"] = {k: meta.get(k) for k in ("namespace", "name", "uid")}
        resource = api.table_resource(body)
        self.registry.add(key, TableEntry(resource, ref=kopf.Body(ref), last_maintenance=last))
        if self.acting:
            self._start(key)

    def remove(self, key: Key) -> None:
        self.registry.remove(key)

    # -- the loops --------------------------------------------------------------------------------
    def _start(self, key: Key) -> None:
        entry = self.entries[key]
        watcher = TableWatcher(
            now_ms(), status.last_maintenance({"lastMaintenance": entry.last_maintenance})
        )
        context = self.context.copy() if self.context is not None else None
        self.registry.start(key, self.memo.fleet, watcher, context)

    async def target(self, key: Key, entry: TableEntry) -> Target:
        local = list(self.policies.get(key[0], []))
        ref = secret_name(entry.resource)
        secret: Any = None
        if ref:
            try:
                secret = await self.memo.secrets.get(key[0], ref)
            except SecretUnreadable as e:
                secret = e  # resolve() turns it into the table's problem

        def read(namespace: str, name: str) -> Any:
            if isinstance(secret, SecretUnreadable):
                raise secret
            return secret

        duplicates = self.registry.duplicates(key)
        inputs = (entry.resource, secret, duplicates, *local)
        return entry.target(inputs, lambda: resolve(entry.resource, local, read, duplicates))

    def set_acting(self, acting: bool) -> None:
        if acting == self.acting:
            return
        self.registry.publishing = acting
        if acting:
            log.info("acting for %d tables (no peer outranks this replica)", len(self.entries))
            for key in self.entries:
                self._start(key)
            return
        log.info("pausing: another replica acts; %d tables left to it", len(self.entries))
        for key in self.entries:
            # Two replicas must not both export a table; statuses are written afresh later.
            self.registry.stop_loop(key)
        self.written.clear()

    async def follow_peering(self, every_s: float = PEERING_CHECK_S) -> None:
        options: Options = self.memo.options
        failing = False
        while True:
            try:
                found = await asyncio.to_thread(
                    peering.read, self.memo.api, PEERING, options.namespaces
                )
                self.set_acting(peering.acting(found, options.priority, datetime.now(UTC)))
                failing = False
            except Exception as e:  # the API server is away: nobody can take over meanwhile
                if not failing:  # said once, not every 3 s
                    log.warning(
                        "cannot read the peering objects (%s); still %s",
                        type(e).__name__,
                        "acting" if self.acting else "paused",
                    )
                failing = True
            await asyncio.sleep(every_s)

    async def stop(self) -> None:
        await self.registry.stop()

    async def publish(self, target: Target, obs: Observation) -> None:
        await self.registry.publish(target, obs)

    # -- the Sink ---------------------------------------------------------------------------------
    async def write_status(self, entry: TableEntry, target: Target, obs: Observation) -> bool:
        """Written now or at a later poll (the API server away or refusing: maintenance goes
        on); False only when the DeltaTable is gone."""
        key = target.key
        now = now_ms()
        old, at = self.written.get(key, (None, 0))
        new = status.build(target, obs, old, now)
        if not status.worth_writing(old, new, now, at) or time.monotonic() < self.writes_resume:
            return True
        there = await self._write_status(target, new)
        if there:
            self.written[key] = (new, now)
        return there is not False

    async def _write_status(self, target: Target, new: dict[str, Any]) -> bool | None:
        """True: written; False: the DeltaTable is gone; None: not now."""
        try:
            there = await asyncio.to_thread(
                api.write_status, self.memo.api, target.namespace, target.name, new
            )
        except Exception as e:  # API server away or refusing: said once, not per table
            # Every table would wait out the same deadline: no writes for a while.
            self.writes_resume = time.monotonic() + WRITE_BACKOFF_S
            if not self.writes_failing:
                log.warning(
                    "cannot write DeltaTable status (%s); maintenance goes on, statuses are "
                    "written when the API server answers again",
                    api.short_error(e),
                )
            self.writes_failing = True
            return None
        if self.writes_failing:
            log.info("DeltaTable status writes work again")
            self.writes_failing = False
        return there

    def post_event(self, entry: TableEntry, event: Event) -> None:
        """A Kubernetes Event, queued to kopf's poster; it is also in the log, so one that
        cannot be queued is not worth failing the poll for."""
        try:
            kopf.event(
                entry.ref, type=event.type, reason=event.reason, message=event.message[:1000]
            )
            self.events_failing = False
        except Exception as e:
            if not self.events_failing:
                log.warning("cannot post Kubernetes Events (%s); see the log", type(e).__name__)
            self.events_failing = True

    def forget(self, key: Key) -> None:
        self.written.pop(key, None)


@kopf.on.startup()
async def start(settings: kopf.OperatorSettings, memo: kopf.Memo, **_: Any) -> None:
    # `deltakeeper operator` passes its options in the memo; `kopf run` reads the environment.
    options: Options = memo.setdefault("options", Options())
    credentials.install_log_scrubbing()
    settings.peering.name = PEERING
    settings.peering.priority = options.priority
    settings.peering.stealth = True
    # kopf turns handler log lines into Events from this level; ours are posted explicitly.
    settings.posting.level = logging.ERROR
    # No handler needs a finalizer; kopf removes this one, which earlier versions added.
    settings.persistence.finalizer = "deltakeeper.io/finalizer"
    settings.persistence.progress_storage = kopf.AnnotationsProgressStorage(prefix="deltakeeper.io")
    settings.persistence.diffbase_storage = kopf.AnnotationsDiffBaseStorage(
        prefix="deltakeeper.io", key="last-handled-configuration"
    )
    settings.watching.server_timeout = 300
    # The namespaces are named and the CRDs exist before the operator starts: kopf need not
    # list and watch every namespace and CRD, which would take cluster-wide rights.
    settings.scanning.disabled = True
    if logging.getLogger().getEffectiveLevel() > logging.DEBUG:
        # kopf logs each handler call ("Handler 'table_event' succeeded.") at INFO: a line for
        # every DeltaTable event, thousands a minute; its warnings and errors still show.
        logging.getLogger("kopf.objects").setLevel(logging.WARNING)
    memo.api = await asyncio.to_thread(api.api_client)
    await asyncio.to_thread(api.ensure_peering, memo.api, PEERING, options.namespaces)
    memo.secrets = secrets.Secrets(functools.partial(api.read_secret, memo.api))
    memo.metrics = metrics.Metrics()
    memo.tables = Tables(memo)
    memo.fleet = Fleet(memo.metrics, memo.tables.publish, max_concurrent=options.max_concurrent)
    memo.background = [
        asyncio.create_task(memo.fleet.heartbeat()),
        asyncio.create_task(memo.tables.follow_peering()),
    ]
    memo.server = metrics.serve(
        memo.metrics, options.metrics_port, options.metrics_bind_address, memo.fleet.healthy
    )
    log.info("metrics: %s, peering priority %d", metrics.url(memo.server), options.priority)


@kopf.on.cleanup()
async def stop(memo: kopf.Memo, **_: Any) -> None:
    for task in memo.background:
        task.cancel()
    memo.server.shutdown()
    await memo.tables.stop()
    await asyncio.to_thread(memo.fleet.close)


@kopf.index(api.GROUP, api.VERSION, api.POLICIES)  # type: ignore[arg-type]
def policies(namespace: str, body: kopf.Body, **_: Any) -> dict[str, Any]:
    return {namespace: api.policy_resource(body)}


@kopf.on.event(api.GROUP, api.VERSION, api.TABLES)  # type: ignore[arg-type]
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


@kopf.timer(api.GROUP, api.VERSION, api.POLICIES, interval=30.0, initial_delay=1.0)  # type: ignore[arg-type]
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
    if status.get("tables") != governed or status.get("observedGeneration") != generation:
        patch.status["tables"] = governed
        patch.status["observedGeneration"] = generation
