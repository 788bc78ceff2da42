"""Prometheus metrics: every name deltakeeper exports is defined here and only here.

Labels are `namespace` and `table` (the resource's name, never the URI: URIs can carry
account names and would make label sets unbounded). Counters only go up, so dashboards take
rates of commits and maintenance. `serve` answers /metrics and /healthz on one port.

The values live in one small record per table and are rendered by our own exposition writer:
prometheus-client keeps an object per series and renders about a microsecond per sample in
the best case, which at 10,000 tables (half a million samples) cost 250 MiB and ten seconds
of CPU per scrape. The registry (`Metrics.registry`) still works for prometheus-client's
readers (`get_sample_value`, `generate_latest`), which tests use.

A scrape that takes gzip (Prometheus's does) is served from text kept compressed per family
and per block of BLOCK_TABLES tables, rendered again only where a writer changed a value it
shows (`_changed`): a scrape costs what changed since the last, not every series. At 50,000
tables, 4.75 million samples: 12 CPU-s to render, 30 MB kept, a quiet fleet's scrape 0.3 s.

Series whose labels are known up front exist from a table's first sight, at 0 ("avoid missing
metrics" in Prometheus's instrumentation guide), so increase() counts a table's first cleanup,
vacuum or failure. They are rendered, not stored: a table's record grows only when something
happens.
"""

from __future__ import annotations

import functools
import itertools
import socket
import threading
import time
from collections.abc import Callable, Collection, Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from operator import is_
from typing import Any, ClassVar, NamedTuple, TypeVar
from urllib.parse import parse_qs

from prometheus_client import CollectorRegistry
from prometheus_client.core import Metric
from prometheus_client.registry import Collector

from deltakeeper.delta.errors import InvalidInputError
from deltakeeper.delta.vacuum.modes import Mode
from deltakeeper.maintenance.operations import Cadence, Operation
from deltakeeper.maintenance.operations.outcome import Outcome, Result
from deltakeeper.maintenance.operations.registry import DELETES, REGISTRY, WRITERS
from deltakeeper.maintenance.policy import METRICS_BIND_ADDRESS, METRICS_PORT, effective
from deltakeeper.resources.status_fields import StatusField as F
from deltakeeper.runtime import gzip_stream
from deltakeeper.runtime.events import SOURCES, EventResult, Trigger
from deltakeeper.runtime.health import Health
from deltakeeper.runtime.model import ScanResult

CONTENT_TYPE = "text/plain; version=0.0.4; charset=utf-8"
# The status counts (resources/status_fields.COUNTS) -> gauge name and help; one gauge per
# table per count.
_TABLE_GAUGES = {
    F.VERSION: ("deltakeeper_table_version", "Latest published version of the table"),
    F.LOG_FILES: ("deltakeeper_table_log_files", "Files in _delta_log"),
    F.LOG_BYTES: ("deltakeeper_table_log_bytes", "Bytes in _delta_log"),
    F.COMMITS_SINCE_CHECKPOINT: (
        "deltakeeper_table_commits_since_checkpoint",
        "Commits after the newest checkpoint (what a reader replays as JSON)",
    ),
    F.FILES: ("deltakeeper_table_files", "Live data files"),
    F.BYTES: ("deltakeeper_table_bytes", "Bytes in live data files"),
    F.SMALL_FILES: ("deltakeeper_table_small_files", "Live data files below the small-file size"),
    F.TOMBSTONES: ("deltakeeper_table_tombstones", "Remove actions not yet expired"),
}
_HEALTH = (
    "deltakeeper_table_health_score",
    "gauge",
    "The table's health, 0-100 (100 healthy): its components' weighted mean",
)
_HEALTH_COMPONENT = (
    "deltakeeper_table_health_component_score",
    "gauge",
    "Each health component's score, 0-100 (smallFiles, vacuumDebt, deletedRows, checkpointLag, "
    "logDebt, missingStats)",
)
_RECLAIMABLE = (
    "deltakeeper_table_reclaimable_bytes",
    "gauge",
    "Bytes maintenance would free now, by kind (data: tombstoned files past the retention; "
    "log: expired log files)",
)
# Maintenance takes from milliseconds (a checkpoint of a small table) to an hour (a vacuum
# listing millions of files); few buckets, as every table has its own histogram.
DURATION_BUCKETS = (0.1, 0.5, 1.0, 5.0, 30.0, 120.0, 600.0, 3600.0)
_COMMITS = (
    "deltakeeper_table_commits_total",
    "counter",
    "Commits seen (the version's increase since the table was first watched)",
)
_AGE = (
    "deltakeeper_table_checkpoint_age_seconds",
    "gauge",
    "Seconds since the newest checkpoint was written",
)
_RUNS = (
    "deltakeeper_maintenance_runs_total",
    "counter",
    "Maintenance operations run, by result (done, dry-run, skipped, refused, failed)",
)
_DURATION = (
    "deltakeeper_maintenance_duration_seconds",
    "histogram",
    "Time one maintenance operation took",
)
_DELETED_FILES = (
    "deltakeeper_deleted_files_total",
    "counter",
    "Files deleted, by kind (log: metadata cleanup, data: vacuum)",
)
_DELETED_BYTES = (
    "deltakeeper_deleted_bytes_total",
    "counter",
    "Bytes deleted, by kind (log, data)",
)
_WRITTEN = (
    "deltakeeper_written_files_total",
    "counter",
    "Files the writer steps wrote, by operation (stats: data files given statistics, "
    "logCompaction: log compaction files, manifest: symlink manifests)",
)
# Each operation's counters of its own (OperationSpec.counters: expire's), for the tables
# whose policy asks for the operation: at 0 from the first sight of such a table.
_OWN = tuple((op, c) for op, spec in REGISTRY.items() for c in spec.counters)
_CONDITION = (
    "deltakeeper_table_condition",
    "gauge",
    "Status conditions by type (Ready, StorageReachable, ProtocolSupported, Degraded): "
    "1 when True, 0 when False; absent while Unknown",
)
# A condition's status -> the gauge's value; Unknown is not exported.
CONDITION_VALUES = {"True": 1, "False": 0}
_COMPACTION = ("deltakeeper_compaction_jobs", "gauge", "SparkApplication compaction jobs, by state")
_VACUUM_RUNS = (
    "deltakeeper_vacuum_runs_total",
    "counter",
    "Vacuums by the mode that ran (lite, full, inventory) and result",
)
_VACUUM_MODE = (
    "deltakeeper_vacuum_mode",
    "gauge",
    "The mode of the table's last vacuum: 1 for that mode (lite, full, inventory)",
)
_VACUUM_CANDIDATES = (
    "deltakeeper_vacuum_candidates_total",
    "counter",
    "Files vacuums considered: listed, named by the log (lite) or inventoried",
)
_VACUUM_LISTED = (
    "deltakeeper_vacuum_listed_objects_total",
    "counter",
    "Objects vacuums' listings or inventories returned (lite lists none)",
)
_VACUUM_REQUESTS = (
    "deltakeeper_vacuum_requests_total",
    "counter",
    "Storage requests vacuums sent (planning included), by operation",
)
_REQUESTS = (
    "deltakeeper_storage_requests_total",
    "counter",
    "Requests sent to the object store or file system, by operation",
)

