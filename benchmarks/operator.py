"""The operator at fleet scale, on a real API server: CPU, peak RSS and commit-to-status time.

    python -m benchmarks.operator [--tables 1000] [--on-minio 100] [--poll 30] [--events]

Starts etcd + kube-apiserver (tests/support/kube.py) and MinIO, writes N small Delta tables
(most on local disk, --on-minio of them on MinIO), creates one DeltaTable each, and runs
`deltakeeper operator` as a process. Measures:
- the operator's CPU (user+system, from /proc) over three poll intervals of steady state, as
  cores, and its peak RSS (VmHWM) over the whole run;
- the time from a commit (a new version on storage) to the DeltaTable's status showing it,
  for a sample of tables, in seconds and in poll intervals;
- the peer: delta-rs doing the same observation (DeltaTable.update_incremental() on each local
  table, i.e. "did the log move?") in this process, as CPU per table-poll, next to ours.
With --events, MinIO's tables have storage events (`events: {source: webhook}`, MinIO's own
webhook target posting to the operator's `--events-listen`), and the run also offers the
listener --event-rate forged S3 records a second (one a request, as MinIO sends them) for
--event-seconds: how many it answered, how fast, and when the polls they woke were done.
Writes the "operator" section of BENCHMARKS.md ("operator-events" with --events).
"""

from __future__ import annotations

import argparse
import collections
import contextlib
import gzip
import io
import json
import random
import shutil
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import psutil

from benchmarks.events import BUCKET, TOKEN, notify, quantile, webhook_env
from benchmarks.harness import (
    MIB,
    REPO,
    deltars_minio_options,
    machine,
    machine_line,
    write_section,
)
from tests.support import kube, stores, waiting

GROUP, VERSION, PLURAL = "deltakeeper.io", "v1alpha1", "deltatables"
NS = "bench"
SCHEMA = json.dumps(
    {"type": "struct", "fields": [{"name": "id", "type": "long", "nullable": True, "metadata": {}}]}
)


def commit_json(version: int) -> bytes:
    """A small valid commit: version 0 creates the table, later ones add one file each."""
    now = int(time.time() * 1000)
    actions: list[dict[str, Any]] = []
    if version == 0:
        actions += [
            {"protocol": {"minReaderVersion": 1, "minWriterVersion": 2}},
            {
                "metaData": {
                    "id": f"bench-{random.getrandbits(64):016x}",
                    "format": {"provider": "parquet", "options": {}},
                    "schemaString": SCHEMA,
                    "partitionColumns": [],
                    "configuration": {},
                    "createdTime": now,
                }
            },
        ]
    actions.append(
        {
            "add": {
                "path": f"part-{version:05d}.parquet",
                "partitionValues": {},
                "size": 1000,
                "modificationTime": now,
                "dataChange": True,
                "stats": '{"numRecords":10}',
            }
        }
    )
    actions.append({"commitInfo": {"timestamp": now, "operation": "WRITE"}})
    return b"".join(json.dumps(a).encode() + b"\n" for a in actions)


def log_key(version: int) -> str:
    return f"_delta_log/{version:020d}.json"


class Lake:
    """Where the benchmark's tables live: local folders, and some on MinIO."""

    def __init__(self, root: Path, minio: stores.Emulator, n: int, on_minio: int) -> None:
        self.root, self.minio, self.n, self.on_minio = root, minio, n, on_minio
        self.fs = minio.fs

    def uri(self, i: int) -> str:
        if i < self.on_minio:
            return f"s3://lake/t{i:05d}"
        return f"file://{self.root / f't{i:05d}'}"

    def commit(self, i: int, version: int) -> None:
        data = commit_json(version)
        if i < self.on_minio:
            self.fs.pipe(f"lake/t{i:05d}/{log_key(version)}", data)
        else:
            path = self.root / f"t{i:05d}" / log_key(version)
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_bytes(data)

    def create_all(self) -> None:
        for start in range(0, self.on_minio, 2000):  # in batches: one PUT each, 128 in flight
            blobs = {
                f"lake/t{i:05d}/{log_key(0)}": commit_json(0)
                for i in range(start, min(self.on_minio, start + 2000))
            }
            self.fs.pipe(blobs, batch_size=128)
        with ThreadPoolExecutor(8) as pool:
            list(pool.map(lambda i: self.commit(i, 0), range(self.on_minio, self.n)))


