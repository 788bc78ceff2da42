"""Compaction end to end: deltakeeper (plan + spark-submit + job) against a hand-run OPTIMIZE
with Delta's defaults in the same Spark, and delta-rs `optimize.compact()` as a reference. A
second OPTIMIZE at deltakeeper's file sizes (the same bins as the job) separates what the bins
cost from what the job adds.

The table comes from this file's own generator: many small parquet files (random, so they do
not compress) in a few partitions, written with pyarrow and committed in one JSON commit, then
checked with delta-rs. It is cached under ${XDG_CACHE_HOME:-~/.cache}/deltakeeper/bench-data
by its shape and generator version; every engine run works on its own copy (data files hard
linked, they are never modified; the log copied).

(A) first compaction, one run per engine on a fresh copy. (B) steady state: on the tables (A)
left, a batch of new small files lands in a few partitions, and deltakeeper and OPTIMIZE run
again. Measured per run: the process's wall time (JVM start included), the job's own time (the
job and the OPTIMIZE script time themselves from their start, after the JVM's, and say how
much of it went to starting the Spark session), bytes read and written and files after (the
log's adds and removes, read by delta-rs), DuckDB's full-scan time, and a digest of the sorted
rows (delta-rs) that must equal the one before.

    python -m benchmarks.compaction             # full shape, then the planner on the
                                                # 1,000,000-file log; writes BENCHMARKS.md
    python -m benchmarks.compaction --quick     # tiny shape; prints only
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import random
import resource
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import asdict, dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq

from benchmarks.harness import MIB, REPO, building, emit, machine, machine_line, write_section
from benchmarks.synth import cache_dir
from deltakeeper.compaction.job import OPTIMIZE_CONF
from deltakeeper.maintenance.policy import CompactionSettings

GENERATOR_VERSION = 1
KIB = 1024
MASTER = "local[2]"
# In its own folder: spark-submit puts the script's folder first on sys.path, and
# benchmarks/operator.py would hide the standard library's `operator`.
OPTIMIZE_SCRIPT = Path(__file__).with_name("spark_jobs") / "optimize.py"
T0_MS = 1_700_000_000_000  # the files' modification time: long past any max age
COLUMNS = pa.schema([("id", pa.int64()), ("n", pa.int64()), ("b", pa.binary())])
ROW_SCHEMA = COLUMNS.append(pa.field("part", pa.string()))
SCHEMA_STRING = json.dumps(
    {
        "type": "struct",
        "fields": [
            {"name": name, "type": kind, "nullable": True, "metadata": {}}
            for name, kind in (("id", "long"), ("n", "long"), ("b", "binary"), ("part", "string"))
        ],
    }
)
# The same for both Spark runs: loopback only, no UI, room for 50 MiB bins.
SPARK_CONF = {
    "spark.driver.host": "127.0.0.1",
    "spark.driver.bindAddress": "127.0.0.1",
    "spark.ui.enabled": "false",
    "spark.driver.memory": "2g",
}
# --quick's tiny tables: C1-only JIT and two log-replay tasks halve a short job's time.
QUICK_CONF = {
    **SPARK_CONF,
    "spark.driver.extraJavaOptions": "-XX:+UseSerialGC -XX:TieredStopAtLevel=1",
    "spark.databricks.delta.snapshotPartitions": "2",
    "spark.sql.shuffle.partitions": "2",
}


@dataclass(frozen=True)
class Shape:
    files: int
    partitions: int
    rows_per_file: int
    payload_bytes: int  # random bytes per row in column b
    target_file_size: int  # deltakeeper's and delta-rs's target; OPTIMIZE keeps Delta's 1 GiB
    new_files: int  # (B): new small files ...
    new_partitions: int  # ... spread over this many partitions
    quick: bool = False  # Spark runs with QUICK_CONF
    seed: int = 1

    def key(self) -> str:
        blob = json.dumps({**asdict(self), "generator": GENERATOR_VERSION}, sort_keys=True)
        return hashlib.sha256(blob.encode()).hexdigest()[:16]

    @property
    def rows(self) -> int:
        return self.files * self.rows_per_file

    @property
    def spark_conf(self) -> dict[str, str]:
        return QUICK_CONF if self.quick else SPARK_CONF


# Files of about 110 KiB, 500 per partition: each partition's 54 MiB make six 8 MiB files
# and a seventh of about 6 MiB, above the 4 MiB minFileSize, so (B) finds only new files small.
FULL = Shape(10_000, 20, 2_000, 36, 8 * MIB, 200, 4)
QUICK = Shape(200, 2, 400, 36, 600 * KIB, 100, 2, quick=True)


# ------------------------------------------------------------------------------------------
# The generator
# ------------------------------------------------------------------------------------------


def _part(index: int) -> str:
    return f"p{index:02d}"


def _write_file(root: Path, shape: Shape, number: int, part: str) -> dict[str, Any]:
    """One parquet file of rows with ids number*rows .. (number+1)*rows - 1; its add action."""
    rng = random.Random(f"{shape.seed}/{number}")
    rows = shape.rows_per_file
    first = number * rows
    payload = rng.randbytes(rows * shape.payload_bytes)
    step = shape.payload_bytes
    data = pa.table(
        {
            "id": pa.array(range(first, first + rows), pa.int64()),
            "n": pa.array([rng.getrandbits(63) for _ in range(rows)], pa.int64()),
            "b": pa.array([payload[i * step : (i + 1) * step] for i in range(rows)], pa.binary()),
        },
        schema=COLUMNS,
    )
    rel = f"part={part}/part-{number:05d}-{shape.key()}.snappy.parquet"
    (root / rel).parent.mkdir(parents=True, exist_ok=True)
    pq.write_table(data, root / rel, compression="snappy")
    stats = {
        "numRecords": rows,
        "minValues": {"id": first},
        "maxValues": {"id": first + rows - 1},
        "nullCount": {"id": 0, "n": 0, "b": 0},
    }
    return {
        "path": rel,
        "partitionValues": {"part": part},
        "size": (root / rel).stat().st_size,
        "modificationTime": T0_MS,
        "dataChange": True,
        "stats": json.dumps(stats),
    }


def _write_files(root: Path, shape: Shape, numbers: range, parts: int) -> list[dict[str, Any]]:
    with ThreadPoolExecutor(max_workers=2) as pool:
        return list(pool.map(lambda i: _write_file(root, shape, i, _part(i % parts)), numbers))


def _commit(log: Path, version: int, operation: str, actions: list[dict[str, Any]]) -> None:
    info = {"commitInfo": {"timestamp": T0_MS + version, "operation": operation}}
    lines = [json.dumps(info), *(json.dumps(a) for a in actions)]
    (log / f"{version:020d}.json").write_text("\n".join(lines) + "\n")


def generate(shape: Shape, out: Path) -> dict[str, Any]:
    """`out`/table: the table at version 0; `out`/new: (B)'s files and their adds."""
    started = time.perf_counter()
    with building(out) as tmp:
        table, new = tmp / "table", tmp / "new"
        (table / "_delta_log").mkdir(parents=True)
        adds = _write_files(table, shape, range(shape.files), shape.partitions)
        meta = {
            "id": f"bench-compaction-{shape.key()}",
            "format": {"provider": "parquet", "options": {}},
            "schemaString": SCHEMA_STRING,
            "partitionColumns": ["part"],
            "configuration": {},
            "createdTime": T0_MS,
        }
        protocol = {"minReaderVersion": 1, "minWriterVersion": 2}
        actions = [{"protocol": protocol}, {"metaData": meta}, *({"add": a} for a in adds)]
        _commit(table / "_delta_log", 0, "WRITE", actions)
        numbers = range(shape.files, shape.files + shape.new_files)
        new_adds = _write_files(new, shape, numbers, shape.new_partitions)
        (new / "adds.json").write_text(json.dumps(new_adds))
        info = {
            "shape": asdict(shape),
            "generator": GENERATOR_VERSION,
            "bytes": sum(a["size"] for a in adds),
            "new_bytes": sum(a["size"] for a in new_adds),
            "generation_seconds": round(time.perf_counter() - started, 1),
        }
        info.update(check(table, shape.files, shape.rows))
        (tmp / "info.json").write_text(json.dumps(info, indent=2) + "\n")
    return info


