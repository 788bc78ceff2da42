"""What a log compaction file saves Delta Spark: the requests to load a snapshot 9 commits past
a checkpoint on MinIO, without and with `<x>.<y>.compacted.json` over those commits.

The table: commits 0 .. 19 each adding one file (delta-rs), a classic checkpoint at 10 (so
11 .. 19 are the 9 commits past it), uploaded to a fresh local MinIO. Delta Spark (s3a,
local[2]) loads the latest snapshot (`DESCRIBE DETAIL`: no data file is read) with its DeltaLog
cache cleared before each load; requests are MinIO's own count around each load, the median of
`--runs` (after one load not counted). Then deltakeeper writes `11.19.compacted.json`
(`compact_log`, as `deltakeeper compact-log --from 11 --to 19` does) and the loads are measured
again. Both ways Spark must find the same version and files.

    python -m benchmarks.log_compaction
    python -m benchmarks.log_compaction --no-write    # print only
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path
from typing import Any

from benchmarks.harness import REPO, machine, machine_line, write_section
from benchmarks.vacuum import minio_requests, spark_session, start_minio, upload

COMMITS = 20
CHECKPOINT = 10
START = CHECKPOINT + 1
END = COMMITS - 1


def build(root: Path) -> None:
    """The table of the module's docstring, on the local disk."""
    import pyarrow as pa
    from deltalake import write_deltalake

    from deltakeeper.delta.checkpoint import load_for_checkpoint, write_checkpoint
    from deltakeeper.delta.table import open_table

    for v in range(COMMITS):
        rows = pa.table({"id": pa.array(range(v * 10, v * 10 + 10), pa.int64())})
        write_deltalake(str(root), rows, mode="append")
        if v == CHECKPOINT:
            table = open_table(str(root))
            now = int(time.time() * 1000)
            write_checkpoint(table, load_for_checkpoint(table, CHECKPOINT), now, 7 * 86_400_000)


def loads(spark: Any, uri: str, endpoint: str, runs: int) -> dict[str, Any]:
    """Spark's snapshot load, cache cleared each time: MinIO's requests (median) and what it
    found."""
    jvm_log = spark._jvm.org.apache.spark.sql.delta.DeltaLog
    counts: list[Counter[str]] = []
    found = None
    for i in range(runs + 1):
        jvm_log.clearCache()
        before = minio_requests(endpoint)
        row = spark.sql(f"DESCRIBE DETAIL delta.`{uri}`").collect()[0]
        after = minio_requests(endpoint)
        found = (row["numFiles"], row["sizeInBytes"])
        if i:  # the first load warms the JVM and the connector
            counts.append(after - before)
    totals = [sum(c.values()) for c in counts]
    median = statistics.median(totals)
    typical = counts[totals.index(min(totals, key=lambda t: abs(t - median)))]
    return {"requests": median, "by_api": dict(typical.most_common()), "found": found}


def measure(runs: int) -> dict[str, Any]:
    from deltakeeper.delta.log_compaction import compact_log
    from deltakeeper.delta.table import open_table

    with tempfile.TemporaryDirectory(prefix="bench-log-compaction-") as tmp:
        src = Path(tmp) / "t"
        build(src)
        keys = sorted(str(p.relative_to(src)) for p in src.rglob("*") if p.is_file())
        emu = start_minio(Path(tmp) / "minio")
        try:
            uri = emu.uri("bench/t")
            upload(emu, src, uri, keys)
            spark = spark_session(emu.storage_options)
            s3a = uri.replace("s3://", "s3a://", 1)
            without = loads(spark, s3a, emu.endpoint, runs)
            done = compact_log(open_table(uri, emu.storage_options), START, END)
            with_file = loads(spark, s3a, emu.endpoint, runs)
            spark.stop()
        finally:
            emu.stop()
    return {"without": without, "with": with_file, "file": done.key, "actions": done.actions}


def api_text(by_api: dict[str, int]) -> str:
    return ", ".join(f"{n} {api}" for api, n in by_api.items())


def report(cmd: str, m: dict[str, Any], r: dict[str, Any], runs: int) -> str:
    a, b = r["without"], r["with"]
    same = a["found"] == b["found"]
    return "\n".join(
        [
            f"## Log compaction files: Delta Spark loading a snapshot {END - CHECKPOINT} "
            "commits past a checkpoint on MinIO",
            "",
            f"- Date: {time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}, deltakeeper "
            f"commit {m['deltakeeper_commit']}",
            machine_line(m, spark=True),
            f"- Command: `{cmd}`",
            f"- Table (`benchmarks/log_compaction.py`): commits 0-{END}, one file each, a "
            f"classic checkpoint at {CHECKPOINT}; on a fresh local MinIO. Delta Spark (s3a, "
            "local[2]) runs `DESCRIBE DETAIL` (a snapshot load, no data read) with its DeltaLog "
            f"cache cleared first; MinIO's own request count, the median of {runs} loads.",
            "",
            "| log | requests | by API |",
            "|---|---|---|",
            f"| commits {START}-{END} | {a['requests']:g} | {api_text(a['by_api'])} |",
            f"| commits {START}-{END} and `{Path(r['file']).name}` ({r['actions']} actions) | "
            f"{b['requests']:g} | {api_text(b['by_api'])} |",
            "",
            f"- **{a['requests'] - b['requests']:g} requests fewer "
            f"({b['requests'] / a['requests']:.2f}x)**; the same snapshot both ways: "
            f"{'yes' if same else 'NO'} ({b['found'][0]} files)",
        ]
    )


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    ap = argparse.ArgumentParser(prog="python -m benchmarks.log_compaction", description=__doc__)
    ap.add_argument("--runs", type=int, default=5)
    ap.add_argument("--no-write", dest="write", action="store_false")
    ap.add_argument("--output", type=Path, default=REPO / "BENCHMARKS.md")
    a = ap.parse_args(argv)
    m = machine()
    r = measure(a.runs)
    cmd = "python -m benchmarks.log_compaction" + "".join(f" {x}" for x in argv)
    text = report(cmd, m, r, a.runs)
    print("\n" + text, flush=True)
    if a.write:
        write_section(a.output, "bench", "log-compaction", text)
        print(f"wrote {a.output}")
    return 0 if r["without"]["found"] == r["with"]["found"] else 1


if __name__ == "__main__":
    sys.exit(main())