def minio_secret(minio: stores.Emulator) -> dict[str, str]:
    """The Secret a DeltaTable's (or DeltaLake's) storage.secretRef names for `minio`."""
    return {
        "AWS_ACCESS_KEY_ID": minio.storage_options["key"],
        "AWS_SECRET_ACCESS_KEY": minio.storage_options["secret"],
    }


def create_resources(
    cluster: kube.KubeCluster, lake: Lake, poll_s: int, resync_s: int | None = None
) -> float:
    """The DeltaTables (with `resync_s`: MinIO's with webhook events); seconds taken."""
    from kubernetes import client

    cluster.create_namespace(NS)
    cluster.create_secret(NS, "minio", minio_secret(lake.minio))
    local = threading.local()

    def create(i: int) -> None:
        if not hasattr(local, "api"):
            local.api = client.CustomObjectsApi(cluster.api_client())
        spec: dict[str, Any] = {"uri": lake.uri(i), "pollInterval": f"{poll_s}s"}
        if i < lake.on_minio:
            spec["storage"] = {
                "secretRef": {"name": "minio"},
                "options": {"endpoint_url": lake.minio.endpoint},
            }
            if resync_s is not None:
                spec["events"] = {"source": "webhook", "resyncInterval": f"{resync_s}s"}
        body = {
            "apiVersion": f"{GROUP}/{VERSION}",
            "kind": "DeltaTable",
            "metadata": {"name": f"t{i:05d}"},
            "spec": spec,
        }
        local.api.create_namespaced_custom_object(GROUP, VERSION, NS, PLURAL, body)

    started = time.monotonic()
    with ThreadPoolExecutor(8) as pool:
        list(pool.map(create, range(lake.n)))
    return time.monotonic() - started


class StatusWatch:
    """Every DeltaTable's `status.version`, and when it was first seen, from one watch stream
    (a LIST of 10,000 objects every half second would load the API server and this machine
    more than the operator does)."""

    def __init__(self, cluster: kube.KubeCluster) -> None:
        self.cluster = cluster
        self.seen: dict[str, tuple[int | None, float]] = {}  # name -> (version, seen at)
        self.modified = 0  # MODIFIED events: every write to a DeltaTable (status or metadata)
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()

    def _run(self) -> None:
        from kubernetes import client, watch

        api = client.CustomObjectsApi(self.cluster.api_client())
        resource_version = None
        while not self._stop.is_set():
            w = watch.Watch()
            kwargs: dict[str, Any] = {"timeout_seconds": 60}
            if resource_version:
                kwargs["resource_version"] = resource_version
            try:
                for event in w.stream(
                    api.list_namespaced_custom_object, GROUP, VERSION, NS, PLURAL, **kwargs
                ):
                    obj = event["object"]
                    self.modified += event["type"] == "MODIFIED"
                    name = obj["metadata"]["name"]
                    resource_version = obj["metadata"]["resourceVersion"]
                    version = (obj.get("status") or {}).get("version")
                    if self.seen.get(name, (None, 0.0))[0] != version:
                        self.seen[name] = (version, time.monotonic())
                    if self._stop.is_set():
                        break
            except Exception:  # expired resourceVersion, a dropped stream: start over
                resource_version = None
                time.sleep(0.5)

    def with_status(self) -> int:
        return sum(v is not None for v, _ in list(self.seen.values()))

    def close(self) -> None:
        self._stop.set()


SCRAPES = 4  # the scraped window: a scrape every 30 s, as the chart's ServiceMonitor


def scraped_cores(proc: psutil.Process, url: str, scrapes: int, progress: Progress) -> float:
    """The operator's cores over `scrapes` 30-s intervals, each ended by a full gzipped
    scrape (the steady work and the scrapes, as a Prometheus-watched deployment has them)."""
    progress.say(f"scraped window: {scrapes} scrapes, 30 s apart")
    cpu, start = cpu_seconds(proc), time.monotonic()
    for k in range(1, scrapes + 1):
        time.sleep(max(0.0, start + 30 * k - time.monotonic()))
        scrape(url)
    return round((cpu_seconds(proc) - cpu) / (time.monotonic() - start), 3)


def maintenance_runs(metrics_url: str, operation: str) -> float:
    return _metric_sum(
        metrics_url, "deltakeeper_maintenance_runs_total{", f'operation="{operation}"'
    )


def cpu_seconds(proc: psutil.Process) -> float:
    t = proc.cpu_times()
    return float(t.user + t.system)