def check(table: Path, files: int, rows: int) -> dict[str, Any]:
    """delta-rs must read the generated table: every file, every row; the rows' digest."""
    found = len(live_files(table))
    count, digest = rows_digest(table)
    if (found, count) != (files, rows):
        raise RuntimeError(f"delta-rs reads {found} files, {count} rows; wrote {files}, {rows}")
    return {"digest": digest}


def ensure(shape: Shape) -> tuple[Path, dict[str, Any]]:
    out = cache_dir() / f"compaction-{shape.key()}"
    if not (out / "info.json").exists():
        generate(shape, out)
    return out, json.loads((out / "info.json").read_text())


def _link(src: str, dest: str) -> None:
    try:
        os.link(src, dest)
    except OSError:  # another file system
        shutil.copy2(src, dest)


def copy_table(src: Path, dest: Path) -> Path:
    """Data files hard linked where possible (no engine modifies one), the log copied."""
    shutil.copytree(src, dest, copy_function=_link, ignore=shutil.ignore_patterns("_delta_log"))
    shutil.copytree(src / "_delta_log", dest / "_delta_log")
    return dest


def append_new(table: Path, new: Path) -> None:
    """(B)'s small files land in the table as one more WRITE commit."""
    adds = json.loads((new / "adds.json").read_text())
    for a in adds:
        (table / a["path"]).parent.mkdir(parents=True, exist_ok=True)
        _link(str(new / a["path"]), str(table / a["path"]))
    log = table / "_delta_log"
    latest = max(int(p.name[:20]) for p in log.glob("[0-9]" * 20 + ".json"))
    _commit(log, latest + 1, "WRITE", [{"add": a} for a in adds])


