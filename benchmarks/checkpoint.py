"""Checkpoint writing on large synthetic logs: deltakeeper, delta-rs and Delta Spark, same run.

Scenarios (issue 3):
- incremental: a 1,000,000-file table with a classic checkpoint and 10 commits after it;
  checkpoint the latest version.
- full: 10,000 JSON commits (1,000,000 live files), no checkpoint; checkpoint the latest version.
- incremental-10m, full-10m (issue 26; only when named): the same at 10,000,000 files, for
  deltakeeper within a 512 MiB memory budget and Delta Spark, which deltakeeper hands a full
  checkpoint that does not fit (`deltakeeper-spark`: `deltakeeper maintain --engine spark`,
  spark-submit with deltakeeper's job). delta-rs would need more memory than this machine has.

Every run copies the log into a fresh folder first, so each engine checkpoints its own copy of
the same log (a checkpoint left by an earlier run would change the work). Each engine runs in a
fresh child process, engines interleaved, `--repeats` times; the time covers opening the table
and writing the checkpoint (imports and, for Spark, JVM and session start are excluded). Peak
RSS is VmHWM: of the Python child for deltakeeper and delta-rs, of the driver JVM for Spark.

After each run the checkpoint is checked: the log copy is cut down to the new checkpoint, the
commit at its version and `_last_checkpoint`, then deltakeeper and delta-rs must both read the
table at that version with every live file. A run that fails this check has no valid result.

    python -m benchmarks.checkpoint                        # both scenarios, writes BENCHMARKS.md
    python -m benchmarks.checkpoint --scenarios full --engines deltakeeper,delta-rs
    python -m benchmarks.checkpoint --quick                # 10k files, 1k commits; prints only
    python -m benchmarks.checkpoint --scenarios incremental-10m,full-10m \
        --engines deltakeeper,deltakeeper-spark --repeats 1
"""

from __future__ import annotations

import argparse
import os
import resource
import shutil
import subprocess
import sys
import time
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from benchmarks.harness import (
    MIB,
    REPO,
    emit,
    machine,
    machine_line,
    median_of,
    proc_status_bytes,
    run_child,
    write_section,
)
from benchmarks.synth import TOMBSTONE_RETENTION_MS, Params, cache_dir, ensure

ENGINES = ("deltakeeper", "deltakeeper-json", "delta-rs", "spark", "deltakeeper-spark")
DEFAULT_ENGINES = ENGINES[:4]
PEER = "delta-rs"
SCENARIOS = {
    "incremental": Params(files=1_000_000, commits=10_000, commits_after_checkpoint=10),
    "incremental-parsed": Params(
        files=1_000_000, commits=10_000, commits_after_checkpoint=10, stats_parsed=True
    ),
    "full": Params(files=1_000_000, commits=10_000, checkpoint=False),
}
LARGE = {  # run only when named
    "incremental-10m": Params(files=10_000_000, commits=10_000, commits_after_checkpoint=10),
    "full-10m": Params(files=10_000_000, commits=10_000, checkpoint=False),
}
# Who can run them on this machine: delta-rs, and deltakeeper's in-memory full checkpoint,
# would need more memory than it has.
LARGE_ENGINES = {
    "incremental-10m": ("deltakeeper", "deltakeeper-json", "spark", "deltakeeper-spark"),
    "full-10m": ("spark", "deltakeeper-spark"),
}
BUDGET_MIB = 512  # issue 26: the 10,000,000-file incremental checkpoint fits this, locally
# Above this many files the checkpoint is read back by deltakeeper's streamed count only: a
# full snapshot (deltakeeper's or delta-rs's) would not fit this machine's memory.
STREAMED_CHECK_FILES = 2_000_000
QUICK = {
    "incremental": Params(files=10_000, commits=1_000, commits_after_checkpoint=10),
    "incremental-parsed": Params(
        files=10_000, commits=1_000, commits_after_checkpoint=10, stats_parsed=True
    ),
    "full": Params(files=10_000, commits=1_000, checkpoint=False),
}
# Issue 3's targets, as (max time ratio, max peak RSS ratio) against delta-rs.
TARGETS = {"incremental": (0.5, 1.0), "incremental-parsed": (0.5, 1.0), "full": (1.0, None)}
TITLES = {
    "incremental": "checkpoint + {after} commits",
    "incremental-parsed": "checkpoint with stats_parsed + {after} commits",
    "full": "{commits:,} JSON commits, no checkpoint",
    "incremental-10m": "checkpoint + {after} commits",
    "full-10m": "{commits:,} JSON commits, no checkpoint",
}
# Issue 14's: writing stats_parsed costs at most this much time over not writing it.
STRUCT_COST = 1.5
METHOD = {
    "deltakeeper": "table = open_table(path); source = checkpoint_source(table); "
    "write_source(table, source, now_ms, 7 days) (= checkpoint_table: the newest checkpoint "
    "streamed when there is one, else the snapshot loaded in memory)",
    "deltakeeper-json": "the same, as on a table that sets "
    "delta.checkpoint.writeStatsAsStruct=false (no stats_parsed or partitionValues_parsed)",
    "delta-rs": "dt = DeltaTable(path); dt.create_checkpoint()",
    "spark": "DeltaLog.forTable(spark, path).checkpoint() in a local[2] session "
    "(driver JVM, default JIT and GC, spark.driver.memory=6g)",
    "deltakeeper-spark": "deltakeeper maintain PATH --engine spark --only checkpoint --master "
    "local[2] --spark-conf spark.driver.memory=6g (spark-submit of deltakeeper's job: Delta "
    "Spark's DeltaLog.checkpoint; the time includes the JVM's start, the peak is the JVM's)",
}
SPARK_MEMORY = "6g"
TIMEOUT_S = 1800  # per run; a run that takes longer is reported as not measured
CATALOG = "org.apache.spark.sql.delta.catalog.DeltaCatalog"


