"""Standalone mode: the operator's watch loop driven by manifests in a folder.

`deltakeeper run --manifests DIR` reads DeltaTable, DeltaMaintenancePolicy and Secret
manifests from DIR (re-read when a file changes), runs the same watcher, planner and executor
as the operator, serves the same metrics, and writes every table's status to a JSON file that
`deltakeeper status` prints. A malformed manifest is reported and skipped; the others run.

DeltaLake manifests are scanned every scanInterval; each table found is maintained as the
DeltaTable `resources.lake.table_manifest` describes (a DeltaTable manifest for the same URI
wins). A table that disappears is no longer polled but stays in the status file, marked
`discovery.present: false` with `TableFound=False`: nothing is deleted. It is polled again when
a scan finds it, and the status file remembers it as gone across a restart.
"""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import json
import logging
import os
import signal
import sys
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any, TextIO

from deltakeeper.maintenance.executor import Compactor
from deltakeeper.maintenance.policy import POLL_INTERVAL_MS
from deltakeeper.resources import manifests
from deltakeeper.resources.lake import LakeResource, table_manifest
from deltakeeper.resources.manifests import PolicyResource, TableResource
from deltakeeper.runtime import credentials, metrics, status
from deltakeeper.runtime.discovery import (
    TABLE_FOUND,
    LakeScan,
    LakeScanner,
    lake_status,
    table_found,
)
from deltakeeper.runtime.fleet import Fleet, now_ms
from deltakeeper.runtime.registry import Entry, Key, Registry, same_table
from deltakeeper.runtime.targets import resolve
from deltakeeper.runtime.watcher import Event, Observation, TableWatcher, Target

log = logging.getLogger("deltakeeper.standalone")
RELOAD_S = 2.0  # how often the folder is checked for changed manifests
STATUS_DIR = ".deltakeeper"
SPEC_DIGEST = "_specDigest"  # status file key; keys starting with _ are not shown


def status_file_for(manifests_dir: str | Path) -> Path:
    return Path(manifests_dir) / STATUS_DIR / "status.json"


@dataclass
class LakeEntry:
    """A DeltaLake manifest, its scanner, and the DeltaTables its scans found."""

    resource: LakeResource
    scanner: LakeScanner
    due: float = 0.0  # loop time of the next scan
    task: asyncio.Task[LakeScan] | None = None
    tables: dict[str, TableResource] = field(default_factory=dict)  # path -> table
    gone: set[str] = field(default_factory=set)  # paths the last good scan did not find
    status: dict[str, Any] = field(default_factory=dict)

    def table(self, path: str) -> TableResource:
        body = table_manifest(self.resource, path)
        source = f"DeltaLake {self.resource.namespace}/{self.resource.name}"
        parsed = manifests.parse(body, source)
        assert isinstance(parsed, TableResource)  # parse returns the kind it is given
        return parsed


@dataclass(kw_only=True)
class TableEntry(Entry):
    """A manifest's table; its watcher lives as long as the manifest (one loop per run)."""

    generation: int
    watcher: TableWatcher


