"""Vacuum without listing: deltakeeper LITE, FULL and INVENTORY against delta-rs `vacuum()` and
Delta Spark `VACUUM` FULL and LITE, each on its own copy of one table.

The table: `--files` data files in 100 partition folders, added by commits 1 .. 100 (1,000
files each at 100,000), a classic checkpoint at 100, commit 101 removing `--removed` of them
(deletion time ten days ago), 100 stray files no commit names (failed writes), and
`_last_vacuum_info` at N = 100: the state a table is in when a vacuum ran before commit 101.
Data files are empty (vacuum never reads them). Every engine runs with a retention of 0 hours
at its own clock, so N = 101 for the LITE ones: they read commit 101 only. LITE deletes the
removed files; FULL also the strays.

- `--store minio` (default): the table on a fresh local MinIO, uploaded once and put back as it
  was after each engine (what it deleted uploaded again, what it wrote removed). Requests
  are MinIO's own count (`minio_s3_requests_total`), before and after each engine's process:
  everything it sent, its snapshot load included; for deltakeeper also its own count, split
  into the snapshot load and the vacuum given a loaded snapshot (what the daemon pays: it keeps
  the snapshot between polls).
- `--store local`: the table on the local disk (a copy of hard links), put back in the same way
  after each engine. No request counts
  but deltakeeper's own (a directory scan is one "list").

Then the quiet case: deltakeeper LITE again on its copy, nothing removed since, with the
snapshot loaded and `_last_vacuum_info` known as the daemon has them, against one poll of the
log (`Table.moved_on`).

    python -m benchmarks.vacuum                              # MinIO, 100,000 files
    python -m benchmarks.vacuum --store local --files 1000000
    python -m benchmarks.vacuum --files 2000 --removed 100 --no-write   # a quick look
"""

from __future__ import annotations

import argparse
import gzip
import json
import os
import shutil
import sys
import tempfile
import time
from collections import Counter
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from benchmarks.harness import (
    REPO,
    deltars_s3_options,
    emit,
    machine,
    machine_line,
    run_child,
    write_section,
)

DAY_MS = 86_400_000
PARTITIONS = 100
COMMITS = 100  # commits adding files; the checkpoint is at this version
STRAYS = 100
ENGINES = (
    "deltakeeper-lite",
    "deltakeeper-full",
    "deltakeeper-inventory",
    "delta-rs",
    "delta-rs-full",
    "spark-lite",
    "spark-full",
)
OPTIONS_ENV = "DELTAKEEPER_BENCH_STORAGE"  # credentials reach children here, never in argv


# -- the table ------------------------------------------------------------------------------------
def data_key(n: int) -> str:
    return f"part=p{n % PARTITIONS:03d}/f-{n:08d}.parquet"


def removed_ids(files: int, removed: int) -> list[int]:
    step = files // removed
    return [i * step for i in range(removed)]


def build(root: Path, files: int, removed: int) -> None:
    """The table described in the module's docstring, on the local disk."""
    from deltakeeper.delta.checkpoint import load_for_checkpoint, write_checkpoint
    from deltakeeper.delta.table import open_table
    from deltakeeper.delta.vacuum.info import render

    log = root / "_delta_log"
    log.mkdir(parents=True)
    schema = {
        "type": "struct",
        "fields": [
            {"name": "id", "type": "long", "nullable": True, "metadata": {}},
            {"name": "part", "type": "string", "nullable": True, "metadata": {}},
        ],
    }
    first = [
        {"protocol": {"minReaderVersion": 1, "minWriterVersion": 2}},
        {
            "metaData": {
                "id": "00000000-0000-0000-0000-00000000beef",
                "format": {"provider": "parquet", "options": {}},
                "schemaString": json.dumps(schema),
                "partitionColumns": ["part"],
                "configuration": {},
                "createdTime": 0,
            }
        },
    ]
    write_commit(log, 0, first)
    per = files // COMMITS
    for v in range(1, COMMITS + 1):
        write_commit(log, v, [add_action(n) for n in range((v - 1) * per, v * per)])
    for p in range(PARTITIONS):
        (root / f"part=p{p:03d}").mkdir()
    for n in range(files):
        (root / data_key(n)).touch()
    now = int(time.time() * 1000)
    table = open_table(str(root))
    write_checkpoint(table, load_for_checkpoint(table, COMMITS), now, 7 * DAY_MS)
    gone = now - 10 * DAY_MS
    write_commit(log, COMMITS + 1, [remove_action(n, gone) for n in removed_ids(files, removed)])
    for s in range(STRAYS):
        (root / f"part=p{s % PARTITIONS:03d}/stray-{s:04d}.parquet").touch()
    (log / "_last_vacuum_info").write_bytes(render(COMMITS))


