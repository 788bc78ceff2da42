"""CPU per quiet poll: deltakeeper's `Table.update` against delta-rs's `update_incremental()`, on
the same quiet tables on MinIO, Azurite, fake-gcs-server and the local disk, in the same run.

A quiet poll is what a watcher does for a table nobody wrote to: is there anything after the
version I have? deltakeeper answers with one listing from that version (`Table.update(snap)`,
which returns `snap` itself); delta-rs with `DeltaTable.update_incremental()`. Each engine runs
in its own fresh child process that opens TABLES tables (synthetic: COMMITS commits, a
checkpoint at the last, written by delta-rs), polls each once to warm up, then polls every
table POLLS times; the child's process CPU time (all its threads: obstore's and delta-rs's
Rust runtimes included) over those polls, divided by their number, is the CPU per poll. Both
engines get the same `storage_options` dict (object_store's names). The stores count the LIST
requests they served during each child (MinIO's metrics, Azurite's debug log, the GCS gateway's
log; tests/support/stores.py). Rounds alternate which engine goes first; medians are reported.

    python -m benchmarks.quiet_poll            # writes BENCHMARKS.md
    python -m benchmarks.quiet_poll --quick    # 4 tables, 10 polls, 1 round; prints only
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import tempfile
import time
import uuid
from datetime import UTC, datetime
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

TABLES, POLLS, ROUNDS, COMMITS = 20, 50, 3, 100
ENGINES = ("deltakeeper", "delta-rs")
# Polls one after another, and spaced as a daemon spreads them (10,000 tables every 30 s is a
# poll every 3 ms): between spaced polls the Rust runtimes' threads park, and waking them is
# part of what a poll costs.
MODES = {"back to back": 0.0, "every 2 ms": 0.002}
TARGET = 1.0  # deltakeeper's CPU per poll over delta-rs's, on each object store


# -- child ------------------------------------------------------------------------------------


def child(engine: str, spec_file: str) -> None:
    from tests.support import stores

    spec = json.loads(Path(spec_file).read_text())
    uris, options, polls = spec["uris"], spec["options"], spec["polls"]
    counter, gap = spec["counter"], spec["gap"]
    if engine == "deltakeeper":
        from deltakeeper.delta.table import open_table

        tables = [open_table(u, options) for u in uris]
        snaps = [t.snapshot() for t in tables]

        def poll() -> None:
            for table, snap in zip(tables, snaps, strict=True):
                if table.update(snap) is not snap:
                    raise AssertionError(f"{table.uri} is not quiet")
                if gap:
                    time.sleep(gap)

        requests = lambda: sum(sum(t.storage.requests.values()) for t in tables)  # noqa: E731
    else:
        import deltalake

        dts = [deltalake.DeltaTable(u, storage_options=options) for u in uris]
        versions = [dt.version() for dt in dts]

        def poll() -> None:
            for dt, version in zip(dts, versions, strict=True):
                dt.update_incremental()
                if dt.version() != version:
                    raise AssertionError("not quiet")
                if gap:
                    time.sleep(gap)

        requests = lambda: 0  # noqa: E731 - delta-rs counts nothing; the store does
    poll()  # warm: connections open, code paths loaded
    before = stores.served(counter) if counter else None
    sent = requests()
    cpu, wall = time.process_time(), time.perf_counter()
    for _ in range(polls):
        poll()
    cpu, wall = time.process_time() - cpu, time.perf_counter() - wall
    n = polls * len(uris)
    report = {"ok": True, "cpu_ms": cpu / n * 1000, "wall_ms": wall / n * 1000}
    report["requests_per_poll"] = (requests() - sent) / n
    if before is not None:  # what the store served during the polls, by operation
        report["store_per_poll"] = {
            op: count / n for op, count in (stores.served(counter) - before).items()
        }
    emit(report)


# -- parent -----------------------------------------------------------------------------------


def make_table(root: Path, commits: int) -> Path:
    """A table of `commits` one-file commits and delta-rs's checkpoint at the last."""
    import deltalake

    from deltakeeper.delta import paths

    log = root / "_delta_log"
    log.mkdir(parents=True)
    field = {"name": "a", "type": "long", "nullable": True, "metadata": {}}
    schema = {"type": "struct", "fields": [field]}
    for v in range(commits):
        lines: list[dict[str, Any]] = []
        if v == 0:
            lines.append({"protocol": {"minReaderVersion": 1, "minWriterVersion": 2}})
            meta = {"id": str(uuid.uuid4()), "format": {"provider": "parquet", "options": {}}}
            meta |= {"schemaString": json.dumps(schema), "partitionColumns": []}
            lines.append({"metaData": meta | {"configuration": {}, "createdTime": 1}})
        add = {"path": f"part-{v:05d}.parquet", "partitionValues": {}, "size": 100}
        lines.append({"add": add | {"modificationTime": 1, "dataChange": True}})
        lines.append({"commitInfo": {"timestamp": 1_700_000_000_000 + v, "operation": "WRITE"}})
        (log / paths.commit(v)).write_text("".join(json.dumps(x) + "\n" for x in lines))
    deltalake.DeltaTable(str(root)).create_checkpoint()
    return root


