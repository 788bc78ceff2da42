"""The standalone daemon's CPU per poll on quiet MinIO tables, against delta-rs, same run.

Issue 24: a daemon watching many quiet tables on an object store must cost no more CPU a poll
than delta-rs does. `deltakeeper run` watches TABLES one-commit tables (written by delta-rs,
with a checkpoint) on a local MinIO at a POLL-second poll; once its first maintenance pass is
over (no request but listings for 10 s), its process CPU (all threads: obstore's Rust runtime
included) over WINDOW seconds is divided by the LIST requests MinIO counted meanwhile. The
peer, in a child process: delta-rs's `update_incremental()` on the same tables, one after
another, spread over the same poll interval; its process CPU over the number of calls.

    python -m benchmarks.daemon_poll              # 1,000 tables, 3 s poll; writes BENCHMARKS.md
    python -m benchmarks.daemon_poll --quick      # 50 tables, 2 s poll, 10 s; prints only
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
import time
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import yaml

from benchmarks.harness import (
    REPO,
    cpu_s,
    deltars_minio_options,
    machine,
    machine_line,
    write_section,
)

TABLES, POLL_S, WINDOW_S = 1000, 3, 60
TARGET = 1.0  # the daemon's CPU per poll over delta-rs's
BUCKET = "lake"


def lists(counts: dict[str, int]) -> int:
    return sum(n for op, n in counts.items() if "list" in op.lower())


def make_tables(emu: Any, work: Path, n: int) -> None:
    """`n` copies of one small delta-rs table (three commits, a checkpoint) on MinIO."""
    import deltalake
    import pyarrow as pa

    template = work / "template"
    for _ in range(3):
        deltalake.write_deltalake(str(template), pa.table({"a": [1, 2]}), mode="append")
    deltalake.DeltaTable(str(template)).create_checkpoint()
    log = [f for f in (template / "_delta_log").iterdir() if f.is_file()]
    blobs = {
        f"{BUCKET}/t{i:05d}/_delta_log/{f.name}": f.read_bytes() for i in range(n) for f in log
    }
    emu.fs.pipe(blobs, batch_size=64)


def write_manifests(emu: Any, folder: Path, n: int, poll_s: float) -> None:
    o = emu.storage_options
    secret = {"key": o["key"], "secret": o["secret"]}
    docs: list[dict[str, Any]] = [
        {
            "apiVersion": "v1",
            "kind": "Secret",
            "metadata": {"name": "s3", "namespace": "bench"},
            "stringData": secret,
        }
    ]
    docs += [
        {
            "apiVersion": "deltakeeper.io/v1alpha1",
            "kind": "DeltaTable",
            "metadata": {"name": f"t{i:05d}", "namespace": "bench"},
            "spec": {
                "uri": f"s3://{BUCKET}/t{i:05d}",
                "pollInterval": f"{poll_s:g}s",
                "storage": {
                    "secretRef": {"name": "s3"},
                    "options": {"endpoint_url": o["endpoint_url"]},
                },
            },
        }
        for i in range(n)
    ]
    folder.mkdir()
    (folder / "tables.yaml").write_text(yaml.safe_dump_all(docs))


def started_polling(
    daemon: subprocess.Popen[Any], emu: Any, stores: Any, n: int, since: dict[str, int]
) -> None:
    """Wait until MinIO has counted `n` listings since `since`: the daemon is up and has
    looked at (about) every table, so its first pass is under way."""
    end = time.monotonic() + 300
    while time.monotonic() < end and daemon.poll() is None:
        now = stores.minio_requests(emu.endpoint)
        if lists({k: v - since.get(k, 0) for k, v in now.items()}) >= n:
            return
        time.sleep(0.5)
    raise SystemExit(f"the daemon listed fewer than its {n} tables (exit code {daemon.poll()})")


def settle(emu: Any, stores: Any, give_up_s: float = 900) -> None:
    """Wait until the daemon only lists: its first pass (checkpoints, cleanups) is over."""
    end = time.monotonic() + give_up_s
    while time.monotonic() < end:
        before = stores.minio_requests(emu.endpoint)
        time.sleep(10)
        after = stores.minio_requests(emu.endpoint)
        busy = {k: v - before.get(k, 0) for k, v in after.items() if "list" not in k.lower()}
        if not any(busy.values()):
            return
    raise SystemExit(f"the daemon was still busy after {give_up_s:.0f} s")


def measure_daemon(
    emu: Any, stores: Any, work: Path, n: int, poll_s: float, window_s: float
) -> dict[str, Any]:
    folder = work / "manifests"
    write_manifests(emu, folder, n, poll_s)
    cmd = [sys.executable, "-m", "deltakeeper", "run", "--manifests", str(folder)]
    cmd += ["--metrics-port", "0", "--summary-every", "0"]
    before = stores.minio_requests(emu.endpoint)
    with open(work / "daemon.log", "w") as out:
        daemon = subprocess.Popen(cmd, stdout=out, stderr=subprocess.STDOUT)
    try:
        # Not a fixed wait for the start-up: the listings say when the polls began.
        started_polling(daemon, emu, stores, n, before)
        settle(emu, stores)
        r0, c0 = stores.minio_requests(emu.endpoint), cpu_s(daemon.pid)
        time.sleep(window_s)
        r1, c1 = stores.minio_requests(emu.endpoint), cpu_s(daemon.pid)
        if daemon.poll() is not None:
            raise SystemExit(f"the daemon ended ({daemon.returncode}): see {work / 'daemon.log'}")
    finally:
        daemon.terminate()
        daemon.wait(60)
    requests = {k: v - r0.get(k, 0) for k, v in r1.items() if v - r0.get(k, 0)}
    polls = lists(requests)
    if not polls:
        tail = (work / "daemon.log").read_text()[-2000:]
        raise SystemExit(f"the daemon polled nothing; its log ends:\n{tail}")
    return {
        "cpu_s": c1 - c0,
        "polls": polls,
        "requests": requests,
        "ms": 1000 * (c1 - c0) / max(polls, 1),
    }


PEER = """
import json, sys, time, deltalake
n, poll_s, window_s = int(sys.argv[1]), float(sys.argv[2]), float(sys.argv[3])
options = json.loads(sys.argv[4])
tables = [
    deltalake.DeltaTable(f"s3://{bucket}/t{i:05d}", storage_options=options) for i in range(n)
]
gap = poll_s / n
def one_round():
    for t in tables:
        t.update_incremental()
        time.sleep(gap)
