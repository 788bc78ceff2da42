"""Latest-snapshot load of a large synthetic table: deltakeeper against delta-rs, same run.

Each engine runs in a fresh child process (engines interleaved, `--repeats` times) that imports
its library, then times "load the latest snapshot and count the live files". Peak RSS is the
child's own VmHWM (/proc/self/status), so it covers the whole process, interpreter and imports
included; the RSS right after the imports is reported next to it. Not ru_maxrss: Linux carries
the parent's RSS into a child's ru_maxrss across fork/vfork + exec, and the parent here holds
the table generator's memory. Medians are reported, and the
ratios deltakeeper/delta-rs. The log files are read once before measuring (warm page cache).

    python -m benchmarks.snapshot_load                 # 1M files, writes BENCHMARKS.md
    python -m benchmarks.snapshot_load --quick         # 10k files, prints only (CI smoke)
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from datetime import UTC, datetime
from pathlib import Path

from benchmarks.harness import (
    MIB,
    REPO,
    machine,
    machine_line,
    proc_status_bytes,
    run_child,
    write_section,
)
from benchmarks.synth import Params, ensure

# What each engine runs, timed after its imports. delta-rs: DeltaTable() builds the eager
# snapshot (every add action, stats parsed into typed Arrow columns; 1.6.6 cannot skip stats);
# get_add_actions() hands that Arrow data over without one Python object per file, as
# deltakeeper's Arrow-backed snapshot does (dt.file_uris() would add ~1M Python strs).
# deltakeeper's default snapshot reads only the add columns it needs (no stats), so the
# deltakeeper-stats row also loads every add column, stats as JSON strings (not parsed).
METHOD = {
    "delta-rs": "DeltaTable(path); dt.version(); dt.get_add_actions().num_rows",
    "deltakeeper": "snap = open_table(path).snapshot(); snap.version; snap.num_files",
    "deltakeeper-stats": "same, with snapshot(add_cols=schema.FULL_ADD)",
}
ENGINES = tuple(METHOD)
PEER = "delta-rs"


def _child(engine: str, table: str) -> int:
    """Runs in the fresh child: import, time the load, print one JSON line."""
    try:
        if engine == "delta-rs":
            from deltalake import DeltaTable

            def load() -> tuple[int, int]:
                dt = DeltaTable(table)
                return dt.version(), dt.get_add_actions().num_rows
        else:
            from deltakeeper.delta import open_table, schema

            cols = {"add_cols": schema.FULL_ADD} if engine == "deltakeeper-stats" else {}

            def load() -> tuple[int, int]:
                snap = open_table(table).snapshot(**cols)
                return snap.version, snap.num_files

        rss_import = proc_status_bytes("VmRSS")
        started = time.perf_counter()
        version, files = load()
        seconds = time.perf_counter() - started
    except Exception as e:
        print(json.dumps({"ok": False, "error": f"{type(e).__name__}: {e}"}))
        return 1
    print(
        json.dumps(
            {
                "ok": True,
                "seconds": seconds,
                "version": version,
                "files": files,
                "rss_after_import": rss_import,
                "peak_rss": proc_status_bytes("VmHWM"),
            }
        )
    )
    return 0


def run_once(engine: str, table: Path) -> dict:
    """One fresh child's report, plus the wall time of the whole process."""
    return run_child("benchmarks.snapshot_load", [engine, str(table)])


def summarize(runs: list[dict], expected: tuple[int, int]) -> dict:
    ok = [r for r in runs if r["ok"]]
    if not ok:
        return {"ok": False, "error": runs[0]["error"], "runs": runs}
    wrong = [(r["version"], r["files"]) for r in ok if (r["version"], r["files"]) != expected]
    return {
        "ok": len(ok) == len(runs) and not wrong,
        "error": f"wrong answer (version, files) {wrong[0]}, expected {expected}" if wrong else "",
        "seconds": statistics.median(r["seconds"] for r in ok),
        "min": min(r["seconds"] for r in ok),
        "max": max(r["seconds"] for r in ok),
        "process_seconds": statistics.median(r["process_seconds"] for r in ok),
        "peak_rss": statistics.median(r["peak_rss"] for r in ok),
        "rss_after_import": statistics.median(r["rss_after_import"] for r in ok),
        "files": ok[0]["files"],
        "version": ok[0]["version"],
        "runs": runs,
    }


def warm(table: Path) -> None:
    for f in sorted((table / "_delta_log").iterdir()):
        f.read_bytes()


def _fmt(s: dict, key: str) -> str:
    if key == "time":
        return f"{s['seconds']:.2f} s ({s['min']:.2f}-{s['max']:.2f})"
    return f"{s[key] / MIB:,.0f} MiB"


def ratios(results: dict) -> dict[str, dict]:
    """engine -> its time and peak RSS divided by the peer's, for engines that measured."""
    peer = results.get(PEER)
    if not (peer and peer["ok"]):
        return {}
    return {
        e: {"time": s["seconds"] / peer["seconds"], "peak_rss": s["peak_rss"] / peer["peak_rss"]}
        for e, s in results.items()
        if e != PEER and s["ok"]
    }