def same_options(emu: Any) -> dict[str, str]:
    """One dict both engines take: object_store's names (delta-rs needs allow_http spelt out)."""
    o = emu.storage_options
    if emu.scheme == "s3":
        return deltars_minio_options(emu)
    if emu.scheme == "az":
        return {
            "AZURE_STORAGE_ACCOUNT_NAME": o["account_name"],
            "AZURE_STORAGE_ACCOUNT_KEY": o["account_key"],
            "AZURE_STORAGE_ENDPOINT": emu.endpoint,
            "AZURE_ALLOW_HTTP": "true",
        }
    return {"GOOGLE_BASE_URL": emu.endpoint, "GOOGLE_SKIP_SIGNATURE": "true"}


def measure(args: argparse.Namespace) -> dict[str, Any]:
    from tests.support import stores

    binaries = stores.install()
    results: dict[tuple[str, str], Any] = {}
    with tempfile.TemporaryDirectory(prefix="deltakeeper-quiet-") as tmp:
        work = Path(tmp)
        template = make_table(work / "template", COMMITS)
        emus = {
            "MinIO": stores.start_minio(binaries["MINIO"], _dir(work / "minio")),
            "Azurite": stores.start_azurite(binaries["AZURITE"], _dir(work / "azurite")),
            "fake-gcs-server": stores.start_fake_gcs(
                binaries["FAKE_GCS_SERVER"], _dir(work / "gcs")
            ),
        }
        try:
            places: dict[str, tuple[Any, list[str], dict[str, str]]] = {}
            local = [str(_copy(template, work / "local" / f"t{i:03d}")) for i in range(args.tables)]
            places["local disk"] = (None, local, {})
            for name, emu in emus.items():
                uris = [emu.uri(f"quiet/t{i:03d}") for i in range(args.tables)]
                for uri in uris:
                    emu.upload_folder(template, uri)
                places[name] = (emu, uris, same_options(emu))
            for mode, gap in MODES.items():
                for name, (emu, uris, options) in places.items():
                    spec = work / f"{uuid.uuid4().hex}.json"
                    counter = emu.counter() if emu else None
                    body = {"uris": uris, "options": options, "polls": args.polls}
                    spec.write_text(json.dumps(body | {"counter": counter, "gap": gap}))
                    runs: dict[str, list[dict[str, Any]]] = {e: [] for e in ENGINES}
                    for r in range(args.rounds):
                        for engine in ENGINES if r % 2 == 0 else ENGINES[::-1]:
                            got = run_child("benchmarks.quiet_poll", [engine, str(spec)], 1800)
                            if not got.get("ok"):
                                raise SystemExit(f"{engine} on {name}: {got.get('error')}")
                            runs[engine].append(got)
                    results[(mode, name)] = runs
                    print(mode, name, _line(runs), file=sys.stderr, flush=True)
        finally:
            for emu in emus.values():
                emu.stop()
    return results


def _dir(path: Path) -> Path:
    path.mkdir(parents=True)
    return path


def _copy(src: Path, dest: Path) -> Path:
    import shutil

    shutil.copytree(src, dest)
    return dest


def _median(runs: list[dict[str, Any]], key: str) -> float:
    return statistics.median(r[key] for r in runs)


def _store(runs: list[dict[str, Any]], op: str) -> float:
    return statistics.median(r["store_per_poll"].get(op, 0) for r in runs)


