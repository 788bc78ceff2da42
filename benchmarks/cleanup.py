"""Metadata cleanup of 100,000 expired log files on MinIO: requests sent, time taken.

The table (`benchmarks/synth.py`, with history) has commits 0 .. 100,000 and a classic
checkpoint at 100,000, so commits 0 .. 99,999 are expired once `now` is past the retention
window. The log is uploaded to a fresh MinIO (started as the test suite starts it) with
concurrent PUTs; the commit and checkpoint at 100,000 go last, after the clock has passed the
newest upload, so the file times only ever increase (the protocol's cutOffCheckpoint must not
sit on a commit whose time needed adjusting). deltakeeper then loads the snapshot, plans and
executes the cleanup with `now` = real time + retention + 2 days.

Requests are counted twice: by deltakeeper's own storage counter, and by MinIO itself (its
Prometheus `minio_api_requests_total`, read before and after: tests/support/stores.py). Issue
3's target is at most ceil(n / 1000) delete requests for n deleted files (S3 DeleteObjects
takes 1,000 keys). Afterwards exactly the checkpoint, its commit and `_last_checkpoint` must be
left, and deltakeeper and delta-rs must read the table at version 100,000 with every live file.

    python -m benchmarks.cleanup             # 100,000 expired files, writes BENCHMARKS.md
    python -m benchmarks.cleanup --quick     # 1,000 expired files, prints only (CI smoke)
"""

from __future__ import annotations

import argparse
import asyncio
import math
import sys
import tempfile
import time
from collections import Counter
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from benchmarks.harness import MIB, REPO, machine, machine_line, minio_store, write_section
from benchmarks.synth import Params, ensure

DAY_MS = 86_400_000
RETENTION_MS = 30 * DAY_MS
FULL = Params(files=100_000, commits=100_001, commits_after_checkpoint=0, keep_history=True)
QUICK = Params(files=1_000, commits=1_001, commits_after_checkpoint=0, keep_history=True)
BATCH = 1000  # S3 DeleteObjects limit


def start_minio(workdir: Path) -> Any:
    from tests.support import stores

    return stores.start_minio(stores.install()["MINIO"], workdir)


def upload(emu: Any, table: Path, prefix: str, names: list[str]) -> None:
    """PUT `names` from the table's log under `prefix` (bucket/path), 64 at a time, through
    obstore directly (not deltakeeper's storage; s3fs took 986 s for 100,000 files)."""
    import obstore

    bucket, _, root = prefix.partition("/")
    store = minio_store(emu, bucket)
    log = table / "_delta_log"

    async def put_all() -> None:
        gate = asyncio.Semaphore(64)

        async def put(name: str) -> None:
            async with gate:
                await obstore.put_async(
                    store, f"{root}/_delta_log/{name}", (log / name).read_bytes()
                )

        await asyncio.gather(*(put(n) for n in names))

    asyncio.run(put_all())


def upload_log(emu: Any, table: Path, uri: str, version: int) -> float:
    """Old commits first, then (once the clock is past them) the checkpoint version's files."""
    from deltakeeper.delta import paths
    from deltakeeper.delta.log.segment import monotonic
    from deltakeeper.delta.table import open_table

    started = time.perf_counter()
    prefix = f"{emu.bucket}/{uri.split('/', 3)[3]}"
    last = {paths.commit(version), paths.checkpoint(version), paths.LAST_CHECKPOINT}
    names = sorted(f.name for f in (table / "_delta_log").iterdir())
    upload(emu, table, prefix, [n for n in names if n not in last])
    storage = open_table(uri, emu.storage_options).storage
    times = {}
    for f in storage.walk(paths.LOG_DIR):
        name = paths.parse(f.key.rsplit("/", 1)[-1])
        if name is not None:
            times[name.version] = f.mtime_ms
    wait_until_ms = max(monotonic(times).values()) + 1000  # times are whole seconds on S3
    time.sleep(max(0.0, wait_until_ms / 1000 - time.time()))
    upload(emu, table, prefix, sorted(last))
    return time.perf_counter() - started