def children_cpu_seconds(proc: psutil.Process) -> float:
    """CPU of the processes the operator started (the webhook's server), alive now."""
    total = 0.0
    for child in proc.children(recursive=True):
        with contextlib.suppress(psutil.Error):
            total += cpu_seconds(child)
    return total


# What the steady window counts, from one scrape (_metric_sums): (series prefix, label) a name.
WINDOW_COUNTS = {
    "lists": ("deltakeeper_storage_requests_total{", 'operation="list"'),
    "cleanup_runs": ("deltakeeper_maintenance_runs_total{", 'operation="cleanup"'),
    "vacuum_runs": ("deltakeeper_maintenance_runs_total{", 'operation="vacuum"'),
    **{
        f"polls_{t}": ("deltakeeper_polls_total{", f'trigger="{t}"')
        for t in ("event", "interval", "resync", "fallback")
    },
}


def scrape(metrics_url: str) -> bytes:
    """/metrics as Prometheus asks for it: every series, gzipped (raw, not decompressed)."""
    import urllib.request

    request = urllib.request.Request(metrics_url, headers={"Accept-Encoding": "gzip"})
    with urllib.request.urlopen(request, timeout=120) as r:
        body = r.read()
        return body if r.headers.get("Content-Encoding") == "gzip" else gzip.compress(body)


def _metric_sum(metrics_url: str, prefix: str, label: str) -> float:
    return _metric_sums(metrics_url, {"sum": (prefix, label)})["sum"]


def _metric_sums(metrics_url: str, wanted: dict[str, tuple[str, str]]) -> dict[str, float]:
    """Per name, the values of the series that start with its prefix and carry its label, summed
    over one scrape."""
    # GzipFile reads the members back to back as they come (gzip.decompress copies the rest
    # of the data at each of tens of thousands of members).
    text = gzip.GzipFile(fileobj=io.BytesIO(scrape(metrics_url))).read().decode()
    sums = dict.fromkeys(wanted, 0.0)
    for line in text.splitlines():
        for name, (prefix, label) in wanted.items():
            if line.startswith(prefix) and label in line:
                sums[name] += float(line.rsplit(" ", 1)[1])
    return sums


def deltars_poll_cpu(lake: Lake, sample: int) -> float:
    """CPU seconds per table-poll for delta-rs's own "did the log move?", on the store most
    tables are on (its object_store client on MinIO, the file system otherwise)."""
    from deltalake import DeltaTable

    if lake.on_minio * 2 > lake.n:
        opts = deltars_minio_options(lake.minio)
        picks = range(min(sample, lake.on_minio))
        tables = [DeltaTable(lake.uri(i), storage_options=opts) for i in picks]
    else:
        paths = [str(lake.root / f"t{i:05d}") for i in range(lake.on_minio, lake.n)][:sample]
        tables = [DeltaTable(p) for p in paths]
    before = time.process_time()
    for _ in range(3):
        for dt in tables:
            dt.update_incremental()
    return (time.process_time() - before) / (3 * len(tables))


@dataclass(frozen=True)
class EventLoad:
    """Forged S3 records offered to the operator's webhook listener."""

    rate: int  # a second, one record a request
    seconds: int
    resync_s: int = 3600  # the tables' resyncInterval


CONNECTIONS = 64  # the webhook load's kept-alive connections