def _others(runs: list[dict[str, Any]]) -> float:
    return statistics.median(
        sum(v for k, v in r["store_per_poll"].items() if k != "list") for r in runs
    )


def _line(runs: dict[str, list[dict[str, Any]]]) -> str:
    ours, peer = _median(runs["deltakeeper"], "cpu_ms"), _median(runs["delta-rs"], "cpu_ms")
    return f"deltakeeper {ours:.3f} ms, delta-rs {peer:.3f} ms CPU a poll: {ours / peer:.2f}x"


def section(
    results: dict[tuple[str, str], Any], args: argparse.Namespace, m: dict[str, Any]
) -> str:
    date = datetime.now(UTC).strftime("%Y-%m-%d %H:%M UTC")
    rows = []
    verdicts: dict[str, list[str]] = {mode: [] for mode in MODES}
    for (mode, name), runs in results.items():
        dk, rs = runs["deltakeeper"], runs["delta-rs"]
        ours, peer = _median(dk, "cpu_ms"), _median(rs, "cpu_ms")
        ratio = ours / peer
        lists = "-"
        if "store_per_poll" in dk[0]:
            lists = (
                f"{_median(dk, 'requests_per_poll'):.2f} ({_store(dk, 'list'):.2f})"
                f" / ({_store(rs, 'list'):.2f}; other requests {_others(rs):.2f})"
            )
        wall = f"{_median(dk, 'wall_ms'):.2f} / {_median(rs, 'wall_ms'):.2f}"
        rows.append(
            f"| {mode} | {name} | {ours:.3f} ms | {peer:.3f} ms | **{ratio:.2f}x** | {lists} "
            f"| {wall} |"
        )
        if name != "local disk":
            verdicts[mode].append(f"{name} {ratio:.2f}x" + (" met" if ratio <= TARGET else ""))
    command = (
        f"python -m benchmarks.quiet_poll --tables {args.tables} --polls {args.polls} "
        f"--rounds {args.rounds}"
    )
    lines = [
        "## Quiet poll: deltakeeper `Table.update` vs delta-rs `update_incremental()`",
        "",
        f"- Date: {date}, deltakeeper commit {m['deltakeeper_commit']}",
        machine_line(m),
        f"- Command: `{command}`",
        f"- Tables: {args.tables} quiet tables of {COMMITS} one-file commits and delta-rs's "
        "checkpoint at the last, on each store (fresh local emulators as the test suite starts "
        "them; fake-gcs-server behind tests/support/gcs_xml.py, which both engines go through).",
        "- Method: each engine in a fresh child process with the same `storage_options` "
        f"(object_store's names); one warm-up poll of each table, then {args.polls} polls of "
        "each, one after another or with a pause after each (`every 2 ms`: a daemon spreads its "
        "polls; the pauses are not CPU time); CPU = the child's process time (all threads, "
        "the Rust runtimes included) over "
        f"the polls, per poll; medians of {args.rounds} rounds, the engine that goes first "
        "alternating. Requests a poll: deltakeeper's own count of LIST requests (in brackets, "
        "the store's count of what it served during the polls) / the store's count for "
        "delta-rs, and its other requests.",
        "",
        "| polls | store | deltakeeper CPU a poll | delta-rs CPU a poll | ratio "
        "| LIST a poll: ours (store's count) / delta-rs (store's count) "
        "| wall a poll, ms: ours / delta-rs |",
        "|---|---|---|---|---|---|---|",
        *rows,
        "",
        f"- Target: at most {TARGET:.1f}x delta-rs on each object store. "
        + "; ".join(f"{mode}: {', '.join(v)}" for mode, v in verdicts.items())
        + ".",
    ]
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--child", nargs=2, metavar=("ENGINE", "SPEC"))
    parser.add_argument("--tables", type=int, default=TABLES)
    parser.add_argument("--polls", type=int, default=POLLS)
    parser.add_argument("--rounds", type=int, default=ROUNDS)
    parser.add_argument("--quick", action="store_true", help="4 tables, 10 polls, 1 round")
    args = parser.parse_args(argv)
    if args.child:
        child(*args.child)
        return 0
    if args.quick:
        args.tables, args.polls, args.rounds = 4, 10, 1
    m = machine()
    results = measure(args)
    text = section(results, args, m)
    print(text)
    if not args.quick:
        write_section(REPO / "BENCHMARKS.md", "bench", "quiet-poll", text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
