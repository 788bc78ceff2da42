"""The operator's DeltaLakes: each is scanned for tables every scanInterval while this replica
acts, and each table found gets a DeltaTable, made and kept by server-side apply.

The DeltaTables are owned by their DeltaLake (ownerReference), so deleting the lake lets the
cluster's garbage collector delete them; their data is never touched. A lake's DeltaTables are
the ones it controls by ownerReference: a user's DeltaTable that only carries the lake's label
is not counted, marked or applied. Each applied DeltaTable carries the digest of what was
applied (an annotation), so a scan, after a restart too, applies only what differs. A
DeltaTable whose table a scan no longer finds is kept, with the condition `TableFound=False`: a
table gone from a scan may be a move or a mistake, and deleting a DeltaTable is never what a
scan implies. The DeltaTables themselves are maintained by tables.py like any other.

A lake whose tableTemplate has `events` hears of its new tables from that source too, while
this replica acts: a commit in the log of a table it has no DeltaTable for has that one log
listed (the event is not believed) and, if it is a table the scan would report, its DeltaTable
is applied at once, as the next scan would have, and its first poll starts when it arrives.
"""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import json
import logging
import time
from collections.abc import Callable, Mapping
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Any, TypeVar

import kopf

from deltakeeper.delta.discover import ROOT, is_table, reportable
from deltakeeper.delta.errors import DeltaError
from deltakeeper.delta.storage import open_storage
from deltakeeper.k8s import api, secrets
from deltakeeper.k8s.tables import ClusterTable, Tables
from deltakeeper.resources.conditions import ConditionStatus, ConditionType, EventType, Reason
from deltakeeper.resources.crd import LAKES
from deltakeeper.resources.lake import (
    APPLIED_ANNOTATION,
    LakeResource,
    parse_lake,
    table_manifest,
)
from deltakeeper.resources.manifests import ManifestError
from deltakeeper.resources.status_fields import LakeStatusField
from deltakeeper.runtime import model
from deltakeeper.runtime.conditions import table_found
from deltakeeper.runtime.credentials import SCRUBBER
from deltakeeper.runtime.discovery import LakeScan, LakeScanner, ScanResult, lake_status
from deltakeeper.runtime.metrics import Metrics
from deltakeeper.runtime.model import Event, Problem
from deltakeeper.runtime.status import conditions_status
from deltakeeper.runtime.targets import resolve, secret_name

log = logging.getLogger("deltakeeper.operator")
Key = tuple[str, str]
IDLE_CHECK_S = 3.0  # how often a lake not scanned (another replica acts) looks again
RETRY_S = 30.0  # after a failed scan, the next is this soon (or scanInterval, if sooner)
# Requests in flight while applying: 10,000 new tables one by one take minutes.
APPLY_THREADS = 4
LAKE_THREADS = 2  # scans and status writes of all lakes
T = TypeVar("T")
EVENT_TABLES = 10  # more tables appearing at once than this make one Event, not one each
MAX_HEARD = 1024  # new-table paths waiting for their check, per lake; more events are dropped
ARRIVAL_S = 10.0  # how long an applied DeltaTable is waited for, to start its first poll now


@dataclass
class ClusterLake:
    """A DeltaLake as its last watch event showed it, and what its scans did."""

    ref: kopf.Body  # apiVersion, kind, namespace, name, uid: for Events and ownerReferences
    generation: int
    resource: LakeResource | None
    problem: str = ""  # why the spec cannot be used
    scanner: LakeScanner | None = None
    status: dict[str, Any] = field(default_factory=dict)  # as last written
    failed: str = ""  # why the last scan failed ("": it did not)
    wake: asyncio.Event = field(default_factory=asyncio.Event)
    task: asyncio.Task[None] | None = None
    heard: set[str] = field(default_factory=set)  # new tables an event named, being checked
    unlisten: Callable[[], None] | None = None  # stops its new-table events

    @property
    def uid(self) -> str:
        return str(self.ref["metadata"]["uid"])

    @property
    def owner(self) -> dict[str, Any]:
        return {
            "apiVersion": self.ref["apiVersion"],
            "kind": self.ref["kind"],
            "name": self.ref["metadata"]["name"],
            "uid": self.uid,
            "controller": True,
        }