def offer_events(port: int, on_minio: int, load: EventLoad) -> dict[str, Any]:
    """Post `load.rate` records a second for `load.seconds`, each naming version 0's commit of
    a random MinIO table (a duplicate notification: it wakes a poll that finds nothing new).
    Latency runs from when a request was due, so a listener falling behind shows in it.

    Sent over CONNECTIONS kept-alive connections as plain HTTP/1.1, request k on connection
    k % CONNECTIONS: an HTTP client library took half a core at 1,000 a second, CPU the
    operator and MinIO share on this machine."""
    import asyncio

    answers: collections.Counter[str] = collections.Counter()
    lat: list[float] = []
    rtt: list[float] = []  # from the request's send: the listener's part, without this side's

    def request(key: str) -> bytes:
        record = {"s3": {"bucket": {"name": BUCKET}, "object": {"key": key}}}
        body = json.dumps({"Records": [record]}).encode()
        head = (
            f"POST /events HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\n"
            f"Authorization: Bearer {TOKEN}\r\nContent-Type: application/json\r\n"
            f"Content-Length: {len(body)}\r\n\r\n"
        )
        return head.encode() + body

    async def answer(reader: asyncio.StreamReader) -> str:
        head = await reader.readuntil(b"\r\n\r\n")
        length = 0
        for line in head.split(b"\r\n")[1:]:
            name, _, value = line.partition(b":")
            if name.strip().lower() == b"content-length":
                length = int(value)
        await reader.readexactly(length)
        return head.split(b" ", 2)[1].decode()

    async def connection(first: int, t0: float, total: int) -> None:
        streams: tuple[asyncio.StreamReader, asyncio.StreamWriter] | None = None
        for k in range(first, total, CONNECTIONS):
            due = t0 + k / load.rate
            await asyncio.sleep(max(0.0, due - time.monotonic()))
            data = request(f"t{random.randrange(on_minio):05d}/{log_key(0)}")
            try:
                if streams is None:
                    streams = await asyncio.open_connection("127.0.0.1", port)
                sent = time.monotonic()
                streams[1].write(data)
                answers[await answer(streams[0])] += 1
                rtt.append(time.monotonic() - sent)
            except (OSError, asyncio.IncompleteReadError, asyncio.LimitOverrunError) as e:
                answers[type(e).__name__] += 1
                if streams is not None:
                    streams[1].close()
                streams = None
            lat.append(time.monotonic() - due)
        if streams is not None:
            streams[1].close()

    async def go() -> float:
        t0 = time.monotonic()
        total = load.rate * load.seconds
        await asyncio.gather(*(connection(i, t0, total) for i in range(CONNECTIONS)))
        return time.monotonic() - t0

    took = asyncio.run(go())
    return {
        "offered": load.rate * load.seconds,
        "answers": dict(answers),
        "answered_per_s": round(answers["200"] / took, 1),
        "answer_p50_s": round(quantile(lat, 0.5), 3),
        "answer_p99_s": round(quantile(lat, 0.99), 3),
        "sent_to_answer_p50_s": round(quantile(rtt, 0.5), 3) if rtt else None,
        "sent_to_answer_p99_s": round(quantile(rtt, 0.99), 3) if rtt else None,
        "offer_s": round(took, 1),
    }


def event_polls(metrics_url: str) -> float:
    return _metric_sum(metrics_url, "deltakeeper_polls_total{", 'trigger="event"')


def polls_settle(metrics_url: str, quiet_s: float = 5.0, limit_s: float = 600.0) -> float:
    """Seconds until the event polls stop growing (the last growth seen), at most `limit_s`."""
    started = time.monotonic()
    last, last_change = event_polls(metrics_url), started
    while time.monotonic() - last_change < quiet_s and time.monotonic() - started < limit_s:
        time.sleep(0.5)
        now = event_polls(metrics_url)
        if now != last:
            last, last_change = now, time.monotonic()
    return last_change - started