class Standalone:
    """The tables of a folder's manifests in the runtime's registry; the Sink that keeps
    their statuses for the status file."""

    def __init__(
        self,
        folder: Path,
        status_path: Path,
        registry: metrics.Metrics,
        max_concurrent: int = 2,
        out: TextIO | None = None,
        clock: Callable[[], int] = now_ms,
        default_poll_ms: int = POLL_INTERVAL_MS,
        compactor: Compactor | None = None,
    ) -> None:
        self.folder = folder
        self.compactor = compactor  # how tables with compaction.enabled run their jobs
        self.status_path = status_path
        self.metrics = registry
        self.out = out or sys.stdout  # at run time: the CLI wraps it to mask secrets
        self.clock = clock
        self.default_poll_ms = default_poll_ms  # for tables whose spec and policy set none
        self.registry: Registry[TableEntry] = Registry(registry, self, self.target, log)
        self.fleet = Fleet(registry, self.registry.publish, max_concurrent, clock=clock)
        self.policies: list[PolicyResource] = []
        self.secrets: dict[tuple[str, str], Mapping[str, str]] = {}
        self.statuses: dict[str, dict[str, Any]] = _read_json(status_path).get("tables", {})
        self._signature: object = None
        self._good: dict[str, list[Any]] = {}  # file -> its last documents that loaded
        self.rejected: list[str] = []  # what the last reload refused, file and field named
        self._dirty = False
        self.lakes: dict[Key, LakeEntry] = {}
        self.lake_statuses: dict[str, dict[str, Any]] = _read_json(status_path).get("lakes", {})
        self._manifest_tables: dict[Key, TableResource] = {}
        self._origin: dict[Key, tuple[LakeEntry, str]] = {}  # lake tables: lake and path
        self._gone: set[Key] = set()  # lake tables the last good scan did not find: not polled

    @property
    def tables(self) -> dict[Key, TableEntry]:
        return self.registry.entries

    # -- manifests ----------------------------------------------------------------------------
    def reload(self) -> bool:
        """Re-read the folder if any manifest changed; True when it did."""
        signature = _signature(self.folder)
        if signature == self._signature:
            return False
        self._signature = signature
        loaded = manifests.load_dir(self.folder, self._good)
        self._good = loaded.good
        self.rejected = [credentials.SCRUBBER.scrub(str(e)) for e in loaded.errors]
        for message in self.rejected:
            log.error("%s", message)
        for path in loaded.kept:
            log.warning("%s: kept its last good version until the file is fixed", path)
        self._dirty = True
        self.policies = list(loaded.policies)
        self.secrets = dict(loaded.secrets)
        credentials.SCRUBBER.register(
            v for data in self.secrets.values() for v in credentials.secret_values(data)
        )
        self._manifest_tables = {(t.namespace, t.name): t for t in loaded.tables}
        self._sync_lakes(loaded.lakes)
        self._sync_tables()
        log.info(
            "manifests in %s: %d tables, %d policies, %d lakes, %d errors",
            self.folder,
            len(self._manifest_tables),
            len(self.policies),
            len(self.lakes),
            len(loaded.errors),
        )
        return True

    def _sync_tables(self) -> None:
        """Watch the manifests' tables and the lakes' tables that are there, no other; a lake's
        table that is gone keeps its status, unpolled."""
        wanted = dict(self._manifest_tables)
        was_gone = self._gone
        self._origin, self._gone = {}, set()
        uris = {same_table(str(t.spec.get("uri") or "")) for t in wanted.values()}
        for lake in self.lakes.values():
            for path, table in sorted(lake.tables.items()):
                key = (table.namespace, table.name)
                if key in wanted or same_table(str(table.spec["uri"])) in uris:
                    continue  # a DeltaTable manifest for it wins
                self._origin[key] = (lake, path)
                if path in lake.gone:
                    self._gone.add(key)
                else:
                    wanted[key] = table
        for key in [k for k in self.tables if k not in wanted]:
            self._drop(key)
        for key in was_gone - self._gone - wanted.keys():  # its lake removed, say
            self.forget(key)
        for key in self._gone:
            self._mark_gone(key)
        for key, resource in wanted.items():
            self._upsert(key, resource)

    def _mark_gone(self, key: Key) -> None:
        """The status a gone table keeps: the last poll's, `present: false`, TableFound=False."""
        lake, path = self._origin[key]
        old = self.statuses.setdefault(_name(key), {})
        conditions = [c for c in old.get("conditions") or [] if isinstance(c, dict)]
        marked = [c for c in conditions if c.get("type") == TABLE_FOUND]
        if (
            old.get("discovery") == _discovery(lake, path)
            and marked[-1:]
            and (marked[-1].get("status") == "False")
        ):
            return  # marked already
        kept = "no longer polled; its status is kept and nothing is deleted"
        found = table_found(_lake_name(lake.resource), path, False, kept)
        generation = int(old.get("observedGeneration") or 1)
        mark = status.conditions_status([found], old, generation, self.clock())
        old["conditions"] = [c for c in conditions if c.get("type") != TABLE_FOUND] + mark
        old["discovery"] = _discovery(lake, path)
        self._dirty = True

    def _gone_before(self, lake: LakeResource) -> set[str]:
        """The lake's tables the status file says were gone when it was written."""
        name = _lake_name(lake)
        return {
            str(where.get("path"))
            for s in self.statuses.values()
            if (where := s.get("discovery") or {}).get("lake") == name
            and where.get("present") is False
        }

    def _sync_lakes(self, lakes: Sequence[LakeResource]) -> None:
        wanted = {(lake.namespace, lake.name): lake for lake in lakes}
        for key in [k for k in self.lakes if k not in wanted]:
            old = self.lakes.pop(key)
            if old.task is not None:
                old.task.cancel()
            self.metrics.forget_lake(*key)
            self.lake_statuses.pop(_name(key), None)
            log.info("%s/%s: DeltaLake removed; its tables are no longer watched", *key)
        for key, lake in wanted.items():
            entry = self.lakes.get(key)
            if entry is None:
                scanner = LakeScanner(lake, self.metrics, self.clock)
                entry = self.lakes[key] = LakeEntry(lake, scanner)
                entry.gone = self._gone_before(lake)  # until a scan finds them again
                entry.tables = {path: entry.table(path) for path in entry.gone}
            elif entry.resource != lake:
                entry.resource = entry.scanner.lake = lake
                entry.due = 0.0  # scan again now, under the new spec
                entry.tables = {path: entry.table(path) for path in entry.tables}

    # -- lakes --------------------------------------------------------------------------------
    def scan_lakes(self, now: float) -> None:
        """Start the scans that are due (each in a thread: listing blocks)."""
        for entry in self.lakes.values():
            if entry.task is None and now >= entry.due:
                entry.due = now + entry.resource.scan_interval_s
                entry.task = asyncio.create_task(self._scan(entry))

    async def _scan(self, entry: LakeEntry) -> LakeScan:
        try:
            target = resolve(entry.resource.root_table(), [], self._secret)
            if target.problem is not None:
                scan = entry.scanner.failed(target.problem.message, target.problem.reason)
            else:
                scan = await asyncio.to_thread(entry.scanner.scan, target.storage_options)
            self._scanned(entry, scan)
            return scan
        finally:
            entry.task = None

    def _scanned(self, entry: LakeEntry, scan: LakeScan) -> None:
        lake = entry.resource
        if scan.ok:
            for path in scan.appeared:
                entry.gone.discard(path)
                if path not in entry.tables:
                    entry.tables[path] = entry.table(path)
            entry.gone.update(scan.disappeared)
        for event in scan.events():
            level = logging.WARNING if event.type == "Warning" else logging.INFO
            log.log(level, "%s/%s: %s: %s", lake.namespace, lake.name, event.reason, event.message)
        self._sync_tables()
        managed = sum(1 for origin, _ in self._origin.values() if origin is entry)
        name = _lake_name(lake)
        previous = self.lake_statuses.get(name)
        self.lake_statuses[name] = lake_status(scan, managed, previous, lake.generation)
        if scan.ok:  # a failed scan says nothing about which tables are there
            missing = sum(1 for k in self._gone if self._origin[k][0] is entry)
            self.lake_statuses[name]["missingTables"] = missing
        for key, (origin, path) in self._origin.items():
            if origin is entry and _name(key) in self.statuses:
                self.statuses[_name(key)]["discovery"] = _discovery(entry, path)
        self._dirty = True

    async def scan_all(self) -> None:
        """Scan every lake now and wait for the scans (`--once`)."""
        for entry in self.lakes.values():
            entry.due = 0.0
        self.scan_lakes(0.0)
        tasks = [e.task for e in self.lakes.values() if e.task is not None]
        await asyncio.gather(*tasks)

    def _upsert(self, key: Key, resource: TableResource) -> None:
        known = self.tables.get(key)
        if known is None:
            previous = self.statuses.get(_name(key), {})
            watcher = TableWatcher(self.clock(), status.last_maintenance(previous), self.compactor)
            generation = max(resource.generation, int(previous.get("observedGeneration") or 0))
            if previous and previous.get(SPEC_DIGEST) != spec_digest(resource.spec):
                generation += 1
            self.registry.add(key, TableEntry(resource, generation=generation, watcher=watcher))
            self.statuses.setdefault(_name(key), {})[SPEC_DIGEST] = spec_digest(resource.spec)
            return
        if known.resource.spec != resource.spec or known.resource.labels != resource.labels:
            # Standalone manifests rarely carry metadata.generation; a changed spec is a new one.
            known.generation += 1
            self.registry.change(key, resource)
            self.statuses.setdefault(_name(key), {})[SPEC_DIGEST] = spec_digest(resource.spec)
        if known.loop is not None:
            known.loop.poke()  # a policy or Secret may have changed too: poll now

    def _drop(self, key: Key) -> None:
        self.registry.remove(key)
        if key in self._gone:
            log.info("%s/%s: gone from its DeltaLake; no longer polled, status kept", *key)
        else:
            log.info("%s/%s: manifest removed; no longer watched (its data is untouched)", *key)

    async def target(self, key: Key, entry: TableEntry) -> Target:
        # A changed spec replaces the resource and bumps the generation together.
        duplicates = self.registry.duplicates(key)
        inputs = (entry.resource, self.policies, self.secrets, duplicates)

        def make() -> Target:
            target = resolve(
                entry.resource, self.policies, self._secret, duplicates, self.default_poll_ms
            )
            return replace(target, generation=entry.generation)

        return entry.target(inputs, make)

    def _secret(self, namespace: str, name: str) -> Mapping[str, str] | None:
        return self.secrets.get((namespace, name))

    # -- the Sink -----------------------------------------------------------------------------
    async def write_status(self, entry: TableEntry, target: Target, obs: Observation) -> bool:
        name = _name(target.key)
        old = self.statuses.get(name, {})
        new = status.build(target, obs, old, self.clock())
        origin = self._origin.get(target.key)
        if origin is not None:
            new["discovery"] = _discovery(*origin)
            found = table_found(_lake_name(origin[0].resource), origin[1], True)
            now = self.clock()
            new["conditions"] += status.conditions_status([found], old, target.generation, now)
        self.statuses[name] = {**new, SPEC_DIGEST: old.get(SPEC_DIGEST)}
        self._dirty = True
        return True

    def post_event(self, entry: TableEntry, event: Event) -> None:
        pass  # events are in the log only

    def forget(self, key: Key) -> None:
        if key in self._gone:
            return  # a gone lake table keeps its status
        self.statuses.pop(_name(key), None)
        self._dirty = True

    def flush(self) -> None:
        if not self._dirty:
            return
        self._dirty = False
        self.status_path.parent.mkdir(parents=True, exist_ok=True)
        tmp = self.status_path.with_suffix(".tmp")
        body = {
            "updated": self.clock(),
            "folder": str(self.folder),
            "tables": self.statuses,
            "lakes": self.lake_statuses,
            "rejected": self.rejected,
        }
        tmp.write_text(json.dumps(body, indent=1, sort_keys=True))
        os.replace(tmp, self.status_path)

    # -- running ------------------------------------------------------------------------------
    async def run(self, stop: asyncio.Event, once: bool = False, summary_s: float = 0) -> int:
        heartbeat = asyncio.create_task(self.fleet.heartbeat())
        try:
            if once:
                return await self._once()
            last_summary = 0.0
            while not stop.is_set():
                self.reload()
                loop_now = asyncio.get_running_loop().time()
                self.scan_lakes(loop_now)
                for key, entry in self.tables.items():
                    if entry.loop is None:
                        self.registry.start(key, self.fleet, entry.watcher)
                self.flush()
                if summary_s and loop_now - last_summary >= summary_s:
                    last_summary = loop_now
                    print_summary(self.statuses, self.out, self.rejected, self.lake_statuses)
                with contextlib.suppress(TimeoutError):
                    await asyncio.wait_for(stop.wait(), RELOAD_S)
            return 0
        finally:
            heartbeat.cancel()
            for lake in self.lakes.values():
                if lake.task is not None:
                    lake.task.cancel()
            await self.registry.stop()
            for entry in self.tables.values():
                entry.watcher.compactions.stop()  # no job outlives `run`
            self.flush()
            await asyncio.to_thread(self.fleet.close)

    async def _once(self) -> int:
        """Poll every table once (maintenance included), write the status, exit 0 when every
        table is Ready and no manifest was rejected."""
        self.reload()
        await self.scan_all()
        for key, entry in self.tables.items():
            await self.fleet.poll_once(await self.target(key, entry), entry.watcher)
        self.flush()
        print_summary(self.statuses, self.out, self.rejected, self.lake_statuses)
        ready = all(
            _ready(s) == "True" for s in [*self.statuses.values(), *self.lake_statuses.values()]
        )
        return 0 if ready and not self.rejected else 1