# ------------------------------------------------------------------------------------------
# What a table holds (delta-rs) and how fast DuckDB scans it
# ------------------------------------------------------------------------------------------


def live_files(table: Path) -> dict[str, int]:
    from deltalake import DeltaTable

    adds = DeltaTable(str(table)).get_add_actions(flatten=True)
    return dict(zip(adds["path"].to_pylist(), adds["size_bytes"].to_pylist(), strict=True))


def rows_digest(table: Path) -> tuple[int, str]:
    """Row count and SHA-256 of the rows sorted by id, in one Arrow schema whatever the reader
    or writer chose (views, dictionaries), so equal rows give equal digests."""
    from deltalake import DeltaTable, QueryBuilder

    qb = QueryBuilder().register("t", DeltaTable(str(table)))
    rows = pa.table(qb.execute("SELECT id, n, b, part FROM t ORDER BY id").read_all())
    rows = rows.cast(ROW_SCHEMA).combine_chunks()
    h = hashlib.sha256()
    for batch in rows.to_batches(max_chunksize=1 << 20):
        h.update(batch.serialize())
    return rows.num_rows, h.hexdigest()


def scan_seconds(table: Path, rows: int, repeats: int = 2) -> float:
    """DuckDB's full scan (every column decoded), the best of `repeats`."""
    from tests.support.oracles import duckdb_connect

    best = float("inf")
    for _ in range(repeats):
        with duckdb_connect() as con:
            started = time.perf_counter()
            (count,) = con.execute("SELECT count(t) FROM delta_scan(?) t", [str(table)]).fetchone()
            best = min(best, time.perf_counter() - started)
        if count != rows:
            raise RuntimeError(f"DuckDB reads {count} rows of {table}, expected {rows}")
    return best


# ------------------------------------------------------------------------------------------
# The engines: each runs to its end and says what it measured of itself
# ------------------------------------------------------------------------------------------


def _spark_env() -> dict[str, str]:
    return {**os.environ, "SPARK_LOCAL_IP": "127.0.0.1", "PYSPARK_PYTHON": sys.executable}


