"""Storage events against polling, on MinIO with its own webhook delivery (issue 47).

One MinIO whose bucket notifications (`.json` writes) go to `deltakeeper run --events-listen`.
TABLES one-commit tables (delta-rs wrote one, copied), then two runs of the daemon over them:

1. Polling: every table at a POLL-second pollInterval, no events. Quiet, over WINDOW seconds
   after its first pass: LIST requests by MinIO's own count (per table-hour), process CPU
   (cores), RSS. Then COMMITS_POLL commits (delta-rs) to random tables, one at a time: commit to
   metrics (`deltakeeper_table_version` scraped) and commit to status (the status file, which
   is rewritten 0.1 s after a change, or later when writing it takes longer than a tenth of
   the time: 10,000 tables' file is megabytes).
2. Events: the same tables with `events: {source: webhook, resyncInterval: RESYNC}` (the
   bucket notification set now, so nothing from phase 1 is queued for it). The same quiet
   window; COMMITS commits, one at a time, each to a table of its own where there are enough
   tables; a burst of BURST commits to BURST_TABLES tables by one writer a table: when each
   table shows its last version after its last commit, and the polls it took; a new table under
   a DeltaLake's prefix (a 1 h scanInterval): its first commit to its version in the metrics.

    python -m benchmarks.events                  # 10,000 tables etc. (the issue's sizes)
    python -m benchmarks.events --tables 500 --commits 200 --burst 1000 --burst-tables 20
    python -m benchmarks.events --quick          # 30 tables, 3 s poll, short: prints only

Latencies start when `write_deltalake` returns (the commit is in the store) and end when a
scrape or the status file shows the version: MinIO's delivery, the poll and the scrape are all
in them.
"""

from __future__ import annotations

import argparse
import json
import math
import random
import re
import statistics
import subprocess
import sys
import tempfile
import threading
import time
import urllib.request
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import yaml

from benchmarks.daemon_poll import settle
from benchmarks.harness import (
    REPO,
    cpu_s,
    deltars_minio_options,
    machine,
    machine_line,
    minio_store,
    proc_status_bytes,
    write_section,
)
from deltakeeper.units import parse_duration_ms

TABLES, POLL_S, WINDOW_S, RESYNC = 10_000, 30, 120, "1h"
COMMITS, COMMITS_POLL = 1000, 10
BURST, BURST_TABLES, BURST_SECONDS = 10_000, 100, 60.0  # "within one minute"
BUCKET, NS, TARGET_ID = "lake", "bench", "DK"
TOKEN = "benchmark-events-token-0123456789"
LIST_TARGET = 1.2  # LIST requests per table-hour with events
P50_TARGET, P99_TARGET, BURST_TARGET, NEW_TABLE_TARGET = 1.0, 3.0, 5.0, 3.0
_VERSION = re.compile(
    rf'^deltakeeper_table_version{{namespace="{NS}",table="([^"]+)"}} (\S+)$', re.M
)


def lists(counts: dict[str, int]) -> int:
    return sum(n for op, n in counts.items() if "list" in op.lower())


def name(i: int) -> str:
    return f"t{i:05d}"


def make_tables(emu: Any, work: Path, n: int) -> None:
    """`n` copies of one delta-rs table (one commit) on MinIO, before any notification."""
    import deltalake
    import pyarrow as pa

    template = work / "template"
    deltalake.write_deltalake(str(template), pa.table({"a": [1, 2]}))
    files = [f for f in template.rglob("*") if f.is_file()]
    blobs = {
        f"{BUCKET}/{name(i)}/{f.relative_to(template)}": f.read_bytes()
        for i in range(n)
        for f in files
    }
    emu.fs.pipe(blobs, batch_size=64)