def _discovery(entry: LakeEntry, path: str) -> dict[str, Any]:
    """A lake-managed table's origin, and whether the lake's last good scan still found it."""
    return {"lake": _lake_name(entry.resource), "path": path, "present": path not in entry.gone}


def _lake_name(lake: LakeResource) -> str:
    return _name((lake.namespace, lake.name))


def _signature(folder: Path) -> object:
    try:
        entries = sorted(os.scandir(folder), key=lambda e: e.name)
    except FileNotFoundError:
        return None
    return tuple(
        (e.name, e.stat().st_mtime_ns, e.stat().st_size)
        for e in entries
        if e.is_file() and e.name.endswith((".yaml", ".yml", ".json"))
    )


def _name(key: tuple[str, str]) -> str:
    return f"{key[0]}/{key[1]}"


def spec_digest(spec: Mapping[str, Any]) -> str:
    """What the status file keeps of a spec to see it change across restarts: a digest, since
    a spec may hold secrets (options, credentials in a URI) the status file must not copy."""
    text = json.dumps(spec, sort_keys=True, default=str)
    return hashlib.sha256(text.encode()).hexdigest()


def _read_json(path: Path) -> dict[str, Any]:
    try:
        data = json.loads(path.read_text())
    except (FileNotFoundError, ValueError):
        return {}
    return data if isinstance(data, dict) else {}