# A DeltaLake's scans; labels `namespace` and `lake` (the resource's name).
_LAKE_TABLES = ("deltakeeper_lake_tables", "gauge", "Delta tables the lake's last scan found")
_LAKE_SECONDS = (
    "deltakeeper_lake_scan_duration_seconds",
    "gauge",
    "Seconds the lake's last scan took",
)
_LAKE_REQUESTS = (
    "deltakeeper_lake_scan_requests_total",
    "counter",
    "Storage requests the lake's scans sent (listings, retries included)",
)
_LAKE_SCANS = ("deltakeeper_lake_scans_total", "counter", "Scans of the lake, by result")

# Storage events (runtime/events.py): daemon-wide, no table labels; every label value known up
# front is exported at 0 from the start.
_EVENTS = (
    "deltakeeper_events_total",
    "counter",
    "Storage events by source and result (woke, duplicate, ignored, unknown_table, "
    "new_table: a DeltaLake's new table; rejected and malformed count requests)",
)
_POLLS = (
    "deltakeeper_polls_total",
    "counter",
    "Polls by what triggered them (event, interval, resync, fallback)",
)
_EVENT_LAG = (
    "deltakeeper_event_poll_lag_seconds",
    "histogram",
    "From an event's arrival to the end of the poll it woke",
)
_SOURCE_UP = (
    "deltakeeper_event_source_up",
    "gauge",
    "1 while the event source is running in this daemon (webhook: listening), else 0",
)
LAG_BUCKETS = (0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0)


@dataclass(slots=True)
class _Duration:
    buckets: list[int] = field(default_factory=lambda: [0] * len(DURATION_BUCKETS))
    total: float = 0.0
    count: int = 0

    def observe(self, seconds: float) -> None:
        for i, bound in enumerate(DURATION_BUCKETS):
            if seconds <= bound:
                self.buckets[i] += 1
                break
        self.total += seconds
        self.count += 1


_NOT_RUN = _Duration()  # an operation's histogram before its first run: only ever read


@dataclass(slots=True)
class _Vacuums:
    """A table's vacuums: runs by (mode, result), the last mode, and what they cost."""

    runs: dict[tuple[str, str], int] = field(default_factory=dict)
    mode: str = ""
    candidates: int = 0
    listed: int = 0
    requests: dict[str, int] = field(default_factory=dict)


@dataclass(slots=True)
class _Table:
    """Everything exported about one table. Dicts stay empty until something happens."""

    namespace: str
    name: str
    gauges: dict[str, int] = field(default_factory=dict)
    version: int | None = None
    commits: int = 0
    checkpoint_ms: int | None = None
    runs: dict[tuple[str, str], int] = field(default_factory=dict)
    durations: dict[str, _Duration] = field(default_factory=dict)
    deleted: dict[str, list[int]] = field(default_factory=dict)  # kind -> [files, bytes]
    written: dict[str, int] = field(default_factory=dict)  # writer operation -> files
    conditions: dict[str, int] = field(default_factory=dict)  # type -> 1 (True) or 0 (False)
    compaction: dict[str, float] = field(default_factory=dict)
    requests: dict[str, int] = field(default_factory=dict)
    vacuum: _Vacuums | None = None
    health: Health | None = None
    # The operations with counters of their own its policy asks for, and those counters
    asks: frozenset[Operation] = frozenset()
    own: dict[str, int] = field(default_factory=dict)
    labels: str = ""  # the two labels as exposed, escaped once
    block: _Block | None = None  # where its text is kept compressed between scrapes
    label: ClassVar[str] = "table"

    def __post_init__(self) -> None:
        self.labels = f'namespace="{_escape(self.namespace)}",table="{_escape(self.name)}"'


