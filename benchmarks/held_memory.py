"""What watching one big table costs in memory: deltakeeper's watcher against delta-rs, same run.

Each engine runs in a fresh child on its own copy of the synthetic table's log. deltakeeper
runs its watch loop's body (runtime/watcher.TableWatcher, what `deltakeeper run` and the
operator run per table): a first pass (observe, then the due maintenance: the incremental
checkpoint, cleanup and a vacuum plan), then `--rounds` polls, each after one new commit of
ten files. `deltakeeper-full` is the same with every snapshot held with its file actions (the
behaviour before delta/held.py); `empty` is deltakeeper on a one-file table, the baseline the
target is measured from. delta-rs loads the table (`DeltaTable`) and calls `update_incremental()`
after each commit: what a delta-rs based watcher would hold. Reported per engine: peak RSS
(VmHWM) through the first pass, RSS held after it and after the rounds, and the median time of
a poll with one new commit. Target (issue 26): a 1,000,000-file table held for <= 100 MiB more
than an empty one.

    python -m benchmarks.held_memory                   # 1M files, writes BENCHMARKS.md
    python -m benchmarks.held_memory --quick           # 20k files, prints only (CI smoke)
"""

from __future__ import annotations

import argparse
import json
import shutil
import statistics
import sys
import tempfile
import time
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import deltakeeper  # noqa: F401  before pyarrow, as in the daemon: it sets Arrow's allocator
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
from benchmarks.synth import Params, append_commit, ensure

ENGINES = ("empty", "deltakeeper", "deltakeeper-full", "delta-rs")
COMMIT_FILES = 10
METHOD = (
    "each engine in a fresh child on its own copy of the log. deltakeeper runs the body of its "
    "watch loop (`runtime/watcher.TableWatcher`): a first pass (observe, then the due "
    "maintenance: the incremental checkpoint, cleanup, a vacuum plan), then one poll after "
    f"each of the rounds' new commits ({COMMIT_FILES} files each). `deltakeeper-full` holds "
    "every snapshot with its file actions, as before `delta/held.py`; `empty` is deltakeeper "
    "on a one-file table with the same log shape, the baseline. delta-rs loads the table "
    "(`DeltaTable`) and calls `update_incremental()` after each commit. Peak RSS is VmHWM "
    "through the first pass; held is VmRSS after it and after the rounds."
)
PEER = "delta-rs"
MARKER = "held-memory"


def _child(engine: str, table: str, rounds: int) -> int:
    try:
        poll, version = _engine(engine, table)
        rss_import = proc_status_bytes("VmRSS")
        started = time.perf_counter()
        poll(first=True)
        first = time.perf_counter() - started
        held_first = proc_status_bytes("VmRSS")
        # The kernel's high-water mark lags the RSS counters it is kept from (and an engine's
        # threads may free pages between the two reads): the peak is at least what was seen.
        peak = max(proc_status_bytes("VmHWM"), held_first)
        times = []
        for _ in range(rounds):
            append_commit(Path(table), version() + 1, COMMIT_FILES)
            started = time.perf_counter()
            poll(first=False)
            times.append(time.perf_counter() - started)
        held = proc_status_bytes("VmRSS")
        emit(
            {
                "ok": True,
                "version": version(),
                "rss_after_import": rss_import,
                "first_pass_seconds": first,
                "peak_rss": peak,
                "held_after_first": held_first,
                "held_after_rounds": held,
                "poll_seconds": statistics.median(times) if times else 0.0,
            }
        )
    except Exception as e:
        emit({"ok": False, "error": f"{type(e).__name__}: {e}"})
        return 1
    return 0


def _engine(engine: str, table: str) -> tuple[Any, Any]:
    """(poll, version): a poll function and the version the engine holds."""
    if engine == PEER:
        from deltalake import DeltaTable

        dt: Any = None

        def poll_rs(first: bool) -> None:
            nonlocal dt
            if first:
                dt = DeltaTable(table)
            else:
                dt.update_incremental()

        return poll_rs, lambda: dt.version()
    from deltakeeper.runtime.model import Target
    from deltakeeper.runtime.watcher import TableWatcher

    hold = {"hold_file_actions": 10**12} if engine == "deltakeeper-full" else {}
    watcher = TableWatcher(int(time.time() * 1000), **hold)
    target = Target("bench", "t", f"file://{table}")

    def poll_dk(first: bool) -> None:
        now = int(time.time() * 1000)
        obs = watcher.observe(target, now)
        if not obs.ready:
            raise RuntimeError(f"not ready: {[c.message for c in obs.conditions]}")
        if obs.due:
            watcher.maintain(target, obs, now)

    return poll_dk, lambda: watcher._snap.version  # the benchmark looks inside


