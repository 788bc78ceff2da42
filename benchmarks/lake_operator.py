"""The operator managing one DeltaLake's tables, on a real API server: CPU and memory once N
discovered tables are managed.

    python -m benchmarks.lake_operator [--tables 10000] [--poll 30] [--scan 60]
        [--store minio|local] [--no-peer]

Starts etcd + kube-apiserver (tests/support/kube.py), writes N one-commit tables under one
prefix (two levels: dNN/tNNNNN) on MinIO (the default, as the issue asks; started as the test
suite starts it) or on local disk, creates one DeltaLake on it and runs `deltakeeper operator
--discovery` as a process. Measures:
- the time until every table found has its DeltaTable (the first scan and N server-side
  applies), and until every DeltaTable has a status;
- the first scan's listing requests and seconds, and a later one's (from the lake's status);
- the operator's CPU (user+system) over three poll intervals of steady state, rescans included,
  as cores, its RSS then, and its peak RSS (VmHWM) over the whole run;
- the peer, in the same run: the same N tables as hand-written DeltaTables without a lake
  (benchmarks/operator.py's run) on the same store, steady cores and peak RSS; the ratio is
  the lake's cost.
Writes the "lake-operator" section of BENCHMARKS.md.
"""

from __future__ import annotations

import argparse
import json
import shutil
import subprocess
import sys
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import psutil

from benchmarks import operator as plain
from benchmarks.harness import MIB, REPO, machine, machine_line, write_section
from tests.support import kube, stores

GROUP, VERSION = "deltakeeper.io", "v1alpha1"
NS, LAKE = "bench", "lake"


STORES = ("minio", "local")
MINIO_PREFIX = "lake/found"  # bucket/prefix of the lake on MinIO


def table_path(i: int) -> str:
    return f"d{i % 100:02d}/t{i:05d}"


def create_tables(root: Path, n: int) -> None:
    def one(i: int) -> None:
        path = root / table_path(i) / plain.log_key(0)
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(plain.commit_json(0))

    with ThreadPoolExecutor(8) as pool:
        list(pool.map(one, range(n)))


def upload_tables(minio: stores.Emulator, n: int) -> None:
    """One commit per table, sent in batches (one PUT each, 128 in flight)."""
    for start in range(0, n, 2000):
        blobs = {
            f"{MINIO_PREFIX}/{table_path(i)}/{plain.log_key(0)}": plain.commit_json(0)
            for i in range(start, min(n, start + 2000))
        }
        minio.fs.pipe(blobs, batch_size=128)


def create_lake(
    cluster: kube.KubeCluster, uri: str, storage: dict[str, Any], poll_s: int, scan_s: int
) -> None:
    from kubernetes import client

    cluster.create_namespace(NS)
    spec: dict[str, Any] = {
        "uri": uri,
        "scanInterval": f"{scan_s}s",
        "tableTemplate": {"pollInterval": f"{poll_s}s"},
    }
    if storage:
        spec["storage"] = storage
    body = {
        "apiVersion": f"{GROUP}/{VERSION}",
        "kind": "DeltaLake",
        "metadata": {"name": LAKE},
        "spec": spec,
    }
    client.CustomObjectsApi(cluster.api_client()).create_namespaced_custom_object(
        GROUP, VERSION, NS, "deltalakes", body
    )


def lake_status(cluster: kube.KubeCluster) -> dict[str, Any]:
    from kubernetes import client

    got = client.CustomObjectsApi(cluster.api_client()).get_namespaced_custom_object(
        GROUP, VERSION, NS, "deltalakes", LAKE
    )
    return dict(got.get("status") or {})


def count_tables(cluster: kube.KubeCluster) -> int:
    """DeltaTables in the namespace, from a one-item list (the server counts the rest)."""
    from kubernetes import client

    got = client.CustomObjectsApi(cluster.api_client()).list_namespaced_custom_object(
        GROUP, VERSION, NS, "deltatables", limit=1
    )
    return len(got["items"]) + int(got["metadata"].get("remainingItemCount") or 0)