# Each distinct set of operations `asks` was given, one object for all tables asking it (a
# handful of combinations of a handful of operations).
_ASKS: dict[frozenset[Operation], frozenset[Operation]] = {}


@dataclass(slots=True)
class _Lake:
    """Everything exported about one DeltaLake's scans."""

    namespace: str
    name: str
    tables: int | None = None
    seconds: float | None = None
    requests: int = 0
    scans: dict[str, int] = field(default_factory=dict)  # result -> scans
    labels: str = ""
    label: ClassVar[str] = "lake"

    def __post_init__(self) -> None:
        self.labels = f'namespace="{_escape(self.namespace)}",lake="{_escape(self.name)}"'


@dataclass(slots=True)
class _Daemon:
    """The daemon-wide series: no namespace or table label, only their own."""

    namespace: str = ""
    name: str = ""
    labels: str = ""
    label: ClassVar[str] = ""
    events: dict[tuple[str, str], int] = field(
        default_factory=lambda: {(s, str(r)): 0 for s in SOURCES for r in EventResult}
    )
    polls: dict[str, int] = field(default_factory=lambda: {str(t): 0 for t in Trigger})
    lag: list[int] = field(default_factory=lambda: [0] * len(LAG_BUCKETS))
    lag_sum: float = 0.0
    lag_count: int = 0
    up: dict[str, int] = field(default_factory=lambda: dict.fromkeys(SOURCES, 0))


Labels = tuple[tuple[str, str], ...]
Sample = tuple[
    _Table | _Lake | _Daemon, str, Labels, float
]  # table, name suffix, extra labels, value
Family = tuple[tuple[str, str, str], Iterator[Sample]]  # (name, type, help), samples

# The series at 0 from a table's first sight: every counter, by every label value known up
# front that the daemon may come to export for it, and no more (each costs every scrape, at
# 10,000 tables): it dry-runs vacuums only (a table's vacuum.dryRun), vacuums lite or full
# unless told inventory (auto, the daemons' default), compacts only where compaction is
# enabled (where the table's compaction gauge is, runtime/jobs.py), and never counts a step
# skipped after a failure nor a started job (registry.record). Per table 71 samples: 4
# deleted, 3 written, 13 runs and 3 histograms of 11, 5 storage requests, and the vacuums' 6
# runs, 2 counts and 5 requests; 89 compacting: 17 runs, 4 histograms and the gauge's 3
# states. An operation only some policies ask for (expire) has its runs and histogram where
# asked (5 runs, 11 samples and the 3 expired counters more). A table maintained for a while
# has most of them anyway (every look counts as a run).
_KINDS = {kind: (("kind", kind),) for kind in DELETES.values()}  # log, data -> labels
_WRITER_LABELS = {str(op): (("operation", str(op)),) for op in WRITERS}
_RESULTS = (Result.DONE, Result.SKIPPED, Result.REFUSED, Result.FAILED)
# The request kinds every storage backend counts (delta/storage/__init__.py).
_REQUEST_LABELS = {op: (("operation", op),) for op in ("list", "read", "head", "put", "delete")}
# A vacuum records a run when it deletes, dry-runs or looks and finds nothing due (a failure
# records none); auto runs lite or full.
_VACUUM_RUN_LABELS = {
    (str(mode), str(r)): (("mode", str(mode)), ("result", str(r)))
    for mode in (Mode.LITE, Mode.FULL)
    for r in (Result.DONE, Result.DRY_RUN, Result.SKIPPED)
}


class _Known(NamedTuple):
    operations: tuple[str, ...]  # each has its histogram
    runs: dict[tuple[str, str], Labels]  # (operation, result) -> its labels, made once


@functools.cache
def _known(compacts: bool, asks: frozenset[Operation]) -> _Known:
    """Every table plans the operations of these cadences its policy asks for by default
    (the writers only where asked); compaction where it is enabled, and those only some
    policies ask for (expiry: dataRetention) where `asks` has them. Those a resource can
    dry-run also count dry runs."""
    planned = {Cadence.NEW_VERSION, Cadence.PERIODIC, Cadence.SCHEDULED}
    ops = tuple(
        op
        for op, spec in REGISTRY.items()
        if (spec.cadence is Cadence.JOBS and compacts)
        or (spec.cadence in planned and (op in asks or spec.asked(_DEFAULTS)))
    )
    runs = [(op, r) for op in ops for r in _RESULTS]
    runs += [(op, Result.DRY_RUN) for op in ops if REGISTRY[op].dry_run_event is not None]
    return _Known(
        tuple(map(str, ops)),
        {(str(op), str(r)): (("operation", str(op)), ("result", str(r))) for op, r in runs},
    )


_DEFAULTS = effective({})  # what a table asks for when its policy sets nothing