def run(
    n: int, on_minio: int, poll_s: int, samples: int, load: EventLoad | None = None
) -> dict[str, Any]:
    work = Path(tempfile.mkdtemp(prefix="dk-bench-operator-"))
    cluster = kube.start(kube.install(), work / "kube")
    events = load is not None
    listen = stores.free_port()
    env = webhook_env(listen, None) if events else None
    minio = stores.start_minio(stores.install()["MINIO"], work / "minio", env=env)
    report: dict[str, Any] = {"tables": n, "on_minio": on_minio, "poll_s": poll_s}
    report["events"] = events
    if load is not None:
        report["resync_s"] = load.resync_s
    progress = Progress(time.monotonic())
    op = None
    statuses: StatusWatch | None = None
    try:
        cluster.apply_crds()
        lake = Lake(work / "lake", minio, n, on_minio)
        progress.say(f"writing {n} tables ({on_minio} on MinIO)")
        lake.create_all()
        if events:
            notify(minio, True)  # the tables' commits from now on
        progress.say(f"creating {n} DeltaTables")
        resync_s = load.resync_s if load is not None else None
        report["create_resources_s"] = round(create_resources(cluster, lake, poll_s, resync_s), 1)
        port = stores.free_port()
        log = open(work / "operator.log", "wb")  # noqa: SIM115 (closed with the process)
        cmd = [str(Path(sys.executable).parent / "deltakeeper"), "operator", "--namespace", NS]
        cmd += ["--metrics-port", str(port)]
        if events:
            (work / "token").write_text(TOKEN)
            cmd += ["--events-listen", f"127.0.0.1:{listen}"]
            cmd += ["--events-token-file", str(work / "token")]
        statuses = StatusWatch(cluster)
        started = time.monotonic()
        op = subprocess.Popen(cmd, env=cluster.env(), stdout=log, stderr=subprocess.STDOUT)
        proc = psutil.Process(op.pid)
        progress.pid = op.pid
        progress.say("operator started")
        url = f"http://127.0.0.1:{port}/metrics"
        while (shown := statuses.with_status()) < n:
            if op.poll() is not None:
                raise RuntimeError((work / "operator.log").read_text()[-3000:])
            progress.say(f"statuses: {shown}/{n}", force=False)
            time.sleep(1)
        report["all_status_s"] = round(time.monotonic() - started, 1)
        progress.say(f"every table has a status ({report['all_status_s']} s)")
        # The first pass: every new table is due for cleanup and vacuum once.
        while (vacuumed := maintenance_runs(url, "vacuum")) < n:
            if op.poll() is not None:
                raise RuntimeError((work / "operator.log").read_text()[-3000:])
            progress.say(f"first pass: {vacuumed:.0f}/{n} vacuumed", force=False)
            time.sleep(5)
        report["first_pass_s"] = round(time.monotonic() - started, 1)
        progress.say(f"first pass done ({report['first_pass_s']} s); steady window")
        if resync_s is not None:  # the window holds resync polls, as every later hour does
            resyncs = started + 1.1 * resync_s
            while time.monotonic() < resyncs:
                progress.say("waiting for the first resync polls", force=False)
                time.sleep(min(30.0, max(0.0, resyncs - time.monotonic())))
        # Steady state: three poll intervals of quiet tables. The LIST counts come from a
        # scrape of every series, one just before the window and one just after, each outside
        # it: a scrape's CPU grows with the tables, not with the window, so it is measured on
        # its own (Prometheus scrapes every 15-60 s; the chart's ServiceMonitor every 30 s).
        counts0, lt0 = _metric_sums(url, WINDOW_COUNTS), time.monotonic()
        cpu0, t0 = cpu_seconds(proc), time.monotonic()
        writes0 = statuses.modified
        time.sleep(3 * poll_s)
        cpu1, t1 = cpu_seconds(proc), time.monotonic()
        writes1 = statuses.modified
        counts1 = _metric_sums(url, WINDOW_COUNTS)
        lt1 = time.monotonic()
        lists0, lists1 = counts0["lists"], counts1["lists"]
        # Per table-hour, what the LISTs came from: polls by trigger, and the maintenance that
        # lists (a cleanup plan lists the log; a quiet LITE vacuum lists it from N).
        report["window_per_table_hour"] = {
            name: round((counts1[name] - counts0[name]) * 3600 / (lt1 - lt0) / n, 3)
            for name in WINDOW_COUNTS
        }
        report["scrape_s"] = round(lt1 - t1, 2)
        report["scrape_cpu_s"] = round(cpu_seconds(proc) - cpu1, 2)
        report["writes_per_s"] = round((writes1 - writes0) / (t1 - t0), 2)
        report["steady_cores"] = round((cpu1 - cpu0) / (t1 - t0), 3)
        report["cores_scraped_30s"] = scraped_cores(proc, url, SCRAPES, progress)
        polls_per_s = (lists1 - lists0) / (lt1 - lt0)
        report["polls_per_s"] = round(polls_per_s, 1)
        report["lists_per_table_hour"] = round(polls_per_s * 3600 / n, 2)
        polls = max(1.0, polls_per_s * (t1 - t0))
        report["cpu_ms_per_poll"] = round(1000 * (cpu1 - cpu0) / polls, 3)
        report["rss_steady_mib"] = round(proc.memory_info().rss / MIB, 1)
        progress.say(f"steady: {report['steady_cores']} cores; commit-to-status")
        # Commit to status: a new version on a sample of tables (local and MinIO).
        picks = random.sample(range(n), samples)
        committed = {}
        for i in picks:
            lake.commit(i, 1)
            committed[f"t{i:05d}"] = time.monotonic()
        deadline = time.monotonic() + 4 * poll_s + 60
        lat: list[float] = []
        while time.monotonic() < deadline:
            seen = {name: statuses.seen.get(name, (None, 0.0)) for name in committed}
            lat = sorted(at - committed[name] for name, (v, at) in seen.items() if v == 1)
            if len(lat) == len(committed):
                break
            time.sleep(0.5)
        report["latency_samples"] = len(committed)
        report["latency_seen"] = len(lat)
        if lat:
            report["latency_median_s"] = round(statistics.median(lat), 1)
            report["latency_max_s"] = round(lat[-1], 1)
            report["latency_max_polls"] = round(lat[-1] / poll_s, 2)
        if load is not None:
            progress.say(f"webhook: {load.rate}/s for {load.seconds} s")
            cpu0, children0, polls0 = (
                cpu_seconds(proc),
                children_cpu_seconds(proc),
                event_polls(url),
            )
            w = report["webhook"] = offer_events(listen, on_minio, load)
            w["event_polls_done_s"] = round(polls_settle(url), 1)
            cpu = cpu_seconds(proc) - cpu0
            w["operator_cores"] = round(cpu / w["offer_s"], 2)
            w["listener_cores"] = round((children_cpu_seconds(proc) - children0) / w["offer_s"], 2)
            w["event_polls"] = int(event_polls(url) - polls0)
            w["operator_cpu_ms_per_event_poll"] = round(1000 * cpu / max(1, w["event_polls"]), 2)
        report["peak_rss_mib"] = round(peak_rss(op.pid) / MIB, 1)
        report["operator_cpu_total_s"] = round(cpu_seconds(proc), 1)
        report["deltars_cpu_ms_per_poll"] = round(1000 * deltars_poll_cpu(lake, 500), 3)
        report["apiserver_rss_mib"] = round(
            psutil.Process(cluster.apiserver.pid).memory_info().rss / MIB
        )
        report["etcd_rss_mib"] = round(psutil.Process(cluster.etcd.pid).memory_info().rss / MIB)
    finally:
        if statuses is not None:
            statuses.close()
        if op is not None and op.poll() is None:
            report["stop_s"] = stop_operator(op)
        cluster.stop()
        minio.stop()
        shutil.rmtree(work, ignore_errors=True)  # gigabytes at 10,000 tables
    return report