def _cpu_of_children() -> float:
    used = resource.getrusage(resource.RUSAGE_CHILDREN)
    return used.ru_utime + used.ru_stime


def _timed(cmd: list[str], env: dict[str, str] | None = None) -> tuple[dict[str, Any], float]:
    """Run `cmd`; its last stdout line as JSON (plus `cpu`: user + system seconds of its whole
    process tree, JVM and job included), and its wall time."""
    started, cpu = time.perf_counter(), _cpu_of_children()
    proc = subprocess.run(cmd, cwd=REPO, env=env, capture_output=True, text=True)
    wall = time.perf_counter() - started
    cpu = _cpu_of_children() - cpu
    try:
        return json.loads(proc.stdout.strip().splitlines()[-1]) | {"cpu": cpu}, wall
    except (IndexError, ValueError):
        tail = "\n".join(proc.stderr.strip().splitlines()[-15:])
        raise RuntimeError(f"{cmd[:3]} exited {proc.returncode} with no result:\n{tail}") from None


def _jars() -> Path:
    from tests.support.spark import ensure_spark

    return ensure_spark()


def run_deltakeeper(table: Path, shape: Shape) -> dict[str, Any]:
    cmd = [sys.executable, "-m", "deltakeeper", "compact", str(table), "--json"]
    cmd += ["--target-file-size", str(shape.target_file_size), "--master", MASTER]
    cmd += ["--jars-dir", str(_jars())]
    for key, value in shape.spark_conf.items():
        cmd += ["--spark-conf", f"{key}={value}"]
    out, wall = _timed(cmd, _spark_env())
    job = out.get("job") or {}
    if job.get("result") != "done":
        raise RuntimeError(f"deltakeeper compact did not compact: {json.dumps(out)[:2000]}")
    plan = out["plan"]
    checkpoint = out.get("checkpoint") or {}
    return {
        "wall": wall,
        "cpu": out["cpu"],
        "job": job["seconds"],
        "session": job["sessionSeconds"],
        "planned": f"{len(plan['partitions'])} partitions, {plan['files']} files",
        # compact's checkpoint before the job: its result and why (the interval's rule)
        "checkpoint": f"{checkpoint.get('result', 'not planned')}: {checkpoint.get('message')}",
    }


def optimize_sizes(shape: Shape) -> dict[str, str]:
    """Delta's OPTIMIZE conf at the file sizes deltakeeper's job sets (planner defaults)."""
    settings = CompactionSettings(target_file_size=shape.target_file_size)
    return {
        OPTIMIZE_CONF["minFileSize"]: str(settings.small_below),
        OPTIMIZE_CONF["maxFileSize"]: str(settings.target_file_size),
    }


def run_optimize(table: Path, shape: Shape) -> dict[str, Any]:
    return _optimize(table, shape, {})


def run_optimize_sized(table: Path, shape: Shape) -> dict[str, Any]:
    return _optimize(table, shape, optimize_sizes(shape))


def _optimize(table: Path, shape: Shape, sizes: dict[str, str]) -> dict[str, Any]:
    from deltakeeper.compaction.submit import DELTA_EXTENSIONS, spark_submit_path

    jars = _jars()
    names = (jars / "jars.txt").read_text().split()
    cmd = [
        spark_submit_path(),
        "--master",
        MASTER,
        "--jars",
        ",".join(str(jars / n) for n in names),
    ]
    for key, value in {**DELTA_EXTENSIONS, **shape.spark_conf, **sizes}.items():
        cmd += ["--conf", f"{key}={value}"]
    out, wall = _timed([*cmd, str(OPTIMIZE_SCRIPT), str(table)], _spark_env())
    return {
        "wall": wall,
        "cpu": out["cpu"],
        "job": out["seconds"],
        "session": out["sessionSeconds"],
    }


def run_deltars(table: Path, shape: Shape) -> dict[str, Any]:
    cmd = [sys.executable, "-m", "benchmarks.compaction", "--child", str(table)]
    out, wall = _timed([*cmd, str(shape.target_file_size)])
    return {"wall": wall, "cpu": out["cpu"], "job": out["seconds"], "session": 0.0}