def table_lines(results: dict) -> list[str]:
    lines = [
        "| engine | load + count, median (min-max) | peak RSS, median | RSS after imports |",
        "|---|---|---|---|",
    ]
    for engine, s in results.items():
        if "seconds" not in s:
            lines.append(f"| {engine} | not measured: {s['error']} | | |")
            continue
        note = f" — {s['error']}" if s["error"] else ""
        lines.append(
            f"| {engine} | {_fmt(s, 'time')}{note} | {_fmt(s, 'peak_rss')} "
            f"| {_fmt(s, 'rss_after_import')} |"
        )
    lines.append("")
    r = ratios(results)
    for engine in results:
        if engine == PEER:
            continue
        if engine in r:
            t, m = r[engine]["time"], r[engine]["peak_rss"]
            lines.append(f"- **{engine} / {PEER}: time {t:.2f}x, peak RSS {m:.2f}x**")
        else:
            lines.append(f"- **{engine} / {PEER}: no ratio, one of them has no valid result.**")
    lines.append("")
    lines.append("Below 1 means deltakeeper is faster / smaller.")
    return lines


def report(cmd: str, m: dict, params: Params, info: dict, results: dict, repeats: int) -> str:
    ck = info["checkpoint"]
    layout = (
        f"a classic V1 checkpoint at version {ck['version']} ({ck['numOfAddFiles']:,} adds, "
        f"{info['tombstones_in_checkpoint']:,} tombstones, {ck['sizeInBytes'] / MIB:,.1f} MiB) "
        f"plus {info['json_commits']} JSON commits"
        if ck
        else f"{info['json_commits']:,} JSON commits, no checkpoint"
    )
    shape = (
        f"checkpoint + {params.commits_after_checkpoint} commits"
        if ck
        else f"{params.commits:,} JSON commits, no checkpoint"
    )
    out = [
        f"## Latest-snapshot load: {params.files:,} files, {shape}",
        "",
        f"- Date: {datetime.now(UTC).strftime('%Y-%m-%d %H:%M UTC')}, "
        f"deltakeeper commit {m['deltakeeper_commit']}",
        machine_line(m),
        f"- Command: `{cmd}`",
        f"- Table: synthetic (`benchmarks/synth.py`, seed {params.seed}), "
        f"{params.files:,} live files at version {info['version']}, partitioned by "
        f"date/region, JSON stats on 5 columns; log = {layout}; "
        f"{info['log_bytes'] / MIB:,.1f} MiB of log, generated in "
        f"{info['generation_seconds']:.0f} s. Data files do not exist (only the log is read).",
        f"- Method: each engine in a fresh process, {repeats} run(s) each, interleaved, warm page "
        "cache; time covers the load only (imports excluded); peak RSS is the child's "
        "VmHWM (whole process, interpreter and imports included).",
        *(f"  - {e}: `{METHOD[e]}`" for e in results),
        "",
        *table_lines(results),
        "",
    ]
    return "\n".join(out)


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    if argv[:1] == ["--child"]:
        return _child(argv[1], argv[2])
    ap = argparse.ArgumentParser(prog="python -m benchmarks.snapshot_load", description=__doc__)
    ap.add_argument("--files", type=int)
    ap.add_argument("--commits", type=int)
    ap.add_argument("--commits-after-checkpoint", type=int)
    ap.add_argument("--no-checkpoint", action="store_true")
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--engines", default=",".join(ENGINES))
    ap.add_argument("--quick", action="store_true", help="10k files, 1k commits; no BENCHMARKS.md")
    ap.add_argument("--write", dest="write", action="store_true", default=None)
    ap.add_argument("--no-write", dest="write", action="store_false")
    ap.add_argument("--output", type=Path, default=REPO / "BENCHMARKS.md")
    a = ap.parse_args(argv)
    small = {"files": 10_000, "commits": 1_000, "after": 10} if a.quick else {}
    params = Params(
        files=a.files or small.get("files", Params.files),
        commits=a.commits or small.get("commits", Params.commits),
        checkpoint=not a.no_checkpoint,
        commits_after_checkpoint=(
            a.commits_after_checkpoint
            if a.commits_after_checkpoint is not None
            else small.get("after", Params.commits_after_checkpoint)
        ),
    )
    engines = [e for e in a.engines.split(",") if e]
    if unknown := set(engines) - set(ENGINES):
        ap.error(f"unknown engines {sorted(unknown)}; known: {', '.join(ENGINES)}")

    started = time.perf_counter()
    table, info = ensure(params)
    print(f"table {table} ({time.perf_counter() - started:.1f} s to generate or find)", flush=True)
    warm(table)
    m = machine()
    runs: dict[str, list[dict]] = {e: [] for e in engines}
    for i in range(a.repeats):
        for engine in engines:
            r = run_once(engine, table)
            runs[engine].append(r)
            shown = (
                f"{r['seconds']:.2f} s, peak RSS {r['peak_rss'] / MIB:,.0f} MiB"
                if r["ok"]
                else f"FAILED: {r['error']}"
            )
            print(f"  run {i + 1} {engine}: {shown}", flush=True)
    expected = (params.version, params.files)
    results = {e: summarize(rs, expected) for e, rs in runs.items()}
    cmd = "python -m benchmarks.snapshot_load" + "".join(f" {x}" for x in argv)
    text = report(cmd, m, params, info, results, a.repeats)
    print("\n" + text)
    if a.write if a.write is not None else not a.quick:
        write_section(a.output, "snapshot_load", params.key(), text)
        print(f"wrote {a.output}")
    failed = [e for e, s in results.items() if not s["ok"]]
    if failed:
        print(f"NOT MEASURED OR WRONG: {', '.join(failed)}", file=sys.stderr)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