# -- children: one engine, one checkpoint -----------------------------------------------------
def _json_only() -> None:
    """Make every table read as if it set delta.checkpoint.writeStatsAsStruct=false."""
    import dataclasses

    from deltakeeper.delta.checkpoint import StatsColumns

    of_table = StatsColumns.for_snapshot

    def without_struct(snap: Any) -> StatsColumns:
        return dataclasses.replace(of_table(snap), as_struct=False)

    StatsColumns.for_snapshot = without_struct  # type: ignore[method-assign]


def _deltakeeper(path: str, now_ms: int) -> dict[str, Any]:
    from deltakeeper.delta.checkpoint import checkpoint_source, write_source
    from deltakeeper.delta.table import open_table

    rss_import = proc_status_bytes("VmRSS")
    started = time.perf_counter()
    table = open_table(path)
    source = checkpoint_source(table)
    loaded = time.perf_counter()
    result = write_source(table, source, now_ms, TOMBSTONE_RETENTION_MS)
    done = time.perf_counter()
    return {
        "seconds": done - started,
        "load_seconds": loaded - started,
        "version": result.version,
        "rss_after_import": rss_import,
        "peak_rss": proc_status_bytes("VmHWM"),
    }


def _deltars(path: str) -> dict[str, Any]:
    from deltalake import DeltaTable

    rss_import = proc_status_bytes("VmRSS")
    started = time.perf_counter()
    dt = DeltaTable(path)
    loaded = time.perf_counter()
    dt.create_checkpoint()
    done = time.perf_counter()
    return {
        "seconds": done - started,
        "load_seconds": loaded - started,
        "version": dt.version(),
        "rss_after_import": rss_import,
        "peak_rss": proc_status_bytes("VmHWM"),
    }


def spark_session() -> Any:
    """local[2] with the suite's Delta jars, but sized and tuned for a large log."""
    from pyspark.sql import SparkSession

    from tests.support.spark import _log4j2_file, ensure_spark

    jdir = ensure_spark()
    jars = [str(jdir / n) for n in (jdir / "jars.txt").read_text().split() if n]
    log4j = _log4j2_file()
    return (
        SparkSession.builder.master("local[2]")
        .appName("deltakeeper-bench")
        .config("spark.jars", ",".join(jars))
        .config("spark.sql.extensions", "io.delta.sql.DeltaSparkSessionExtension")
        .config("spark.sql.catalog.spark_catalog", CATALOG)
        .config("spark.driver.memory", SPARK_MEMORY)
        .config("spark.driver.extraJavaOptions", f"-Dlog4j2.configurationFile=file:{log4j}")
        .config("spark.driver.host", "127.0.0.1")
        .config("spark.driver.bindAddress", "127.0.0.1")
        .config("spark.ui.enabled", "false")
        .config("spark.ui.showConsoleProgress", "false")
        .config("spark.sql.catalogImplementation", "in-memory")
        .getOrCreate()
    )