class Progress:
    """A line on stderr per phase, and every 60 s while a phase waits: a run at 50,000 tables
    takes over an hour, and a stopped one should say how far it got and how big it was."""

    EVERY_S = 60.0

    def __init__(self, started: float) -> None:
        self.started, self.last = started, 0.0
        self.pid: int | None = None

    def say(self, what: str, force: bool = True) -> None:
        now = time.monotonic()
        if not force and now - self.last < self.EVERY_S:
            return
        self.last = now
        rss = ""
        if self.pid is not None:
            with contextlib.suppress(psutil.Error):
                rss = f", operator RSS {psutil.Process(self.pid).memory_info().rss / MIB:.0f} MiB"
        print(f"[{now - self.started:7.1f} s] {what}{rss}", file=sys.stderr, flush=True)


def stop_operator(op: subprocess.Popen[bytes]) -> float | None:
    """Seconds from SIGTERM to exit; None when it took over 120 s and was killed (said in the
    report, not a lost run)."""
    stopping = time.monotonic()
    if not waiting.stop(op, 120, 30):
        return None
    return round(time.monotonic() - stopping, 1)


def stopped(stop_s: float | None) -> str:
    return f"{stop_s} s" if stop_s is not None else "killed after 120 s"


def peak_rss(pid: int) -> int:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1]) * 1024
    return 0


def provenance() -> str:
    """When, and on which commit (and whether the tree had changes), a run started."""
    head = subprocess.run(
        ["git", "-C", str(REPO), "rev-parse", "--short", "HEAD"], capture_output=True, text=True
    ).stdout.strip()
    dirty = subprocess.run(
        ["git", "-C", str(REPO), "status", "--porcelain", "operator"],
        capture_output=True,
        text=True,
    ).stdout.strip()
    when = time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime())
    return f"- Date: {when}, deltakeeper commit {head}" + (
        " + uncommitted changes in operator/" if dirty else ""
    )


