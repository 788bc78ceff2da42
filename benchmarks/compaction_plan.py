"""The compaction planner on the synthetic 1,000,000-file table, against delta-rs loading the
same snapshot, in the same run.

Each engine runs in a fresh child process, interleaved, `--repeats` times; peak RSS is the
child's VmHWM. deltakeeper loads the latest snapshot (the columns the planner reads, stats
included, so deleted-row ratios are exact) and plans every partition; delta-rs only loads the
snapshot (`DeltaTable(path)` and its add actions), which is the least any planner built on it
would do. The planner's own time is reported apart from the load.

    python -m benchmarks.compaction_plan              # 1M files, writes BENCHMARKS.md
    python -m benchmarks.compaction_plan --quick      # 10k files, prints only
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from datetime import UTC, datetime
from pathlib import Path

from benchmarks.harness import (
    MIB,
    REPO,
    emit,
    machine,
    machine_line,
    proc_status_bytes,
    run_child,
    write_section,
)
from benchmarks.synth import Params, ensure

PEER = "delta-rs"
ENGINES = ("delta-rs", "deltakeeper-plan")
NOW_MS = 4_102_444_800_000  # 2100-01-01: every small file is past any max age


def _child(engine: str, table: str) -> int:
    try:
        rss_import = proc_status_bytes("VmRSS")
        if engine == PEER:
            from deltalake import DeltaTable

            started = time.perf_counter()
            dt = DeltaTable(table)
            files, load = dt.get_add_actions().num_rows, time.perf_counter() - started
            emit_result(files, load, 0.0, 0, rss_import)
            return 0
        from deltakeeper.delta import open_table, schema
        from deltakeeper.maintenance import compaction_plan

        started = time.perf_counter()
        snap = open_table(table).snapshot(add_cols=(*schema.LEAN_ADD, "stats"))
        load = time.perf_counter() - started
        names = compaction_plan.logical_partition_names(snap.metadata)
        settings = compaction_plan.CompactionSettings(
            target_file_size=128 * MIB, min_files_per_partition=50
        )
        started = time.perf_counter()
        found = compaction_plan.plan(snap.files, tuple(names), settings, NOW_MS)
        planning = time.perf_counter() - started
        emit_result(snap.num_files, load, planning, len(found.partitions), rss_import)
    except Exception as e:
        emit({"ok": False, "error": f"{type(e).__name__}: {e}"})
        return 1
    return 0


def emit_result(files: int, load: float, plan: float, due: int, rss_import: int) -> None:
    emit(
        {
            "ok": True,
            "files": files,
            "load_seconds": load,
            "plan_seconds": plan,
            "seconds": load + plan,
            "due_partitions": due,
            "rss_after_import": rss_import,
            "peak_rss": proc_status_bytes("VmHWM"),
        }
    )


def summarize(runs: list[dict], files: int) -> dict:
    ok = [r for r in runs if r.get("ok") and r["files"] == files]
    if len(ok) != len(runs):
        bad = next(r for r in runs if r not in ok)
        return {"ok": False, "error": bad.get("error") or f"wrong file count {bad.get('files')}"}
    med = {k: statistics.median(r[k] for r in ok) for k in ("seconds", "load_seconds", "peak_rss")}
    med["plan_seconds"] = statistics.median(r["plan_seconds"] for r in ok)
    return {"ok": True, "due_partitions": ok[0]["due_partitions"], **med}


def report(cmd: str, params: Params, results: dict[str, dict], repeats: int) -> str:
    m = machine()
    lines = [
        f"## Compaction planner: {params.files:,} files",
        "",
        f"- Date: {datetime.now(UTC).strftime('%Y-%m-%d %H:%M UTC')}, "
        f"deltakeeper commit {m['deltakeeper_commit']}",
        machine_line(m),
        f"- Command: `{cmd}`",
        f"- Table: synthetic (`benchmarks/synth.py`, seed {params.seed}), {params.files:,} live "
        f"files, checkpoint + {params.commits_after_checkpoint} commits, partitioned by "
        "date/region. Each engine in a fresh process, "
        f"{repeats} run(s), interleaved; medians.",
        "  - delta-rs: `DeltaTable(path).get_add_actions()` (the snapshot any planner needs)",
        "  - deltakeeper-plan: the snapshot with stats, then `compaction_plan.plan` per partition",
        "",
        "| engine | total | load | plan | peak RSS | partitions due |",
        "|---|---|---|---|---|---|",
    ]
    for engine, s in results.items():
        if not s["ok"]:
            lines.append(f"| {engine} | not measured: {s['error']} | | | | |")
            continue
        lines.append(
            f"| {engine} | {s['seconds']:.2f} s | {s['load_seconds']:.2f} s "
            f"| {s['plan_seconds']:.2f} s | {s['peak_rss'] / MIB:,.0f} MiB "
            f"| {s['due_partitions'] if engine != PEER else '-'} |"
        )
    peer, ours = results.get(PEER, {}), results.get("deltakeeper-plan", {})
    if peer.get("ok") and ours.get("ok"):
        lines += [
            "",
            f"- **deltakeeper load + plan / delta-rs load: time "
            f"{ours['seconds'] / peer['seconds']:.2f}x, peak RSS "
            f"{ours['peak_rss'] / peer['peak_rss']:.2f}x** (below 1: deltakeeper is faster / "
            "smaller)",
        ]
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    if argv[:1] == ["--child"]:
        return _child(argv[1], argv[2])
    ap = argparse.ArgumentParser(prog="python -m benchmarks.compaction_plan", description=__doc__)
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--quick", action="store_true", help="10k files; prints only")
    ap.add_argument("--output", type=Path, default=REPO / "BENCHMARKS.md")
    a = ap.parse_args(argv)
    params = (
        Params(files=10_000, commits=1_000, commits_after_checkpoint=10) if a.quick else Params()
    )
    table, _ = ensure(params)
    runs: dict[str, list[dict]] = {e: [] for e in ENGINES}
    for i in range(a.repeats):
        for engine in ENGINES:
            r = run_child("benchmarks.compaction_plan", [engine, str(table)])
            runs[engine].append(r)
            print(f"  run {i + 1} {engine}: {r.get('seconds', r.get('error'))}", flush=True)
    results = {e: summarize(rs, params.files) for e, rs in runs.items()}
    cmd = "python -m benchmarks.compaction_plan" + "".join(f" {x}" for x in argv)
    text = report(cmd, params, results, a.repeats)
    print("\n" + text)
    if not a.quick:
        write_section(a.output, "compaction_plan", params.key(), text)
        print(f"wrote {a.output}")
    return 0 if all(s["ok"] for s in results.values()) else 1


if __name__ == "__main__":
    sys.exit(main())