class Metrics:
    """deltakeeper's metrics; tests make their own, the operator or standalone daemon one."""

    def __init__(
        self, registry: CollectorRegistry | None = None, clock: Callable[[], float] = time.time
    ) -> None:
        self.clock = clock
        self._tables: dict[tuple[str, str], _Table] = {}
        self._blocks: list[_Block] = []  # the tables in the same order, BLOCK_TABLES a block
        # Per per-table family: the pieces of its last gzip scrape and their Sum
        self._sums: list[tuple[list[gzip_stream.Piece], gzip_stream.Sum] | None] = [None] * len(
            _PER_TABLE
        )
        self._lakes: dict[tuple[str, str], _Lake] = {}
        self._lock = threading.Lock()  # writers only: the scrape copies the dict (atomic)
        self._daemon = _Daemon()
        self.registry = registry or CollectorRegistry()
        self.registry.register(_Collector(self))

    def _of(self, namespace: str, table: str) -> _Table:
        record = self._tables.get((namespace, table))
        if record is None:
            with self._lock:
                record = self._tables.get((namespace, table))
                if record is None:
                    record = self._tables[(namespace, table)] = _Table(namespace, table)
                    self._place(record)
        return record

    def _place(self, t: _Table) -> None:
        """Into the last block, or a new one: blocks keep the tables' order."""
        if not self._blocks or len(self._blocks[-1].tables) >= BLOCK_TABLES:
            self._blocks.append(_Block())
        t.block = self._blocks[-1]
        t.block.tables.append(t)
        t.block.stale_all()

    def table(self, namespace: str, table: str, counts: Mapping[str, Any]) -> None:
        """Gauges from a status's counts; commits counted from version moves."""
        t = self._of(namespace, table)
        for key in _TABLE_GAUGES:
            if isinstance(value := counts.get(key), int):
                t.gauges[key] = value
        version = counts.get(F.VERSION)
        if isinstance(version, int):
            # The first sight starts the counter at 0 (rate() needs no history before it);
            # a version going back (table re-created) counts nothing.
            if t.version is not None:
                t.commits += max(0, version - t.version)
            t.version = version
        _changed(t, "gauges")

    def conditions(self, namespace: str, table: str, statuses: Mapping[str, str]) -> None:
        """The table's conditions (type -> "True", "False" or "Unknown"), all of them at once."""
        t = self._of(namespace, table)
        t.conditions = {
            kind: CONDITION_VALUES[s] for kind, s in statuses.items() if s in CONDITION_VALUES
        }
        _changed(t, "conditions")

    def checkpoint_written(self, namespace: str, table: str, written_ms: int | None) -> None:
        """When the table's newest checkpoint was written (None: it has none)."""
        self._of(namespace, table).checkpoint_ms = written_ms

    def maintenance(
        self, namespace: str, table: str, operation: str, result: str, seconds: float
    ) -> None:
        t = self._of(namespace, table)
        t.runs[(operation, result)] = t.runs.get((operation, result), 0) + 1
        t.durations.setdefault(operation, _Duration()).observe(seconds)
        _changed(t, "runs", "durations")

    def deleted(self, namespace: str, table: str, kind: str, files: int, nbytes: int) -> None:
        t = self._of(namespace, table)
        counts = t.deleted.setdefault(kind, [0, 0])
        counts[0] += files
        counts[1] += nbytes
        _changed(t, "deleted")

    def written(self, namespace: str, table: str, operation: str, files: int) -> None:
        t = self._of(namespace, table)
        t.written[operation] = t.written.get(operation, 0) + files
        _changed(t, "written")

    def requests(self, namespace: str, table: str, counts: Mapping[str, int]) -> None:
        t = self._of(namespace, table)
        for operation, n in counts.items():
            if n:
                t.requests[operation] = t.requests.get(operation, 0) + n
        _changed(t, "requests")

    def vacuum(
        self,
        namespace: str,
        table: str,
        mode: str,
        result: str,
        found: tuple[int, int],
        requests: Mapping[str, int],
    ) -> None:
        """One vacuum: its mode and result, `found` (candidates, objects listed), requests."""
        t = self._of(namespace, table)
        v = t.vacuum = t.vacuum or _Vacuums()
        v.runs[(mode, result)] = v.runs.get((mode, result), 0) + 1
        v.mode = mode
        v.candidates += found[0]
        v.listed += found[1]
        for operation, n in requests.items():
            v.requests[operation] = v.requests.get(operation, 0) + n
        _changed(t, "vacuum")

    def asks(self, namespace: str, table: str, operations: frozenset[Operation]) -> None:
        """The operations with counters of their own the table's policy asks for: those
        counters exist (at 0 until they move) while it does."""
        t = self._of(namespace, table)
        t.asks = _ASKS.setdefault(operations, operations)  # the same few sets for every table
        t.own = {c.name: t.own.get(c.name, 0) for op, c in _OWN if op in operations}
        _changed(t, "asks", "own")

    def counted(self, namespace: str, table: str, outcome: Outcome) -> None:
        """A done run's own counters (its operation's)."""
        t = self._of(namespace, table)
        for c in REGISTRY[outcome.operation].counters:
            t.own[c.name] = t.own.get(c.name, 0) + c.count(outcome)
        _changed(t, "own")

    def health(self, namespace: str, table: str, health: Health | None) -> None:
        """The table's health as of its last poll; None (not read yet) leaves the last one."""
        if health is not None:
            t = self._of(namespace, table)
            t.health = health
            _changed(t, "health")

    def compaction_jobs(self, namespace: str, table: str, jobs: Mapping[str, int]) -> None:
        """The compaction gauge's states, all at once: none for a table that does not compact
        here (its series go, and with them its compaction runs and histogram at 0)."""
        t = self._of(namespace, table)
        if jobs != t.compaction:
            t.compaction = dict(jobs)
            _changed(t, "compaction")

    def lake_scan(
        self,
        namespace: str,
        lake: str,
        result: str,
        tables: int | None,
        seconds: float,
        requests: int,
    ) -> None:
        """One scan of a DeltaLake; `tables` None when it failed (the last count stays)."""
        record = self._lakes.get((namespace, lake))
        if record is None:
            with self._lock:
                record = self._lakes.setdefault((namespace, lake), _Lake(namespace, lake))
        if tables is not None:
            record.tables = tables
        record.seconds = seconds
        record.requests += requests
        record.scans[result] = record.scans.get(result, 0) + 1

    # -- storage events (runtime/events.Counts) ------------------------------------------------
    def event(self, source: str, result: str, n: int = 1) -> None:
        key = (source, str(result))
        with self._lock:
            self._daemon.events[key] = self._daemon.events.get(key, 0) + n

    def poll(self, trigger: str) -> None:
        """One poll (from poll threads too: hence the lock)."""
        with self._lock:
            self._daemon.polls[str(trigger)] += 1

    def event_lag(self, seconds: float) -> None:
        d = self._daemon
        with self._lock:
            for i, bound in enumerate(LAG_BUCKETS):
                if seconds <= bound:
                    d.lag[i] += 1
                    break
            d.lag_sum += seconds
            d.lag_count += 1

    def source_up(self, source: str, up: bool) -> None:
        with self._lock:
            self._daemon.up[source] = int(up)

    def forget_lake(self, namespace: str, lake: str) -> None:
        with self._lock:
            self._lakes.pop((namespace, lake), None)

    def forget(self, namespace: str, table: str) -> None:
        """Drop every series of a table (its resource was deleted); counters included."""
        with self._lock:
            t = self._tables.pop((namespace, table), None)
            if t is not None and t.block is not None:
                t.block.tables.remove(t)
                t.block.stale_all()
                if not t.block.tables:
                    self._blocks.remove(t.block)

    # -- exposition ---------------------------------------------------------------------------
    def families(self) -> Iterator[Family]:
        """Every family with its samples, generated as they are read."""
        tables = list(self._tables.values())
        now = self.clock()
        for family in _PER_TABLE:
            yield family.header, (s for t in tables for s in family.samples(t, now))
        yield from _lake_families(list(self._lakes.values()))
        yield from _daemon_families(self._daemon)

    def exposition(
        self, chunk_lines: int = 5000, names: Collection[str] | None = None
    ) -> Iterator[str]:
        """The text format (version 0.0.4), in chunks of a few hundred KiB, for /metrics;
        `names`: only these families (`/metrics?name[]=...`, as Prometheus's client libraries
        take it), whose samples are then never read."""
        for (name, kind, text), samples in self.families():
            if names is not None and name not in names:
                continue
            lines = [_header(name, kind, text)]
            for chunk in _lines(name, samples, chunk_lines):
                lines += chunk
                yield "".join(lines)
                lines.clear()
            if lines:
                yield "".join(lines)

    def exposition_gzip(self, names: Collection[str] | None = None) -> Iterator[bytes]:
        """`exposition`'s text as one gzip stream (runtime/gzip_stream.py). Each block of
        tables keeps each family's piece until a value in it changes, so a scrape renders and
        compresses what changed since the last (a quiet poll: its request counts), not every
        series."""
        blocks = list(self._blocks)
        now = self.clock()
        total = gzip_stream.Sum()
        yield gzip_stream.HEADER
        for index, family in enumerate(_PER_TABLE):
            if names is not None and family.header[0] not in names:
                continue
            if family.reads is None:  # changes with time alone: rendered every scrape
                tables = [t for b in blocks for t in list(b.tables)]
                samples = (s for t in tables for s in family.samples(t, now))
                pieces = [_HEADER_PIECES[index], *_pieces(family.header[0], samples)]
            else:
                members = (block.member(index, family, now) for block in blocks)
                pieces = [_HEADER_PIECES[index], *(m for m in members if m.size)]
            total = total.then(self._sum(index, pieces))
            yield from (p.data for p in pieces)
        rest = itertools.chain(
            _lake_families(list(self._lakes.values())), _daemon_families(self._daemon)
        )
        for (name, kind, text), theirs in rest:
            if names is None or name in names:
                pieces = [gzip_stream.piece(_header(name, kind, text).encode())]
                pieces += _pieces(name, theirs)
                total = total.then(_sum(pieces))
                yield from (p.data for p in pieces)
        yield gzip_stream.trailer(total)

    def _sum(self, index: int, pieces: list[gzip_stream.Piece]) -> gzip_stream.Sum:
        """The pieces' Sum, kept while they are the same objects (most families between two
        scrapes): a scrape then combines a few families' CRCs, not every block's."""
        kept = self._sums[index]
        if kept is not None and len(kept[0]) == len(pieces) and all(map(is_, kept[0], pieces)):
            return kept[1]
        total = _sum(pieces)
        self._sums[index] = (pieces, total)
        return total