def section(reports: list[dict[str, Any]], m: dict[str, Any], started: str) -> str:
    rows = []
    for r in reports:
        ratio = r["cpu_ms_per_poll"] / r["deltars_cpu_ms_per_poll"]
        latency = (
            f"{r.get('latency_median_s', '-')} s / {r.get('latency_max_s', '-')} s "
            f"({r.get('latency_max_polls', '-')} polls; {r['latency_seen']}/{r['latency_samples']})"
        )
        rows.append(
            f"| {r['tables']:,} ({r['on_minio']} on MinIO) | {r['poll_s']} s | "
            f"{r['steady_cores']:.3f} | {r['peak_rss_mib']:.0f} MiB | {r['polls_per_s']} | "
            f"{r['cpu_ms_per_poll']:.2f} ms vs {r['deltars_cpu_ms_per_poll']:.2f} ms "
            f"({ratio:.2f}x) | {latency} | {r['all_status_s']} s / {r['first_pass_s']} s | "
            f"{r.get('writes_per_s', '-')} | {r['scrape_s']} s | {stopped(r.get('stop_s'))} |"
        )
    return "\n".join(
        [
            "## Operator at fleet scale (`python -m benchmarks.operator`)",
            "",
            started,
            machine_line(m),
            "- One `deltakeeper operator` process against a real kube-apiserver + etcd on the same "
            "machine; quiet one-commit tables on the local disk and on MinIO (the first column "
            "says how many on MinIO). CPU is the "
            "operator's own (user+system) over three poll intervals of steady state, after the "
            "first pass; peak RSS is its VmHWM over the whole run. Commit-to-status: a new "
            "commit on a random sample of tables until a watch on the DeltaTables shows "
            "`status.version` move. Start: time from the operator's start until every table has "
            "a status, and until every table's first maintenance pass (on these tables: looked, "
            "nothing to do). API writes: DeltaTable modifications a second over the steady "
            "window, from the same watch. Scrape: one GET of /metrics with every series. "
            "Stop: SIGTERM to exit. "
            "The peer column: delta-rs's `update_incremental()` on the same tables, CPU per "
            "table-poll, against ours (operator CPU / listings); on local tables, or on MinIO "
            "tables when most are there.",
            "- Target (issue 24): 10,000 tables at a 30 s poll within half a core and 1 GiB, "
            "commit-to-status within 1.2 poll intervals, CPU per poll at most delta-rs's; "
            "50,000 tables at a 60 s poll within one core and 2 GiB, API writes for quiet "
            "tables at most 15 a second.",
            "- Read with care: the first pass here is cheap (nothing to delete). On real tables "
            "every table's first cleanup and vacuum queue behind `--max-concurrent` slots, but "
            "statuses do not wait for them: a poll publishes what it saw before it maintains. "
            "CPU per poll at 1,000 tables carries fixed costs (peering checks every 3 s, kopf's "
            "keepalive, the heartbeat) over ten times fewer polls. Other processes (the API "
            "server, etcd, MinIO, this script) share the two CPUs.",
            "",
            "| tables | poll | cores (steady) | peak RSS | polls/s "
            "| CPU per poll: ours vs delta-rs | commit-to-status median / max "
            "| start: all statuses / first pass | API writes/s | scrape | stop |",
            "|---|---|---|---|---|---|---|---|---|---|---|",
            *rows,
        ]
    )


def scraped(r: dict[str, Any]) -> str:
    """A scrape's time and CPU, and the steady cores with one every 30 s."""
    if "scrape_cpu_s" not in r:
        return f"{r['scrape_s']} s"
    return f"{r['scrape_s']} s, {r['scrape_cpu_s']} CPU-s; {r['cores_scraped_30s']:.3f}"


def lists_split(r: dict[str, Any]) -> str:
    """Where a window's LISTs came from, per table-hour (runs before the split was kept: none)."""
    w = r.get("window_per_table_hour")
    if not w:
        return ""
    polls = ", ".join(
        f"{t} {w[f'polls_{t}']}"
        for t in ("resync", "event", "interval", "fallback")
        if w[f"polls_{t}"]
    )
    runs = f"cleanup plans {w['cleanup_runs']}, vacuums {w['vacuum_runs']}"
    return f" (polls: {polls or 'none'}; {runs})"