def _ready(s: Mapping[str, Any]) -> str:
    for c in s.get("conditions") or []:
        if c.get("type") == "Ready":
            return str(c.get("status"))
    return "Unknown"


def _reason(s: Mapping[str, Any]) -> str:
    for c in s.get("conditions") or []:
        if c.get("type") == "Ready" and c.get("status") != "True":
            return f"{c.get('reason')}: {c.get('message')}"
    for c in s.get("conditions") or []:
        if c.get("type") == "Degraded" and c.get("status") == "True":
            return f"{c.get('reason')}: {c.get('message')}"
    return ""


COLUMNS = ("TABLE", "VERSION", "BEHIND", "FILES", "SMALL", "LOG", "READY", "LAST-MAINTENANCE")


def status_rows(statuses: Mapping[str, Mapping[str, Any]]) -> list[tuple[str, ...]]:
    rows: list[tuple[str, ...]] = []
    for name in sorted(statuses):
        s = statuses[name]
        acted = [(e.get("time", ""), op, e) for op, e in (s.get("lastMaintenance") or {}).items()]
        done = [f"{op} {e.get('result')} {_deleted(op, e)}{t[11:]}" for t, op, e in sorted(acted)]
        rows.append(
            (
                name,
                _cell(s.get("version")),
                _cell(s.get("commitsSinceCheckpoint")),
                _cell(s.get("files")),
                _cell(s.get("smallFiles")),
                _cell(s.get("logFiles")),
                _ready(s),
                done[-1] if done else "-",
            )
        )
    return rows