def _spark(path: str) -> dict[str, Any]:
    spark = spark_session()
    jvm = spark._jvm
    pid = int(jvm.java.lang.ProcessHandle.current().pid())
    rss_start = proc_status_bytes("VmRSS", pid)
    started = time.perf_counter()
    log = jvm.org.apache.spark.sql.delta.DeltaLog.forTable(spark._jsparkSession, path)
    loaded = time.perf_counter()
    log.checkpoint()
    done = time.perf_counter()
    version = int(log.unsafeVolatileSnapshot().version())
    peak = proc_status_bytes("VmHWM", pid)
    spark.stop()
    return {
        "seconds": done - started,
        "load_seconds": loaded - started,
        "version": version,
        "rss_after_import": rss_start,
        "peak_rss": peak,
    }


def _deltakeeper_spark(path: str) -> dict[str, Any]:
    from tests.support.spark import ensure_spark

    cmd = [sys.executable, "-m", "deltakeeper", "maintain", path, "--engine", "spark"]
    cmd += ["--only", "checkpoint", "--master", "local[2]", "--jars-dir", str(ensure_spark())]
    cmd += ["--spark-conf", f"spark.driver.memory={SPARK_MEMORY}", "--json"]
    started = time.perf_counter()
    done = subprocess.run(cmd, capture_output=True, text=True)
    seconds = time.perf_counter() - started
    if done.returncode != 0:
        raise RuntimeError(f"exit {done.returncode}: {done.stderr.strip()[-500:]}")
    from deltakeeper.delta.table import open_table

    return {
        "seconds": seconds,
        "load_seconds": 0.0,
        "version": open_table(path).latest_version(),
        "rss_after_import": 0,
        # Every descendant waited for: the deltakeeper CLI and spark-submit's JVM (the largest).
        "peak_rss": resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss * 1024,
    }


def _child(engine: str, path: str, now_ms: int) -> int:
    try:
        if engine == "deltakeeper-json":
            _json_only()
        if engine == "deltakeeper-spark":
            report = _deltakeeper_spark(path)
        elif engine.startswith("deltakeeper"):
            report = _deltakeeper(path, now_ms)
        elif engine == "delta-rs":
            report = _deltars(path)
        else:
            report = _spark(path)
    except Exception as e:
        emit({"ok": False, "error": f"{type(e).__name__}: {e}"})
        return 1
    emit({"ok": True, **report})
    return 0


# -- checking what a run wrote ----------------------------------------------------------------
def checkpoint_files(log: Path, version: int) -> list[Path]:
    from deltakeeper.delta import paths

    out = []
    for f in sorted(log.iterdir()):
        name = paths.parse(f.name)
        if name is not None and name.is_checkpoint and name.version == version:
            out.append(f)
    return out


def cut_to_checkpoint(log: Path, version: int) -> None:
    """Leave only the checkpoint at `version`, its commit and `_last_checkpoint`.

    Readers must then answer from the new checkpoint: nothing older is left to replay.
    """
    from deltakeeper.delta import paths

    keep = {paths.commit(version), paths.LAST_CHECKPOINT}
    keep |= {f.name for f in checkpoint_files(log, version)}
    for f in log.iterdir():
        if f.is_dir():
            shutil.rmtree(f)
        elif f.name not in keep:
            f.unlink()