one_round()
c0, calls, end = time.process_time(), 0, time.monotonic() + window_s
while time.monotonic() < end:
    one_round()
    calls += n
print(json.dumps({"cpu_s": time.process_time() - c0, "polls": calls}))
"""


def measure_peer(emu: Any, stores: Any, n: int, poll_s: float, window_s: float) -> dict[str, Any]:
    options = deltars_minio_options(emu)
    code = PEER.replace("{bucket}", BUCKET)
    args = [str(n), str(poll_s), str(window_s), json.dumps(options)]
    r0 = stores.minio_requests(emu.endpoint)
    done = subprocess.run([sys.executable, "-c", code, *args], capture_output=True, text=True)
    r1 = stores.minio_requests(emu.endpoint)
    if done.returncode != 0:
        raise SystemExit(f"delta-rs peer failed: {done.stderr[-2000:]}")
    found = json.loads(done.stdout.strip().splitlines()[-1])
    found["ms"] = 1000 * found["cpu_s"] / max(found["polls"], 1)
    found["requests"] = {k: v - r0.get(k, 0) for k, v in r1.items() if v - r0.get(k, 0)}
    return found


def measure(n: int, poll_s: float, window_s: float) -> dict[str, Any]:
    from tests.support import stores

    with tempfile.TemporaryDirectory() as tmp:
        work = Path(tmp)
        emu = stores.start_minio(stores.install()["MINIO"], work / "minio")
        try:
            make_tables(emu, work, n)
            ours = measure_daemon(emu, stores, work, n, poll_s, window_s)
            peer = measure_peer(emu, stores, n, poll_s, window_s)
        finally:
            emu.stop()
    return {"ours": ours, "peer": peer, "ratio": ours["ms"] / peer["ms"]}


def report(
    cmd: str, m: dict[str, Any], n: int, poll_s: float, window_s: float, r: dict[str, Any]
) -> str:
    ours, peer = r["ours"], r["peer"]
    met = "met" if r["ratio"] <= TARGET else "**NOT met**"
    return "\n".join(
        [
            "## Standalone daemon: CPU per quiet poll on MinIO against delta-rs",
            "",
            f"- Date: {datetime.now(UTC):%Y-%m-%d %H:%M} UTC, "
            f"deltakeeper commit {m['deltakeeper_commit']}",
            machine_line(m),
            f"- Command: `{cmd}`",
            f"- {n:,} one-commit tables (delta-rs wrote them, with a checkpoint) on a fresh local "
            f"MinIO, a {poll_s:g} s poll; `deltakeeper run` over a folder of manifests, measured "
            f"over {window_s:g} s after its first pass: process CPU over the LIST requests MinIO "
            "counted. delta-rs: `update_incremental()` on the same tables one after another, "
            "spread over the poll interval, in a child process; its CPU over its calls (its "
            "requests include its tables' first loads).",
            "",
            "| engine | CPU | polls | CPU per poll | requests |",
            "|---|---|---|---|---|",
            _row("deltakeeper run", ours),
            _row("delta-rs", peer),
            "",
            f"- **deltakeeper / delta-rs: {r['ratio']:.3f}x** (target <= {TARGET:g}x: {met})",
        ]
    )


def _row(engine: str, r: dict[str, Any]) -> str:
    cells = (
        f"{r['cpu_s']:.2f} s",
        f"{r['polls']:,}",
        f"{r['ms']:.3f} ms",
        _requests(r["requests"]),
    )
    return f"| {engine} | " + " | ".join(cells) + " |"


def _requests(counts: dict[str, int]) -> str:
    return ", ".join(f"{n:,} {op}" for op, n in sorted(counts.items())) or "none"


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--tables", type=int, default=TABLES)
    ap.add_argument("--poll", type=int, default=POLL_S, help="poll interval, whole seconds")
    ap.add_argument("--window", type=float, default=WINDOW_S, help="seconds measured")
    ap.add_argument("--quick", action="store_true", help="50 tables, 2 s poll, 10 s; prints only")
    ap.add_argument("--no-write", action="store_true", help="print, do not touch BENCHMARKS.md")
    ap.add_argument("--output", type=Path, default=REPO / "BENCHMARKS.md")
    args = ap.parse_args(argv)
    if args.quick:
        args.tables, args.poll, args.window = 50, 2, 10.0
    m = machine()
    result = measure(args.tables, args.poll, args.window)
    cmd = "python -m benchmarks.daemon_poll" + (" " + " ".join(argv or sys.argv[1:])).rstrip()
    text = report(cmd.strip(), m, args.tables, args.poll, args.window, result)
    print(text)
    if not (args.quick or args.no_write):
        write_section(args.output, "bench", "daemon-poll", text)
        print(f"wrote {args.output}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