def add_action(n: int) -> dict[str, Any]:
    return {
        "add": {
            "path": data_key(n),
            "partitionValues": {"part": f"p{n % PARTITIONS:03d}"},
            "size": 1000,
            "modificationTime": 0,
            "dataChange": True,
        }
    }


def remove_action(n: int, when: int) -> dict[str, Any]:
    return {
        "remove": {
            "path": data_key(n),
            "deletionTimestamp": when,
            "dataChange": True,
            "extendedFileMetadata": True,
            "partitionValues": {"part": f"p{n % PARTITIONS:03d}"},
            "size": 1000,
        }
    }


def write_commit(log: Path, version: int, actions: list[dict[str, Any]]) -> None:
    info = {"commitInfo": {"timestamp": int(time.time() * 1000), "operation": "WRITE"}}
    text = "".join(json.dumps(a) + "\n" for a in [info, *actions])
    (log / f"{version:020d}.json").write_text(text)


def cached_table(files: int, removed: int) -> Path:
    base = Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache")
    root = base / "deltakeeper" / "bench-data" / f"vacuum-{files}-{removed}"
    if not (root / "_delta_log" / "_last_vacuum_info").exists():
        shutil.rmtree(root, ignore_errors=True)
        started = time.perf_counter()
        build(root, files, removed)
        print(f"built the table in {time.perf_counter() - started:.0f} s", flush=True)
    return root


def linked_copy(src: Path, dest: Path) -> None:
    """Data files hard-linked (vacuum only unlinks them), the log copied."""
    shutil.copytree(src, dest, copy_function=os.link, ignore=shutil.ignore_patterns("_delta_log"))
    shutil.copytree(src / "_delta_log", dest / "_delta_log")


# -- the engines, each in a child process ---------------------------------------------------------
def child(engine: str, uri: str, extra: str) -> dict[str, Any]:
    options = json.loads(os.environ.get(OPTIONS_ENV) or "{}")
    if engine.startswith("deltakeeper"):
        return deltakeeper(engine.split("-", 1)[1], uri, options, extra)
    if engine.startswith("delta-rs"):
        return deltars(uri, options, full=engine.endswith("full"))
    return spark(uri, options, engine.split("-", 1)[1])


def deltakeeper(mode: str, uri: str, options: dict[str, Any], inventory: str) -> dict[str, Any]:
    """One vacuum: the snapshot load, then the plan and its execution, each timed and counted.
    `quiet`: LITE with `_last_vacuum_info` known beforehand, as a watcher knows it."""
    from deltakeeper.delta.table import open_table
    from deltakeeper.delta.vacuum import info as vacuum_info
    from deltakeeper.delta.vacuum import plan as vacuum
    from deltakeeper.delta.vacuum.inventory import open_inventory
    from deltakeeper.delta.vacuum.modes import InventoryFormat, Mode

    table = open_table(uri, options)
    t0 = time.perf_counter()
    snap = vacuum.load_for_vacuum(table)
    known = vacuum_info.read(table.storage) if mode == "quiet" else None
    t1, loaded = time.perf_counter(), Counter(table.storage.requests)
    found = open_inventory(inventory, InventoryFormat.AUTO, options) if inventory else None
    chosen = Mode.LITE if mode == "quiet" else Mode(mode)
    now = int(time.time() * 1000)
    plan = vacuum.plan_table_vacuum(table, snap, 0, now, True, chosen, found, known)
    deleted = vacuum.execute_vacuum(table, plan)
    vacuum.remove_empty_folders(table, plan)
    vacuum.record_vacuum(table, plan)
    t2 = time.perf_counter()
    return {
        "ok": True,
        "load_seconds": t1 - t0,
        "seconds": t2 - t1,
        "deleted": deleted,
        "load_requests": dict(loaded),
        "vacuum_requests": dict(Counter(table.storage.requests) - loaded),
    }