def _deleted(operation: str, entry: Mapping[str, Any]) -> str:
    if operation == "checkpoint":
        return f"v{entry.get('version')} "
    if operation == "compaction":
        return f"{entry.get('filesRemoved', 0)}->{entry.get('filesAdded', 0)} files "
    return f"{entry.get('deletedFiles', 0)} files "


def _cell(value: Any) -> str:
    return "-" if value is None else str(value)


LAKE_COLUMNS = ("LAKE", "TABLES", "MANAGED", "LAST-SCAN", "REQUESTS", "SECONDS", "READY")


def lake_rows(lakes: Mapping[str, Mapping[str, Any]]) -> list[tuple[str, ...]]:
    rows: list[tuple[str, ...]] = []
    for name in sorted(lakes):
        s = lakes[name]
        scan = s.get("lastScan") or {}
        rows.append(
            (
                name,
                _cell(s.get("tables")),
                _cell(s.get("managedTables")),
                f"{scan.get('time', '-')} {scan.get('result', '')}".strip(),
                _cell(scan.get("requests")),
                _cell(scan.get("seconds")),
                _ready(s),
            )
        )
    return rows


def print_summary(
    statuses: Mapping[str, Mapping[str, Any]],
    out: TextIO,
    rejected: Sequence[str] = (),
    lakes: Mapping[str, Mapping[str, Any]] | None = None,
) -> None:
    _print_rows([COLUMNS, *status_rows(statuses)], out)
    gone = [
        n for n in sorted(statuses) if (statuses[n].get("discovery") or {}).get("present") is False
    ]
    for name in sorted(statuses):
        why = _reason(statuses[name])
        if why:
            out.write(f"  {name}: {why}\n")
    for name in gone:
        where = statuses[name]["discovery"]
        out.write(
            f"  {name}: gone from DeltaLake {where['lake']} ({where['path']}); "
            "not polled, status kept, nothing deleted\n"
        )
    if lakes:
        _print_rows([LAKE_COLUMNS, *lake_rows(lakes)], out)
        for name in sorted(lakes):
            why = _reason(lakes[name])
            if why:
                out.write(f"  {name}: {why}\n")
    print_rejected(rejected, out)
    out.flush()