# Tables a block holds: each scrape re-renders a block's family when a value of one of its
# tables in that family changed, and each block keeps one piece a family. Smaller blocks
# re-render less per change but compress worse; at 16 the pieces are about 17x smaller than
# the text.
BLOCK_TABLES = 16


def _pieces(name: str, samples: Iterable[Sample]) -> list[gzip_stream.Piece]:
    return [gzip_stream.piece("".join(c).encode()) for c in _lines(name, samples, 5000)]


def _sum(pieces: Iterable[gzip_stream.Piece]) -> gzip_stream.Sum:
    total = gzip_stream.Sum()
    for p in pieces:
        total = total.plus(p)
    return total


class _Block:
    """A run of tables and, for each per-table family, their text compressed (None until
    rendered) and whether a value in it changed since. The writers change first and mark
    after; the scrape clears the mark before it reads: a change during a render is rendered
    again next time."""

    __slots__ = ("members", "stale", "tables")

    def __init__(self) -> None:
        self.tables: list[_Table] = []
        self.members: list[gzip_stream.Piece | None] = [None] * len(_PER_TABLE)
        self.stale = bytearray(len(_PER_TABLE))

    def stale_all(self) -> None:
        """After a table came or went (marked, not emptied: a scrape rendering the block
        now stores its piece into `members` after this, and must render again)."""
        self.stale[:] = b"\x01" * len(self.stale)

    def member(self, index: int, family: _PerTable, now: float) -> gzip_stream.Piece:
        member = self.members[index]
        if member is None or self.stale[index]:
            self.stale[index] = 0
            tables = list(self.tables)
            samples = (s for t in tables for s in family.samples(t, now))
            text = "".join(line for chunk in _lines(family.header[0], samples, 0) for line in chunk)
            member = self.members[index] = gzip_stream.piece(text.encode())
        return member