def run(n: int, poll_s: int, scan_s: int, store: str) -> dict[str, Any]:
    work = Path(tempfile.mkdtemp(prefix="dk-bench-lake-"))
    cluster = kube.start(kube.install(), work / "kube")
    minio = (
        stores.start_minio(stores.install()["MINIO"], work / "minio") if store == "minio" else None
    )
    report: dict[str, Any] = {"tables": n, "poll_s": poll_s, "scan_s": scan_s, "store": store}
    op = None
    statuses: plain.StatusWatch | None = None
    try:
        cluster.apply_crds()
        uri, storage = f"file://{work / 'lake'}", {}
        created = time.monotonic()
        if minio is None:
            create_tables(work / "lake", n)
        else:
            upload_tables(minio, n)
            uri = f"s3://{MINIO_PREFIX}"
            storage = {"secretRef": {"name": "minio"}, "options": {"endpoint_url": minio.endpoint}}
        report["write_tables_s"] = round(time.monotonic() - created, 1)
        port = stores.free_port()
        log = open(work / "operator.log", "wb")  # noqa: SIM115 (closed with the process)
        cmd = [str(Path(sys.executable).parent / "deltakeeper"), "operator", "--namespace", NS]
        cmd += ["--metrics-port", str(port), "--discovery"]
        op = subprocess.Popen(cmd, env=cluster.env(), stdout=log, stderr=subprocess.STDOUT)
        proc = psutil.Process(op.pid)
        statuses = plain.StatusWatch(cluster)
        started = time.monotonic()
        if minio is not None:
            cluster.create_namespace(NS)
            cluster.create_secret(NS, "minio", plain.minio_secret(minio))
        create_lake(cluster, uri, storage, poll_s, scan_s)

        def wait(done: Any, what: str) -> float:
            while not done():
                if op is not None and op.poll() is not None:
                    raise RuntimeError((work / "operator.log").read_text()[-3000:])
                time.sleep(2)
            return round(time.monotonic() - started, 1)

        report["all_tables_s"] = wait(lambda: count_tables(cluster) >= n, "every DeltaTable")
        report["all_status_s"] = wait(lambda: statuses.with_status() >= n, "every status")
        first = lake_status(cluster)
        report["first_scan"] = first.get("lastScan")
        report["managed"] = first.get("managedTables")
        # Every new table is due for cleanup and vacuum once; on MinIO that first pass takes
        # minutes, so wait for it, as the peer does, before the steady window.
        url = f"http://127.0.0.1:{port}/metrics"
        report["first_pass_s"] = wait(lambda: plain.maintenance_runs(url, "vacuum") >= n, "pass")
        # The first scan's TableFound conditions are written at each table's next poll, and
        # the second scan follows: let both pass, so the window below is the steady state.
        time.sleep(scan_s + poll_s)
        # Steady state: three poll intervals, rescans (nothing new to apply) included.
        cpu0, t0 = plain.cpu_seconds(proc), time.monotonic()
        time.sleep(3 * poll_s)
        cpu1, t1 = plain.cpu_seconds(proc), time.monotonic()
        report["steady_cores"] = round((cpu1 - cpu0) / (t1 - t0), 3)
        report["rss_steady_mib"] = round(proc.memory_info().rss / MIB, 1)
        later = lake_status(cluster)
        report["later_scan"] = later.get("lastScan")
        report["peak_rss_mib"] = round(plain.peak_rss(op.pid) / MIB, 1)
        report["apiserver_rss_mib"] = round(
            psutil.Process(cluster.apiserver.pid).memory_info().rss / MIB
        )
    finally:
        if statuses is not None:
            statuses.close()
        if op is not None and op.poll() is None:
            report["stop_s"] = plain.stop_operator(op)
        cluster.stop()
        if minio is not None:
            minio.stop()
        shutil.rmtree(work, ignore_errors=True)  # gigabytes at 10,000 tables
    return report