def verify(table: Path, version: int, files: int) -> dict[str, Any]:
    """Read an engine's checkpoint back with deltakeeper and delta-rs; errors say what is off."""
    import json

    import pyarrow.parquet as pq
    from deltalake import DeltaTable

    from deltakeeper.delta.table import open_table

    log = table / "_delta_log"
    parts = checkpoint_files(log, version)
    if not parts:
        return {"verified": False, "error": f"no checkpoint at version {version}"}
    rows = sum(pq.ParquetFile(p).metadata.num_rows for p in parts)
    size = sum(p.stat().st_size for p in parts)
    hint = json.loads((log / "_last_checkpoint").read_text())
    cut_to_checkpoint(log, version)
    answers: dict[str, Any] = {"_last_checkpoint": hint.get("version")}
    expected: dict[str, Any] = {"_last_checkpoint": version, "deltakeeper": (version, files)}
    if files > STREAMED_CHECK_FILES:
        from deltakeeper.delta.held import read_streamed

        t = open_table(str(table))
        held = read_streamed(t, t.listing_for(None)[0])
        answers["deltakeeper"] = (held.version, held.num_files) if held else None
    else:
        snap = open_table(str(table)).snapshot()
        dt = DeltaTable(str(table))
        answers["deltakeeper"] = (snap.version, snap.num_files)
        answers["delta-rs"] = (dt.version(), dt.get_add_actions().num_rows)
        expected["delta-rs"] = (version, files)
    wrong = {k: v for k, v in answers.items() if v != expected[k]}
    error = f"checkpoint read back wrong: {wrong}, expected {expected}" if wrong else ""
    return {"verified": not wrong, "error": error, "cp_rows": rows, "cp_bytes": size}


# -- one run ----------------------------------------------------------------------------------
def fresh_copy(table: Path, dest: Path) -> Path:
    shutil.rmtree(dest, ignore_errors=True)
    dest.mkdir(parents=True)
    shutil.copytree(table / "_delta_log", dest / "_delta_log")
    for f in (dest / "_delta_log").iterdir():  # warm page cache, as for every engine
        f.read_bytes()
    return dest


def run_once(engine: str, table: Path, params: Params, now_ms: int, scratch: Path) -> dict:
    work = fresh_copy(table, scratch / engine)
    try:
        r = run_child("benchmarks.checkpoint", [engine, str(work), str(now_ms)], TIMEOUT_S)
        if r["ok"]:
            if r["version"] != params.version:
                r |= {"ok": False, "error": f"checkpointed version {r['version']}"}
            else:
                check = verify(work, params.version, params.files)
                r |= check | {"ok": check["verified"]}
        return r
    finally:
        shutil.rmtree(work, ignore_errors=True)


def summarize(runs: list[dict]) -> dict:
    ok = [r for r in runs if r["ok"]]
    if len(ok) < len(runs):
        bad = next(r for r in runs if not r["ok"])
        return {"ok": False, "error": bad["error"], "runs": runs}
    return {
        "ok": True,
        "seconds": median_of(ok, "seconds"),
        "min": min(r["seconds"] for r in ok),
        "max": max(r["seconds"] for r in ok),
        "load_seconds": median_of(ok, "load_seconds"),
        "peak_rss": median_of(ok, "peak_rss"),
        "rss_after_import": median_of(ok, "rss_after_import"),
        "cp_rows": ok[0]["cp_rows"],
        "cp_bytes": ok[0]["cp_bytes"],
        "runs": runs,
    }


def measure(
    scenario: str,
    params: Params,
    engines: list[str],
    repeats: int,
    now_ms: int,
    spark_repeats: int | None = None,
) -> tuple[dict, dict]:
    started = time.perf_counter()
    table, info = ensure(params)
    print(f"{scenario}: table {table} ({time.perf_counter() - started:.1f} s)", flush=True)
    scratch = cache_dir() / f"scratch-checkpoint-{os.getpid()}"
    runs: dict[str, list[dict]] = {e: [] for e in engines}
    for i in range(repeats):
        for engine in engines:
            if engine == "spark" and spark_repeats is not None and i >= spark_repeats:
                continue
            r = run_once(engine, table, params, now_ms, scratch)
            runs[engine].append(r)
            shown = (
                f"{r['seconds']:.2f} s, peak RSS {r['peak_rss'] / MIB:,.0f} MiB"
                if r["ok"]
                else f"FAILED: {r['error']}"
            )
            print(f"  run {i + 1} {engine}: {shown}", flush=True)
    shutil.rmtree(scratch, ignore_errors=True)
    return info, {e: summarize(rs) for e, rs in runs.items()}


# -- report -----------------------------------------------------------------------------------
def ratios(results: dict) -> dict[str, tuple[float, float]]:
    peer = results.get(PEER)
    if not (peer and peer["ok"]):
        return {}
    return {
        e: (s["seconds"] / peer["seconds"], s["peak_rss"] / peer["peak_rss"])
        for e, s in results.items()
        if e != PEER and s["ok"]
    }