def _changed(t: _Table, *fields: str) -> None:
    """After a writer changed these fields of `t`: the families that show them are stale."""
    block = t.block
    if block is not None:
        for f in fields:
            for index in _READERS[f]:
                block.stale[index] = 1


def _header(name: str, kind: str, text: str) -> str:
    return f"# HELP {name} {text}\n# TYPE {name} {kind}\n"


def _lines(name: str, samples: Iterable[Sample], chunk_lines: int) -> Iterator[list[str]]:
    """The samples' lines, in lists of `chunk_lines` (0: one list)."""
    lines: list[str] = []
    for t, suffix, extra, value in samples:
        labels = t.labels + _extra_labels(extra) if extra else t.labels
        if not t.labels:  # a daemon-wide series: its own labels only, if any
            labels = labels.removeprefix(",")
            if not labels:
                lines.append(f"{name}{suffix} {float(value)!r}\n")
                continue
        lines.append(f"{name}{suffix}{{{labels}}} {float(value)!r}\n")
        if len(lines) == chunk_lines:
            yield lines
            lines = []
    if lines:
        yield lines


K = TypeVar("K")
_NO_VACUUM = _Vacuums()  # a table's vacuums before its first: only ever read


def _mode_result(key: tuple[str, str]) -> Labels:
    return (("mode", key[0]), ("result", key[1]))


def _operation(key: str) -> Labels:
    return (("operation", key),)


def _known_first(
    t: _Table,
    counts: Mapping[K, int],
    known: Mapping[K, Labels],
    labels: Callable[[K], Labels],
) -> Iterator[Sample]:
    """A counter's samples: each known label value (at 0 until it moves), then any other."""
    for key, fixed in known.items():
        yield t, "", fixed, counts.get(key, 0)
    for key, n in list(counts.items()):
        if key not in known:
            yield t, "", labels(key), n


_SCAN_RESULTS = {str(r): (("result", str(r)),) for r in ScanResult}  # result -> labels


def _lake_families(lakes: list[_Lake]) -> Iterator[Family]:
    yield _LAKE_TABLES, ((k, "", (), k.tables) for k in lakes if k.tables is not None)
    yield _LAKE_SECONDS, ((k, "", (), k.seconds) for k in lakes if k.seconds is not None)
    yield _LAKE_REQUESTS, ((k, "", (), k.requests) for k in lakes)
    yield (  # every result from the lake's first scan, at 0 until it happens
        _LAKE_SCANS,
        ((k, "", labels, k.scans.get(r, 0)) for k in lakes for r, labels in _SCAN_RESULTS.items()),
    )


def _daemon_families(d: _Daemon) -> Iterator[Family]:
    yield (
        _EVENTS,
        (
            (d, "", (("source", s), ("result", r)), n)
            for (s, r), n in sorted(list(d.events.items()))
        ),
    )
    yield _POLLS, ((d, "", (("trigger", t),), n) for t, n in list(d.polls.items()))
    yield _EVENT_LAG, _lag(d)
    yield _SOURCE_UP, ((d, "", (("source", s),), n) for s, n in list(d.up.items()))


def _lag(d: _Daemon) -> Iterator[Sample]:
    cumulative = 0
    for bound, n in zip(LAG_BUCKETS, d.lag, strict=True):
        cumulative += n
        yield d, "_bucket", (("le", str(bound)),), cumulative
    yield d, "_bucket", (("le", "+Inf"),), d.lag_count
    yield d, "_sum", (), d.lag_sum
    yield d, "_count", (), d.lag_count


