"""Table discovery on MinIO: `discover()` against a naive full recursive listing of the prefix.

A fresh local MinIO (started as the test suite starts it) gets a lake of synthetic tables under
one prefix, `d<NN>/t<NNNN>/`: each a one-commit `_delta_log` and F data files. Both ways find
the tables: discover() lists folder by folder and looks into each `_delta_log/` (its requests
follow the folders); the naive way lists every object under the prefix (ListObjectsV2 without
a delimiter, 1,000 keys a page) and keeps the folders holding a commit (its requests follow the
objects). Both must find the same tables. Requests are deltakeeper's storage counts and, for
discover, also MinIO's own count (tests/support/stores.py).

Two lakes, to show which way each cost goes: many small tables (10,000 with 3 data files each)
and a few big ones (10 with 5,000 files each).

    python -m benchmarks.discovery            # both lakes, writes BENCHMARKS.md
    python -m benchmarks.discovery --quick    # 500 and 5 tables, prints only
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from benchmarks.cleanup import start_minio
from benchmarks.harness import REPO, machine, machine_line, write_section

REPEATS = 3
COMMIT = (
    json.dumps({"protocol": {"minReaderVersion": 1, "minWriterVersion": 2}})
    + "\n"
    + json.dumps(
        {
            "metaData": {
                "id": "00000000-0000-0000-0000-000000000001",
                "format": {"provider": "parquet", "options": {}},
                "schemaString": '{"type":"struct","fields":[]}',
                "partitionColumns": [],
                "configuration": {},
            }
        }
    )
    + "\n"
).encode()


@dataclass(frozen=True)
class Lake:
    tables: int
    files: int  # data files per table
    domains: int  # first-level folders

    @property
    def objects(self) -> int:
        return self.tables * (self.files + 1)

    def label(self) -> str:
        return f"{self.tables:,} tables x {self.files:,} data files"


FULL = (Lake(10_000, 3, 20), Lake(10, 5_000, 1))
QUICK = (Lake(500, 3, 5), Lake(5, 2_000, 1))


def table_paths(lake: Lake) -> list[str]:
    per = -(-lake.tables // lake.domains)
    return [f"d{i // per:02d}/t{i % per:04d}" for i in range(lake.tables)]


def upload(emu: Any, prefix: str, lake: Lake) -> float:
    started = time.perf_counter()
    blobs: dict[str, bytes] = {}

    def flush() -> None:
        emu.fs.pipe(blobs, batch_size=128)
        blobs.clear()

    for rel in table_paths(lake):
        blobs[f"{prefix}/{rel}/_delta_log/00000000000000000000.json"] = COMMIT
        for f in range(lake.files):
            blobs[f"{prefix}/{rel}/part-{f:05d}.parquet"] = b"x"
        if len(blobs) >= 5000:
            flush()
    flush()
    return time.perf_counter() - started


def naive(storage: Any) -> tuple[set[str], int]:
    """Every object under the prefix; the tables are the folders whose log holds a commit."""
    from deltakeeper.delta import paths

    tables = set()
    for info in storage.walk():
        folder, _, name = info.key.rpartition("/")
        parsed = paths.parse(name)
        if (
            folder.endswith(paths.LOG_DIR)
            and parsed is not None
            and parsed.kind is paths.Kind.COMMIT
        ):
            tables.add(folder[: -len(paths.LOG_DIR) - 1] or ".")
    return tables, sum(storage.requests.values())


def timed(run: Callable[[], tuple[set[str], int]]) -> dict[str, Any]:
    started = time.perf_counter()
    tables, requests = run()
    return {"seconds": time.perf_counter() - started, "requests": requests, "tables": tables}


def measure(emu: Any, lake: Lake, index: int) -> dict[str, Any]:
    from deltakeeper.delta.discover import discover
    from deltakeeper.delta.storage import open_storage

    uri = emu.uri(f"bench/lake{index}")
    upload_s = upload(emu, uri.split("://", 1)[1], lake)
    print(f"{lake.label()}: uploaded {lake.objects:,} objects in {upload_s:.0f} s", flush=True)
    expected = set(table_paths(lake))

    def ours(workers: int) -> Callable[[], tuple[set[str], int]]:
        def run() -> tuple[set[str], int]:
            scan = discover(open_storage(uri, emu.storage_options), workers=workers)
            return set(scan.tables), scan.requests

        return run

    runs: dict[str, list[dict[str, Any]]] = {"discover": [], "discover-1": [], "naive": []}
    server: list[int] = []
    for _ in range(REPEATS):
        before = emu.requests()["list"]
        runs["discover"].append(timed(ours(8)))
        server.append(emu.requests()["list"] - before)
        runs["discover-1"].append(timed(ours(1)))
        runs["naive"].append(timed(lambda: naive(open_storage(uri, emu.storage_options))))
    problems = [
        f"{how} found {len(r['tables']):,} tables, expected {len(expected):,}"
        for how, rs in runs.items()
        for r in rs
        if r["tables"] != expected
    ]
    out = {
        how: {
            "seconds": statistics.median(r["seconds"] for r in rs),
            "requests": rs[0]["requests"],
        }
        for how, rs in runs.items()
    }
    return {"lake": lake, "upload_s": upload_s, "runs": out, "server": server, "problems": problems}


def report(cmd: str, m: dict[str, Any], results: list[dict[str, Any]]) -> str:
    lines = [
        "## Table discovery on MinIO: discover() vs a full recursive listing",
        "",
        f"- Date: {datetime.now(UTC).strftime('%Y-%m-%d %H:%M UTC')}, "
        f"deltakeeper commit {m['deltakeeper_commit']}",
        machine_line(m),
        f"- Command: `{cmd}`",
        "- Lakes: synthetic, `d<NN>/t<NNNN>/` under one prefix on a fresh local MinIO; each table "
        "a one-commit `_delta_log` and its data files (tiny objects: listing cost depends on "
        "the number of keys, not their size).",
        "- discover(): level by level, each folder's `_delta_log/` looked into first (one "
        "request per table), sub-folders of the others listed with a delimiter; 8 listings in "
        "flight (`discover-1`: one at a time). Naive: every key under the prefix "
        "(ListObjectsV2, 1,000 a page, one after another), tables = folders whose "
        "`_delta_log/` holds a commit. All found exactly the tables uploaded. Time: median of "
        f"{REPEATS} runs; requests: deltakeeper's count (MinIO's own count of discover's "
        "list requests in brackets).",
        "",
        "| lake | objects | discover(): requests, time | discover-1: time "
        "| naive full listing: requests, time |",
        "|---|---|---|---|---|",
    ]
    for r in results:
        lake, runs = r["lake"], r["runs"]
        d, d1, n = runs["discover"], runs["discover-1"], runs["naive"]
        lines.append(
            f"| {lake.label()} | {lake.objects:,} | {d['requests']:,} "
            f"({min(r['server']):,}), {d['seconds']:.2f} s | {d1['seconds']:.2f} s "
            f"| {n['requests']:,}, {n['seconds']:.2f} s |"
        )
    lines += [
        "",
        "- Read: discover()'s requests follow the folders (one per table, two per folder "
        "above them), never the files; the naive listing's follow the objects (one per 1,000). "
        "With a handful of files per table, as in the first lake, the naive listing sends far "
        "fewer requests and is faster; the two cross near 1,000 objects per table (arithmetic "
        "from these counts, not measured), which real tables pass with their data and log "
        "files (a table committing every minute keeps ~43,000 commits in a 30-day log "
        "retention); the second lake shows discover()'s cost staying put as files grow.",
    ]
    for r in results[:1]:
        runs = r["runs"]
        gain = runs["discover-1"]["seconds"] / max(runs["discover"]["seconds"], 1e-9)
        lines.append(
            f"- Eight listings in flight against one at a time, {r['lake'].label()}: "
            f"{gain:.1f}x faster (MinIO and the client share the machine's CPUs)."
        )
    problems = [p for r in results for p in r["problems"]]
    if problems:
        lines.append(f"- **Problems: {'; '.join(problems)}**")
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    ap = argparse.ArgumentParser(prog="python -m benchmarks.discovery", description=__doc__)
    ap.add_argument("--quick", action="store_true", help="small lakes; no BENCHMARKS.md")
    ap.add_argument("--output", type=Path, default=REPO / "BENCHMARKS.md")
    a = ap.parse_args(argv)
    lakes = QUICK if a.quick else FULL
    m = machine()
    with tempfile.TemporaryDirectory(prefix="bench-minio-") as tmp:
        emu = start_minio(Path(tmp))
        try:
            results = [measure(emu, lake, i) for i, lake in enumerate(lakes)]
        finally:
            emu.stop()
    cmd = "python -m benchmarks.discovery" + "".join(f" {x}" for x in argv)
    text = report(cmd, m, results)
    print("\n" + text, flush=True)
    if not a.quick:
        write_section(a.output, "discovery", "10000", text)
        print(f"wrote {a.output}")
    problems = [p for r in results for p in r["problems"]]
    if problems:
        print(f"PROBLEMS: {problems}", file=sys.stderr)
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
