"""MinIO's own webhook delivery, without deltakeeper: how long after a delta-rs commit returns
the event for its `_delta_log/*.json` reaches an HTTP listener, with MinIO's queue dir and
without it. The part of `benchmarks/events.py`'s latencies that is the store's.

    python -m benchmarks.minio_delivery            # 20 commits each way; prints only
"""

from __future__ import annotations

import argparse
import http.server
import json
import statistics
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

from benchmarks import events as ev
from benchmarks.harness import deltars_minio_options


class _Arrivals(http.server.BaseHTTPRequestHandler):
    seen: list[tuple[float, list[str]]] = []

    def do_POST(self) -> None:
        body = self.rfile.read(int(self.headers.get("Content-Length") or 0))
        try:
            keys = [r["s3"]["object"]["key"] for r in json.loads(body).get("Records", [])]
        except (ValueError, KeyError, TypeError, AttributeError):
            keys = []
        self.seen.append((time.monotonic(), keys))
        self.send_response(200)
        self.end_headers()

    def log_message(self, *args: Any) -> None:
        pass


def lags(queue_dir: bool, commits: int) -> list[float]:
    """Seconds from each commit's return to its log event's arrival (30: never came)."""
    from tests.support import stores

    with tempfile.TemporaryDirectory() as tmp:
        work, listen = Path(tmp), stores.free_port()
        server = http.server.ThreadingHTTPServer(("127.0.0.1", listen), _Arrivals)
        threading.Thread(target=server.serve_forever, daemon=True).start()
        env = ev.webhook_env(listen, work / "queue" if queue_dir else None)
        emu = stores.start_minio(stores.install()["MINIO"], work / "minio", env=env)
        try:
            ev.make_tables(emu, work, 1)
            ev.notify(emu, True)
            options, out = deltars_minio_options(emu), []
            for v in range(1, commits + 1):
                _Arrivals.seen.clear()
                ev.commit(f"s3://{ev.BUCKET}/{ev.name(0)}", options, v)
                done = time.monotonic()
                out.append(_first_log_event(done) - done)
            return out
        finally:
            emu.stop()
            server.shutdown()


def _first_log_event(since: float, timeout: float = 30.0) -> float:
    while time.monotonic() - since < timeout:
        found = [
            t for t, keys in _Arrivals.seen if any("_delta_log" in k for k in keys)
        ]  # URL-encoded
        if found:
            return min(found)
        time.sleep(0.005)
    return since + timeout


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--commits", type=int, default=20)
    args = ap.parse_args(argv)
    for queue_dir in (True, False):
        got = lags(queue_dir, args.commits)
        how = "with a queue dir" if queue_dir else "without a queue dir"
        print(
            f"MinIO's delivery {how}: median {statistics.median(got):.3f} s, "
            f"max {max(got):.3f} s over {len(got)} commits"
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
