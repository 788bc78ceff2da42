"""The daemon under a memory budget: `deltakeeper run --memory-budget 512Mi` watching one big
synthetic table and many small ones, against delta-rs holding the same tables, same run.

deltakeeper runs as users run it (`deltakeeper run --manifests DIR`, Spark jobs through
spark-submit with the suite's Delta jars) over a folder of DeltaTable manifests: one table of
`--files` live files (a classic checkpoint 20 commits behind, so a checkpoint is due) and
`--small` tables of ten files. The daemon's RSS is sampled from /proc every 0.2 s. The first
pass ends when every table has been polled and the big table's checkpoint and vacuum have an
outcome (a vacuum past the budget runs in Delta Spark, a separate process, or is refused);
then `--rounds` commits of ten files go to the big table, one per poll interval, and what the
daemon holds is read once each has been seen. The same daemon with `--memory-budget none` is
what the budget changes; delta-rs (a `DeltaTable` per table, `update_incremental()` after each
commit) is what a delta-rs based watcher would hold.

    python -m benchmarks.memory_budget            # 1M files + 1,000 small, writes BENCHMARKS.md
    python -m benchmarks.memory_budget --quick    # 20k files + 50 small, prints only
"""

from __future__ import annotations

import argparse
import functools
import json
import os
import shutil
import subprocess
import sys
import tempfile
import threading
import time
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import yaml

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
from benchmarks.synth import Params, append_commit, ensure
from tests.support.waiting import stop, until

MARKER = "memory-budget"
BUDGET = "512Mi"
POLL_S = 15
COMMIT_FILES = 10
TARGET_PEAK_MIB = 600
TARGET_HELD_MIB = 300
# The status file of a thousand tables is read once a second, not more: parsing it costs CPU.
wait = functools.partial(until, every=1.0)


def _append(table: Path) -> int:
    """A new commit of ten files on `table`; its version."""
    version = max(int(p.name[:20]) for p in (table / "_delta_log").glob("*.json")) + 1
    append_commit(table, version, COMMIT_FILES)
    return version


def _lake(into: Path, files: int, small: int) -> tuple[Path, list[Path]]:
    """The big table and `small` small ones under `into`, each its own copy of a cached log."""
    big_src, _ = ensure(Params(files=files, commits=10_000, commits_after_checkpoint=20))
    small_src, _ = ensure(Params(files=10, commits=30, commits_after_checkpoint=5))
    big = into / "big"
    shutil.copytree(big_src / "_delta_log", big / "_delta_log")
    smalls = []
    for n in range(small):
        t = into / f"small-{n:05d}"
        shutil.copytree(small_src / "_delta_log", t / "_delta_log")
        smalls.append(t)
    return big, smalls


def _manifests(folder: Path, tables: list[Path], poll_s: float) -> None:
    folder.mkdir()
    docs = [
        {
            "apiVersion": "deltakeeper.io/v1alpha1",
            "kind": "DeltaTable",
            "metadata": {"name": t.name, "namespace": "bench"},
            "spec": {"uri": f"file://{t}", "pollInterval": f"{poll_s:g}s"},
        }
        for t in tables
    ]
    (folder / "tables.yaml").write_text(yaml.safe_dump_all(docs))


class Sampler:
    """The RSS of process `pid`, every 0.2 s, until stopped."""

    def __init__(self, pid: int) -> None:
        self.pid, self.peak, self.last = pid, 0, 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()

    def _run(self) -> None:
        while not self._stop.wait(0.2):
            try:
                self.last = proc_status_bytes("VmRSS", self.pid)
                self.peak = max(self.peak, proc_status_bytes("VmHWM", self.pid), self.last)
            except (OSError, KeyError):
                return

    def stop(self) -> None:
        self._stop.set()
        self._thread.join()


def _statuses(path: Path) -> dict[str, Any]:
    try:
        return json.loads(path.read_text())["tables"]
    except (OSError, ValueError, KeyError):
        return {}


def _finished(entry: dict[str, Any] | None) -> bool:
    return entry is not None and entry.get("result") is not None


def _daemon(budget: str, files: int, small: int, rounds: int, poll_s: float) -> dict[str, Any]:
    from tests.support.spark import ensure_spark

    with tempfile.TemporaryDirectory(prefix="dk-budget-") as tmp:
        big, smalls = _lake(Path(tmp) / "lake", files, small)
        folder = Path(tmp) / "manifests"
        _manifests(folder, [big, *smalls], poll_s)
        status_file = Path(tmp) / "status.json"
        argv = [sys.executable, "-m", "deltakeeper", "run", "--manifests", str(folder)]
        argv += ["--memory-budget", budget, "--metrics-port", "0", "--summary-every", "0"]
        argv += ["--status-file", str(status_file), "--master", "local[2]"]
        argv += ["--jars-dir", str(ensure_spark())]
        log = Path(tmp) / "daemon.log"
        with log.open("wb") as out:
            proc = subprocess.Popen(argv, cwd=REPO, stdout=out, stderr=subprocess.STDOUT)
        sampler = Sampler(proc.pid)
        started = time.monotonic()
        try:
            watched = Watched(proc, sampler, status_file, big, len(smalls) + 1, poll_s)
            return _watch(watched, rounds, started)
        except Exception as e:
            tail = log.read_text(errors="replace").splitlines()[-15:]
            return {"ok": False, "error": f"{type(e).__name__}: {e}", "log": tail}
        finally:
            stop(proc, 60)
            sampler.stop()


