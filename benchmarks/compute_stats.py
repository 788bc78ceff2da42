"""File statistics for a table whose writer kept none: deltakeeper `compute-stats` (footers
only) against Delta Spark's own COMPUTE STATS (`StatisticsCollection.recompute`, which reads
the data), on MinIO.

The table: `--files` Parquet files of 20 rows each (`id` long, ascending across files, `s`
string, `x` double; written by pyarrow), added by commits of 10,000 adds with no `stats`;
uploaded once to a fresh local MinIO. Delta Spark (s3a, local[2], a 6 GiB driver) recomputes
first; its commit is then removed (the data files are untouched: both engines only re-add),
and deltakeeper runs on the same table. Requests are MinIO's own count around each engine;
deltakeeper's own count too. A filtered query (`id < 100`: the rows of 5 files) is planned by
Delta Spark before and after (`inputFiles()`: the files its data skipping keeps, no data
read). The statistics of both engines are compared file by file (float bounds aside:
deltakeeper drops them for Arrow writers, as Delta's skipFloatingPointFromFooter does).

    python -m benchmarks.compute_stats                   # 100,000 files
    python -m benchmarks.compute_stats --files 2000 --no-write
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path
from typing import Any

from benchmarks.harness import REPO, building, machine, machine_line, write_section
from benchmarks.vacuum import files_below, minio_requests, spark_session, start_minio, upload

ROWS = 20
PER_COMMIT = 10_000
WHERE = "id < 100"
SPARK_MEMORY = "6g"  # Spark's recompute of 100,000 files lost a 2 GiB driver
SCHEMA = {
    "type": "struct",
    "fields": [
        {"name": n, "type": t, "nullable": True, "metadata": {}}
        for n, t in (("id", "long"), ("s", "string"), ("x", "double"))
    ],
}


def build(root: Path, files: int) -> None:
    import pyarrow as pa
    import pyarrow.parquet as pq

    log = root / "_delta_log"
    log.mkdir(parents=True)
    adds = []
    for i in range(files):
        ids = range(i * ROWS, (i + 1) * ROWS)
        rows = pa.table(
            {
                "id": pa.array(ids, pa.int64()),
                "s": pa.array([f"s{n:09d}" for n in ids]),
                "x": pa.array([n / 3 for n in ids]),
            }
        )
        name = f"f-{i:07d}.parquet"
        pq.write_table(rows, root / name)
        size = (root / name).stat().st_size
        adds.append(
            {
                "add": {
                    "path": name,
                    "partitionValues": {},
                    "size": size,
                    "modificationTime": 1_700_000_000_000,
                    "dataChange": True,
                }
            }
        )
    head = [
        {"protocol": {"minReaderVersion": 1, "minWriterVersion": 2}},
        {
            "metaData": {
                "id": "bench-compute-stats",
                "format": {"provider": "parquet", "options": {}},
                "schemaString": json.dumps(SCHEMA),
                "partitionColumns": [],
                "configuration": {},
                "createdTime": 1_700_000_000_000,
            }
        },
    ]
    chunks = [head] + [adds[s : s + PER_COMMIT] for s in range(0, files, PER_COMMIT)]
    for v, actions in enumerate(chunks):
        info = {"commitInfo": {"timestamp": 1_700_000_000_000 + v, "operation": "WRITE"}}
        text = "".join(json.dumps(a) + "\n" for a in [info, *actions])
        (log / f"{v:020d}.json").write_text(text)


def cached_table(files: int) -> Path:
    base = Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache")
    root = base / "deltakeeper" / "bench-data" / f"compute-stats-{files}"
    if not root.exists():
        started = time.perf_counter()
        with building(root) as tmp:
            build(tmp, files)
        print(f"built the table in {time.perf_counter() - started:.0f} s", flush=True)
    return root


def planned_files(spark: Any, uri: str) -> int:
    spark._jvm.org.apache.spark.sql.delta.DeltaLog.clearCache()
    return len(spark.read.format("delta").load(uri).where(WHERE).inputFiles())


def spark_recompute(spark: Any, uri: str) -> None:
    jvm = spark._jvm
    jvm.org.apache.spark.sql.delta.DeltaLog.clearCache()
    log = jvm.org.apache.spark.sql.delta.DeltaLog.forTable(spark._jsparkSession, uri)
    module = getattr(
        getattr(jvm.org.apache.spark.sql.delta.stats, "StatisticsCollection$"), "MODULE$"
    )
    everything = getattr(module, "recompute$default$4")()
    every_file = getattr(module, "recompute$default$5")()
    module.recompute(spark._jsparkSession, log, jvm.scala.Option.empty(), everything, every_file)


def committed_stats(emu: Any, uri: str, after: set[str]) -> dict[str, dict[str, Any]]:
    """The stats of the adds in the commits written since `after` (the log's keys before)."""
    base = uri.split("://", 1)[1] + "/_delta_log"
    emu.fs.invalidate_cache()
    out: dict[str, dict[str, Any]] = {}
    for key in sorted(emu.fs.find(base)):
        name = key.rsplit("/", 1)[-1]
        if not name.endswith(".json") or f"_delta_log/{name}" in after:
            continue
        for line in emu.fs.cat(key).decode().splitlines():
            add = json.loads(line).get("add")
            if add:
                out[add["path"]] = json.loads(add["stats"])
    return out


def log_keys(emu: Any, uri: str) -> set[str]:
    base = uri.split("://", 1)[1]
    emu.fs.invalidate_cache()
    return {k[len(base) + 1 :] for k in emu.fs.find(base + "/_delta_log")}


def without_floats(doc: dict[str, Any]) -> dict[str, Any]:
    return {
        k: ({c: v for c, v in p.items() if c != "x"} if k.endswith("Values") else p)
        for k, p in doc.items()
    }


def measure(src: Path, spark_too: bool) -> dict[str, Any]:
    from deltakeeper.delta.stats.compute import compute_stats
    from deltakeeper.delta.table import open_table

    out: dict[str, Any] = {}
    with tempfile.TemporaryDirectory(prefix="bench-compute-stats-") as tmp:
        emu = start_minio(Path(tmp))
        try:
            uri = emu.uri("bench/t")
            started = time.perf_counter()
            upload(emu, src, uri, sorted(files_below(src, log=True)))
            print(f"uploaded in {time.perf_counter() - started:.0f} s", flush=True)
            s3a = uri.replace("s3://", "s3a://", 1)
            spark = spark_session(emu.storage_options, SPARK_MEMORY)
            out["planned_before"] = planned_files(spark, s3a)
            baseline = log_keys(emu, uri)
            if spark_too:
                before = minio_requests(emu.endpoint)
                t0 = time.perf_counter()
                spark_recompute(spark, s3a)
                out["spark"] = {
                    "seconds": time.perf_counter() - t0,
                    "requests": dict(minio_requests(emu.endpoint) - before),
                }
                theirs = committed_stats(emu, uri, baseline)
                emu.fs.rm([f"{uri.split('://', 1)[1]}/{k}" for k in log_keys(emu, uri) - baseline])
                print(f"spark: {out['spark']['seconds']:.0f} s", flush=True)
            table = open_table(uri, emu.storage_options)
            before = minio_requests(emu.endpoint)
            t0 = time.perf_counter()
            run = compute_stats(table)
            out["deltakeeper"] = {
                "seconds": time.perf_counter() - t0,
                "requests": dict(minio_requests(emu.endpoint) - before),
                "own": dict(table.storage.requests),
                "given": run.given,
                "commits": len(run.commits),
            }
            print(f"deltakeeper: {out['deltakeeper']['seconds']:.0f} s", flush=True)
            ours = committed_stats(emu, uri, baseline)
            out["planned_after"] = planned_files(spark, s3a)
            if spark_too:
                same = sum(without_floats(theirs[p]) == ours.get(p) for p in theirs)
                out["agree"] = (same, len(theirs))
            spark.stop()
        finally:
            emu.stop()
    return out


def requests_text(r: dict[str, int]) -> str:
    total = sum(r.values())
    parts = ", ".join(f"{n:,} {api}" for api, n in Counter(r).most_common())
    return f"{total:,} ({parts})"


def report(cmd: str, m: dict[str, Any], files: int, r: dict[str, Any]) -> str:
    ours = r["deltakeeper"]
    lines = [
        f"## File statistics on MinIO: {files:,} files without stats",
        "",
        f"- Date: {time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}, deltakeeper "
        f"commit {m['deltakeeper_commit']}",
        machine_line(m, spark=True),
        f"- Command: `{cmd}`",
        f"- Table (`benchmarks/compute_stats.py`): {files:,} pyarrow files of {ROWS} rows "
        f"(id long, s string, x double), commits of {PER_COMMIT:,} adds without stats; on a "
        "fresh local MinIO. "
        + (
            f"Delta Spark (s3a, local[2], spark.driver.memory={SPARK_MEMORY}) runs its "
            "COMPUTE STATS (`StatisticsCollection.recompute`) first, its commit is removed, "
            "then deltakeeper runs. "
            if "spark" in r
            else "deltakeeper only (`--no-spark`). "
        )
        + "Requests: MinIO's own count around each engine.",
        "",
        "| engine | time | requests (MinIO) |",
        "|---|---|---|",
    ]
    if "spark" in r:
        s = r["spark"]
        lines.append(
            f"| Delta Spark COMPUTE STATS | {s['seconds']:.1f} s | {requests_text(s['requests'])} |"
        )
    lines.append(
        f"| deltakeeper compute-stats | {ours['seconds']:.1f} s | "
        f"{requests_text(ours['requests'])} |"
    )
    lines += [
        "",
        f"- deltakeeper gave {ours['given']:,} files statistics in {ours['commits']} commits; "
        f"its own count: {requests_text(ours['own'])}",
        f"- Files Delta Spark plans for `WHERE {WHERE}`: {r['planned_before']:,} before, "
        f"{r['planned_after']:,} after",
    ]
    if "spark" in r:
        s = r["spark"]
        same, total = r["agree"]
        lines += [
            f"- **time {ours['seconds'] / s['seconds']:.2f}x, requests "
            f"{sum(ours['requests'].values()) / sum(s['requests'].values()):.2f}x Delta Spark's**",
            f"- Statistics equal to Delta Spark's (float bounds aside) for {same:,} of "
            f"{total:,} files",
        ]
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    ap = argparse.ArgumentParser(prog="python -m benchmarks.compute_stats", description=__doc__)
    ap.add_argument("--files", type=int, default=100_000)
    ap.add_argument("--no-spark", dest="spark", action="store_false")
    ap.add_argument("--no-write", dest="write", action="store_false")
    ap.add_argument("--output", type=Path, default=REPO / "BENCHMARKS.md")
    a = ap.parse_args(argv)
    m = machine()
    r = measure(cached_table(a.files), a.spark)
    cmd = "python -m benchmarks.compute_stats" + "".join(f" {x}" for x in argv)
    text = report(cmd, m, a.files, r)
    print("\n" + text, flush=True)
    if a.write:
        write_section(a.output, "bench", f"compute-stats-{a.files}", text)
        print(f"wrote {a.output}")
    ok = "agree" not in r or r["agree"][0] == r["agree"][1]
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