def _child(table: str, target: str) -> int:
    from deltalake import DeltaTable

    started = time.perf_counter()
    DeltaTable(table).optimize.compact(target_size=int(target))
    emit({"seconds": time.perf_counter() - started})
    return 0


Engine = Callable[[Path, Shape], dict[str, Any]]
SIZED = "OPTIMIZE (deltakeeper's sizes)"
ENGINES: dict[str, Engine] = {
    "deltakeeper": run_deltakeeper,
    "OPTIMIZE (Delta defaults)": run_optimize,
    # The same bins as deltakeeper's job: what is left between the two is the job's own cost.
    SIZED: run_optimize_sized,
    "delta-rs compact": run_deltars,
}
# (B) runs these again; the targets compare deltakeeper with Delta's defaults.
STEADY = ("deltakeeper", "OPTIMIZE (Delta defaults)", SIZED)


def measure_run(engine: str, table: Path, shape: Shape, rows: int, digest: str) -> dict[str, Any]:
    """One engine on `table`: its own timing, then what changed, read from the table."""
    before = live_files(table)
    try:
        run = ENGINES[engine](table, shape)
    except Exception as e:
        return {"ok": False, "error": f"{type(e).__name__}: {e}"}
    after = live_files(table)
    removed = set(before) - set(after)
    added = set(after) - set(before)
    count, got = rows_digest(table)
    return {
        "ok": True,
        **run,
        "work": run["job"] - run["session"],
        "files_before": len(before),
        "files_after": len(after),
        "bytes_read": sum(before[p] for p in removed),
        "bytes_written": sum(after[p] for p in added),
        "files_read": len(removed),
        "scan": scan_seconds(table, rows),
        "rows": count,
        "rows_identical": (count, got) == (rows, digest),
    }


def measure(shape: Shape, work: Path, engines: tuple[str, ...] = tuple(ENGINES)) -> dict[str, Any]:
    """(A) and (B) on copies of the cached table under `work`."""
    src, info = ensure(shape)
    out: dict[str, Any] = {"info": info, "A": {}, "B": {}}
    out["scan_before"] = scan_seconds(src / "table", shape.rows)
    for engine in engines:
        table = copy_table(src / "table", work / f"a-{len(out['A'])}")
        print(f"  (A) {engine} ...", flush=True)
        out["A"][engine] = measure_run(engine, table, shape, shape.rows, info["digest"])
        out["A"][engine]["table"] = table
    rows_b = shape.rows + shape.new_files * shape.rows_per_file
    for engine in (e for e in STEADY if e in engines):
        table = out["A"][engine].pop("table")
        if not out["A"][engine]["ok"]:
            out["B"][engine] = {"ok": False, "error": "(A) failed"}
            continue
        append_new(table, src / "new")
        digest = rows_digest(table)[1]
        print(f"  (B) {engine} ...", flush=True)
        out["B"][engine] = measure_run(engine, table, shape, rows_b, digest)
    for result in out["A"].values():
        result.pop("table", None)
    return out


# ------------------------------------------------------------------------------------------
# The report
# ------------------------------------------------------------------------------------------


def _ratio(a: float, b: float) -> float:
    return a / b if b else float("inf")


def _row(engine: str, r: dict[str, Any]) -> str:
    if not r["ok"]:
        return f"| {engine} | not measured: {r['error']} |" + " |" * 9
    return (
        f"| {engine} | {r['wall']:.1f} s | {r['cpu']:.1f} s | {r['job']:.1f} s | {r['work']:.1f} s "
        f"| {r['files_read']:,} files, {r['bytes_read'] / MIB:,.1f} MiB "
        f"| {r['bytes_written'] / MIB:,.1f} MiB | {r['files_after']:,} | {r['scan']:.2f} s "
        f"| {'identical' if r['rows_identical'] else 'DIFFERENT'} ({r['rows']:,}) |"
    )


