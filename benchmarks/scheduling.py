"""Benefit-first maintenance against first-come-first-served: how long until the sick tables of
a lake have been maintained, on the local disk and on MinIO, same run, same budget.

A lake of TABLES small tables, SICK of them sick: SICK_FILES small files over SICK_COMMITS
commits with no checkpoint, and SICK_REMOVED of those files removed 8 days ago but still in
storage (vacuum debt). The healthy ones have HEALTHY_COMMITS commits of one file each, so a
checkpoint is due. Every table is watched from scratch by the real Fleet and TableWatchers
with `--max-concurrent` 2, as an operator does after a restart: all of them are due at their
first poll, so thousands wait for the two slots. Each mode runs in a fresh child over a fresh
copy of the lake; the clock stops when the last sick table's maintenance has finished.

- benefit-first: the fleet as it is (runtime/slots.py, runtime/health.py `benefit`);
- first-come-first-served: the same fleet with every benefit 0, so slots go in arrival order.

    python -m benchmarks.scheduling            # writes BENCHMARKS.md
    python -m benchmarks.scheduling --quick    # 200 tables, 10 sick; prints only
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import shutil
import tempfile
import time
from pathlib import Path
from typing import Any

from benchmarks.harness import (
    REPO,
    deltars_minio_options,
    emit,
    machine,
    machine_line,
    run_child,
    write_section,
)

TABLES, SICK = 2000, 50
SICK_FILES, SICK_COMMITS, SICK_REMOVED = 2000, 100, 300
HEALTHY_COMMITS = 10  # one file each, then a checkpoint is due (every 10 commits)
POLL_S = 60.0  # first polls spread over 10% of it; the starvation bound is 4 intervals
SLOTS = 2
MODES = ("benefit-first", "first-come-first-served")
TARGET = 0.2
DAY_MS = 86_400_000


# -- the lake ---------------------------------------------------------------------------------


def _commit(log: Path, version: int, actions: list[dict[str, Any]]) -> None:
    (log / f"{version:020d}.json").write_text("".join(json.dumps(a) + "\n" for a in actions))


def _add(path: str, now_ms: int) -> dict[str, Any]:
    stats = '{"numRecords":10}'
    body = {"path": path, "partitionValues": {}, "size": 1000, "modificationTime": now_ms}
    return {"add": body | {"dataChange": True, "stats": stats}}


def _head(now_ms: int) -> list[dict[str, Any]]:
    schema = {"type": "struct", "fields": [{"name": "id", "type": "long", "nullable": True}]}
    meta = {
        "id": "00000000-0000-0000-0000-000000000000",
        "format": {"provider": "parquet", "options": {}},
        "schemaString": json.dumps(schema),
        "partitionColumns": [],
        "configuration": {},
        "createdTime": now_ms,
    }
    return [
        {"commitInfo": {"timestamp": now_ms, "operation": "CREATE TABLE"}},
        {"protocol": {"minReaderVersion": 1, "minWriterVersion": 2}},
        {"metaData": meta},
    ]


def build_table(root: Path, sick: bool, now_ms: int) -> list[str]:
    """One table under `root`; the keys of the data files it stores (relative to root)."""
    log = root / "_delta_log"
    log.mkdir(parents=True)
    _commit(log, 0, _head(now_ms))
    if not sick:  # due for a checkpoint, as most tables of a lake are now and then
        for c in range(HEALTHY_COMMITS):
            _commit(log, c + 1, [_add(f"part-{c}.parquet", now_ms)])
        return []
    per = SICK_FILES // SICK_COMMITS
    for c in range(SICK_COMMITS):
        _commit(log, c + 1, [_add(f"part-{c * per + i}.parquet", now_ms) for i in range(per)])
    gone = now_ms - 8 * DAY_MS
    removes = [
        {"remove": {"path": f"part-{i}.parquet", "deletionTimestamp": gone, "dataChange": True}}
        for i in range(SICK_REMOVED)
    ]
    _commit(log, SICK_COMMITS + 1, removes)
    for i in range(SICK_REMOVED):  # the removed files are still there: vacuum debt
        (root / f"part-{i}.parquet").write_bytes(b"x" * 1000)
    return [f"part-{i}.parquet" for i in range(SICK_REMOVED)]


def build_lake(root: Path, tables: int, sick: int) -> list[str]:
    """The lake under `root`; the sick tables' names, spread evenly among the healthy."""
    now = int(time.time() * 1000)
    every = tables // sick
    names = []
    for i in range(tables):
        is_sick = i % every == every - 1 and len(names) < sick
        name = f"t{i:05d}"
        build_table(root / name, is_sick, now)
        if is_sick:
            names.append(name)
    return names