def deltars(uri: str, options: dict[str, Any], full: bool) -> dict[str, Any]:
    from deltalake import DeltaTable

    t0 = time.perf_counter()
    dt = DeltaTable(uri, storage_options=deltars_options(options) or None)
    t1 = time.perf_counter()
    gone = dt.vacuum(retention_hours=0, enforce_retention_duration=False, dry_run=False, full=full)
    t2 = time.perf_counter()
    return {"ok": True, "load_seconds": t1 - t0, "seconds": t2 - t1, "deleted": len(gone)}


def deltars_options(options: dict[str, Any]) -> dict[str, str]:
    return deltars_s3_options(options) if options else {}


def spark(uri: str, options: dict[str, Any], mode: str) -> dict[str, Any]:
    from tests.support.spark import session_conf

    if options:
        uri = uri.replace("s3://", "s3a://", 1)
    session = spark_session(options)
    conf = {
        "spark.databricks.delta.retentionDurationCheck.enabled": "false",
        "spark.databricks.delta.vacuum.logging.enabled": "false",
    }
    with session_conf(session, conf):
        t0 = time.perf_counter()
        session.sql(f"VACUUM '{uri}' {mode.upper()} RETAIN 0 HOURS").collect()
        t1 = time.perf_counter()
    return {"ok": True, "seconds": t1 - t0}


def s3a_settings(options: dict[str, Any]) -> dict[str, str]:
    """Hadoop's s3a settings for a MinIO's storage options (address, keys, plain HTTP)."""
    return {
        "fs.s3a.endpoint": options["endpoint_url"],
        "fs.s3a.access.key": options["key"],
        "fs.s3a.secret.key": options["secret"],
        "fs.s3a.path.style.access": "true",
        "fs.s3a.connection.ssl.enabled": "false",
        "fs.s3a.aws.credentials.provider": "org.apache.hadoop.fs.s3a.SimpleAWSCredentialsProvider",
    }


def spark_session(options: dict[str, Any], memory: str = "2g") -> Any:
    """The test suite's local[2] session; on MinIO with the s3a connector, its address and keys
    (tests/support/compaction.s3a_jars: Delta's jars and hadoop-aws), and a driver of
    `memory`."""
    from tests.support import spark as spark_support

    if not options:
        return spark_support.spark_session("deltakeeper-bench-vacuum")
    from tests.support.compaction import s3a_jars

    jdir = s3a_jars()
    jars = [str(jdir / n) for n in (jdir / "jars.txt").read_text().split()]
    hadoop = s3a_settings(options)
    from pyspark.sql import SparkSession

    builder = (
        SparkSession.builder.master("local[2]")
        .config("spark.jars", ",".join(jars))
        .config("spark.sql.extensions", "io.delta.sql.DeltaSparkSessionExtension")
        .config(
            "spark.sql.catalog.spark_catalog", "org.apache.spark.sql.delta.catalog.DeltaCatalog"
        )
        .config("spark.driver.memory", memory)
        .config("spark.driver.host", "127.0.0.1")
        .config("spark.driver.bindAddress", "127.0.0.1")
        .config("spark.ui.enabled", "false")
        .config("spark.sql.shuffle.partitions", "2")
        .config("spark.databricks.delta.snapshotPartitions", "2")
        .config("spark.sql.sources.parallelPartitionDiscovery.parallelism", "2")
    )
    for k, v in hadoop.items():
        builder = builder.config(f"spark.hadoop.{k}", v)
    session = builder.getOrCreate()
    session.sparkContext.setLogLevel("ERROR")
    return session


