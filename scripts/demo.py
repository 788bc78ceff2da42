"""`make run`: a small lake that a real external writer keeps busy, kept healthy by deltakeeper.

1. delta-rs creates ./demo-lake/events and keeps appending small batches (a commit a second),
   like an ingester would (scripts/demo_writer.py, its own process).
2. `deltakeeper run` (standalone mode) watches ./demo-lake/manifests/events.yaml, a DeltaTable
   with short demo retention, so checkpoints, log cleanup and vacuum all happen within minutes.
   With Java 17 here, deltakeeper also compacts the small files with a local Spark job
   (scripts/spark/install.sh fetches PySpark and the Delta jars once); without it the writer
   compacts now and then itself, and the demo says so once.
3. A status table every 10 s; metrics on http://127.0.0.1:9108/metrics. Ctrl-C stops both.

DEMO_SECONDS=N stops the demo by itself after N seconds (used by its test).
"""

from __future__ import annotations

import os
import re
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
LAKE = Path(os.environ.get("DEMO_LAKE", ROOT / "demo-lake"))
PORT = os.environ.get("DEMO_METRICS_PORT", "9108")
MANIFEST = """\
# The demo's table. Retention is minutes here so that cleanup and vacuum show up while you
# watch; real tables keep Delta's defaults (30d of log, 7d of deleted files) or a policy's.
# Sizes too are the demo's: each append of the writer is a file of about 1.6 KiB, and a file
# compacted from eight or more of them is over 4 KiB. With the default small-file size (32Mi)
# every file here would count as small, compacted or not; at 3Ki the SMALL column counts the
# appends and not the compacted files.
apiVersion: deltakeeper.io/v1alpha1
kind: DeltaTable
metadata:
  name: events
  namespace: demo
spec:
  uri: file://{table}
  pollInterval: 2s
  smallFileSize: 3Ki
  checkpoint:
    interval: 10
  logRetention: 2m
  deletedFileRetention: 1m
  vacuum:
    schedule: "* * * * *"
    allowShortRetention: true
"""
# Minutes again, not Delta's hour: compaction shows within a few minutes of `make run`. The job
# rewrites the files below minFileSize, the same size SMALL counts (smallFileSize above).
COMPACTION = """\
  compaction:
    enabled: true
    minFileSize: 3Ki
    minFilesPerPartition: 8
    maxAge: 1m
    minInterval: 2m
"""
# The local Spark job on a small machine: loopback only, no UI, a small JIT.
SPARK_CONF = {
    "spark.driver.host": "127.0.0.1",
    "spark.driver.bindAddress": "127.0.0.1",
    "spark.ui.enabled": "false",
    "spark.sql.shuffle.partitions": "2",
    "spark.driver.extraJavaOptions": "-XX:+UseSerialGC -XX:TieredStopAtLevel=1",
}


def main() -> int:
    table = LAKE / "events"
    manifests = LAKE / "manifests"
    manifests.mkdir(parents=True, exist_ok=True)
    spark = _spark()
    (manifests / "events.yaml").write_text(manifest(table, compaction=bool(spark)))
    bin_dir = Path(sys.executable).parent
    writer_script = ROOT / "scripts" / "demo_writer.py"
    # With Spark, compaction is deltakeeper's to show; without, the writer compacts itself.
    writer_env = {**os.environ, "DEMO_WRITER_COMPACT": "0" if spark else "1"}
    writer = subprocess.Popen([sys.executable, str(writer_script), str(table)], env=writer_env)
    _wait_for_table(table, writer)
    print(
        f"demo: delta-rs appends to {table} every second; deltakeeper keeps it healthy.\n"
        f"demo: metrics at http://127.0.0.1:{PORT}/metrics, status with "
        f"`.venv/bin/deltakeeper status --manifests {manifests}`. Ctrl-C stops.",
        flush=True,
    )
    daemon = subprocess.Popen(
        [str(bin_dir / "deltakeeper"), "run", "--manifests", str(manifests),
         "--metrics-port", PORT, "--summary-every", "10", *spark],
        env={**os.environ, "SPARK_LOCAL_IP": "127.0.0.1"},
    )  # fmt: skip
    try:
        deadline = float(os.environ.get("DEMO_SECONDS", "inf"))
        started = time.monotonic()
        while daemon.poll() is None and time.monotonic() - started < deadline:
            time.sleep(0.5)
    except KeyboardInterrupt:
        pass  # the terminal sent SIGINT to all three processes; each stops on its own
    finally:
        for proc in (writer, daemon):
            if proc.poll() is None:
                proc.send_signal(signal.SIGINT)
        codes = [proc.wait(timeout=60) for proc in (writer, daemon)]
    where = "./demo-lake (`make clean` removes it)" if LAKE == ROOT / "demo-lake" else str(LAKE)
    print(f"demo: stopped; the lake stays in {where}")
    return 0 if all(c in (0, 130, -signal.SIGINT) for c in codes) else 1


def _spark() -> list[str]:
    """`deltakeeper run`'s Spark flags, or [] (said once) when compaction cannot run here."""
    if not _java_17():
        print(
            "demo: compaction needs Java 17 (a JRE, `java` on PATH), which this machine lacks; "
            "the demo goes on without it (the writer compacts now and then itself).",
            flush=True,
        )
        return []
    print("demo: Java found; getting PySpark and the Delta jars for compaction (once)...")
    done = subprocess.run(
        ["bash", str(ROOT / "scripts" / "spark" / "install.sh")],
        env={**os.environ, "PYTHON_VENV": str(Path(sys.executable).parent.parent)},
        capture_output=True,
        text=True,
    )
    if done.returncode != 0:
        tail = done.stderr.strip().splitlines()[-1:] or ["no message"]
        print(f"demo: Spark could not be installed ({tail[0]}); going on without compaction.")
        return []
    return spark_flags(done.stdout.strip().splitlines()[-1])


def manifest(table: Path, compaction: bool) -> str:
    """The demo's DeltaTable manifest for `table`, with compaction when Spark can run it."""
    return MANIFEST.format(table=table.resolve()) + (COMPACTION if compaction else "")


def spark_flags(jars_dir: str) -> list[str]:
    """`deltakeeper run`'s flags for the demo's local Spark job, with the Delta jars there."""
    flags = ["--master", "local[2]", "--jars-dir", jars_dir]
    return flags + [f"--spark-conf={k}={v}" for k, v in SPARK_CONF.items()]


def _java_17() -> bool:
    if not shutil.which("java"):
        return False
    out = subprocess.run(["java", "-version"], capture_output=True, text=True).stderr
    found = re.search(r'version "(\d+)', out)
    return bool(found) and int(found.group(1)) >= 17


def _wait_for_table(table: Path, writer: subprocess.Popen[bytes]) -> None:
    while not (table / "_delta_log" / "00000000000000000000.json").exists():
        if writer.poll() is not None:
            raise SystemExit(f"demo: the writer exited with {writer.returncode}")
        time.sleep(0.2)


if __name__ == "__main__":
    sys.exit(main())