def section(r: dict[str, Any], peer: dict[str, Any] | None, m: dict[str, Any], started: str) -> str:
    first, later = r["first_scan"] or {}, r["later_scan"] or {}
    where = "MinIO" if r["store"] == "minio" else "local disk"
    rows = [
        f"| one DeltaLake, {r['tables']:,} tables found on {where} | {r['steady_cores']:.3f} | "
        f"{r['rss_steady_mib']:.0f} MiB | {r['peak_rss_mib']:.0f} MiB | "
        f"{r['all_tables_s']} s / {r['all_status_s']} s / {r['first_pass_s']} s | "
        f"{first.get('requests')} req, {first.get('seconds')} s / "
        f"{later.get('requests')} req, {later.get('seconds')} s |"
    ]
    ratio = ""
    if peer is not None:
        rows.append(
            f"| peer: {peer['tables']:,} hand-written DeltaTables on {where} | "
            f"{peer['steady_cores']:.3f} | "
            f"{peer['rss_steady_mib']:.0f} MiB | {peer['peak_rss_mib']:.0f} MiB | "
            f"- / {peer['all_status_s']} s / {peer['first_pass_s']} s | - |"
        )
        cpu = r["steady_cores"] / peer["steady_cores"]
        rss = r["peak_rss_mib"] / peer["peak_rss_mib"]
        ratio = f"- **With the lake / without: steady CPU {cpu:.2f}x, peak RSS {rss:.2f}x**"
    ratio += f"\n- Stop (SIGTERM to exit), with the lake: {plain.stopped(r.get('stop_s'))}" + (
        f"; peer: {plain.stopped(peer.get('stop_s'))}" if peer is not None else ""
    )
    return "\n".join(
        [
            "## Operator managing a DeltaLake (`python -m benchmarks.lake_operator`)",
            "",
            started,
            machine_line(m),
            f"- Command: `python -m benchmarks.lake_operator --tables {r['tables']} "
            f"--poll {r['poll_s']} --scan {r['scan_s']} --store {r['store']}`"
            + (
                ""
                if r["tables"] >= 10_000
                else " (the issue's run: `--tables 10000 --store minio`)"
            ),
            "- One `deltakeeper operator --discovery` against a real kube-apiserver + etcd on the "
            f"same machine; one DeltaLake on a prefix of one-commit tables two folders deep on "
            f"{where} (MinIO: a fresh local server, the lake's credentials from a Secret; "
            f"writing the tables took {r['write_tables_s']} s, not counted), scanned every "
            f"{r['scan_s']} s, template pollInterval {r['poll_s']} s. Start: "
            "from creating the lake until every table has its DeltaTable (first scan plus one "
            "server-side apply each) / a status / its first cleanup and vacuum. Steady: after the "
            "first pass, one more scan interval and poll "
            "(the first TableFound conditions written), the operator's CPU (user+system) over "
            "three poll intervals with rescans (nothing new to apply), as cores; RSS then, and "
            "peak RSS (VmHWM) over the run. Scans: listing requests and seconds of the first "
            "and of a later scan, from the lake's status. The peer: the same tables as "
            "hand-written DeltaTables and no lake (benchmarks/operator.py), on the same store, "
            "in the same run.",
            "",
            "| setup | cores (steady) | RSS (steady) | peak RSS | start: all DeltaTables / "
            "all statuses / first maintenance pass | scan: first / later |",
            "|---|---|---|---|---|---|",
            *rows,
            "",
            ratio,
        ]
    )


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--tables", type=int, default=10_000)
    ap.add_argument("--poll", type=int, default=30, help="the template's pollInterval, seconds")
    ap.add_argument("--scan", type=int, default=60, help="the lake's scanInterval, seconds")
    ap.add_argument(
        "--store", choices=STORES, default="minio", help="where the tables are (default: minio)"
    )
    ap.add_argument("--no-peer", action="store_true", help="skip the run without a lake")
    ap.add_argument("--no-write", action="store_true", help="print, do not touch BENCHMARKS.md")
    args = ap.parse_args()
    m = machine()
    started = plain.provenance()
    r = run(args.tables, args.poll, args.scan, args.store)
    print(json.dumps(r), flush=True)
    on_minio = args.tables if args.store == "minio" else 0
    peer = None if args.no_peer else plain.run(args.tables, on_minio, args.poll, 5)
    if peer is not None:
        print(json.dumps(peer), flush=True)
    text = section(r, peer, m, started)
    print(text)
    if not args.no_write:
        write_section(REPO / "BENCHMARKS.md", "bench", "lake-operator", text)


if __name__ == "__main__":
    main()
