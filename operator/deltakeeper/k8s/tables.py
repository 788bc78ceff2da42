"""The operator's DeltaTables: each gets a watch loop (runtime/fleet.py) while this replica
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
import time
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

import kopf
import orjson

from deltakeeper.compaction.launcher import Adopting
from deltakeeper.k8s import api, peering, secrets
from deltakeeper.k8s.options import PEERING, Options
from deltakeeper.k8s.spark_launcher import Lookup, TableRef
from deltakeeper.maintenance.operations.outcome import Compactor
from deltakeeper.resources import crd
from deltakeeper.resources.status_fields import StatusField as F
from deltakeeper.runtime import status
from deltakeeper.runtime.fleet import Fleet, now_ms
from deltakeeper.runtime.metrics import Metrics
from deltakeeper.runtime.model import Condition, Event, Observation, Target
from deltakeeper.runtime.registry import Entry, Key, Registry
from deltakeeper.runtime.targets import resolve, secret_name, unchanged
from deltakeeper.runtime.watcher import TableWatcher

log = logging.getLogger("deltakeeper.operator")
PEERING_CHECK_S = 3.0
WRITE_BACKOFF_S = 10.0  # after a status write failed
# After writes work again, a write sent while the server hung may still land, late and older:
# for this long every poll writes its table's status again, so the newest lands last.
REWRITE_AFTER_OUTAGE_S = 60.0


@dataclass(kw_only=True)
class ClusterTable(Entry):
    """A DeltaTable as the last watch event showed it, and its loop while this replica acts."""

    uid: str  # with the key, what Events name (a kopf.Body of it is most of a kilobyte)
    # The status's lastMaintenance, so a new loop keeps the schedules; as JSON, as it is read
    # only when a loop starts (a parsed copy per table is a kilobyte or two). Not deflated:
    # zlib lets go of the GIL, and the event loop waits to get it back (see `written`).
    maintained: bytes = b"null"
    controller: str = ""  # the uid of its controlling owner (a DeltaLake), "" when none
    applied: str = ""  # the digest of what a DeltaLake last applied to it (its annotation)

    @property
    def last_maintenance(self) -> Any:
        return orjson.loads(self.maintained)


class Tables:
    """The DeltaTables of watch events in the runtime's registry, looping while this replica
    acts; the Sink that writes their status subresource and posts Kubernetes Events."""

    def __init__(
        self,
        api_client: Any,
        secret_cache: secrets.Secrets,
        metrics: Metrics,
        options: Options,
        fleet: Fleet,
        launcher: Callable[[Lookup], Compactor] | None = None,
    ) -> None:
        """`launcher`: makes the compactor of tables with compaction enabled, given how its
        jobs find their DeltaTable (None: no compaction)."""
        self.api, self.secrets = api_client, secret_cache
        self.options, self.fleet = options, fleet
        self.compactor = launcher(self.job_owner) if launcher is not None else None
        self.registry: Registry[ClusterTable] = Registry(metrics, self, self.target, log)
        self.registry.publishing = False  # until peering says this replica acts
        self.policies: Any = {}  # kopf's live index of policies, by namespace
        # The status last written (as JSON: held for every table, read at each publish; not
        # deflated, as zlib lets go of the GIL and the event loop waits to get it back behind
        # the poll threads: a fifth of its time under 1,000 events a second) and when, in ms.
        self.written: dict[Key, tuple[bytes, int]] = {}
        # Tables whose last status worth writing did not land (the API server away or
        # refusing): their next quiet poll writes it, not the hourly refresh.
        self.unwritten: set[Key] = set()
        self.writes_failing = False
        self.writes_resume = 0.0  # time.monotonic() before which no status is written
        self.rewrite_until = 0.0  # time.monotonic() before which no write is taken as final
        self.events_failing = False
        # A condition another part says about a table (a DeltaLake: TableFound), written with
        # the watcher's: a status merge patch replaces the whole list of conditions.
        self.extra: dict[Key, Condition] = {}
        # kopf.event needs context variables kopf sets only while it handles an object: loops
        # started outside a handler (on a peering change) run in a copy of a handler's context,
        # and the stall watch's Events are posted in one.
        self.context: contextvars.Context | None = None

    @property
    def entries(self) -> dict[Key, ClusterTable]:
        return self.registry.entries

    @property
    def acting(self) -> bool:
        return self.registry.publishing

    # -- fed by watch events --------------------------------------------------------------------
    def upsert(self, body: kopf.Body) -> None:
        meta = body.get("metadata") or {}
        key = (meta.get("namespace") or "default", meta["name"])
        entry = self.entries.get(key)
        last = _json((body.get("status") or {}).get(F.LAST_MAINTENANCE))
        controller, applied = api.controller_uid(meta), api.applied_digest(meta)
        if entry is not None and entry.uid == meta.get("uid"):
            entry.maintained = last
            entry.controller, entry.applied = controller, applied
            if (entry.resource.generation, entry.resource.labels) != (
                int(meta.get("generation") or 1),
                dict(meta.get("labels") or {}),
            ):
                self.registry.change(key, api.table_resource(body))  # at the next poll
            return
        if entry is not None:  # re-created under the same name
            self.remove(key)
        resource = api.table_resource(body)
        self.registry.add(
            key,
            ClusterTable(
                resource,
                uid=str(meta.get("uid") or ""),
                maintained=last,
                controller=controller,
                applied=applied,
            ),
        )
        if self.acting:
            self._start(key)

    def remove(self, key: Key) -> None:
        self.registry.remove(key)
        self.extra.pop(key, None)

    def set_condition(self, key: Key, condition: Condition) -> None:
        """Add `condition` to the table's status from its next poll on."""
        if self.extra.get(key) != condition:
            self.extra[key] = condition
            if key in self.written:  # written at time 0: that poll writes it
                self.written[key] = (self.written[key][0], 0)

    # -- the loops --------------------------------------------------------------------------------
    def _start(self, key: Key) -> None:
        entry = self.entries[key]
        watcher = TableWatcher(
            now_ms(),
            status.last_maintenance({F.LAST_MAINTENANCE: entry.last_maintenance}),
            self.compactor,
        )
        context = self.context.copy() if self.context is not None else None
        self.registry.start(key, self.fleet, watcher, context)

    def job_owner(self, key: Key) -> TableRef | None:
        """The DeltaTable a compaction job belongs to, as the last watch event showed it (no
        API call: the operator may watch DeltaTables without the right to get one)."""
        entry = self.entries.get(key)
        if entry is None:
            return None
        return TableRef(entry.uid, secret_name(entry.resource))

    async def target(self, key: Key, entry: ClusterTable) -> Target:
        local = list(self.policies.get(key[0], []))
        secret, read = await secrets.for_resolve(self.secrets, key[0], secret_name(entry.resource))
        duplicates = self.registry.duplicates(key)
        default_poll_ms = self.options.default_poll_interval_ms

        def make() -> Target:
            return resolve(entry.resource, local, read, duplicates, default_poll_ms)

        return entry.target((entry.resource, secret, duplicates, *local), make)

    def fresh(self, key: Key, entry: ClusterTable, target: Target) -> bool:
        """As `target` would resolve it, with the Secret as last read (a read past its TTL
        starts now, and a changed Secret makes the next check False)."""
        cached = entry.cached
        if cached is None or cached[1] is not target:
            return False
        secret = None
        name = secret_name(entry.resource)
        if name:
            known, secret = self.secrets.peek(key[0], name)
            if not known:
                return False
        local = list(self.policies.get(key[0], []))
        return unchanged(cached[0], (entry.resource, secret, self.registry.duplicates(key), *local))

    def quiet(self, entry: ClusterTable, target: Target, obs: Observation) -> bool:
        """No write: only `lastPoll` changed, and the refresh is not due (nor a rewrite after an
        outage, nor a condition another part added)."""
        old, at = self.written.get(target.key, (None, 0))
        if old is None or target.key in self.unwritten or time.monotonic() < self.rewrite_until:
            return False
        return now_ms() - at < status.refresh_ms(len(self.entries))

    def set_acting(self, acting: bool) -> None:
        if acting == self.acting:
            return
        self.registry.publishing = acting
        if acting:
            log.info("acting for %d tables (no peer outranks this replica)", len(self.entries))
            launcher = self.compactor.launcher if self.compactor is not None else None
            if isinstance(launcher, Adopting):  # jobs started while another replica acted
                launcher.forget()
            for key in self.entries:
                self._start(key)
            return
        log.info("pausing: another replica acts; %d tables left to it", len(self.entries))
        for key in self.entries:
            # Two replicas must not both export a table; statuses are written afresh later.
            self.registry.stop_loop(key)
        self.written.clear()
        self.unwritten.clear()

    async def follow_peering(self, every_s: float = PEERING_CHECK_S) -> None:
        failing = False
        while True:
            try:
                found = await asyncio.to_thread(
                    peering.read, self.api, PEERING, self.options.namespaces
                )
                acting = peering.acting(found, self.options.priority, datetime.now(UTC))
                self.set_acting(acting)
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

    # -- the Sink ---------------------------------------------------------------------------------
    async def write_status(self, entry: ClusterTable, target: Target, obs: Observation) -> bool:
        """Written now or at a later poll (the API server away or refusing: maintenance goes
        on); False only when the DeltaTable is gone."""
        key = target.key
        now = now_ms()
        raw, at = self.written.get(key, (b"null", 0))
        old = orjson.loads(raw)
        extra = self.extra.get(key)
        new = status.build(target, obs, old, now, [extra] if extra is not None else [])
        as_json = _json(new)
        new = orjson.loads(as_json)  # compared with `old` as the API server would hold it
        if not status.worth_writing(old, new, now, at, status.refresh_ms(len(self.entries))):
            return True
        there = None
        if time.monotonic() >= self.writes_resume:
            there = await self._write_status(target, new)
        if there is None:
            self.unwritten.add(key)
            return True
        self.unwritten.discard(key)
        if there and time.monotonic() >= self.rewrite_until:
            self.written[key] = (as_json, now)
        return there

    async def _write_status(self, target: Target, new: dict[str, Any]) -> bool | None:
        """True: written; False: the DeltaTable is gone; None: not now."""
        try:
            there = await asyncio.to_thread(
                api.write_status, self.api, target.namespace, target.name, new
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
            self.rewrite_until = time.monotonic() + REWRITE_AFTER_OUTAGE_S
            self.written.clear()
        return there

    def post_event(self, entry: ClusterTable, event: Event) -> None:
        """A Kubernetes Event, queued to kopf's poster; it is also in the log, so one that
        cannot be queued is not worth failing the poll for. Queued in a copy of a handler's
        context: the stall watch posts from a task started outside any (see `context`)."""
        post = functools.partial(
            kopf.event,
            _event_ref(entry),
            type=event.type,
            reason=event.reason,
            message=event.message[:1000],
        )
        try:
            if self.context is not None:
                self.context.copy().run(post)
            else:
                post()
            self.events_failing = False
        except Exception as e:
            if not self.events_failing:
                log.warning("cannot post Kubernetes Events (%s); see the log", type(e).__name__)
            self.events_failing = True

    def forget(self, key: Key) -> None:
        self.written.pop(key, None)
        self.unwritten.discard(key)

    def last_written(self, key: Key) -> dict[str, Any] | None:
        """The status last written for a table polled here, None when none was."""
        raw = self.written.get(key)
        return orjson.loads(raw[0]) if raw is not None else None


def _event_ref(entry: ClusterTable) -> Any:
    """What a Kubernetes Event about the table names (a mapping is all kopf.event reads)."""
    meta = {"namespace": entry.resource.namespace, "name": entry.resource.name, "uid": entry.uid}
    return {"apiVersion": crd.API_VERSION, "kind": "DeltaTable", "metadata": meta}


def _json(value: Any) -> bytes:
    """`value` as JSON to hold: in a bytes object of its own size (orjson's output keeps its
    whole write buffer, 4 KiB or more, however short the text)."""
    return bytes(memoryview(orjson.dumps(value, option=orjson.OPT_NON_STR_KEYS)))