@dataclass
class Watched:
    """The daemon under watch: its process, RSS sampler, status file and big table."""

    proc: subprocess.Popen[bytes]
    sampler: Sampler
    status_file: Path
    big: Path
    tables: int
    poll_s: float


def _watch(w: Watched, rounds: int, started: float) -> dict[str, Any]:
    proc, sampler, status_file, big, tables = w.proc, w.sampler, w.status_file, w.big, w.tables

    def big_status() -> dict[str, Any]:
        return _statuses(status_file).get(f"bench/{big.name}") or {}

    def all_polled() -> bool:
        if proc.poll() is not None:
            raise RuntimeError(f"the daemon exited {proc.returncode}")
        found = _statuses(status_file)
        return len(found) == tables and all(s.get("lastPoll") for s in found.values())

    wait(all_polled, 1800, "every table polled")
    polled_s = time.monotonic() - started

    def step(op: str) -> dict[str, Any] | None:
        return (big_status().get("lastMaintenance") or {}).get(op)

    wait(lambda: _finished(step("checkpoint")), 1800, "the big table's checkpoint")
    checkpoint_s = time.monotonic() - started

    def vacuum_settled() -> bool:
        # A vacuum that found nothing to do is not in lastMaintenance: then two more polls
        # without a Spark job running for the table.
        if _finished(step("vacuum")):
            return True
        running = (big_status().get("compaction") or {}).get("running")
        return not running and time.monotonic() - started > checkpoint_s + 2 * w.poll_s

    wait(vacuum_settled, 1800, "the big table's vacuum")
    first_s = time.monotonic() - started
    peak_first = sampler.peak
    done = big_status()["lastMaintenance"]
    for _ in range(rounds):
        version = _append(big)
        wait(lambda v=version: big_status().get("version") == v, w.poll_s * 4, f"version {version}")
    time.sleep(2)  # what one poll's work left behind is given back
    return {
        "ok": True,
        "peak_first_pass": peak_first,
        "held_after_rounds": sampler.last,
        "peak_overall": sampler.peak,
        "polled_seconds": polled_s,
        "checkpoint_seconds": checkpoint_s,
        "first_pass_seconds": first_s,
        "checkpoint": _outcome(done.get("checkpoint")),
        "vacuum": _outcome(done.get("vacuum")),
    }


def _outcome(entry: dict[str, Any] | None) -> str:
    if not entry:
        return "nothing to delete"
    engine = " in Delta Spark" if entry.get("engine") == "spark" else ""
    return f"{entry.get('result')}{engine}"


def _delta_rs(files: int, small: int, rounds: int) -> dict[str, Any]:
    """A child process: delta-rs holding every table, after the same commits."""
    from deltalake import DeltaTable

    with tempfile.TemporaryDirectory(prefix="dk-budget-rs-") as tmp:
        big, smalls = _lake(Path(tmp) / "lake", files, small)
        started = time.monotonic()
        held = {t: DeltaTable(str(t)) for t in [big, *smalls]}
        first_s = time.monotonic() - started
        peak_first = proc_status_bytes("VmHWM")
        for _ in range(rounds):
            _append(big)
            for dt in held.values():
                dt.update_incremental()
        held_now = proc_status_bytes("VmRSS")  # read once: a second read can be a page more
        return {
            "ok": True,
            "peak_first_pass": max(peak_first, held_now),
            "held_after_rounds": held_now,
            "peak_overall": proc_status_bytes("VmHWM"),
            "first_pass_seconds": first_s,
        }


def run(files: int, small: int, rounds: int, poll_s: float = POLL_S) -> dict[str, dict[str, Any]]:
    """Both daemons, then delta-rs. `poll_s`: the tables' poll interval, which the waits for
    a vacuum to settle and for each new commit are measured in."""
    results = {
        f"deltakeeper --memory-budget {BUDGET}": _daemon(BUDGET, files, small, rounds, poll_s),
        "deltakeeper --memory-budget none": _daemon("none", files, small, rounds, poll_s),
    }
    args = [str(files), str(small), str(rounds)]
    results["delta-rs"] = run_child("benchmarks.memory_budget", args, timeout=3600)
    return results


