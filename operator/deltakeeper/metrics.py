"""Prometheus metrics: every name deltakeeper exports is defined here and only here.

Labels are `namespace` and `table` (the resource's name, never the URI: URIs can carry
account names and would make label sets unbounded). Counters only go up, so dashboards take
rates of commits and maintenance. `serve` answers /metrics and /healthz on one port.
"""

from __future__ import annotations

import contextlib
import threading
import time
from collections.abc import Callable, Iterator, Mapping
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram
from prometheus_client.core import GaugeMetricFamily
from prometheus_client.exposition import CONTENT_TYPE_LATEST, generate_latest
from prometheus_client.registry import Collector

DEFAULT_PORT = 9108
TABLE = ("namespace", "table")
# status key -> gauge name (and the help text); one gauge per table per key.
_TABLE_GAUGES = {
    "version": ("deltakeeper_table_version", "Latest published version of the table"),
    "logFiles": ("deltakeeper_table_log_files", "Files in _delta_log"),
    "logBytes": ("deltakeeper_table_log_bytes", "Bytes in _delta_log"),
    "commitsSinceCheckpoint": (
        "deltakeeper_table_commits_since_checkpoint",
        "Commits after the newest checkpoint (what a reader replays as JSON)",
    ),
    "files": ("deltakeeper_table_files", "Live data files"),
    "bytes": ("deltakeeper_table_bytes", "Bytes in live data files"),
    "smallFiles": ("deltakeeper_table_small_files", "Live data files below the small-file size"),
    "tombstones": ("deltakeeper_table_tombstones", "Remove actions not yet expired"),
}
_DURATION_BUCKETS = (0.01, 0.05, 0.1, 0.5, 1, 2.5, 5, 10, 30, 60, 300, 900, 3600)


class Metrics:
    """One registry with deltakeeper's metrics; tests make their own, the daemons share one."""

    def __init__(
        self, registry: CollectorRegistry | None = None, clock: Callable[[], float] = time.time
    ) -> None:
        self.registry = registry or CollectorRegistry()
        r = self.registry
        self.gauges = {
            key: Gauge(name, text, TABLE, registry=r) for key, (name, text) in _TABLE_GAUGES.items()
        }
        self.commits = Counter(
            "deltakeeper_table_commits_total",
            "Commits seen (the version's increase since the table was first watched)",
            TABLE,
            registry=r,
        )
        # Computed at scrape time from the checkpoint's write time: no update per poll.
        self._checkpoint_ms: dict[tuple[str, str], int] = {}
        r.register(_CheckpointAge(self._checkpoint_ms, clock))
        self.runs = Counter(
            "deltakeeper_maintenance_runs_total",
            "Maintenance operations run, by result (done, dry-run, failed, refused)",
            (*TABLE, "operation", "result"),
            registry=r,
        )
        self.duration = Histogram(
            "deltakeeper_maintenance_duration_seconds",
            "Time one maintenance operation took",
            (*TABLE, "operation"),
            buckets=_DURATION_BUCKETS,
            registry=r,
        )
        self.deleted_files = Counter(
            "deltakeeper_deleted_files_total",
            "Files deleted, by kind (log: metadata cleanup, data: vacuum)",
            (*TABLE, "kind"),
            registry=r,
        )
        self.deleted_bytes = Counter(
            "deltakeeper_deleted_bytes_total",
            "Bytes deleted, by kind (log, data)",
            (*TABLE, "kind"),
            registry=r,
        )
        self.compaction_jobs = Gauge(
            "deltakeeper_compaction_jobs",
            "SparkApplication compaction jobs, by state",
            (*TABLE, "state"),
            registry=r,
        )
        self.storage_requests = Counter(
            "deltakeeper_storage_requests_total",
            "Requests sent to the object store or file system, by operation",
            (*TABLE, "operation"),
            registry=r,
        )
        self._versions: dict[tuple[str, str], int] = {}
        self._last: dict[tuple[str, str], dict[str, int]] = {}
        self._lock = threading.Lock()

    def table(self, namespace: str, table: str, status: Mapping[str, Any]) -> None:
        """Gauges from a status (keys as in DESIGN.md); commits counted from version moves."""
        key = (namespace, table)
        values = {f: v for f in self.gauges if isinstance(v := status.get(f), int)}
        if self._last.get(key) == values:
            return  # a quiet table: nothing moved (10,000 tables poll 333 times a second)
        self._last[key] = values
        for field, value in values.items():
            self.gauges[field].labels(*key).set(value)
        version = status.get("version")
        if isinstance(version, int):
            with self._lock:
                seen = self._versions.get(key)
                self._versions[key] = version
            # The first sight starts the counter at 0 (rate() needs no history before it);
            # a version going back (table re-created) counts nothing.
            self.commits.labels(*key).inc(max(0, version - seen) if seen is not None else 0)

    def checkpoint_written(self, namespace: str, table: str, written_ms: int | None) -> None:
        """When the table's newest checkpoint was written (None: it has none)."""
        if written_ms is None:
            self._checkpoint_ms.pop((namespace, table), None)
        else:
            self._checkpoint_ms[(namespace, table)] = written_ms

    def maintenance(
        self, namespace: str, table: str, operation: str, result: str, seconds: float
    ) -> None:
        self.runs.labels(namespace, table, operation, result).inc()
        self.duration.labels(namespace, table, operation).observe(seconds)

    def deleted(self, namespace: str, table: str, kind: str, files: int, nbytes: int) -> None:
        self.deleted_files.labels(namespace, table, kind).inc(files)
        self.deleted_bytes.labels(namespace, table, kind).inc(nbytes)

    def requests(self, namespace: str, table: str, counts: Mapping[str, int]) -> None:
        for operation, n in counts.items():
            if n:
                self.storage_requests.labels(namespace, table, operation).inc(n)

    def forget(self, namespace: str, table: str) -> None:
        """Drop a table's series (its resource was deleted); counters included."""
        with self._lock:
            self._versions.pop((namespace, table), None)
            self._last.pop((namespace, table), None)
            self._checkpoint_ms.pop((namespace, table), None)
        for metric in (*self.gauges.values(), self.commits):
            _remove(metric, (namespace, table))
        for metric in (
            self.runs,
            self.duration,
            self.deleted_files,
            self.deleted_bytes,
            self.compaction_jobs,
            self.storage_requests,
        ):
            for labels in _children(metric):
                if labels[:2] == (namespace, table):
                    _remove(metric, labels)