# -- MinIO ----------------------------------------------------------------------------------------
def start_minio(workdir: Path) -> Any:
    from tests.support import stores

    return stores.start_minio(stores.install()["MINIO"], workdir)


def minio_requests(endpoint: str) -> Counter[str]:
    """MinIO's own count by API name (listobjectsv2, deletemultipleobjects, ...), once it
    settles."""
    from tests.support import stores

    return stores.settled(lambda: stores.minio_api_requests(endpoint))


def upload(emu: Any, src: Path, uri: str, keys: list[str]) -> None:
    base = uri.split("://", 1)[1]
    for start in range(0, len(keys), 5000):
        chunk = {f"{base}/{k}": (src / k).read_bytes() for k in keys[start : start + 5000]}
        emu.fs.pipe(chunk, batch_size=128)


def objects(emu: Any, uri: str) -> dict[str, tuple[int, datetime]]:
    base = uri.split("://", 1)[1]
    found = emu.fs.find(base, detail=True)
    return {k[len(base) + 1 :]: (v["size"], v["LastModified"]) for k, v in found.items()}


def s3_inventory(emu: Any, uri: str, listed: dict[str, tuple[int, datetime]]) -> str:
    """An S3 Inventory report (CSV) of the copy, as S3 writes one; returns its folder."""
    from urllib.parse import quote_plus

    bucket, prefix = uri.split("://", 1)[1].split("/", 1)
    if not emu.fs.exists("inventory"):
        emu.create_bucket("inventory")
    rows = [
        f'"{bucket}","{quote_plus(f"{prefix}/{k}", safe="/")}","","true","false","{size}",'
        f'"{when.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%S.000Z")}"'
        for k, (size, when) in listed.items()
    ]
    data = f"{bucket}/bench/data/report.csv.gz"
    emu.fs.pipe(f"inventory/{data}", gzip.compress("\n".join(rows).encode()))
    manifest = {
        "sourceBucket": bucket,
        "destinationBucket": "arn:aws:s3:::inventory",
        "fileFormat": "CSV",
        "fileSchema": "Bucket, Key, VersionId, IsLatest, IsDeleteMarker, Size, LastModifiedDate",
        "creationTimestamp": str(int(time.time() * 1000)),
        "files": [{"key": data, "size": 1, "MD5checksum": "x"}],
    }
    folder = f"inventory/{bucket}/bench"
    emu.fs.pipe(f"{folder}/2026-01-01T00-00Z/manifest.json", json.dumps(manifest).encode())
    return f"s3://{folder}/"