def _seconds(r: dict[str, Any]) -> str:
    if "checkpoint_seconds" not in r:
        return f"{r['first_pass_seconds']:.1f} s"
    return f"{r['polled_seconds']:.1f} s / {r['checkpoint_seconds']:.1f} s"


def report(results: dict[str, dict[str, Any]]) -> tuple[str, dict[str, Any]]:
    rows = []
    for name, r in results.items():
        if not r.get("ok"):
            rows.append(f"| {name} | failed: {r.get('error')} | | | | |")
            continue
        steps = (
            f"checkpoint {r['checkpoint']}, vacuum {r['vacuum']}" if "checkpoint" in r else "load"
        )
        rows.append(
            f"| {name} | {r['peak_first_pass'] / MIB:,.0f} MiB "
            f"| {r['held_after_rounds'] / MIB:,.0f} MiB | {_seconds(r)} "
            f"| {steps} |"
        )
    lines = [
        "| process | peak RSS, first pass | held after the rounds "
        "| every table polled / big checkpoint done (delta-rs: all loaded) "
        "| big table's steps |",
        "|---|---|---|---|---|",
        *rows,
    ]
    verdict: dict[str, Any] = {}
    ours, peer = results.get(f"deltakeeper --memory-budget {BUDGET}", {}), results["delta-rs"]
    if ours.get("ok") and peer.get("ok"):
        peak, held = ours["peak_first_pass"] / MIB, ours["held_after_rounds"] / MIB
        verdict = {
            "peak_mib": peak,
            "held_mib": held,
            "held_vs_delta_rs": ours["held_after_rounds"] / peer["held_after_rounds"],
        }
        lines += [
            "",
            f"- Under `--memory-budget {BUDGET}`: first-pass peak **{peak:,.0f} MiB** (target "
            f"<= {TARGET_PEAK_MIB} MiB: **{'met' if peak <= TARGET_PEAK_MIB else 'not met'}**), "
            f"held **{held:,.0f} MiB** (target <= {TARGET_HELD_MIB} MiB: "
            f"**{'met' if held <= TARGET_HELD_MIB else 'not met'}**); held RSS / delta-rs's: "
            f"**{verdict['held_vs_delta_rs']:.2f}x**",
        ]
    return "\n".join(lines), verdict


def main(argv: list[str] | None = None) -> int:
    if argv is None:
        argv = sys.argv[1:]
    if argv[:1] == ["--child"]:
        try:
            emit(_delta_rs(int(argv[1]), int(argv[2]), int(argv[3])))
        except Exception as e:
            emit({"ok": False, "error": f"{type(e).__name__}: {e}"})
            return 1
        return 0
    ap = argparse.ArgumentParser(prog="python -m benchmarks.memory_budget", description=__doc__)
    ap.add_argument("--files", type=int, default=1_000_000)
    ap.add_argument("--small", type=int, default=1_000, help="small tables beside the big one")
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--quick", action="store_true", help="20k files, 50 small tables, no write")
    ap.add_argument("--output", type=Path, default=REPO / "BENCHMARKS.md")
    a = ap.parse_args(argv)
    if a.quick:
        a.files, a.small, a.rounds = 20_000, 50, 2
    os.environ.setdefault("PYTHONUNBUFFERED", "1")
    results = run(a.files, a.small, a.rounds)
    table, verdict = report(results)
    print(table)
    print(json.dumps(verdict))
    failed = [name for name, r in results.items() if not r.get("ok")]
    for name in failed:
        print(f"{name}: {results[name]}", file=sys.stderr)
    if a.quick:
        return 1 if failed else 0
    section = "\n".join(
        [
            f"## The daemon under a memory budget: one {a.files:,}-file table and {a.small:,} "
            "small ones",
            "",
            f"{machine_line(machine(), spark=True)}; {datetime.now(UTC):%Y-%m-%d}.",
            f"- Tables: synthetic (`benchmarks/synth.py`, seed 1): one of {a.files:,} live files "
            f"with a classic checkpoint 20 commits behind, {a.small:,} of ten files; every table "
            f"polled every {POLL_S} s.",
            "- Method: `deltakeeper run --manifests DIR --memory-budget SIZE` (Spark jobs through "
            "spark-submit, local[2]); the daemon's RSS sampled every 0.2 s. The first pass ends "
            "when every table has been polled and the big table's checkpoint and vacuum have an "
            f"outcome; then {a.rounds} commits of {COMMIT_FILES} files to the big table, one per "
            "poll, and the RSS once the last is seen. delta-rs: a `DeltaTable` per table, "
            "`update_incremental()` on each after each commit.",
            "",
            table,
        ]
    )
    write_section(a.output, MARKER, "memory_budget", section)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