def clean(uri: str, options: dict[str, Any], now_ms: int) -> dict[str, Any]:
    from deltakeeper.delta.cleanup import execute_cleanup, plan_table_cleanup
    from deltakeeper.delta.table import open_table

    table = open_table(uri, options)
    requests = table.storage.requests
    t0 = time.perf_counter()
    snap = table.snapshot()
    t1, after_load = time.perf_counter(), Counter(requests)
    plan = plan_table_cleanup(table, snap, RETENTION_MS, now_ms)
    t2, after_plan = time.perf_counter(), Counter(requests)
    deleted = execute_cleanup(table, plan)
    t3 = time.perf_counter()
    return {
        "version": snap.version,
        "planned": len(plan.delete),
        "deleted": deleted,
        "seconds": {"snapshot": t1 - t0, "plan": t2 - t1, "execute": t3 - t2},
        "requests": {
            "snapshot": dict(after_load),
            "plan": dict(after_plan - after_load),
            "execute": dict(Counter(requests) - after_plan),
        },
    }


def left_over(uri: str, options: dict[str, Any]) -> list[str]:
    from deltakeeper.delta import paths
    from deltakeeper.delta.table import open_table

    storage = open_table(uri, options).storage
    return sorted(f.key.rsplit("/", 1)[-1] for f in storage.walk(paths.LOG_DIR) if not f.is_dir)


def read_back(uri: str, emu: Any) -> dict[str, tuple[int, int]]:
    from deltalake import DeltaTable

    from deltakeeper.delta.table import open_table

    snap = open_table(uri, emu.storage_options).snapshot()
    opts = emu.storage_options
    dt = DeltaTable(
        uri,
        storage_options={
            "AWS_ENDPOINT_URL": opts["endpoint_url"],
            "AWS_ACCESS_KEY_ID": opts["key"],
            "AWS_SECRET_ACCESS_KEY": opts["secret"],
            "AWS_REGION": "us-east-1",
            "AWS_ALLOW_HTTP": "true",
        },
    )
    return {
        "deltakeeper": (snap.version, snap.num_files),
        "delta-rs": (dt.version(), dt.get_add_actions().num_rows),
    }


def measure(params: Params) -> tuple[dict, dict]:
    from deltakeeper.delta import paths

    table, info = ensure(params)
    version = params.version
    with tempfile.TemporaryDirectory(prefix="bench-minio-") as tmp:
        emu = start_minio(Path(tmp))
        try:
            uri = emu.uri("bench/cleanup")
            upload_seconds = upload_log(emu, table, uri, version)
            print(f"uploaded the log in {upload_seconds:.0f} s", flush=True)
            now_ms = int(time.time() * 1000) + RETENTION_MS + 2 * DAY_MS
            server_before = emu.requests()
            r = clean(uri, emu.storage_options, now_ms)
            server = emu.requests() - server_before
            left = left_over(uri, emu.storage_options)
            answers = read_back(uri, emu)
        finally:
            emu.stop()
    expected_left = sorted(
        [paths.commit(version), paths.checkpoint(version), paths.LAST_CHECKPOINT],
    )
    r |= {
        "expired": version,  # commits 0 .. version - 1
        "server_requests": dict(server),
        "upload_seconds": upload_seconds,
        "left": left,
        "answers": answers,
        "problems": problems(r, version, left, expected_left, answers, params.files),
    }
    return info, r