def _met(ok: bool) -> str:
    return "**met**" if ok else "**NOT met**"


def targets(results: dict[str, Any]) -> dict[str, tuple[str, bool]]:
    """Each target of issue 12's benchmark: the figure and whether it holds."""
    a, b = results["A"], results["B"]
    dk, opt = a.get("deltakeeper", {}), a.get("OPTIMIZE (Delta defaults)", {})
    out: dict[str, tuple[str, bool]] = {}
    if dk.get("ok") and opt.get("ok"):
        wall = _ratio(dk["wall"], opt["wall"])
        out["(A) wall <= 1.1x OPTIMIZE"] = (f"{wall:.2f}x", wall <= 1.1)
    if dk.get("ok"):
        speed = _ratio(results["scan_before"], dk["scan"])
        out["(A) scan after >= 10x faster"] = (f"{speed:.1f}x faster", speed >= 10)
    same = all(r["ok"] and r["rows_identical"] for part in (a, b) for r in part.values())
    out["identical rows, every run"] = ("yes" if same else "no", same)
    dk, opt = b.get("deltakeeper", {}), b.get("OPTIMIZE (Delta defaults)", {})
    if dk.get("ok") and opt.get("ok"):
        new = results["info"]["new_bytes"]
        own = _ratio(dk["bytes_written"], new)
        out["(B) written <= 1.1x the new files' bytes"] = (f"{own:.2f}x", own <= 1.1)
        written = _ratio(dk["bytes_written"], opt["bytes_written"])
        out["(B) written <= 0.5x OPTIMIZE"] = (f"{written:.2f}x", written <= 0.5)
        work = _ratio(dk["work"], opt["work"])
        out["(B) job time (JVM, session excluded) <= 0.5x"] = (f"{work:.2f}x", work <= 0.5)
        wall = _ratio(dk["wall"], opt["wall"])
        out["(B) wall <= 1.0x OPTIMIZE"] = (f"{wall:.2f}x", wall <= 1.0)
    return out


def report(cmd: str, shape: Shape, results: dict[str, Any], m: dict[str, Any]) -> str:
    info = results["info"]
    header = (
        "| engine | wall (process) | CPU (process tree) | job (JVM up) "
        "| job, session start excluded | read "
        "| written | files after | DuckDB scan after | rows |"
    )
    lines = [
        f"## Compaction: {shape.files:,} small files in {shape.partitions} partitions",
        "",
        f"- Date: {datetime.now(UTC).strftime('%Y-%m-%d %H:%M UTC')}, "
        f"deltakeeper commit {m['deltakeeper_commit']}",
        machine_line(m, spark=True),
        f"- Command: `{cmd}`",
        f"- Table: `benchmarks/compaction.py`'s generator (v{GENERATOR_VERSION}, seed "
        f"{shape.seed}): {shape.files:,} files of {shape.rows_per_file:,} rows (id, a random "
        f"long, {shape.payload_bytes} random bytes), {info['bytes'] / MIB:,.1f} MiB "
        f"({info['bytes'] / shape.files / KIB:.0f} KiB a file), one commit; {shape.rows:,} rows.",
        f"- Spark: `spark-submit --master {MASTER}`, the same jars and `--conf` for both Spark "
        f"runs ({', '.join(f'{k}={v}' for k, v in shape.spark_conf.items())}). deltakeeper: "
        f"`deltakeeper compact TABLE --target-file-size {shape.target_file_size // KIB}Ki` "
        "(planner defaults: minFileSize half the target, 50 small files make a partition due). "
        "OPTIMIZE: `OPTIMIZE delta.`TABLE`` with Delta's defaults (min = max file size 1 GiB); "
        "OPTIMIZE at deltakeeper's sizes: the same with "
        f"`{', '.join(f'{k}={v}' for k, v in optimize_sizes(shape).items())}` (the job's bins). "
        f"delta-rs: `optimize.compact(target_size={shape.target_file_size // KIB}Ki)`.",
        "- Wall is the whole process (Python, JVM and Spark session start included), CPU its "
        "process tree's user + system time (what the load of other work does not inflate); the job "
        "times itself from its start (JVM up) and reports the session's start apart. Read and "
        "written are the sizes of the files the commit removed and added; rows: delta-rs reads "
        "every row, sorted by id, digest compared with the one before. DuckDB scan: "
        "`count(t)` over `delta_scan`, best of 2.",
        "",
        f"### (A) first compaction; DuckDB scan before: {results['scan_before']:.2f} s",
        "",
        header,
        "|---|---|---|---|---|---|---|---|---|---|",
        *(_row(e, r) for e, r in results["A"].items()),
        "",
        f"### (B) steady state: {shape.new_files} new files ({info['new_bytes'] / MIB:.1f} MiB) "
        f"in {shape.new_partitions} partitions after (A)",
        "",
        header,
        "|---|---|---|---|---|---|---|---|---|---|",
        *(_row(e, r) for e, r in results["B"].items()),
        "",
    ]
    for name, (figure, ok) in targets(results).items():
        lines.append(f"- Target {name}: {figure}, {_met(ok)}")
    lines += against_sized(results)
    lines += checkpoints(results)
    return "\n".join(lines) + "\n"