def webhook_env(listen: int, queue_dir: Path | None) -> dict[str, str]:
    """MinIO's settings for its webhook target at 127.0.0.1:`listen`; with `queue_dir` (made
    here), it keeps what it could not deliver there, and sends from it on a cadence."""
    env = {
        f"MINIO_NOTIFY_WEBHOOK_ENABLE_{TARGET_ID}": "on",
        f"MINIO_NOTIFY_WEBHOOK_ENDPOINT_{TARGET_ID}": f"http://127.0.0.1:{listen}/events",
        f"MINIO_NOTIFY_WEBHOOK_AUTH_TOKEN_{TARGET_ID}": TOKEN,
    }
    if queue_dir is not None:
        queue_dir.mkdir()
        env[f"MINIO_NOTIFY_WEBHOOK_QUEUE_DIR_{TARGET_ID}"] = str(queue_dir)
    return env


def notify(emu: Any, on: bool) -> None:
    """PutBucketNotificationConfiguration: `.json` writes to MinIO's webhook target, or none."""
    import botocore.session

    s3 = botocore.session.get_session().create_client(
        "s3",
        endpoint_url=emu.endpoint,
        region_name="us-east-1",
        aws_access_key_id=emu.storage_options["key"],
        aws_secret_access_key=emu.storage_options["secret"],
    )
    rules = [
        {
            "QueueArn": f"arn:minio:sqs::{TARGET_ID}:webhook",
            "Events": ["s3:ObjectCreated:*"],
            "Filter": {"Key": {"FilterRules": [{"Name": "suffix", "Value": ".json"}]}},
        }
    ]
    config = {"QueueConfigurations": rules} if on else {}
    s3.put_bucket_notification_configuration(Bucket=BUCKET, NotificationConfiguration=config)


def write_manifests(
    emu: Any, folder: Path, n: int, poll_s: float, events: dict[str, str] | None
) -> None:
    o = emu.storage_options
    storage = {"secretRef": {"name": "s3"}, "options": {"endpoint_url": o["endpoint_url"]}}
    secret = {"key": o["key"], "secret": o["secret"]}
    docs: list[dict[str, Any]] = [
        {
            "apiVersion": "v1",
            "kind": "Secret",
            "metadata": {"name": "s3", "namespace": NS},
            "stringData": secret,
        }
    ]
    extra = {"events": events} if events else {}
    for i in range(n):
        spec = {
            "uri": f"s3://{BUCKET}/{name(i)}",
            "pollInterval": f"{poll_s:g}s",
            "storage": storage,
        }
        docs.append(
            {
                "apiVersion": "deltakeeper.io/v1alpha1",
                "kind": "DeltaTable",
                "metadata": {"name": name(i), "namespace": NS},
                "spec": {**spec, **extra},
            }
        )
    if events:  # a lake whose new tables only events can bring in time (its scan: hourly)
        template = {"pollInterval": f"{poll_s:g}s", "events": events}
        docs.append(
            {
                "apiVersion": "deltakeeper.io/v1alpha1",
                "kind": "DeltaLake",
                "metadata": {"name": "newlake", "namespace": NS},
                "spec": {
                    "uri": f"s3://{BUCKET}/newlake",
                    "storage": storage,
                    "scanInterval": "1h",
                    "tableTemplate": template,
                },
            }
        )
    folder.mkdir()
    (folder / "tables.yaml").write_text(yaml.safe_dump_all(docs))