class _CheckpointAge(Collector):
    def __init__(self, written: dict[tuple[str, str], int], clock: Callable[[], float]) -> None:
        self.written, self.clock = written, clock

    def collect(self) -> Iterator[GaugeMetricFamily]:
        family = GaugeMetricFamily(
            "deltakeeper_table_checkpoint_age_seconds",
            "Seconds since the newest checkpoint was written",
            labels=TABLE,
        )
        now = self.clock()
        for (namespace, table), ms in list(self.written.items()):
            family.add_metric([namespace, table], max(0.0, now - ms / 1000))
        yield family


def _children(metric: Any) -> list[tuple[str, ...]]:
    return list(metric._metrics)  # prometheus-client keeps children by label values


def _remove(metric: Any, labels: tuple[str, ...]) -> None:
    with contextlib.suppress(KeyError):
        metric.remove(*labels)


def serve(
    metrics: Metrics,
    port: int = DEFAULT_PORT,
    host: str = "0.0.0.0",
    healthy: Callable[[], bool] = lambda: True,
) -> ThreadingHTTPServer:
    """Serve /metrics and /healthz from a daemon thread; `server.shutdown()` stops it."""

    class Handler(BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            path = self.path.split("?", 1)[0]
            if path == "/metrics":
                self._reply(200, generate_latest(metrics.registry), CONTENT_TYPE_LATEST)
            elif path == "/healthz":
                ok = healthy()
                self._reply(200 if ok else 503, b"ok\n" if ok else b"unhealthy\n", "text/plain")
            else:
                self._reply(404, b"try /metrics or /healthz\n", "text/plain")

        def _reply(self, code: int, body: bytes, ctype: str) -> None:
            self.send_response(code)
            self.send_header("Content-Type", ctype)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *args: Any) -> None:  # scrapes every 15 s would flood the log
            pass

    server = ThreadingHTTPServer((host, port), Handler)
    server.daemon_threads = True
    threading.Thread(target=server.serve_forever, name="metrics", daemon=True).start()
    return server