def local_inventory(root: Path, out: Path) -> str:
    """A Parquet inventory in Delta's schema of the copy, as a storage report would list it."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    paths, sizes, times = [], [], []
    for dirpath, _, names in os.walk(root):
        for name in names:
            p = os.path.join(dirpath, name)
            st = os.stat(p)
            paths.append(f"file:{p}")
            sizes.append(st.st_size)
            times.append(st.st_mtime_ns // 1_000_000)
    n = len(paths)
    table = pa.table(
        {
            "path": pa.array(paths, pa.string()),
            "length": pa.array(sizes, pa.int64()),
            "isDir": pa.array([False] * n, pa.bool_()),
            "modificationTime": pa.array(times, pa.int64()),
        }
    )
    pq.write_table(table, out)
    return str(out)


# -- one run --------------------------------------------------------------------------------------
def run_engine(engine: str, uri: str, extra: str, options: dict[str, Any]) -> dict[str, Any]:
    env = os.environ.get(OPTIONS_ENV)
    os.environ[OPTIONS_ENV] = json.dumps(options)
    try:
        return run_child("benchmarks.vacuum", [engine, uri, extra], timeout=3600)
    finally:
        if env is None:
            os.environ.pop(OPTIONS_ENV, None)
        else:
            os.environ[OPTIONS_ENV] = env


def measure_minio(src: Path, engines: list[str]) -> dict[str, dict[str, Any]]:
    """Every engine on the table uploaded once and put back as it was after each (what an
    engine deleted uploaded again, what it wrote removed): the same as a copy of its own."""
    out: dict[str, dict[str, Any]] = {}
    with tempfile.TemporaryDirectory(prefix="bench-vacuum-") as tmp:
        emu = start_minio(Path(tmp))
        try:
            uri = emu.uri("bench/t")
            started = time.perf_counter()
            upload(emu, src, uri, sorted(files_below(src, log=True)))
            print(f"uploaded in {time.perf_counter() - started:.0f} s", flush=True)
            baseline = objects(emu, uri)
            for engine in engines_in_order(engines):
                extra = s3_inventory(emu, uri, baseline) if engine.endswith("inventory") else ""
                listed = objects(emu, uri)  # the quiet run finds LITE's deletes done
                before = minio_requests(emu.endpoint)
                r = run_engine(engine, uri, extra, emu.storage_options)
                r["server_requests"] = dict(minio_requests(emu.endpoint) - before)
                now = objects(emu, uri)
                r["gone"] = sorted(set(listed) - set(now))
                if engine == "deltakeeper-quiet":
                    r["poll_requests"] = poll_cost(uri, emu.storage_options)
                out[engine] = r
                print(f"{engine}: {summary(r)}", flush=True)
                if engine != "deltakeeper-lite":  # the quiet run follows it as it left the table
                    restore_minio(emu, src, uri, baseline, now)
        finally:
            emu.stop()
    return out


def engines_in_order(engines: list[str]) -> list[str]:
    """The engines asked for, with the quiet run right after deltakeeper's LITE."""
    out = []
    for engine in engines:
        out.append(engine)
        if engine == "deltakeeper-lite":
            out.append("deltakeeper-quiet")
    return out


def restore_minio(emu: Any, src: Path, uri: str, baseline: dict, now: dict) -> None:
    base = uri.split("://", 1)[1]
    extra = [f"{base}/{k}" for k in set(now) - set(baseline)]  # an engine's own commits
    if extra:
        emu.fs.rm(extra)
    upload(emu, src, uri, [*sorted(set(baseline) - set(now)), "_delta_log/_last_vacuum_info"])


def measure_local(src: Path, engines: list[str], work: Path) -> dict[str, dict[str, Any]]:
    """As on MinIO: one copy (data files hard-linked), put back as it was after each engine."""
    out: dict[str, dict[str, Any]] = {}
    copy = work / "t"
    started = time.perf_counter()
    linked_copy(src, copy)
    print(f"copied in {time.perf_counter() - started:.0f} s", flush=True)
    baseline = files_below(copy, log=True)
    for engine in engines_in_order(engines):
        extra = ""
        if engine.endswith("inventory"):
            extra = local_inventory(copy, work / "inventory.parquet")
        listed = files_below(copy, log=True)  # the quiet run finds LITE's deletes done
        r = run_engine(engine, str(copy), extra, {})
        now = files_below(copy, log=True)
        r["gone"] = sorted(listed - now)
        if engine == "deltakeeper-quiet":
            r["poll_requests"] = poll_cost(str(copy), {})
        out[engine] = r
        print(f"{engine}: {summary(r)}", flush=True)
        if engine != "deltakeeper-lite":
            restore_local(src, copy, baseline, now)
    return out


def restore_local(src: Path, copy: Path, baseline: set[str], now: set[str]) -> None:
    for key in now - baseline:
        (copy / key).unlink()
    for key in baseline - now:
        (copy / key).parent.mkdir(parents=True, exist_ok=True)  # FULL removes emptied folders
        os.link(src / key, copy / key)
    shutil.copy2(src / "_delta_log/_last_vacuum_info", copy / "_delta_log/_last_vacuum_info")