def events_section(reports: list[dict[str, Any]], m: dict[str, Any], started: str) -> str:
    rows = []
    for r in reports:
        w = r["webhook"]
        ok = w["answers"].get("200", 0)
        rows.append(
            f"| {r['tables']:,} ({r['on_minio']:,} with events) | {r['poll_s']} s, resync "
            f"{r.get('resync_s', 3600)} s | "
            f"{r['steady_cores']:.3f} | {scraped(r)} | {r['peak_rss_mib']:.0f} MiB | "
            f"{r['lists_per_table_hour']}{lists_split(r)} | {r.get('latency_median_s', '-')} s / "
            f"{r.get('latency_max_s', '-')} s ({r['latency_seen']}/{r['latency_samples']}) | "
            f"{r['all_status_s']} s / {r['first_pass_s']} s | {r.get('writes_per_s', '-')} | "
            f"{w['offered']:,} in {w['offer_s']} s: {ok:,} answered 200, "
            f"{w['answered_per_s']:,}/s, p50 {w['answer_p50_s']} s, p99 {w['answer_p99_s']} s "
            f"(from the send: {w.get('sent_to_answer_p50_s')} s / "
            f"{w.get('sent_to_answer_p99_s')} s); operator {w['operator_cores']} cores, "
            f"listener {w.get('listener_cores', '-')} | {w.get('event_polls', '-'):,} event polls "
            f"({w.get('operator_cpu_ms_per_event_poll', '-')} ms CPU each), done "
            f"{w['event_polls_done_s']} s after |"
        )
    return "\n".join(
        [
            "## Operator with storage events at fleet scale (`python -m benchmarks.operator "
            "--events`)",
            "",
            started,
            machine_line(m),
            "- One `deltakeeper operator --events-listen` against a real kube-apiserver + etcd "
            "and MinIO on the same machine; one-commit tables, those on MinIO with `events: "
            "{source: webhook, resyncInterval: ...}` (the poll column) and MinIO's own webhook "
            "target posting their `.json` writes to the operator (no queue dir); the rest on "
            "local disk, polled. Steady: the operator's CPU (user+system) and LIST requests "
            "(its own count) over three poll intervals after the first pass, and no sooner "
            "than 1.1 resync intervals after the start, so resync polls and their "
            "status refreshes are in it; no scrape of /metrics falls in it. Scrape: one GET of "
            "/metrics with every series, gzipped as Prometheus asks (the operator keeps "
            "unchanged series compressed from the scrape before the window), its time and the "
            "operator's CPU for it; then the operator's cores over four 30-s intervals, each "
            "ended by such a scrape (the chart's ServiceMonitor). "
            "Commit-to-status: a commit "
            "on a random sample of tables (written to MinIO, announced by MinIO) until a watch "
            "on the DeltaTables shows `status.version` move. Webhook: forged records (one a "
            "request, version 0's commit of a random MinIO table: each wakes a poll that finds "
            "nothing new) offered at a fixed rate from this script; answer times from when each "
            "was due; then the time until the operator's event polls stopped growing.",
            "- Target (issue 47): 50,000 tables (at least 5,000 on MinIO with events): steady "
            "CPU <= 0.05 core (polling at 60 s: 0.317), memory <= 2 GiB, the webhook taking "
            "1,000 events a second without falling behind.",
            "",
            "| tables | poll | cores (steady) | scrape: time, CPU; cores scraped every 30 s "
            "| peak RSS | LISTs per table-hour "
            "| commit-to-status median / max | start: all statuses / first pass | API writes/s "
            "| webhook under load | event polls |",
            "|---|---|---|---|---|---|---|---|---|---|---|",
            *rows,
        ]
    )


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--tables", type=int, nargs="+", default=[1000])
    ap.add_argument("--on-minio", type=int, default=100)
    ap.add_argument("--poll", type=int, default=30, help="pollInterval in seconds")
    ap.add_argument("--samples", type=int, default=20, help="tables for commit-to-status")
    ap.add_argument("--no-write", action="store_true", help="print, do not touch BENCHMARKS.md")
    ap.add_argument(
        "--section",
        default="operator",
        help="BENCHMARKS.md section to (re)write (default operator; e.g. operator-minio)",
    )
    ap.add_argument(
        "--events",
        action="store_true",
        help="MinIO's tables with storage events (webhook), and the webhook under load",
    )
    ap.add_argument("--event-rate", type=int, default=1000, help="records a second offered")
    ap.add_argument("--event-seconds", type=int, default=30, help="for this long")
    ap.add_argument(
        "--resync",
        type=int,
        default=3600,
        help="resyncInterval of the tables with events, in seconds; the steady window begins "
        "1.1 of it after the start, so it holds resync polls (10,000 tables at 720 s poll as "
        "often as 50,000 at an hour)",
    )
    args = ap.parse_args()
    m = machine()
    started = provenance()
    load = EventLoad(args.event_rate, args.event_seconds, args.resync) if args.events else None
    reports = []
    for n in args.tables:
        r = run(n, min(args.on_minio, n), args.poll, min(args.samples, n), load)
        print(json.dumps(r), flush=True)
        reports.append(r)
    text = (events_section if args.events else section)(reports, m, started)
    print(text)
    if not args.no_write:
        name = "operator-events" if args.events and args.section == "operator" else args.section
        write_section(REPO / "BENCHMARKS.md", "bench", name, text)


if __name__ == "__main__":
    main()