def target_line(scenario: str, results: dict) -> str:
    if scenario in LARGE:
        return budget_line(scenario, results)
    max_time, max_rss = TARGETS[scenario]
    r = ratios(results).get("deltakeeper")
    want = f"time <= {max_time}x delta-rs" + (
        f" and peak RSS <= {max_rss}x" if max_rss is not None else ""
    )
    if r is None:
        return f"- Target ({want}): **not measured**"
    met = r[0] <= max_time and (max_rss is None or r[1] <= max_rss)
    return f"- Target ({want}): **{'met' if met else 'NOT met'}**"


def budget_line(scenario: str, results: dict) -> str:
    """Issue 26's: the 10,000,000-file incremental checkpoint within the budget, locally."""
    ours = results.get("deltakeeper")
    if scenario != "incremental-10m":
        return "- The full checkpoint does not fit a small budget: deltakeeper hands it to Spark"
    if not (ours and ours["ok"]):
        return f"- Target (deltakeeper's peak RSS <= {BUDGET_MIB} MiB): **not measured**"
    peak = ours["peak_rss"] / MIB
    met = "met" if peak <= BUDGET_MIB else "NOT met"
    return f"- Target (deltakeeper's peak RSS <= {BUDGET_MIB} MiB): {peak:,.0f} MiB, **{met}**"


def table_lines(scenario: str, results: dict) -> list[str]:
    lines = [
        "| engine | open + checkpoint, median (min-max) | of which open/load | peak RSS, median "
        "| RSS before timing | checkpoint written |",
        "|---|---|---|---|---|---|",
    ]
    for engine, s in results.items():
        if not s["ok"]:
            lines.append(f"| {engine} | not measured: {s['error']} | | | | |")
            continue
        jvm = " (JVM)" if engine in ("spark", "deltakeeper-spark") else ""
        lines.append(
            f"| {engine} | {s['seconds']:.2f} s ({s['min']:.2f}-{s['max']:.2f}) "
            f"| {s['load_seconds']:.2f} s | {s['peak_rss'] / MIB:,.0f} MiB{jvm} "
            f"| {s['rss_after_import'] / MIB:,.0f} MiB | {s['cp_rows']:,} rows, "
            f"{s['cp_bytes'] / MIB:,.1f} MiB |"
        )
    lines.append("")
    r = ratios(results)
    for engine in results:
        if engine != PEER and engine in r:
            lines.append(
                f"- **{engine} / {PEER}: time {r[engine][0]:.2f}x, peak RSS {r[engine][1]:.2f}x**"
            )
    lines.append(target_line(scenario, results))
    if scenario not in LARGE:
        lines.append(struct_cost_line(results))
    return lines


def struct_cost_line(results: dict) -> str:
    want = f"deltakeeper <= {STRUCT_COST}x deltakeeper-json and <= delta-rs"
    with_, without, peer = (results.get(e) for e in ("deltakeeper", "deltakeeper-json", PEER))
    if not (with_ and without and peer and with_["ok"] and without["ok"] and peer["ok"]):
        return f"- Target for stats_parsed ({want}): **not measured**"
    cost = with_["seconds"] / without["seconds"]
    met = cost <= STRUCT_COST and with_["seconds"] <= peer["seconds"]
    return (
        f"- stats_parsed costs {cost:.2f}x the time of JSON stats alone; target ({want}): "
        f"**{'met' if met else 'NOT met'}**"
    )


