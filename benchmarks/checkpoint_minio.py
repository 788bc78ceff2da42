"""The incremental checkpoint on MinIO against the same log on local disk: time and memory.

Issue 11: on an object store the old checkpoint is read by ranged requests (its footer and
the projected columns), so the 1,000,000-file incremental checkpoint must stay within the peak
RSS it has on local disk (within 10%). Issue 24: and within 1.2x its time. Each run is a
fresh child process (VmHWM, as in benchmarks/checkpoint.py), the two stores interleaved;
MinIO is started as the test suite starts it.

Two layouts of the CPUs, interleaved: `shared`, every process on every CPU (MinIO's own work,
MD5 ETags and SigV4 payload hashes of what it is sent, competes with ours); and `store apart`,
where the store runs as it does for users, off our CPUs: deltakeeper's runs (on both stores)
on the first half of the CPUs, MinIO on the rest.

    python -m benchmarks.checkpoint_minio            # the 1M-file table, writes BENCHMARKS.md
    python -m benchmarks.checkpoint_minio --quick    # 10k files, prints only
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import sys
import tempfile
import time
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from benchmarks.checkpoint import QUICK, SCENARIOS
from benchmarks.cleanup import start_minio, upload
from benchmarks.harness import (
    MIB,
    REPO,
    cpu_s,
    cpus_of,
    emit,
    machine,
    machine_line,
    median_of,
    pin,
    proc_status_bytes,
    run_child,
    write_section,
)
from benchmarks.synth import TOMBSTONE_RETENTION_MS, ensure

MODULE = "benchmarks.checkpoint_minio"
TOLERANCE = 0.10  # peak RSS on MinIO over the local disk's, at most 1 + this (issue 11)
TIME_TARGET = 1.2  # time on MinIO over the local disk's, at most this (issue 24)


def _child(uri: str, options: dict[str, Any], now_ms: int) -> dict[str, Any]:
    from deltakeeper.delta.checkpoint import checkpoint_source, write_source
    from deltakeeper.delta.table import open_table

    started, cpu = time.perf_counter(), time.process_time()
    table = open_table(uri, options)
    result = write_source(table, checkpoint_source(table), now_ms, TOMBSTONE_RETENTION_MS)
    return {
        "seconds": time.perf_counter() - started,
        "cpu": time.process_time() - cpu,
        "version": result.version,
        "peak_rss": proc_status_bytes("VmHWM"),
        "requests": dict(table.storage.requests),
        "cpus": cpus_of("self"),
    }


def layouts() -> dict[str, tuple[set[int], set[int]]]:
    """Layout name -> (deltakeeper's CPUs, MinIO's CPUs)."""
    cpus = sorted(os.sched_getaffinity(0))
    out = {"shared": (set(cpus), set(cpus))}
    if len(cpus) > 1:  # one CPU: nothing to set apart
        half = len(cpus) // 2
        out["store apart"] = (set(cpus[:half]), set(cpus[half:]))
    return out


def measure(quick: bool, repeats: int) -> dict[str, Any]:
    params = (QUICK if quick else SCENARIOS)["incremental"]
    table, info = ensure(params)
    now_ms = int(time.time() * 1000)
    cpus = layouts()
    runs: dict[str, dict[str, list[dict[str, Any]]]] = {
        name: {"local": [], "minio": []} for name in cpus
    }
    with tempfile.TemporaryDirectory(prefix="bench-cp-minio-") as tmp:
        emu = start_minio(Path(tmp) / "minio")
        try:
            names = sorted(f.name for f in (table / "_delta_log").iterdir() if f.is_file())
            upload(emu, table, f"{emu.bucket}/t", names)
            opts = json.dumps(emu.storage_options)
            first = True
            for i in range(repeats):  # each run checkpoints a fresh copy of the same log
                order = list(cpus) if i % 2 == 0 else list(cpus)[::-1]
                for name in order:
                    ours, store = cpus[name]
                    pin(emu.process.pid, store)
                    where = ",".join(map(str, sorted(ours)))
                    local = Path(tmp) / f"local{i}"
                    shutil.copytree(table / "_delta_log", local / "_delta_log")
                    runs[name]["local"].append(
                        run_child(MODULE, [str(local), "{}", str(now_ms), where])
                    )
                    shutil.rmtree(local)
                    if not first:  # the copy is as uploaded before the first run
                        clear_checkpoint(emu, table, names)
                    first = False
                    before = cpu_s(emu.process.pid)
                    run = run_child(MODULE, [emu.uri("t"), opts, str(now_ms), where])
                    run |= {"store_cpu": cpu_s(emu.process.pid) - before}
                    run |= {"store_cpus": cpus_of(emu.process.pid)}
                    runs[name]["minio"].append(run)
        finally:
            emu.stop()
    return {"params": params, "info": info, "runs": runs, "cpus": cpus}


def clear_checkpoint(emu: Any, table: Path, names: list[str]) -> None:
    """Put the MinIO copy back as uploaded: remove what a run wrote (its checkpoint), and
    upload the old `_last_checkpoint` again (the run moved it on)."""
    kept = set(names)
    emu.fs.invalidate_cache()  # s3fs keeps listings; the run wrote behind its back
    for key in emu.fs.find(f"{emu.bucket}/t/_delta_log/"):
        if key.rsplit("/", 1)[-1] not in kept:
            emu.fs.rm(key)
    upload(emu, table, f"{emu.bucket}/t", [n for n in names if n == "_last_checkpoint"])


def summary(runs: dict[str, list[dict[str, Any]]]) -> dict[str, dict[str, float]]:
    return {
        store: {
            "seconds": median_of(rs, "seconds"),
            "min": min(r["seconds"] for r in rs),
            "max": max(r["seconds"] for r in rs),
            "peak_rss": median_of(rs, "peak_rss"),
            "cpu": median_of(rs, "cpu"),
            "store_cpu": median_of(rs, "store_cpu") if "store_cpu" in rs[0] else 0.0,
        }
        for store, rs in runs.items()
    }


def report(cmd: str, m: dict[str, Any], result: dict[str, Any]) -> str:
    params, info, runs, cpus = result["params"], result["info"], result["runs"], result["cpus"]
    s = {name: summary(by_store) for name, by_store in runs.items()}
    repeats = len(runs["shared"]["local"])
    lines = [
        "## Checkpoint write (incremental) on MinIO against the local disk: "
        f"{params.files:,} files",
        "",
        f"- Date: {datetime.now(UTC).strftime('%Y-%m-%d %H:%M UTC')}, "
        f"deltakeeper commit {m['deltakeeper_commit']}",
        machine_line(m),
        f"- Command: `{cmd}`",
        f"- Table: synthetic (`benchmarks/synth.py`, seed 1), {params.files:,} live files, a "
        f"classic checkpoint and {params.commits_after_checkpoint} commits after it; "
        f"{info['log_bytes'] / MIB:,.1f} MiB of log, on the local disk and on a fresh local "
        "MinIO.",
        "- Method: `write_source(table, checkpoint_source(table), now, 7 days)` after "
        "`open_table(uri)` (what `deltakeeper checkpoint` runs), each run in a fresh process on "
        f"a fresh copy, the stores and the layouts interleaved, {repeats} runs of each; time "
        "covers open + checkpoint; peak RSS is the process's VmHWM; CPU is the process's "
        "(user + system, all threads) over the same span, and MinIO's over the whole child "
        "process. Requests: deltakeeper's count, one MinIO run.",
        f"- Layouts: {_layouts_line(cpus)}",
        "",
        "| layout | store | time, median (min-max) | peak RSS, median | "
        "CPU, median: ours / MinIO's | requests |",
        "|---|---|---|---|---|---|",
    ]
    for name, by_store in runs.items():
        for store in ("local", "minio"):
            x = s[name][store]
            req = ", ".join(f"{n} {op}" for op, n in sorted(by_store[store][0]["requests"].items()))
            lines.append(
                f"| {name} | {'MinIO' if store == 'minio' else 'local disk'} | "
                f"{x['seconds']:.2f} s ({x['min']:.2f}-{x['max']:.2f}) | "
                f"{x['peak_rss'] / MIB:,.0f} MiB | {x['cpu']:.2f} s / {x['store_cpu']:.2f} s | "
                f"{req or '-'} |"
            )
    lines.append("")
    for name in runs:
        lines += _ratios(name, s[name])
    return "\n".join(lines) + "\n"


def _layouts_line(cpus: dict[str, tuple[set[int], set[int]]]) -> str:
    out = [f"`shared`: every process on {_named(cpus['shared'][0])}"]
    if "store apart" in cpus:
        ours, store = cpus["store apart"]
        out.append(
            f"`store apart`: deltakeeper's runs (both stores) on {_named(ours)}, MinIO on "
            f"{_named(store)}, as a store runs for users: off the client's CPUs"
        )
    else:
        out.append("`store apart`: not run (one CPU)")
    return "; ".join(out) + "."


def _named(cpus: set[int]) -> str:
    return ("CPU " if len(cpus) == 1 else "CPUs ") + ",".join(map(str, sorted(cpus)))


def _ratios(name: str, s: dict[str, dict[str, float]]) -> list[str]:
    time_ratio = s["minio"]["seconds"] / s["local"]["seconds"]
    rss_ratio = s["minio"]["peak_rss"] / s["local"]["peak_rss"]
    cpu_ratio = s["minio"]["cpu"] / s["local"]["cpu"]
    busy_ratio = (s["minio"]["cpu"] + s["minio"]["store_cpu"]) / s["local"]["cpu"]
    return [
        f"- {name}: **MinIO / local disk: time {time_ratio:.3f}x** (target <= {TIME_TARGET}x: "
        f"{_met(time_ratio <= TIME_TARGET)}), **peak RSS {rss_ratio:.3f}x** (target <= "
        f"{1 + TOLERANCE:.1f}x: {_met(rss_ratio <= 1 + TOLERANCE)}); CPU: ours on MinIO over "
        f"ours on the local disk {cpu_ratio:.3f}x, ours and MinIO's over ours on the local "
        f"disk {busy_ratio:.3f}x",
    ]


def _met(ok: bool) -> str:
    return "**met**" if ok else "**NOT met**"


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    if argv[:1] == ["--child"]:
        uri, options, now_ms = argv[1], json.loads(argv[2]), int(argv[3])
        if len(argv) > 4:  # the layout's CPUs, before any thread of the run starts
            pin("self", {int(c) for c in argv[4].split(",")})
        emit({"ok": True, **_child(uri, options, now_ms)})
        return 0
    ap = argparse.ArgumentParser(prog=f"python -m {MODULE}", description=__doc__.split("\n")[0])
    ap.add_argument("--quick", action="store_true", help="10k files instead of 1M; prints only")
    ap.add_argument("--repeats", type=int, default=3, help="runs on each store (default 3)")
    ap.add_argument("--output", type=Path, default=REPO / "BENCHMARKS.md")
    args = ap.parse_args(argv)
    m = machine()
    result = measure(args.quick, args.repeats)
    for name, by_store in result["runs"].items():
        for store, rs in by_store.items():
            bad = [r for r in rs if not r.get("ok")]
            if bad:
                print(f"{name}, {store}: failed: {bad[0].get('error')}")
                return 1
    cmd = "python -m " + " ".join([MODULE, *argv])
    text = report(cmd, m, result)
    print(text)
    if not args.quick:
        write_section(args.output, "checkpoint-minio", result["params"].key(), text)
        print(f"wrote {args.output}")
    return 0


if __name__ == "__main__":
    os.environ.setdefault("PYTHONUNBUFFERED", "1")
    raise SystemExit(main())
