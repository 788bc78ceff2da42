"""kopf handlers: one watch loop (a kopf daemon) per DeltaTable, policies kept in an index.

kopf gives each DeltaTable a daemon task while the table exists and this replica leads its
peering (a second replica pauses, so two never act on one table). Each daemon runs the shared
watch loop (fleet.py) and publishes to the status subresource and as Kubernetes Events.
Deleting a DeltaTable stops its loop and drops its metrics; the table's data is never touched.
"""

from __future__ import annotations

import asyncio
import logging
import os
import random
from dataclasses import dataclass, field
from typing import Any

import kopf

from deltakeeper import credentials, metrics, status
from deltakeeper.fleet import Fleet, now_ms
from deltakeeper.k8s import api
from deltakeeper.resources.manifests import select_policy
from deltakeeper.targets import resolve
from deltakeeper.watcher import Observation, TableWatcher, Target

log = logging.getLogger("deltakeeper.operator")
PEERING = "deltakeeper"


@dataclass
class Options:
    """Set by `deltakeeper operator`; from the environment under `kopf run -m deltakeeper.k8s`."""

    metrics_port: int = int(os.environ.get("DELTAKEEPER_METRICS_PORT", metrics.DEFAULT_PORT))
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


OPTIONS = Options()


@kopf.on.startup()
async def start(settings: kopf.OperatorSettings, memo: kopf.Memo, **_: Any) -> None:
    credentials.install_log_scrubbing()
    settings.peering.name = PEERING
    settings.peering.priority = OPTIONS.priority
    settings.peering.stealth = True
    # kopf turns handler log lines into Events from this level; ours are posted explicitly.
    settings.posting.level = logging.ERROR
    settings.persistence.finalizer = "deltakeeper.io/finalizer"
    settings.persistence.progress_storage = kopf.AnnotationsProgressStorage(prefix="deltakeeper.io")
    settings.persistence.diffbase_storage = kopf.AnnotationsDiffBaseStorage(
        prefix="deltakeeper.io", key="last-handled-configuration"
    )
    settings.watching.server_timeout = 300
    memo.api = await asyncio.to_thread(api.api_client)
    memo.bodies = {}
    memo.tables = {}  # (namespace, name) -> TableResource, kept by the tables' daemons
    await asyncio.to_thread(api.ensure_peering, memo.api, PEERING, OPTIONS.namespaces)
    memo.secrets = api.Secrets(memo.api)
    memo.metrics = metrics.Metrics()
    memo.fleet = Fleet(memo.metrics, _publisher(memo), max_concurrent=OPTIONS.max_concurrent)
    memo.heartbeat = asyncio.create_task(memo.fleet.heartbeat())
    memo.server = metrics.serve(memo.metrics, OPTIONS.metrics_port, healthy=memo.fleet.healthy)
    port = memo.server.server_address[1]
    log.info("metrics on :%d/metrics, peering priority %d", port, OPTIONS.priority)


@kopf.on.cleanup()
async def stop(memo: kopf.Memo, **_: Any) -> None:
    memo.heartbeat.cancel()
    memo.server.shutdown()
    await asyncio.to_thread(memo.fleet.close)


@kopf.index(api.GROUP, api.VERSION, api.POLICIES)  # type: ignore[arg-type]
def policies(namespace: str, body: kopf.Body, **_: Any) -> dict[str, Any]:
    return {namespace: api.policy_resource(body)}


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
    """How many tables a policy governs (`kubectl get dmp` shows it), and its generation.

    Tables come from the daemons' own registry, not a kopf index: kopf's start-up readiness
    for indexed resources is quadratic in their count (10,000 tables never got going)."""
    local = list(policies.get(namespace, []))
    governed = sum(
        1
        for (ns, _), table in list(memo.tables.items())
        if ns == namespace
        if (chosen := select_policy(table, local)[0]) is not None and chosen.name == name
    )
    generation = meta.get("generation")
    if status.get("tables") != governed or status.get("observedGeneration") != generation:
        patch.status["tables"] = governed
        patch.status["observedGeneration"] = generation


@kopf.daemon(api.GROUP, api.VERSION, api.TABLES, cancellation_timeout=30.0)  # type: ignore[arg-type]
async def watch_table(
    body: kopf.Body,
    name: str,
    namespace: str,
    stopped: kopf.DaemonStopped,
    memo: kopf.Memo,
    policies: kopf.Index[str, Any],
    **_: Any,
) -> None:
    cache: dict[str, Any] = {}

    def current() -> Target:
        # `body` is live: kopf updates it as the resource changes, so a new spec or policy
        # takes effect at the next poll. Resolving again only when an input changed keeps a
        # quiet table's poll cheap (and lets the watcher take its quiet path).
        local = list(policies.get(namespace, []))
        ref = ((body.get("spec") or {}).get("storage") or {}).get("secretRef") or {}
        secret = memo.secrets.read(namespace, ref["name"]) if ref.get("name") else None
        key = (
            body.get("metadata", {}).get("resourceVersion"),
            tuple((p.name, p.generation) for p in local),
            id(secret),
        )
        if cache.get("key") != key:
            table = api.table_resource(body)
            memo.tables[(namespace, name)] = table
            cache["target"] = resolve(table, local, memo.secrets.read)
            cache["key"] = key
        return cache["target"]

    memo.bodies[(namespace, name)] = body  # events name the object by its uid
    memo.written.pop((namespace, name), None)  # a re-created table starts with no status
    previous = body.get("status") or {}
    watcher = TableWatcher(now_ms(), status.last_maintenance(previous))

    async def sleep(seconds: float) -> bool:
        await stopped.wait(seconds)
        return bool(stopped)

    try:
        await memo.fleet.watch(current, watcher, sleep)
    finally:
        # Deleted, or this replica paused for a peer that now acts: either way its series
        # would be stale here (two replicas must not both export a table).
        memo.metrics.forget(namespace, name)
        memo.bodies.pop((namespace, name), None)
        memo.tables.pop((namespace, name), None)


def _publisher(memo: kopf.Memo) -> Any:
    written: dict[tuple[str, str], tuple[dict[str, Any], int]] = {}
    memo.written = written

    async def publish(target: Target, obs: Observation) -> None:
        key = target.key
        now = now_ms()
        old, at = written.get(key, (None, 0))
        new = status.build(target, obs, old, now)
        if status.worth_writing(old, new, now, at):
            await asyncio.to_thread(api.write_status, memo.api, target.namespace, target.name, new)
            written[key] = (new, now)
        ref = memo.bodies.get(key)
        for event in obs.events if ref is not None else ():
            kopf.event(ref, type=event.type, reason=event.reason, message=event.message[:1000])
            level = logging.WARNING if event.type == "Warning" else logging.INFO
            log.log(
                level, "%s/%s: %s: %s", target.namespace, target.name, event.reason, event.message
            )

    return publish