def files_below(root: Path, log: bool = False) -> set[str]:
    """Keys of the files below `root` (with `log`, `_delta_log`'s too); never Hadoop's `.crc`
    side files, which Delta Spark deletes with their files on a local disk."""
    return {
        os.path.relpath(os.path.join(d, n), root)
        for d, _, names in os.walk(root)
        for n in names
        if (log or "_delta_log" not in d) and not n.startswith(".")
    }


def poll_cost(uri: str, options: dict[str, Any]) -> dict[str, int]:
    """What one poll of the quiet table costs (the watcher's `moved_on`)."""
    from deltakeeper.delta.table import open_table

    table = open_table(uri, options)
    snap = table.snapshot()
    table.storage.requests.clear()
    assert not table.moved_on(snap)
    return dict(table.storage.requests)


def summary(r: dict[str, Any]) -> str:
    if not r.get("ok"):
        return f"FAILED: {r.get('error')}"
    sent = r.get("server_requests") or r.get("vacuum_requests")
    return f"{r['seconds']:.2f} s, {len(r['gone'])} deleted, requests {sent}"


# -- the report -----------------------------------------------------------------------------------
def total(c: dict[str, int] | None) -> int:
    return sum((c or {}).values())


def counts(c: dict[str, int] | None) -> str:
    return ", ".join(f"{v:,} {k}" for k, v in sorted((c or {}).items(), key=lambda kv: -kv[1]))


def report(cmd: str, m: dict[str, Any], a: argparse.Namespace, r: dict[str, dict]) -> str:
    on_minio = a.store == "minio"
    place = "a fresh local MinIO" if on_minio else "the local disk (a copy of hard links)"
    lines = [
        f"## Vacuum on {'MinIO' if on_minio else 'the local disk'}: {a.files:,} files, "
        f"{a.removed:,} removed past the retention",
        "",
        f"- Date: {datetime.now(UTC).strftime('%Y-%m-%d %H:%M UTC')}, "
        f"deltakeeper commit {m['deltakeeper_commit']}",
        machine_line(m, spark=True),
        f"- Command: `{cmd}`",
        f"- Table (`benchmarks/vacuum.py`): {a.files:,} empty data files in {PARTITIONS} "
        f"partition folders added by commits 1-{COMMITS}, a classic checkpoint at {COMMITS}, "
        f"commit {COMMITS + 1} removing {a.removed:,} of them ten days ago, {STRAYS} stray "
        f"files no commit names, `_last_vacuum_info` at N = {COMMITS}; on {place}, put back as "
        "it was after each engine (deleted files restored, files it wrote removed). Retention "
        "0 hours for every engine (Spark: retentionDurationCheck off, vacuum logging off; "
        "delta-rs: enforce_retention_duration=False), so LITE reads commit "
        f"{COMMITS + 1} only.",
        "- Requests: "
        + (
            "MinIO's own count (`minio_s3_requests_total`, before and after each engine's "
            "process: its snapshot load included). deltakeeper's own count splits its run into "
            "the snapshot load and the vacuum given a loaded snapshot (what the daemon pays)."
            if on_minio
            else "the local disk has no server to count them: deltakeeper's own count only "
            "(a directory scan is one `list`, an unlink one `delete`)."
        ),
        "",
        "| engine | files deleted | vacuum time | load time | "
        + ("requests (MinIO's count) " if on_minio else "requests (no server to count) ")
        + "| deltakeeper's count: load / vacuum |",
        "|---|---|---|---|---|---|",
    ]
    for engine, x in r.items():
        if not x.get("ok"):
            lines.append(f"| {engine} | failed: {x.get('error')} | | | | |")
            continue
        load = f"{x['load_seconds']:.2f} s" if "load_seconds" in x else "in the vacuum time"
        ours = (
            f"{total(x['load_requests'])} / {total(x['vacuum_requests'])} "
            f"({counts(x['vacuum_requests'])})"
            if "vacuum_requests" in x
            else ""
        )
        server = (
            f"{total(x.get('server_requests')):,} ({counts(x.get('server_requests'))})"
            if on_minio
            else ""
        )
        lines.append(
            f"| {engine} | {len(x['gone']):,} | {x['seconds']:.2f} s | {load} | {server} | {ours} |"
        )
    lines += verdicts(r, on_minio)
    return "\n".join(lines) + "\n"