class Daemon:
    def __init__(self, work: Path, folder: Path, listen: int | None) -> None:
        from tests.support import stores

        self.folder, self.port = folder, stores.free_port()
        cmd = [sys.executable, "-m", "deltakeeper", "run", "--manifests", str(folder)]
        cmd += ["--metrics-port", str(self.port), "--summary-every", "0"]
        if listen is not None:
            (work / "token").write_text(TOKEN)
            cmd += ["--events-listen", f"127.0.0.1:{listen}"]
            cmd += ["--events-token-file", str(work / "token")]
        self.log = work / f"daemon-{self.port}.log"
        with open(self.log, "w") as out:
            self.proc = subprocess.Popen(cmd, stdout=out, stderr=subprocess.STDOUT)

    def scrape(self, family: str) -> str:
        """One family's samples: a whole scrape of 10,000 tables is tens of megabytes, and the
        latency loop scrapes every 50 ms."""
        url = f"http://127.0.0.1:{self.port}/metrics?name[]={family}"
        with urllib.request.urlopen(url, timeout=30) as r:
            return str(r.read().decode())

    def versions(self) -> dict[str, int]:
        try:
            text = self.scrape("deltakeeper_table_version")
            return {m[1]: int(float(m[2])) for m in _VERSION.finditer(text)}
        except OSError:
            return {}

    def events(self, result: str) -> float:
        pattern = rf'^deltakeeper_events_total{{source="webhook",result="{result}"}} (\S+)$'
        found = re.search(pattern, self.scrape("deltakeeper_events_total"), re.M)
        return float(found.group(1)) if found else 0.0

    def polls(self) -> dict[str, float]:
        text = self.scrape("deltakeeper_polls_total")
        return {
            m[1]: float(m[2])
            for m in re.finditer(r'^deltakeeper_polls_total{trigger="(\w+)"} (\S+)$', text, re.M)
        }

    def status_version(self, table: str) -> int | None:
        try:
            body = json.loads((self.folder / ".deltakeeper" / "status.json").read_text())
        except (FileNotFoundError, ValueError):
            return None
        found = body["tables"].get(f"{NS}/{table}", {}).get("version")
        return int(found) if found is not None else None

    def stop(self) -> None:
        self.proc.terminate()
        self.proc.wait(120)


def until(check: Any, timeout: float, what: str, every: float = 0.05) -> float:
    """Seconds until `check()` holds; SystemExit after `timeout`."""
    start = time.monotonic()
    while time.monotonic() - start < timeout:
        if check():
            return time.monotonic() - start
        time.sleep(every)
    raise SystemExit(f"timed out after {timeout:g} s waiting for {what}")


def quiet(emu: Any, stores: Any, d: Daemon, n: int, window_s: float) -> dict[str, Any]:
    """LISTs per table-hour, CPU (cores) and RSS over `window_s` of quiet tables."""
    until(lambda: len(d.versions()) >= n, 1800, f"{n} tables in the metrics", every=2)
    settle(emu, stores, give_up_s=1800)
    r0, c0 = stores.minio_requests(emu.endpoint), cpu_s(d.proc.pid)
    time.sleep(window_s)
    r1, c1 = stores.minio_requests(emu.endpoint), cpu_s(d.proc.pid)
    requests = {k: v - r0.get(k, 0) for k, v in r1.items() if v - r0.get(k, 0)}
    return {
        "lists": lists(requests),
        "per_table_hour": lists(requests) / n / (window_s / 3600),
        "cores": (c1 - c0) / window_s,
        "rss": proc_status_bytes("VmRSS", d.proc.pid),
        "requests": requests,
    }


def commit(uri: str, options: dict[str, str], v: int) -> None:
    import deltalake
    import pyarrow as pa

    hooks = deltalake.PostCommitHookProperties(create_checkpoint=False, cleanup_expired_logs=False)
    deltalake.write_deltalake(
        uri,
        pa.table({"a": [v]}),
        mode="append",
        storage_options=options,
        post_commithook_properties=hooks,
    )


def latencies(
    emu: Any,
    d: Daemon,
    tables: list[str],
    expected: dict[str, int],
    timeout: float,
    every: float = 0.05,
) -> dict[str, list[float]]:
    """One commit at a time to each of `tables`: seconds to the metrics and to the status,
    probed each `every` seconds (a probe reads every table's series, or the whole status file:
    at 10,000 tables, probing every 50 ms would take a core from the daemon it measures)."""
    options = deltars_minio_options(emu)
    metrics, status = [], []
    for t in tables:
        commit(f"s3://{BUCKET}/{t}", options, expected[t])
        expected[t] += 1
        v = expected[t]
        start = time.monotonic()
        shown = lambda t=t, v=v: d.versions().get(t) == v  # noqa: E731
        until(shown, timeout, f"{t} at {v} (metrics)", every)
        metrics.append(time.monotonic() - start)
        written = lambda t=t, v=v: d.status_version(t) == v  # noqa: E731
        until(written, timeout, f"{t} at {v} (status)", every)
        status.append(time.monotonic() - start)
    return {"metrics": metrics, "status": status}