def _copy_log(src: Path, into: Path) -> Path:
    dst = into / "table"
    shutil.copytree(src / "_delta_log", dst / "_delta_log")
    return dst


def run(files: int, rounds: int, repeats: int) -> dict[str, Any]:
    big, info = ensure(Params(files=files, commits=10_000, commits_after_checkpoint=20))
    # The same shape with one file: the same maintenance runs, so the same code is loaded.
    small, _ = ensure(Params(files=1, commits=10_000, commits_after_checkpoint=20))
    runs: dict[str, list[dict[str, Any]]] = {e: [] for e in ENGINES}
    for _ in range(repeats):
        for engine in ENGINES:
            with tempfile.TemporaryDirectory(prefix="dk-held-") as tmp:
                table = _copy_log(small if engine == "empty" else big, Path(tmp))
                args = [engine, str(table), str(rounds)]
                runs[engine].append(run_child("benchmarks.held_memory", args, timeout=1800))
    return {"files": files, "rounds": rounds, "table": info, "runs": runs}


def report(result: dict[str, Any]) -> tuple[str, dict[str, Any]]:
    rows, summary = [], {}
    for engine, runs in result["runs"].items():
        ok = [r for r in runs if r.get("ok")]
        if not ok:
            rows.append(f"| {engine} | failed: {runs[0].get('error')} | | | | |")
            continue
        s = {k: median_of(ok, k) for k in ok[0] if isinstance(ok[0][k], int | float)}
        summary[engine] = s
        rows.append(
            f"| {engine} | {s['peak_rss'] / MIB:,.0f} MiB | {s['held_after_first'] / MIB:,.0f} MiB "
            f"| {s['held_after_rounds'] / MIB:,.0f} MiB | {s['first_pass_seconds']:.2f} s "
            f"| {s['poll_seconds'] * 1000:.1f} ms |"
        )
    lines = [
        "| engine | peak RSS, first pass | held after it | held after the rounds "
        "| first pass | poll, one new commit |",
        "|---|---|---|---|---|---|",
        *rows,
    ]
    verdict = {}
    if {"empty", "deltakeeper", PEER} <= summary.keys():
        beyond = (
            summary["deltakeeper"]["held_after_rounds"] - summary["empty"]["held_after_rounds"]
        ) / MIB
        ratio = summary["deltakeeper"]["held_after_rounds"] / summary[PEER]["held_after_rounds"]
        verdict = {"beyond_empty_mib": beyond, "held_vs_delta_rs": ratio}
        lines += [
            "",
            f"- **deltakeeper holds the table for {beyond:,.0f} MiB more than an empty one** "
            f"(target <= 100 MiB: **{'met' if beyond <= 100 else 'not met'}**); "
            f"held RSS / delta-rs's: **{ratio:.2f}x**",
        ]
    return "\n".join(lines), verdict


def main(argv: list[str] | None = None) -> int:
    if argv is None:
        argv = sys.argv[1:]
    if argv[:1] == ["--child"]:
        return _child(argv[1], argv[2], int(argv[3]))
    ap = argparse.ArgumentParser(prog="python -m benchmarks.held_memory", description=__doc__)
    ap.add_argument("--files", type=int, default=1_000_000)
    ap.add_argument("--rounds", type=int, default=20)
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--quick", action="store_true", help="20k files, one repeat, no write")
    ap.add_argument("--output", type=Path, default=REPO / "BENCHMARKS.md")
    a = ap.parse_args(argv)
    if a.quick:
        a.files, a.rounds, a.repeats = 20_000, 3, 1
    result = run(a.files, a.rounds, a.repeats)
    table, verdict = report(result)
    print(table)
    print(json.dumps(verdict))
    failed = [e for e, runs in result["runs"].items() if not all(r.get("ok") for r in runs)]
    if a.quick:
        return 1 if failed else 0
    m = machine()
    section = "\n".join(
        [
            "## Holding a big table between polls",
            "",
            f"{machine_line(m)}; {datetime.now(UTC):%Y-%m-%d}.",
            f"- Table: synthetic (`benchmarks/synth.py`, seed 1), {a.files:,} live files, a "
            "classic checkpoint 20 commits behind the latest version; each engine works on its "
            "own copy of the log.",
            f"- Method: {METHOD} {a.repeats} run(s) per engine, interleaved; medians.",
            "",
            table,
        ]
    )
    write_section(a.output, MARKER, "held_memory", section)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