def checkpoints(results: dict[str, Any]) -> list[str]:
    """What each run started from, and deltakeeper's checkpoint before its job."""
    lines = [
        "- Each engine works on its own copy: (A) from the generator's one-commit log, (B) from "
        "the log its own (A) left plus the new files' commit; no engine sees another's commits "
        "or checkpoints. OPTIMIZE writes no checkpoint before it starts."
    ]
    for part in ("A", "B"):
        dk = results[part].get("deltakeeper", {})
        if dk.get("ok"):
            lines.append(f"- ({part}) deltakeeper's checkpoint before the job: {dk['checkpoint']}")
    return lines


def against_sized(results: dict[str, Any]) -> list[str]:
    """deltakeeper against OPTIMIZE with the same bins: the job's own cost, no target."""
    lines = []
    for part in ("A", "B"):
        dk, sized = results[part].get("deltakeeper", {}), results[part].get(SIZED, {})
        if dk.get("ok") and sized.get("ok"):
            wall, cpu = _ratio(dk["wall"], sized["wall"]), _ratio(dk["cpu"], sized["cpu"])
            lines.append(
                f"- ({part}) deltakeeper / {SIZED} (same bins, no target): wall {wall:.2f}x, "
                f"CPU {cpu:.2f}x, job with session start excluded "
                f"{_ratio(dk['work'], sized['work']):.2f}x"
            )
    return lines


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    if argv[:1] == ["--child"]:
        return _child(argv[1], argv[2])
    ap = argparse.ArgumentParser(prog="python -m benchmarks.compaction", description=__doc__)
    ap.add_argument("--quick", action="store_true", help="a tiny table; prints only")
    ap.add_argument("--output", type=Path, default=REPO / "BENCHMARKS.md")
    ap.add_argument(
        "--no-planner",
        action="store_true",
        help="skip the planner on the 1,000,000-file log (benchmarks.compaction_plan, which the "
        "full run also runs, once, into the same file)",
    )
    a = ap.parse_args(argv)
    shape = QUICK if a.quick else FULL
    m = machine()
    with tempfile.TemporaryDirectory(prefix="bench-compaction-", dir=cache_dir()) as work:
        results = measure(shape, Path(work))
    cmd = "python -m benchmarks.compaction" + "".join(f" {x}" for x in argv)
    text = report(cmd, shape, results, m)
    print("\n" + text)
    if not a.quick:
        write_section(a.output, "compaction", shape.key(), text)
        print(f"wrote {a.output}")
    if not (a.quick or a.no_planner):
        from benchmarks import compaction_plan

        compaction_plan.main(["--repeats", "1", "--output", str(a.output)])
    # A missed target is a finding, written above; only a run that failed fails the command.
    return 0 if all(r["ok"] for part in ("A", "B") for r in results[part].values()) else 1


if __name__ == "__main__":
    sys.exit(main())