def problems(
    r: dict, version: int, left: list[str], expected: list[str], answers: dict, files: int
) -> list[str]:
    out = []
    if r["planned"] != version or r["deleted"] != version:
        out.append(f"planned {r['planned']} and deleted {r['deleted']}, expected {version}")
    if left != expected:
        out.append(f"left in _delta_log: {left[:5]}... ({len(left)}), expected {expected}")
    want = (version, files)
    out += [f"{k} reads {v}, expected {want}" for k, v in answers.items() if v != want]
    sent = r["requests"]["execute"].get("delete", 0)
    if sent > math.ceil(r["deleted"] / BATCH):
        out.append(f"{sent} delete requests for {r['deleted']} files")
    return out


def report(cmd: str, m: dict, params: Params, info: dict, r: dict) -> str:
    n = r["deleted"]
    sent = r["requests"]["execute"].get("delete", 0)
    server_deletes = {k: v for k, v in r["server_requests"].items() if "delete" in k.lower()}
    target = math.ceil(n / BATCH)
    met = not r["problems"] and sent <= target
    secs = r["seconds"]
    req = r["requests"]
    lines = [
        f"## Metadata cleanup on MinIO: {n:,} expired log files",
        "",
        f"- Date: {datetime.now(UTC).strftime('%Y-%m-%d %H:%M UTC')}, "
        f"deltakeeper commit {m['deltakeeper_commit']}",
        machine_line(m),
        f"- Command: `{cmd}`",
        f"- Table: synthetic (`benchmarks/synth.py`, seed {params.seed}, with history), "
        f"commits 0 .. {params.version:,} and a classic checkpoint at {params.version:,}; "
        f"{info['log_bytes'] / MIB:,.1f} MiB of log uploaded to a fresh local MinIO in "
        f"{r['upload_seconds']:.0f} s. `now` = upload time + 32 days, log retention 30 days.",
        "- Method: `plan_table_cleanup(table, open_table(uri).snapshot(), 30 days, now)` then "
        "`execute_cleanup(table, plan)`; requests from deltakeeper's storage counter and, "
        "independently, from MinIO's own metrics (`minio_api_requests_total`).",
        "",
        "| step | time | requests (deltakeeper's count) |",
        "|---|---|---|",
        *(
            f"| {step} | {secs[step]:.2f} s | {_counts(req[step])} |"
            for step in ("snapshot", "plan", "execute")
        ),
        "",
        f"- Deleted {n:,} files with **{sent} delete requests** "
        f"(MinIO counted {_counts(server_deletes) or 'none'}); "
        f"target at most ceil(n/1000) = {target}: **{'met' if met else 'NOT met'}**",
        f"- Left in `_delta_log`: {', '.join(r['left'])}; read back at version "
        + ", ".join(f"{k} {v[0]:,} with {v[1]:,} files" for k, v in r["answers"].items()),
    ]
    if r["problems"]:
        lines.append(f"- **Problems: {'; '.join(r['problems'])}**")
    return "\n".join(lines) + "\n"


def _counts(c: dict[str, int]) -> str:
    return ", ".join(f"{v:,} {k}" for k, v in sorted(c.items()))


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    ap = argparse.ArgumentParser(prog="python -m benchmarks.cleanup", description=__doc__)
    ap.add_argument("--quick", action="store_true", help="1,000 expired files; no BENCHMARKS.md")
    ap.add_argument("--write", dest="write", action="store_true", default=None)
    ap.add_argument("--no-write", dest="write", action="store_false")
    ap.add_argument("--output", type=Path, default=REPO / "BENCHMARKS.md")
    a = ap.parse_args(argv)
    params = QUICK if a.quick else FULL
    m = machine()
    info, r = measure(params)
    cmd = "python -m benchmarks.cleanup" + "".join(f" {x}" for x in argv)
    text = report(cmd, m, params, info, r)
    print("\n" + text, flush=True)
    if a.write if a.write is not None else not a.quick:
        write_section(a.output, "cleanup", params.key(), text)
        print(f"wrote {a.output}")
    if r["problems"]:
        print(f"PROBLEMS: {r['problems']}", file=sys.stderr)
    return 1 if r["problems"] else 0


if __name__ == "__main__":
    sys.exit(main())
