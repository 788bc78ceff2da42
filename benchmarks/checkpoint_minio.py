"""Peak memory of the incremental checkpoint on MinIO against the same log on local disk.

Issue 11: on an object store the old checkpoint is read by ranged requests (its footer and
the projected columns), so the 1,000,000-file incremental checkpoint must stay within the peak
RSS it has on local disk (within 10%). Each run is a fresh child process (VmHWM, as in
benchmarks/checkpoint.py); MinIO is started as the test suite starts it.

    python -m benchmarks.checkpoint_minio            # the 1M-file table
    python -m benchmarks.checkpoint_minio --quick    # 10k files
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from benchmarks.checkpoint import QUICK, SCENARIOS
from benchmarks.cleanup import start_minio, upload
from benchmarks.harness import MIB, emit, proc_status_bytes, run_child
from benchmarks.synth import TOMBSTONE_RETENTION_MS, ensure

MODULE = "benchmarks.checkpoint_minio"
TOLERANCE = 0.10


def _child(uri: str, options: dict[str, Any], now_ms: int) -> dict[str, Any]:
    from deltakeeper.delta.checkpoint import checkpoint_source, write_source
    from deltakeeper.delta.table import open_table

    started = time.perf_counter()
    table = open_table(uri, options)
    result = write_source(table, checkpoint_source(table), now_ms, TOMBSTONE_RETENTION_MS)
    return {
        "seconds": time.perf_counter() - started,
        "version": result.version,
        "peak_rss": proc_status_bytes("VmHWM"),
        "requests": dict(table.storage.requests),
    }


def measure(quick: bool) -> dict[str, dict[str, Any]]:
    params = (QUICK if quick else SCENARIOS)["incremental"]
    table, _ = ensure(params)
    now_ms = int(time.time() * 1000)
    with tempfile.TemporaryDirectory(prefix="bench-cp-minio-") as tmp:
        local = Path(tmp) / "local"
        shutil.copytree(table / "_delta_log", local / "_delta_log")
        emu = start_minio(Path(tmp) / "minio")
        try:
            uri = emu.uri("t")
            names = sorted(f.name for f in (table / "_delta_log").iterdir() if f.is_file())
            upload(emu, table, f"{emu.bucket}/t", names)
            opts = json.dumps(emu.storage_options)
            return {
                "local": run_child(MODULE, [str(local), "{}", str(now_ms)]),
                "minio": run_child(MODULE, [uri, opts, str(now_ms)]),
            }
        finally:
            emu.stop()


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    if argv[:1] == ["--child"]:
        uri, options, now_ms = argv[1], json.loads(argv[2]), int(argv[3])
        emit({"ok": True, **_child(uri, options, now_ms)})
        return 0
    ap = argparse.ArgumentParser(prog=f"python -m {MODULE}", description=__doc__.split("\n")[0])
    ap.add_argument("--quick", action="store_true", help="10k files instead of 1M")
    args = ap.parse_args(argv)
    runs = measure(args.quick)
    for name, r in runs.items():
        if not r.get("ok"):
            print(f"{name}: failed: {r.get('error')}")
            return 1
        print(
            f"{name}: {r['seconds']:.1f} s, peak RSS {r['peak_rss'] / MIB:,.0f} MiB, "
            f"requests {r['requests']}"
        )
    ratio = runs["minio"]["peak_rss"] / runs["local"]["peak_rss"]
    print(f"peak RSS MinIO / local disk: {ratio:.2f} (target within {1 + TOLERANCE:.2f})")
    return 0 if ratio <= 1 + TOLERANCE else 1


if __name__ == "__main__":
    os.environ.setdefault("PYTHONUNBUFFERED", "1")
    raise SystemExit(main())