def _runs(t: _Table) -> Iterator[Sample]:
    runs = t.runs
    known = _known(bool(t.compaction), t.asks).runs
    for key, labels in known.items():
        yield t, "", labels, runs.get(key, 0)
    for (op, result), n in list(runs.items()):
        if (op, result) not in known:
            yield t, "", (("operation", op), ("result", result)), n


def _deleted(t: _Table, index: int) -> Iterator[Sample]:
    deleted = t.deleted
    for kind, labels in _KINDS.items():
        counts = deleted.get(kind)
        yield t, "", labels, counts[index] if counts else 0
    for kind, counts in list(deleted.items()):
        if kind not in _KINDS:
            yield t, "", (("kind", kind),), counts[index]


def _histogram(t: _Table) -> Iterator[Sample]:
    durations = t.durations
    known = _known(bool(t.compaction), t.asks).operations
    for op in (*known, *(o for o in list(durations) if o not in known)):
        d = durations.get(op, _NOT_RUN)
        cumulative = 0
        for bound, n in zip(DURATION_BUCKETS, d.buckets, strict=True):
            cumulative += n
            yield t, "_bucket", (("operation", op), ("le", str(bound))), cumulative
        yield t, "_bucket", (("operation", op), ("le", "+Inf")), d.count
        yield t, "_sum", (("operation", op),), d.total
        yield t, "_count", (("operation", op),), d.count


def _vacuum_runs(t: _Table) -> Iterator[Sample]:
    runs = (t.vacuum or _NO_VACUUM).runs
    return _known_first(t, runs, _VACUUM_RUN_LABELS, _mode_result)


def _vacuum_requests(t: _Table) -> Iterator[Sample]:
    requests = (t.vacuum or _NO_VACUUM).requests
    return _known_first(t, requests, _REQUEST_LABELS, _operation)


def _one(t: _Table, value: float | None, extra: Labels = ()) -> tuple[Sample, ...]:
    return () if value is None else ((t, "", extra, value),)


def _age(t: _Table, now: float) -> tuple[Sample, ...]:
    if t.checkpoint_ms is None:
        return ()
    return ((t, "", (), max(0.0, now - t.checkpoint_ms / 1000)),)


@dataclass(frozen=True, slots=True)
class _PerTable:
    """A family with samples per table: its header, one table's samples (`now`: the scrape's
    time), and the fields of _Table they show (None: they change with time alone)."""

    header: tuple[str, str, str]
    samples: Callable[[_Table, float], Iterable[Sample]]
    reads: tuple[str, ...] | None


def _gauge(key: str) -> Callable[[_Table, float], Iterable[Sample]]:
    return lambda t, now: _one(t, t.gauges.get(key))


def _own(name: str) -> Callable[[_Table, float], Iterable[Sample]]:
    return lambda t, now: _one(t, t.own.get(name))


_KNOWN = ("runs", "compaction", "asks")  # _known's arguments, besides the counts
_PER_TABLE: tuple[_PerTable, ...] = (
    *(_PerTable((n, "gauge", h), _gauge(k), ("gauges",)) for k, (n, h) in _TABLE_GAUGES.items()),
    _PerTable(
        _COMMITS, lambda t, now: _one(t, t.commits if t.version is not None else None), ("gauges",)
    ),
    _PerTable(
        _CONDITION,
        lambda t, now: [(t, "", (("condition", k),), v) for k, v in list(t.conditions.items())],
        ("conditions",),
    ),
    _PerTable(_AGE, _age, None),
    _PerTable(_HEALTH, lambda t, now: _one(t, t.health.score if t.health else None), ("health",)),
    _PerTable(
        _HEALTH_COMPONENT,
        lambda t, now: [
            (t, "", (("component", str(c.component)),), c.score)
            for c in (t.health.components if t.health else ())
        ],
        ("health",),
    ),
    _PerTable(
        _RECLAIMABLE,
        lambda t, now: [
            (t, "", (("kind", kind),), n)
            for kind, n in (t.health.reclaimable.items() if t.health else ())
        ],
        ("health",),
    ),
    _PerTable(_RUNS, lambda t, now: _runs(t), _KNOWN),
    _PerTable(_DURATION, lambda t, now: _histogram(t), ("durations", *_KNOWN[1:])),
    _PerTable(_DELETED_FILES, lambda t, now: _deleted(t, 0), ("deleted",)),
    _PerTable(_DELETED_BYTES, lambda t, now: _deleted(t, 1), ("deleted",)),
    _PerTable(
        _WRITTEN,
        lambda t, now: _known_first(t, t.written, _WRITER_LABELS, _operation),
        ("written",),
    ),
    _PerTable(
        _COMPACTION,
        lambda t, now: [(t, "", (("state", st),), n) for st, n in list(t.compaction.items())],
        ("compaction",),
    ),
    _PerTable(_VACUUM_RUNS, lambda t, now: _vacuum_runs(t), ("vacuum",)),
    _PerTable(
        _VACUUM_MODE,
        lambda t, now: _one(t, 1 if t.vacuum and t.vacuum.mode else None, _vacuum_mode(t)),
        ("vacuum",),
    ),
    _PerTable(
        _VACUUM_CANDIDATES, lambda t, now: _one(t, (t.vacuum or _NO_VACUUM).candidates), ("vacuum",)
    ),
    _PerTable(_VACUUM_LISTED, lambda t, now: _one(t, (t.vacuum or _NO_VACUUM).listed), ("vacuum",)),
    _PerTable(_VACUUM_REQUESTS, lambda t, now: _vacuum_requests(t), ("vacuum",)),
    *(_PerTable((c.name, "counter", c.help), _own(c.name), ("own",)) for _, c in _OWN),
    _PerTable(
        _REQUESTS,
        lambda t, now: _known_first(t, t.requests, _REQUEST_LABELS, _operation),
        ("requests",),
    ),
)
# A field of _Table -> the families that show it (their indexes in _PER_TABLE)
_READERS: dict[str, tuple[int, ...]] = {
    f: tuple(i for i, fam in enumerate(_PER_TABLE) if fam.reads and f in fam.reads)
    for f in {f for fam in _PER_TABLE for f in fam.reads or ()}
}
_HEADER_PIECES = tuple(gzip_stream.piece(_header(*f.header).encode()) for f in _PER_TABLE)