def verdicts(r: dict[str, dict], on_minio: bool) -> list[str]:
    lite, full = r.get("deltakeeper-lite"), r.get("deltakeeper-full")
    spark_lite = r.get("spark-lite")
    out = [""]
    if lite and full and lite.get("ok") and full.get("ok"):
        key = "server_requests" if on_minio else "vacuum_requests"
        req = total(lite[key]) / max(1, total(full[key]))
        own = total(lite["vacuum_requests"]) / max(1, total(full["vacuum_requests"]))
        secs = lite["seconds"] / max(1e-9, full["seconds"])
        kept = [lite["vacuum_requests"], full["vacuum_requests"]]
        nodel = [total({k: v for k, v in c.items() if k != "delete"}) for c in kept]
        out.append(
            f"- **LITE / FULL: requests {req:.3f}x"
            + (
                f" (whole process, MinIO's count), {own:.3f}x (the vacuum given a loaded snapshot)"
                if on_minio
                else f", {nodel[0] / max(1, nodel[1]):.3f}x without the deletes (one unlink a "
                "file here, where S3 takes 1,000 in one request)"
            )
            + f", time {secs:.3f}x**; target <= 0.05x requests and <= 0.2x time"
        )
    if lite and spark_lite and lite.get("ok") and spark_lite.get("ok"):
        same = lite["gone"] == spark_lite["gone"]
        out.append(
            f"- deltakeeper LITE deleted {'the same' if same else 'NOT the same'} "
            f"{len(lite['gone']):,} files as Delta Spark's VACUUM LITE"
        )
    quiet = r.get("deltakeeper-quiet")
    if quiet and quiet.get("ok"):
        out.append(
            f"- Quiet table (deltakeeper LITE again, nothing removed since; snapshot loaded and "
            f"`_last_vacuum_info` known, as the daemon has them): "
            f"{total(quiet['vacuum_requests'])} requests ({counts(quiet['vacuum_requests'])}), "
            f"{quiet['seconds']:.3f} s; one poll of the log: {total(quiet['poll_requests'])} "
            f"({counts(quiet['poll_requests'])})"
        )
    return out


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    if argv[:1] == ["--child"]:
        emit(child(argv[1], argv[2], argv[3] if len(argv) > 3 else ""))
        return 0
    ap = argparse.ArgumentParser(prog="python -m benchmarks.vacuum", description=__doc__)
    ap.add_argument("--store", choices=("minio", "local"), default="minio")
    ap.add_argument("--files", type=int, default=100_000)
    ap.add_argument("--removed", type=int, default=1_000)
    ap.add_argument("--engines", default=",".join(ENGINES))
    ap.add_argument("--no-write", dest="write", action="store_false")
    ap.add_argument("--output", type=Path, default=REPO / "BENCHMARKS.md")
    a = ap.parse_args(argv)
    engines = a.engines.split(",")
    m = machine()
    src = cached_table(a.files, a.removed)
    if a.store == "minio":
        r = measure_minio(src, engines)
    else:
        with tempfile.TemporaryDirectory(prefix="bench-vacuum-", dir=src.parent) as work:
            r = measure_local(src, engines, Path(work))
    cmd = "python -m benchmarks.vacuum" + "".join(f" {x}" for x in argv)
    text = report(cmd, m, a, r)
    print("\n" + text, flush=True)
    if a.write:
        write_section(a.output, "vacuum", f"{a.store}-{a.files}-{a.removed}", text)
        print(f"wrote {a.output}")
    return 0 if all(x.get("ok") for x in r.values()) else 1


if __name__ == "__main__":
    sys.exit(main())