def report(
    scenario: str,
    cmd: str,
    m: dict,
    params: Params,
    info: dict,
    results: dict,
    repeats: int,
    spark_repeats: int | None = None,
) -> str:
    runs = f"{repeats} run(s) per engine" + (
        f" ({min(repeats, spark_repeats)} for Spark)" if spark_repeats is not None else ""
    )
    ck = info["checkpoint"]
    parsed = " with stats_parsed" if params.stats_parsed else ""
    layout = (
        f"a classic V1 checkpoint{parsed} at version {ck['version']} "
        f"({ck['numOfAddFiles']:,} adds, "
        f"{ck['sizeInBytes'] / MIB:,.1f} MiB) plus {info['json_commits']} JSON commits"
        if ck
        else f"{info['json_commits']:,} JSON commits, no checkpoint"
    )
    title = TITLES[scenario].format(after=params.commits_after_checkpoint, commits=params.commits)
    readers = (
        "deltakeeper's streamed count (a full snapshot would not fit this machine)"
        if params.files > STREAMED_CHECK_FILES
        else "deltakeeper and delta-rs"
    )
    out = [
        f"## Checkpoint write ({scenario}): {params.files:,} files, {title}",
        "",
        f"- Date: {datetime.now(UTC).strftime('%Y-%m-%d %H:%M UTC')}, "
        f"deltakeeper commit {m['deltakeeper_commit']}",
        machine_line(m, spark="spark" in results),
        f"- Command: `{cmd}`",
        f"- Table: synthetic (`benchmarks/synth.py`, seed {params.seed}), {params.files:,} live "
        f"files at version {info['version']}, partitioned by date/region, JSON stats on 5 "
        f"columns; log = {layout}; {info['log_bytes'] / MIB:,.1f} MiB of log.",
        f"- Method: each run copies the log to a fresh folder (warm page cache), then one engine "
        f"checkpoints the latest version in a fresh process; {runs}, interleaved. "
        "Time covers open + checkpoint (imports, JVM and Spark session start "
        "excluded). Peak RSS is VmHWM of the Python process, or of the driver JVM for Spark. "
        "Tombstones older than 7 days before the real current time expire, as delta-rs and "
        "Spark do by their clocks (all of this log's are older). Each checkpoint was read back "
        f"by {readers} from a log cut down to it: right version, every live file.",
        *(f"  - {e}: `{METHOD[e]}`" for e in results),
        "",
        *table_lines(scenario, results),
        "",
    ]
    return "\n".join(out)


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    if argv[:1] == ["--child"]:
        return _child(argv[1], argv[2], int(argv[3]))
    ap = argparse.ArgumentParser(prog="python -m benchmarks.checkpoint", description=__doc__)
    ap.add_argument(
        "--scenarios", default=",".join(SCENARIOS), help=f"of {tuple(SCENARIOS | LARGE)}"
    )
    ap.add_argument("--engines", default=",".join(DEFAULT_ENGINES), help=f"of {ENGINES}")
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--spark-repeats", type=int, help="fewer Spark runs (it takes minutes)")
    ap.add_argument("--quick", action="store_true", help="10k files, 1k commits; no BENCHMARKS.md")
    ap.add_argument("--write", dest="write", action="store_true", default=None)
    ap.add_argument("--no-write", dest="write", action="store_false")
    ap.add_argument("--output", type=Path, default=REPO / "BENCHMARKS.md")
    a = ap.parse_args(argv)
    engines = [e for e in a.engines.split(",") if e]
    scenarios = [s for s in a.scenarios.split(",") if s]
    known = SCENARIOS | LARGE
    if unknown := (set(engines) - set(ENGINES)) | (set(scenarios) - set(known)):
        ap.error(f"unknown {sorted(unknown)}; engines {ENGINES}, scenarios {tuple(known)}")
    now_ms = int(time.time() * 1000)  # the clock delta-rs and Spark use for tombstones
    m = machine()
    cmd = "python -m benchmarks.checkpoint" + "".join(f" {x}" for x in argv)
    failed = []
    for scenario in scenarios:
        params = (QUICK if a.quick else known)[scenario]
        able = [e for e in engines if e in LARGE_ENGINES.get(scenario, ENGINES)]
        if skipped := sorted(set(engines) - set(able)):
            print(f"{scenario}: not run here (memory): {', '.join(skipped)}", flush=True)
        info, results = measure(scenario, params, able, a.repeats, now_ms, a.spark_repeats)
        text = report(scenario, cmd, m, params, info, results, a.repeats, a.spark_repeats)
        print("\n" + text, flush=True)
        if a.write if a.write is not None else not a.quick:
            write_section(a.output, "checkpoint", f"{scenario} {params.key()}", text)
            print(f"wrote {a.output}")
        failed += [f"{scenario}/{e}" for e, s in results.items() if not s["ok"]]
    if failed:
        print(f"NOT MEASURED OR WRONG: {', '.join(failed)}", file=sys.stderr)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