# -- child: one mode over one copy of the lake ------------------------------------------------


def child(mode: str, spec_file: str) -> None:
    spec = json.loads(Path(spec_file).read_text())
    emit(asyncio.run(_watch(mode, spec)))


async def _watch(mode: str, spec: dict[str, Any]) -> dict[str, Any]:
    from deltakeeper.maintenance.operations.outcome import Result
    from deltakeeper.runtime import fleet as fleet_module
    from deltakeeper.runtime.fleet import Fleet
    from deltakeeper.runtime.model import Observation, Target
    from deltakeeper.runtime.watcher import TableWatcher

    if mode == "first-come-first-served":
        fleet_module.health.benefit = lambda *_: 0.0  # type: ignore[assignment]
        fleet_module.health.first_poll_benefit = lambda *_: 0.0  # type: ignore[assignment]
    sick = set(spec["sick"])
    options = spec["options"]
    stop = asyncio.Event()
    done: dict[str, float] = {}
    maintained = 0
    failed: list[str] = []
    start = time.perf_counter()

    async def publish(target: Target, obs: Observation) -> None:
        nonlocal maintained
        if not obs.outcomes:
            return
        maintained += 1
        bad = [o for o in obs.outcomes if o.result in (Result.FAILED, Result.REFUSED)]
        failed.extend(f"{target.name}: {o.operation}: {o.message}" for o in bad)
        if target.name in sick and target.name not in done:
            done[target.name] = time.perf_counter() - start
            if len(done) == len(sick):
                stop.set()

    async def sleep(seconds: float) -> bool:
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(stop.wait(), seconds)
        return stop.is_set()

    fleet = Fleet(max_concurrent=SLOTS)
    now = int(time.time() * 1000)
    tasks = []
    for name in spec["tables"]:
        uri = f"{spec['root']}/{name}"
        target = Target("lake", name, uri, storage_options=options, poll_interval_s=POLL_S)

        async def current(t: Target = target) -> Target:
            return t

        watcher = TableWatcher(now)
        tasks.append(asyncio.create_task(fleet.watch(current, watcher, sleep, publish)))
    try:
        await asyncio.wait_for(stop.wait(), spec["timeout_s"])
        ok = True
    except TimeoutError:
        ok = False
    elapsed = time.perf_counter() - start
    for task in tasks:
        task.cancel()
    await asyncio.gather(*tasks, return_exceptions=True)
    await asyncio.to_thread(fleet.close)
    times = sorted(done.values())
    return {
        "ok": ok and not failed,
        "error": "; ".join(failed[:3]) if failed else None,
        "sick_done_s": elapsed if ok else None,
        "first_sick_s": times[0] if times else None,
        "median_sick_s": times[len(times) // 2] if times else None,
        "maintained_before": maintained,
        "polls": fleet.polls,
    }


# -- parent -----------------------------------------------------------------------------------


def measure(args: argparse.Namespace, work: Path) -> dict[str, Any]:
    lake = work / "lake"
    sick = build_lake(lake, args.tables, args.sick)
    tables = sorted(p.name for p in lake.iterdir())
    results: dict[str, Any] = {"sick": sick}
    stores: list[tuple[str, Any]] = [("local disk", None)]
    if not args.local_only:
        from tests.support import stores as support

        emu = support.start_minio(support.install()["MINIO"], work / "minio")
        stores.append(("MinIO", emu))
    try:
        for store, emu in stores:
            for mode in MODES:
                root, options = _fresh(lake, work, store, mode, emu)
                spec = {
                    "root": root,
                    "options": options,
                    "tables": tables,
                    "sick": sick,
                    "timeout_s": args.timeout,
                }
                spec_file = work / f"spec-{len(results)}.json"
                spec_file.write_text(json.dumps(spec))
                print(f"{store}, {mode} ...", flush=True)
                report = run_child("benchmarks.scheduling", [mode, str(spec_file)])
                print(f"  {report}", flush=True)
                results[f"{store}/{mode}"] = report
    finally:
        for _, emu in stores:
            if emu is not None:
                emu.stop()
    return results


def _fresh(lake: Path, work: Path, store: str, mode: str, emu: Any) -> tuple[str, dict[str, Any]]:
    """A copy of the lake the mode may change: a folder, or a prefix on MinIO."""
    tag = mode.split("-")[0]
    if emu is None:
        dest = work / f"copy-{tag}"
        shutil.copytree(lake, dest)
        return str(dest), {}
    base = f"lake/{tag}"
    files = [p for p in lake.rglob("*") if p.is_file()]
    for start in range(0, len(files), 5000):
        chunk = {
            f"{base}/{p.relative_to(lake).as_posix()}": p.read_bytes()
            for p in files[start : start + 5000]
        }
        emu.fs.pipe(chunk, batch_size=128)
    options = deltars_minio_options(emu)
    return f"s3://{base}", options


def section(results: dict[str, Any], args: argparse.Namespace, m: dict[str, Any]) -> str:
    lines = [
        "## Benefit-first scheduling: the sick tables of a lake "
        "(`python -m benchmarks.scheduling`)",
        "",
        f"- Lake: {args.tables:,} tables, {args.sick} sick ({SICK_FILES:,} small files over "
        f"{SICK_COMMITS} commits without a checkpoint, {SICK_REMOVED} of them removed 8 days "
        f"ago and still stored), the rest healthy ({HEALTHY_COMMITS} commits of one file: a "
        "checkpoint due); "
        "the sick ones spread "
        "evenly. Every table watched from scratch by the real Fleet and TableWatchers, "
        f"`--max-concurrent {SLOTS}`, polls every {POLL_S:.0f} s (the first within 10% of it): "
        "all are due at their first poll. Each mode in a fresh child over a fresh copy.",
        "- Time: until the last sick table's maintenance (checkpoint, cleanup, vacuum) ended. "
        "First-come-first-served is the same fleet with every benefit 0.",
        machine_line(m),
        "",
        "| store | mode | all sick maintained | first sick | median sick | "
        "tables maintained by then |",
        "|---|---|---|---|---|---|",
    ]
    ratios = []
    for store in ("local disk", "MinIO"):
        runs = {mode: results.get(f"{store}/{mode}") for mode in MODES}
        if not all(runs.values()):
            continue
        for mode, r in runs.items():
            assert r is not None
            lines.append(
                f"| {store} | {mode} | {_s(r.get('sick_done_s'))} | {_s(r.get('first_sick_s'))} "
                f"| {_s(r.get('median_sick_s'))} | {r.get('maintained_before', '?'):,} |"
                + (f" (failed: {r['error']})" if r.get("error") else "")
            )
        bf, fc = (runs[mode].get("sick_done_s") for mode in MODES)  # type: ignore[union-attr]
        if bf and fc:
            ratios.append(f"{store} **{bf / fc:.2f}x**")
    lines += [
        "",
        f"Benefit-first over first-come-first-served, time until every sick table was "
        f"maintained: {', '.join(ratios)} (target ≤ {TARGET}x).",
    ]
    return "\n".join(lines)


def _s(seconds: float | None) -> str:
    return f"{seconds:.1f} s" if seconds is not None else "did not finish"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--child", nargs=2, metavar=("MODE", "SPEC"))
    parser.add_argument("--tables", type=int, default=TABLES)
    parser.add_argument("--sick", type=int, default=SICK)
    parser.add_argument("--timeout", type=float, default=1800.0)
    parser.add_argument("--local-only", action="store_true")
    parser.add_argument("--quick", action="store_true", help="200 tables, 10 sick; prints only")
    parser.add_argument("--print-only", action="store_true", help="leave BENCHMARKS.md alone")
    args = parser.parse_args(argv)
    if args.child:
        child(*args.child)
        return 0
    if args.quick:
        args.tables, args.sick = 200, 10
    m = machine()
    with tempfile.TemporaryDirectory(prefix="dk-sched-") as tmp:
        results = measure(args, Path(tmp))
    text = section(results, args, m)
    print(text)
    if not args.quick and not args.print_only:
        write_section(REPO / "BENCHMARKS.md", "bench", "scheduling", text)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