class Lakes:
    """The DeltaLakes of watch events, each with its scan loop."""

    def __init__(
        self, api_client: Any, secret_cache: secrets.Secrets, metrics: Metrics, tables: Tables
    ) -> None:
        """`tables`: the operator's DeltaTables, where the lakes' DeltaTables are watched and
        whose peering state says whether to scan."""
        self.api, self.secrets = api_client, secret_cache
        self.metrics, self.tables = metrics, tables
        self.entries: dict[Key, ClusterLake] = {}
        # Scans, applies and lake status writes have threads of their own: behind the table
        # status writes in asyncio's default pool (10,000 at a start) a scan waited minutes.
        self._pool = ThreadPoolExecutor(LAKE_THREADS, thread_name_prefix="lake")

    async def _run(self, fn: Callable[..., T], *args: Any) -> T:
        return await asyncio.get_running_loop().run_in_executor(self._pool, fn, *args)

    # -- fed by watch events --------------------------------------------------------------------
    def upsert(self, body: kopf.Body) -> None:
        meta = body.get("metadata") or {}
        key = (meta.get("namespace") or "default", meta["name"])
        generation = int(meta.get("generation") or 1)
        entry = self.entries.get(key)
        if entry is not None and entry.ref["metadata"]["uid"] == meta.get("uid"):
            if entry.generation != generation:  # the spec changed: scan and apply now
                entry.generation = generation
                entry.resource, entry.problem = _parse(body)
                entry.scanner = None
                self._listen(key, entry)
                entry.wake.set()
            return
        if entry is not None:  # re-created under the same name
            self.remove(key)
        ref: Any = {k: body.get(k) for k in ("apiVersion", "kind")}
        ref["metadata"] = {k: meta.get(k) for k in ("namespace", "name", "uid")}
        resource, problem = _parse(body)
        entry = ClusterLake(kopf.Body(ref), generation, resource, problem)
        entry.status = dict(body.get("status") or {})
        self.entries[key] = entry
        self._listen(key, entry)
        # Started inside a kopf handler: the task's context lets kopf.event post Events.
        entry.task = asyncio.create_task(self._loop(key, entry))

    def remove(self, key: Key) -> None:
        entry = self.entries.pop(key, None)
        if entry is not None and entry.task is not None:
            entry.task.cancel()
        if entry is not None and entry.unlisten is not None:
            entry.unlisten()
        self.metrics.forget_lake(*key)

    async def stop(self) -> None:
        tasks = [e.task for e in self.entries.values() if e.task is not None]
        for task in tasks:
            task.cancel()
        for task in tasks:
            with contextlib.suppress(asyncio.CancelledError):
                await task
        self._pool.shutdown(wait=False, cancel_futures=True)

    # -- new tables by storage events -------------------------------------------------------------
    def _listen(self, key: Key, entry: ClusterLake) -> None:
        """Hear of the lake's new tables from its template's event source, if it has one."""
        if entry.unlisten is not None:
            entry.unlisten()
            entry.unlisten = None
        source = entry.resource.events_source if entry.resource is not None else None
        if source is not None and entry.resource is not None:
            events = self.tables.fleet.events
            entry.unlisten = events.lake(
                source, entry.resource.uri, lambda path: self._heard(key, entry, path)
            )

    def _heard(self, key: Key, entry: ClusterLake, path: str) -> bool:
        """An event names a commit in the log of a table at `path` that is not watched: check
        it (in a thread) if this replica acts and a scan would report it; else False (a
        standby counts it as an unknown table, as its tables' events)."""
        lake = entry.resource
        if lake is None or not self.tables.acting:
            return False
        if not reportable(
            path, include=lake.include, exclude=lake.exclude, max_depth=lake.max_depth
        ):
            return False
        watched = (key[0], lake.table_name(path)) in self.tables.entries
        if not watched and path not in entry.heard and len(entry.heard) < MAX_HEARD:
            entry.heard.add(path)
            asyncio.get_running_loop().create_task(self._check(key, entry, lake, path))
        return True

    async def _check(self, key: Key, entry: ClusterLake, lake: LakeResource, path: str) -> None:
        try:
            options = await self._storage_options(lake)
            if isinstance(options, Problem):
                return  # the scan says why in the lake's status
            found = await self._run(_is_table, lake.uri, options, path)
            if not found or self.entries.get(key) is not entry:
                return
            name = lake.table_name(path)
            self.tables.set_condition((key[0], name), table_found(lake.name, path, True))
            await self._run(self._apply, entry, lake, (path,), {})
            log.info("DeltaLake %s/%s: table %s appeared (a storage event)", *key, path)
            if entry.scanner is not None and entry.scanner.known is not None:
                entry.scanner.known = tuple(sorted({*entry.scanner.known, path}))
            await self._poke_when_watched((key[0], name))
        except Exception as e:  # the API server away, say: the next scan applies it
            log.warning(
                "DeltaLake %s/%s: new table %s not applied (%s)", *key, path, api.short_error(e)
            )
        finally:
            entry.heard.discard(path)

    async def _poke_when_watched(self, key: Key) -> None:
        """Once the watch brings the new DeltaTable, its first poll now, not after the jitter
        of a start."""
        deadline = time.monotonic() + ARRIVAL_S
        while time.monotonic() < deadline:
            table = self.tables.entries.get(key)
            if table is not None and table.loop is not None:
                table.loop.poke()
                return
            await asyncio.sleep(0.05)

    # -- the loop ----------------------------------------------------------------------------------
    async def _loop(self, key: Key, entry: ClusterLake) -> None:
        while True:
            while not self.tables.acting:
                await asyncio.sleep(IDLE_CHECK_S)
            entry.wake.clear()
            try:
                ok = await self.scan(key, entry)
            except Exception:  # a bug must not end the lake's loop for good
                log.exception("DeltaLake %s/%s: the scan failed", *key)
                ok = False
            interval = entry.resource.scan_interval_s if entry.resource else RETRY_S
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(
                    entry.wake.wait(), interval if ok else min(interval, RETRY_S)
                )

    async def scan(self, key: Key, entry: ClusterLake) -> bool:
        """One scan: find the tables, apply their DeltaTables, mark the missing ones, write the
        lake's status. False when the lake could not be scanned."""
        lake = entry.resource
        now_ms = int(time.time() * 1000)
        if lake is None:
            scan = LakeScan(ScanResult.INVALID, now_ms, message=entry.problem)
        else:
            if entry.scanner is None:
                entry.scanner = LakeScanner(lake, self.metrics)
                entry.scanner.known = self._known(key, entry)  # no false news after a restart
            options = await self._storage_options(lake)
            if isinstance(options, Problem):
                scan = entry.scanner.failed(options.message, options.reason)
            else:
                scan = await self._run(entry.scanner.scan, options)
        missing: list[str] = []
        refused = None
        if scan.ok and lake is not None:
            applied = {name: t.applied for name, t in self._managed(key, entry).items()}
            try:
                await self._run(self._apply, entry, lake, scan.tables, applied)
            except Exception as e:  # the API server refusing or away: said in Ready
                refused = f"cannot create or update DeltaTables: {api.short_error(e)}"
                log.warning("DeltaLake %s/%s: %s", *key, refused)
            missing = self._mark(key, entry, lake, scan.tables)
        # the statuses of the tables polled here
        managed = {
            name: self.tables.last_written((key[0], name)) for name in self._managed(key, entry)
        }
        status = lake_status(scan, managed, entry.status, entry.generation)
        if scan.ok:  # a failed scan says nothing about which tables are there
            status[str(LakeStatusField.MISSING_TABLES)] = len(missing)
        if refused:
            ready = ConditionType.READY
            conditions = [
                model.Condition(ready, ConditionStatus.FALSE, Reason.APPLY_FAILED, refused),
                *(c for c in scan.conditions() if c.type is not ready),
            ]
            status[str(LakeStatusField.CONDITIONS)] = conditions_status(
                conditions, entry.status, entry.generation, now_ms
            )
        self._announce(entry, scan)
        await self._write(key, entry, status)
        return scan.ok

    async def _storage_options(self, lake: LakeResource) -> dict[str, Any] | Problem:
        """The lake's storage options with its Secret's credentials, resolved as a table's
        are, or why they cannot be had (SecretNotFound, ...; naming the Secret, no value)."""
        root = lake.root_table()
        _, read = await secrets.for_resolve(self.secrets, lake.namespace, secret_name(root))
        target = resolve(root, [], read)
        if target.problem is not None:
            message = target.problem.message.replace("table's", "lake's")
            return Problem(target.problem.reason, message)
        return dict(target.storage_options)

    def _apply(
        self,
        entry: ClusterLake,
        lake: LakeResource,
        paths: tuple[str, ...],
        applied: Mapping[str, str],
    ) -> None:
        """Apply the DeltaTable of each table whose manifest differs from the digest its
        DeltaTable carries in `applied` (name -> digest, as the watch shows them; a missing
        DeltaTable has none). Blocking: runs in a thread, a few requests at a time."""
        todo = []
        for path in paths:
            body = table_manifest(lake, path)
            body["metadata"]["ownerReferences"] = [entry.owner]
            digest = _digest(body)
            if applied.get(body["metadata"]["name"]) != digest:
                body["metadata"]["annotations"][APPLIED_ANNOTATION] = digest
                todo.append(body)
        with ThreadPoolExecutor(APPLY_THREADS) as pool:
            # raises the first failure, after the others ran
            list(pool.map(lambda body: api.apply_table(self.api, body), todo))

    def _managed(self, key: Key, entry: ClusterLake) -> dict[str, ClusterTable]:
        """The DeltaTables this lake controls (by ownerReference: a label anyone can set), as
        the watch shows them, by name."""
        return {
            name: table
            for (ns, name), table in list(self.tables.entries.items())
            if ns == key[0] and table.controller == entry.uid
        }

    def _known(self, key: Key, entry: ClusterLake) -> tuple[str, ...] | None:
        """The paths of the tables this lake manages already, from their DeltaTables."""
        assert entry.resource is not None  # only a lake with a usable spec is scanned
        prefix = entry.resource.uri.rstrip("/") + "/"
        uris = [str(t.resource.spec.get("uri", "")) for t in self._managed(key, entry).values()]
        paths = tuple(sorted(u[len(prefix) :] for u in uris if u.startswith(prefix)))
        return paths or None

    def _mark(
        self, key: Key, entry: ClusterLake, lake: LakeResource, paths: tuple[str, ...]
    ) -> list[str]:
        """TableFound on each managed DeltaTable; returns the names of those not found."""
        found = {lake.table_name(p): p for p in paths}
        tables = self.tables
        for name, path in found.items():
            tables.set_condition((key[0], name), table_found(lake.name, path, True))
        managed = self._managed(key, entry)
        missing = sorted(set(managed) - set(found))
        for name in missing:
            path = str(managed[name].resource.spec.get("uri", name))
            kept = "the DeltaTable is kept: delete it yourself if the table is gone for good"
            tables.set_condition((key[0], name), table_found(lake.name, path, False, kept))
        return missing

    def _announce(self, entry: ClusterLake, scan: LakeScan) -> None:
        events = scan.events()
        failed = "" if scan.ok else scan.message
        # Said when it started, not every retry. Compared as masked now: a secret learned
        # since (another resource's) can mask more of the same message than it did then.
        if failed and SCRUBBER.scrub(failed) == SCRUBBER.scrub(entry.failed):
            events = [e for e in events if e.reason is not Reason.SCAN_FAILED]
        entry.failed = failed
        for reason, paths, kind in (
            (Reason.TABLE_FOUND, scan.appeared, EventType.NORMAL),
            (Reason.TABLE_GONE, scan.disappeared, EventType.WARNING),
        ):
            if len(paths) > EVENT_TABLES:  # the first scan of a big lake: one Event, not 10,000
                events = [e for e in events if e.reason is not reason]
                shown = ", ".join(paths[:EVENT_TABLES])
                verb = "appeared" if reason is Reason.TABLE_FOUND else "disappeared"
                events.append(Event(kind, reason, f"{len(paths)} tables {verb}: {shown}, ..."))
        for event in events:
            try:
                kopf.event(
                    entry.ref, type=event.type, reason=event.reason, message=event.message[:1000]
                )
            except Exception as e:  # also in the log; not worth failing the scan for
                log.warning("cannot post a Kubernetes Event (%s)", type(e).__name__)

    async def _write(self, key: Key, entry: ClusterLake, status: dict[str, Any]) -> None:
        try:
            await self._run(api.write_status, self.api, *key, status, LAKES)
            entry.status = status
        except Exception as e:  # the API server away: the next scan writes it
            log.warning("DeltaLake %s/%s: cannot write status (%s)", *key, api.short_error(e))


def _is_table(uri: str, options: Mapping[str, Any], path: str) -> bool:
    """One listing of the log at `path` under `uri`: a commit or checkpoint in it?"""
    try:
        return is_table(open_storage(uri, dict(options)), "" if path == ROOT else path)
    except (DeltaError, OSError) as e:
        log.warning("cannot check %s/%s for a new table: %s", uri, path, type(e).__name__)
        return False


def _parse(body: Mapping[str, Any]) -> tuple[LakeResource | None, str]:
    try:
        return parse_lake(dict(body), "api"), ""
    except ManifestError as e:
        return None, SCRUBBER.scrub(str(e))


def _digest(body: Mapping[str, Any]) -> str:
    return hashlib.sha256(json.dumps(body, sort_keys=True).encode()).hexdigest()