WRITERS = {
    "raw": "a writer a table, each commit a Parquet file then the commit's conditional put",
    "delta-rs": "one delta-rs writer a table",
}


def raw_writers(
    emu: Any,
    tables: list[str],
    per_table: int,
    expected: dict[str, int],
    last: dict[str, float],
    seconds: float,
) -> None:
    """One writer a table, as a Delta writer does it without reading the table back: a Parquet
    file, then its commit put only if that version is free (the store's conditional create),
    `per_table` times. delta-rs's `write_deltalake` reads the table before each commit and
    manages about 77 commits a second here, half the burst's rate; these are the same log
    entries (an `add` with statistics and a `commitInfo`), written concurrently in one event
    loop, each writer's commits spread evenly over `seconds` (as fast as they go with 0)."""
    import asyncio
    import io

    import obstore
    import orjson
    import pyarrow as pa
    import pyarrow.parquet as pq

    store = minio_store(emu, BUCKET, pool_max_idle_per_host="200")
    sink = io.BytesIO()
    pq.write_table(pa.table({"a": [1]}), sink)
    data = sink.getvalue()
    stats = orjson.dumps(
        {"numRecords": 1, "minValues": {"a": 1}, "maxValues": {"a": 1}, "nullCount": {"a": 0}}
    ).decode()

    async def write(t: str, start: float) -> None:
        for i in range(per_table):
            await asyncio.sleep(max(0.0, start + i * seconds / per_table - time.monotonic()))
            v = expected[t] + 1
            now = int(time.time() * 1000)
            part = f"part-{v:05d}-{random.getrandbits(64):016x}.parquet"
            await obstore.put_async(store, f"{t}/{part}", data)
            info = {"timestamp": now, "operation": "WRITE"}
            info["operationParameters"] = {"mode": "Append"}
            add = {"path": part, "partitionValues": {}, "size": len(data)}
            add |= {"modificationTime": now, "dataChange": True, "stats": stats}
            body = orjson.dumps({"commitInfo": info}) + b"\n" + orjson.dumps({"add": add})
            key = f"{t}/_delta_log/{v:020d}.json"
            await obstore.put_async(store, key, body + b"\n", mode="create")
            expected[t] = v
        last[t] = time.monotonic()

    async def main() -> None:
        start = time.monotonic()
        await asyncio.gather(*(write(t, start) for t in tables))

    asyncio.run(main())


def burst(
    emu: Any,
    d: Daemon,
    tables: list[str],
    per_table: int,
    expected: dict[str, int],
    writer: str = "raw",
    seconds: float = 60.0,
) -> dict[str, Any]:
    """One writer a table, `per_table` commits each, all at once; then how long after each
    table's last commit its last version showed in the metrics, and the polls it all took.
    `writer`: "raw" (raw_writers) or "delta-rs" (`write_deltalake`, one thread a table)."""
    options = deltars_minio_options(emu)
    polls0 = d.polls()
    last: dict[str, float] = {}

    def write(t: str) -> None:
        for _ in range(per_table):
            commit(f"s3://{BUCKET}/{t}", options, expected[t])
            expected[t] += 1
        last[t] = time.monotonic()

    start = time.monotonic()
    if writer == "raw":
        args = (emu, tables, per_table, expected, last, seconds)
        writers = [threading.Thread(target=raw_writers, args=args)]
    else:
        writers = [threading.Thread(target=write, args=(t,)) for t in tables]
    for w in writers:
        w.start()
    shown: dict[str, float] = {}
    while len(shown) < len(tables):
        if time.monotonic() - start > 1800:
            raise SystemExit("the burst's tables did not reach their last versions")
        if len(last) < len(tables) and not any(w.is_alive() for w in writers):
            raise SystemExit("a burst writer failed (its error is above)")
        got = d.versions()
        now = time.monotonic()
        for t in tables:
            if t not in shown and t in last and got.get(t) == expected[t]:
                shown[t] = now - last[t]
        time.sleep(0.1)
    for w in writers:
        w.join()
    seconds = time.monotonic() - start
    read_back(emu, tables, expected)
    polls1 = d.polls()
    polls = {k: int(v - polls0.get(k, 0)) for k, v in polls1.items() if v - polls0.get(k, 0)}
    return {
        "commits": per_table * len(tables),
        "tables": len(tables),
        "writer": writer,
        "write_s": max(last.values()) - start,
        "seconds": seconds,
        "after_last": sorted(shown.values()),
        "polls": polls,
    }