def _print_rows(rows: Sequence[tuple[str, ...]], out: TextIO) -> None:
    widths = [max(len(r[i]) for r in rows) for i in range(len(rows[0]))]
    for row in rows:
        out.write("  ".join(c.ljust(w) for c, w in zip(row, widths, strict=True)).rstrip() + "\n")


def print_rejected(rejected: Sequence[str], out: TextIO) -> None:
    if rejected:
        out.write(f"rejected manifests ({len(rejected)}; fix them, the others run):\n")
        out.writelines(f"  {message}\n" for message in rejected)


def run(
    folder: str,
    metrics_port: int,
    host: str,
    status_path: str | None,
    max_concurrent: int,
    once: bool,
    summary_s: float,
    compactor: Compactor | None = None,
    default_poll_ms: int | None = None,
) -> int:
    credentials.install_log_scrubbing()
    path = Path(folder)
    if not path.is_dir():
        from deltakeeper.delta.errors import InvalidInputError

        raise InvalidInputError(f"--manifests {folder}: no such folder; put DeltaTable YAML there")
    registry = metrics.Metrics()
    daemon = Standalone(
        path,
        Path(status_path) if status_path else status_file_for(path),
        registry,
        max_concurrent,
        default_poll_ms=default_poll_ms or POLL_INTERVAL_MS,
        compactor=compactor,
    )
    server = None if once else metrics.serve(registry, metrics_port, host, daemon.fleet.healthy)
    if server is not None:
        log.info("metrics: %s", metrics.url(server))

    async def main() -> int:
        stop = asyncio.Event()
        loop = asyncio.get_running_loop()
        for sig in (signal.SIGINT, signal.SIGTERM):
            loop.add_signal_handler(sig, stop.set)
        return await daemon.run(stop, once=once, summary_s=summary_s)

    try:
        return asyncio.run(main())
    finally:
        if server is not None:
            server.shutdown()