def _vacuum_mode(t: _Table) -> Labels:
    return (("mode", t.vacuum.mode),) if t.vacuum and t.vacuum.mode else ()


@functools.lru_cache(maxsize=4096)
def _extra_labels(extra: Labels) -> str:
    return "".join(f',{k}="{_escape(v)}"' for k, v in extra)


def _escape(value: str) -> str:
    return value.replace("\\", r"\\").replace("\n", r"\n").replace('"', r"\"")


class _Collector(Collector):
    """The same families as prometheus-client Metric objects (slow; for its readers)."""

    def __init__(self, metrics: Metrics) -> None:
        self.metrics = metrics

    def collect(self) -> Iterator[Metric]:
        for (name, kind, text), samples in self.metrics.families():
            counter = kind == "counter"
            family = Metric(name.removesuffix("_total") if counter else name, text, kind)
            for t, suffix, extra, value in samples:
                labels = {"namespace": t.namespace, t.label: t.name, **dict(extra)}
                if not t.label:  # a daemon-wide series
                    labels = dict(extra)
                family.add_sample(name + suffix, labels, value)
            yield family


class MetricsBindError(InvalidInputError):
    """The metrics address cannot be bound: in use, not this host's, or not an address."""


class _IPv6Server(ThreadingHTTPServer):
    address_family = socket.AF_INET6


def url(server: ThreadingHTTPServer) -> str:
    """Where the server really listens, for the log."""
    address, port = server.server_address[:2]
    host = address.decode() if isinstance(address, bytes) else address
    return f"http://{f'[{host}]' if ':' in host else host}:{port}/metrics (and /healthz)"


def serve(
    metrics: Metrics,
    port: int = METRICS_PORT,
    host: str = METRICS_BIND_ADDRESS,
    healthy: Callable[[], bool] = lambda: True,
) -> ThreadingHTTPServer:
    """Serve /metrics and /healthz from a daemon thread; `server.shutdown()` stops it.
    MetricsBindError says what to change when the address cannot be bound."""

    class Handler(BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            path, _, query = self.path.partition("?")
            if path == "/metrics":
                self._metrics(parse_qs(query).get("name[]"))
            elif path == "/healthz":
                ok = healthy()
                self._reply(200 if ok else 503, b"ok\n" if ok else b"unhealthy\n", "text/plain")
            else:
                self._reply(404, b"try /metrics or /healthz\n", "text/plain")

        def _metrics(self, names: list[str] | None) -> None:
            # Streamed (the connection's end marks the body's end): 10,000 tables make tens of
            # megabytes of text, never held whole. Prometheus asks for gzip, and gets it.
            gzip = "gzip" in (self.headers.get("Accept-Encoding") or "")
            self.send_response(200)
            self.send_header("Content-Type", CONTENT_TYPE)
            if gzip:
                self.send_header("Content-Encoding", "gzip")
            self.send_header("Connection", "close")
            self.end_headers()
            self.close_connection = True
            try:
                if gzip:  # kept compressed between scrapes, in small pieces: sent in batches
                    self._send(metrics.exposition_gzip(names=names))
                else:
                    for chunk in metrics.exposition(names=names):
                        self.wfile.write(chunk.encode())
            except (BrokenPipeError, ConnectionResetError):
                pass  # the scraper gave up (its timeout); what was rendered is kept

        def _send(self, parts: Iterator[bytes]) -> None:
            batch: list[bytes] = []
            size = 0
            for part in parts:
                batch.append(part)
                size += len(part)
                if size >= 1 << 18:
                    self.wfile.write(b"".join(batch))
                    batch, size = [], 0
            self.wfile.write(b"".join(batch))

        def _reply(self, code: int, body: bytes, ctype: str) -> None:
            self.send_response(code)
            self.send_header("Content-Type", ctype)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *args: Any) -> None:  # scrapes every 15 s would flood the log
            pass

    server_class = _IPv6Server if ":" in host else ThreadingHTTPServer
    try:
        server = server_class((host, port), Handler)
    except (OSError, OverflowError) as e:
        reason = getattr(e, "strerror", None) or str(e)
        raise MetricsBindError(
            f"cannot serve metrics on {host}:{port}: {reason}; choose another "
            "--metrics-port (0: any free port) or --metrics-bind-address"
        ) from e
    server.daemon_threads = True
    threading.Thread(target=server.serve_forever, name="metrics", daemon=True).start()
    return server