def read_back(emu: Any, tables: list[str], expected: dict[str, int]) -> None:
    """delta-rs reads each burst table at its last version, with a file for each commit."""
    import deltalake

    options = deltars_minio_options(emu)
    for t in tables:
        dt = deltalake.DeltaTable(f"s3://{BUCKET}/{t}", storage_options=options)
        files = len(dt.file_uris())
        if dt.version() != expected[t] or files != expected[t] + 1:
            raise SystemExit(f"delta-rs reads {t} at {dt.version()} with {files} files")


def new_table(emu: Any, d: Daemon) -> float:
    """A new table's first commit under the DeltaLake's prefix to its version in the metrics."""
    import deltalake
    import pyarrow as pa

    from deltakeeper.resources.lake import table_name

    table = table_name("fresh/one", "newlake")
    deltalake.write_deltalake(
        f"s3://{BUCKET}/newlake/fresh/one",
        pa.table({"a": [1]}),
        storage_options=deltars_minio_options(emu),
    )
    return until(lambda: d.versions().get(table) == 0, 60, "the lake's new table")


def measure(args: argparse.Namespace) -> dict[str, Any]:
    from tests.support import stores

    n = args.tables
    rng = random.Random(47)
    with tempfile.TemporaryDirectory() as tmp:
        work = Path(tmp)
        listen = stores.free_port()
        env = webhook_env(listen, work / "minio-queue" if args.queue_dir else None)
        emu = stores.start_minio(stores.install()["MINIO"], work / "minio", env=env)
        out: dict[str, Any] = {}
        try:
            make_tables(emu, work, n)
            expected = {name(i): 0 for i in range(n)}
            # 1. polling
            folder = work / "polling"
            write_manifests(emu, folder, n, args.poll, None)
            d = Daemon(work, folder, None)
            try:
                out["polling"] = quiet(emu, stores, d, n, args.window)
                picked = [name(rng.randrange(n)) for _ in range(args.commits_poll)]
                out["polling_lag"] = latencies(
                    emu, d, picked, expected, 3 * args.poll + 30, args.probe_every
                )
            finally:
                d.stop()
            # 2. events
            notify(emu, True)
            folder = work / "events"
            events = {"source": "webhook", "resyncInterval": args.resync}
            write_manifests(emu, folder, n, args.poll, events)
            d = Daemon(work, folder, listen)
            try:
                out["events"] = quiet(emu, stores, d, n, args.window)
                spread = rng.sample(range(n), min(n, args.commits))
                picked = [name(spread[i % len(spread)]) for i in range(args.commits)]
                out["events_lag"] = latencies(emu, d, picked, expected, 60, args.probe_every)
                burst_tables = [name(i) for i in range(min(n, args.burst_tables))]
                per_table = max(1, args.burst // len(burst_tables))
                out["burst"] = burst(
                    emu, d, burst_tables, per_table, expected, args.burst_writer, args.burst_seconds
                )
                out["new_table_s"] = new_table(emu, d)
                out["events_counted"] = {
                    r: int(d.events(r)) for r in ("woke", "duplicate", "unknown_table", "new_table")
                }
            finally:
                d.stop()
        finally:
            emu.stop()
    return out


def quantile(values: list[float], q: float) -> float:
    if len(values) == 1:
        return values[0]
    return statistics.quantiles(values, n=100, method="inclusive")[round(q * 100) - 1]


def report(cmd: str, m: dict[str, Any], args: argparse.Namespace, r: dict[str, Any]) -> str:
    p, e = r["polling"], r["events"]
    el, pl = r["events_lag"], r["polling_lag"]
    b = r["burst"]

    def lag_row(what: str, lags: dict[str, list[float]]) -> str:
        cells = [
            f"{quantile(lags[k], q):.2f} s" for k in ("metrics", "status") for q in (0.5, 0.99)
        ]
        return f"| {what} | {len(lags['metrics'])} | " + " | ".join(cells) + " |"

    def met(ok: bool) -> str:
        return "met" if ok else "**NOT met**"

    memory = e["rss"] / p["rss"] - 1
    p50, p99 = quantile(el["metrics"], 0.5), quantile(el["metrics"], 0.99)
    s50, s99 = quantile(el["status"], 0.5), quantile(el["status"], 0.99)
    worst = max(b["after_last"])
    dollars = 0.005 / 1000 * 24 * 30
    return "\n".join(
        [
            f"## Storage events against polling on MinIO, {args.tables:,} tables "
            "(`python -m benchmarks.events`)",
            "",
            f"- Date: {datetime.now(UTC):%Y-%m-%d %H:%M} UTC, "
            f"deltakeeper commit {m['deltakeeper_commit']}",
            machine_line(m),
            f"- Command: `{cmd}`",
            f"- {args.tables:,} one-commit tables on a fresh local MinIO whose bucket sends its "
            "`.json` writes to `deltakeeper run --events-listen` (MinIO's own webhook target, "
            + (
                "with a queue dir: MinIO then sends on a cadence of about 3 s, which the "
                "latencies include"
                if args.queue_dir
                else "without a queue dir: MinIO sends each event as the write completes"
            )
            + f"). pollInterval {args.poll} s in both runs; with events, resyncInterval "
            f"{args.resync}. Quiet figures over {args.window:g} s after the first pass; LISTs by "
            "MinIO's own count. Latencies from `write_deltalake` returning to the version in a "
            f"scrape of `/metrics`, and in the status file, each probed every "
            f"{args.probe_every:g} s.",
            "",
            "| quiet tables | LISTs in the window | LISTs per table-hour | $/month per 10,000 "
            "tables (S3 LIST price) | CPU (cores) | RSS |",
            "|---|---|---|---|---|---|",
            f"| polling at {args.poll} s | {p['lists']:,} | {p['per_table_hour']:.2f} | "
            f"${p['per_table_hour'] * 10_000 * dollars:,.0f} | {p['cores']:.3f} | "
            f"{p['rss'] / 2**20:.0f} MiB |",
            f"| events, resync {args.resync} | {e['lists']:,} | {e['per_table_hour']:.2f} | "
            f"${e['per_table_hour'] * 10_000 * dollars:,.0f} | {e['cores']:.3f} | "
            f"{e['rss'] / 2**20:.0f} MiB |",
            "",
            "| commit to | commits | metrics p50 | metrics p99 | status p50 | status p99 |",
            "|---|---|---|---|---|---|",
            lag_row(f"polling at {args.poll} s", pl),
            lag_row("events", el),
            "",
            f"- Burst: {b['commits']:,} commits to {b['tables']} tables ({WRITERS[b['writer']]}, "
            f"written in {b['write_s']:.0f} s; delta-rs read each table back at its last "
            f"version): each table at its last version "
            f"{statistics.median(b['after_last']):.2f} s (median), {worst:.2f} s (worst) after "
            f"its last commit; polls: {b['polls']}.",
            f"- A new table under a DeltaLake's prefix (scanInterval 1h): in the metrics "
            f"{r['new_table_s']:.2f} s after its first commit.",
            f"- Events counted: {r['events_counted']}.",
            resync_note(args),
            f"- Targets at this size: LISTs per table-hour <= {LIST_TARGET}: "
            f"{met(e['per_table_hour'] <= LIST_TARGET)}; CPU <= 0.05 core: "
            f"{met(e['cores'] <= 0.05)}; memory within 10% of polling ({memory:+.1%}): "
            f"{met(abs(memory) <= 0.10)}; commit to metrics p50 <= {P50_TARGET:g} s "
            f"({p50:.2f}): {met(p50 <= P50_TARGET)}, p99 <= {P99_TARGET:g} s ({p99:.2f}): "
            f"{met(p99 <= P99_TARGET)}; commit to status p50 ({s50:.2f}): "
            f"{met(s50 <= P50_TARGET)}, p99 ({s99:.2f}): {met(s99 <= P99_TARGET)}; "
            f"burst within {BURST_TARGET:g} s ({worst:.2f}): "
            f"{met(worst <= BURST_TARGET)}; new table within {NEW_TABLE_TARGET:g} s: "
            f"{met(r['new_table_s'] <= NEW_TABLE_TARGET)}.",
        ]
    )


def resync_note(args: argparse.Namespace) -> str:
    """What the quiet window with events holds: the first resync cycle. After its first poll
    a table's next is drawn over the whole resyncInterval (runtime/fleet.py `_wait`), so the
    window expects tables x window / resync LISTs, give or take their square root by chance."""
    expected = args.tables * args.window / (parse_duration_ms(args.resync) / 1000)
    return (
        f"- The quiet window with events holds the first resync cycle, drawn over the "
        f"resyncInterval ({args.resync}): {expected:,.1f} LISTs expected in {args.window:g} s "
        f"(one a table each resyncInterval), give or take {math.sqrt(expected):.1f} by "
        f"chance. A longer window measures the rate more closely."
    )


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--tables", type=int, default=TABLES)
    ap.add_argument("--poll", type=int, default=POLL_S, help="pollInterval, whole seconds")
    ap.add_argument("--resync", default=RESYNC, help="resyncInterval with events")
    ap.add_argument("--window", type=float, default=WINDOW_S, help="quiet seconds measured")
    ap.add_argument("--commits", type=int, default=COMMITS, help="commits timed with events")
    ap.add_argument("--commits-poll", type=int, default=COMMITS_POLL, help="... with polling")
    ap.add_argument("--burst", type=int, default=BURST, help="commits in the burst")
    ap.add_argument("--burst-tables", type=int, default=BURST_TABLES)
    ap.add_argument(
        "--burst-seconds",
        type=float,
        default=BURST_SECONDS,
        help="the raw writers spread their commits over this long (0: as fast as they go)",
    )
    ap.add_argument(
        "--burst-writer",
        choices=("raw", "delta-rs"),
        default="raw",
        help="the burst's writers: conditional puts of each commit, concurrently (raw), or "
        "delta-rs's write_deltalake, a thread a table",
    )
    ap.add_argument(
        "--probe-every", type=float, default=0.05, help="seconds between latency probes"
    )
    ap.add_argument(
        "--no-queue-dir",
        dest="queue_dir",
        action="store_false",
        help="MinIO sends each event as it happens, without its queue dir (which keeps events "
        "for a target that is down, and sends them on a cadence of about 3 s)",
    )
    ap.add_argument("--quick", action="store_true", help="30 tables, 3 s poll, short; prints")
    ap.add_argument("--no-write", action="store_true", help="print, do not touch BENCHMARKS.md")
    ap.add_argument("--output", type=Path, default=REPO / "BENCHMARKS.md")
    args = ap.parse_args(argv)
    if args.quick:
        args.tables, args.poll, args.window = 30, 3, 10.0
        args.commits, args.commits_poll, args.burst, args.burst_tables = 10, 3, 40, 4
        args.burst_seconds = 2.0
    m = machine()
    result = measure(args)
    cmd = "python -m benchmarks.events" + (" " + " ".join(argv or sys.argv[1:])).rstrip()
    text = report(cmd.strip(), m, args, result)
    print(text)
    if not (args.quick or args.no_write):
        key = f"events-{args.tables}" + ("" if args.queue_dir else "-no-queue-dir")
        write_section(args.output, "bench", key, text)
        print(f"wrote {args.output}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
