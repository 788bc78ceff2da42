"""Data retention by age on MinIO: deltakeeper `expire` against Delta Spark's own
`DELETE FROM t WHERE day < cutoff`, each on its own copy of the same table.

The table: `--days` daily partitions (`day` a string, `2020-01-01` on) of `--files` pyarrow
files each, 10 rows a file (`id` long, `day`), with statistics, added by commits of 10,000
adds; built once (cached), uploaded to a fresh local MinIO twice a round, `--runs` rounds. The
cutoff leaves the newest `--keep` days: deltakeeper expires the older ones in one commit; Delta
Spark (s3a, local[2], one session for every round) runs its DELETE on the other copy. Spark's
first DELETE compiles its code; later rounds run it warm, so both the first round and the
median are reported. Measured for each: wall time, bytes written (the objects
new under the table after the run: log files for deltakeeper; Spark's too), MinIO's own
request count around it. Then Delta Spark reads both copies: the same row count and the same
sum of ids. The issue's targets: time <= 0.05x, bytes written <= 0.001x, requests <= 0.1x.

    python -m benchmarks.expire                             # 1,000 days x 10 files
    python -m benchmarks.expire --days 30 --files 2 --keep 3 --no-write
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import os
import statistics
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path
from typing import Any

from benchmarks.harness import REPO, building, machine, machine_line, write_section
from benchmarks.vacuum import files_below, minio_requests, spark_session, start_minio, upload

ROWS = 10
PER_COMMIT = 10_000
SETTLE_S = 3.0
WARM_S = 10.0
FIRST_DAY = dt.date(2020, 1, 1)
SCHEMA = {
    "type": "struct",
    "fields": [
        {"name": n, "type": t, "nullable": True, "metadata": {}}
        for n, t in (("id", "long"), ("day", "string"))
    ],
}


def day_text(n: int) -> str:
    return (FIRST_DAY + dt.timedelta(days=n)).isoformat()


def build(root: Path, days: int, files: int) -> None:
    import pyarrow as pa
    import pyarrow.parquet as pq

    log = root / "_delta_log"
    log.mkdir(parents=True)
    adds = []
    for d in range(days):
        folder = root / f"day={day_text(d)}"
        folder.mkdir()
        for f in range(files):
            first = (d * files + f) * ROWS
            rows = pa.table({"id": pa.array(range(first, first + ROWS), pa.int64())})
            name = f"day={day_text(d)}/part-{f:03d}.parquet"
            pq.write_table(rows, root / name)
            stats = {
                "numRecords": ROWS,
                "minValues": {"id": first},
                "maxValues": {"id": first + ROWS - 1},
                "nullCount": {"id": 0},
            }
            adds.append(
                {
                    "add": {
                        "path": name,
                        "partitionValues": {"day": day_text(d)},
                        "size": (root / name).stat().st_size,
                        "modificationTime": 1_700_000_000_000,
                        "dataChange": True,
                        "stats": json.dumps(stats),
                    }
                }
            )
    head = [
        {"protocol": {"minReaderVersion": 1, "minWriterVersion": 2}},
        {
            "metaData": {
                "id": "bench-expire",
                "format": {"provider": "parquet", "options": {}},
                "schemaString": json.dumps(SCHEMA),
                "partitionColumns": ["day"],
                "configuration": {},
                "createdTime": 1_700_000_000_000,
            }
        },
    ]
    chunks = [adds[i : i + PER_COMMIT] for i in range(0, len(adds), PER_COMMIT)] or [[]]
    for version, chunk in enumerate(chunks):
        actions = (head if version == 0 else []) + chunk
        text = "".join(json.dumps(a) + "\n" for a in actions)
        (log / f"{version:020d}.json").write_text(text)


def cached_table(days: int, files: int) -> Path:
    base = Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache")
    root = base / "deltakeeper" / "bench-data" / f"expire-{days}x{files}"
    if not root.exists():
        started = time.perf_counter()
        with building(root) as tmp:
            build(tmp, days, files)
        print(f"built the table in {time.perf_counter() - started:.0f} s", flush=True)
    return root


def objects(emu: Any, uri: str) -> dict[str, int]:
    base = uri.split("://", 1)[1]
    emu.fs.invalidate_cache()
    found = emu.fs.find(base, detail=True)
    return {k[len(base) + 1 :]: int(v["size"]) for k, v in found.items()}


def written(before: dict[str, int], after: dict[str, int]) -> int:
    """Bytes of the objects that are new (or rewritten) under the table."""
    return sum(size for key, size in after.items() if before.get(key) != size)


def totals(spark: Any, uri: str) -> tuple[int, int]:
    spark._jvm.org.apache.spark.sql.delta.DeltaLog.clearCache()
    row = spark.read.format("delta").load(uri).selectExpr("count(*) AS n", "sum(id) AS s").first()
    return int(row["n"]), int(row["s"] or 0)


def measure(src: Path, days: int, keep: int, runs: int) -> dict[str, Any]:
    """`runs` rounds, each on fresh copies: Spark's DELETE, then deltakeeper's expiry. Times
    are the median round's; requests and bytes are the first round's (every round does the
    same work)."""
    cutoff = day_text(days - keep)
    out: dict[str, Any] = {"cutoff": cutoff}
    with tempfile.TemporaryDirectory(prefix="bench-expire-") as tmp:
        emu = start_minio(Path(tmp))
        try:
            spark = spark_session(emu.storage_options)
            keys = sorted(files_below(src, log=True))
            rounds = [one_round(emu, spark, src, keys, days, keep, n) for n in range(runs)]
            spark.stop()
        finally:
            emu.stop()
    for engine in ("spark", "deltakeeper"):
        seconds = [r[engine]["seconds"] for r in rounds]
        out[engine] = {**rounds[0][engine], "seconds": statistics.median(seconds), "runs": seconds}
    for key in ("rows_ours", "rows_theirs"):
        out[key] = rounds[0][key]
    out["same_rows"] = all(r["rows_ours"] == r["rows_theirs"] for r in rounds)
    return out


def one_round(
    emu: Any, spark: Any, src: Path, keys: list[str], days: int, keep: int, n: int
) -> dict[str, Any]:
    """Round `n`: fresh copies of `src` (its files `keys`), Spark's DELETE on one, our expiry
    on the other."""
    from deltakeeper.delta.expire.run import Expiry, expire
    from deltakeeper.delta.table import open_table

    last = dt.datetime.combine(FIRST_DAY + dt.timedelta(days=days), dt.time(), dt.UTC)
    now_ms = int(last.timestamp() * 1000)  # the day after the newest: keep `keep` days
    cutoff = day_text(days - keep)
    out: dict[str, Any] = {}
    ours, theirs = emu.uri(f"bench/ours-{n}"), emu.uri(f"bench/theirs-{n}")
    started = time.perf_counter()
    upload(emu, src, ours, keys)
    upload(emu, src, theirs, keys)
    print(f"round {n + 1}: uploaded in {time.perf_counter() - started:.0f} s", flush=True)
    s3a = theirs.replace("s3://", "s3a://", 1)
    if n == 0:  # each engine has read a table before: Delta's classes, our lazy imports
        totals(spark, s3a)
        open_table(ours, emu.storage_options).snapshot()
        time.sleep(WARM_S)  # the JIT's compiling after the first read, off the timed runs

    before_objects, before = objects(emu, ours), minio_requests(emu.endpoint)
    settle()
    t0 = time.perf_counter()
    table = open_table(ours, emu.storage_options)
    run = expire(table, Expiry("day", keep * 86_400_000, 1.0), now_ms)
    out["deltakeeper"] = {
        "seconds": time.perf_counter() - t0,
        "requests": dict(minio_requests(emu.endpoint) - before),
        "written": written(before_objects, objects(emu, ours)),
        "own": dict(table.storage.requests),
        "files": run.plan.files,
        "rows": run.plan.rows,
    }

    before_objects, before = objects(emu, theirs), minio_requests(emu.endpoint)
    # Both start from the store: Spark reads the log again, as deltakeeper does.
    spark._jvm.org.apache.spark.sql.delta.DeltaLog.clearCache()
    settle()
    t0 = time.perf_counter()
    spark.sql(f"DELETE FROM delta.`{s3a}` WHERE day < '{cutoff}'").collect()
    out["spark"] = {
        "seconds": time.perf_counter() - t0,
        "requests": dict(minio_requests(emu.endpoint) - before),
        "written": written(before_objects, objects(emu, theirs)),
    }

    print(
        f"round {n + 1}: spark {out['spark']['seconds']:.2f} s, "
        f"deltakeeper {out['deltakeeper']['seconds']:.2f} s",
        flush=True,
    )
    out["rows_ours"] = totals(spark, ours.replace("s3://", "s3a://", 1))
    out["rows_theirs"] = totals(spark, s3a)
    return out


def settle() -> None:
    """A pause before each timed run: MinIO has taken in the upload, and the JVM is done
    compiling what it last ran (its JIT threads run on after a DELETE, on the same two
    cores; deltakeeper, timed right after Spark, took 0.14-0.22 s against 0.12-0.16 s after
    a pause). deltakeeper runs first in a round, Spark second."""
    time.sleep(SETTLE_S)


def requests_text(r: dict[str, int]) -> str:
    parts = ", ".join(f"{n:,} {api}" for api, n in Counter(r).most_common())
    return f"{sum(r.values()):,} ({parts})"


def row(name: str, engine: dict[str, Any]) -> str:
    return (
        f"| {name} | {engine['seconds']:.2f} s ({runs_text(engine)}) | {engine['written']:,} | "
        f"{requests_text(engine['requests'])} |"
    )


def runs_text(engine: dict[str, Any]) -> str:
    return ", ".join(f"{s:.2f}" for s in engine["runs"])


def ratios(r: dict[str, Any]) -> dict[str, float]:
    ours, theirs = r["deltakeeper"], r["spark"]
    return {
        "time": ours["seconds"] / theirs["seconds"],
        "time_first": ours["runs"][0] / theirs["runs"][0],
        "written": ours["written"] / max(theirs["written"], 1),
        "requests": sum(ours["requests"].values()) / max(sum(theirs["requests"].values()), 1),
    }


def report(cmd: str, m: dict[str, Any], days: int, files: int, keep: int, r: dict[str, Any]) -> str:
    ours, theirs, x = r["deltakeeper"], r["spark"], ratios(r)
    same = r["same_rows"]
    runs = len(ours["runs"])
    return "\n".join(
        [
            f"## Data expiry on MinIO: {days:,} daily partitions of {files} files, "
            f"the oldest {days - keep:,} expired",
            "",
            f"- Date: {time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}, deltakeeper "
            f"commit {m['deltakeeper_commit']}",
            machine_line(m, spark=True),
            f"- Command: `{cmd}`",
            f"- Table (`benchmarks/expire.py`): {days * files:,} pyarrow files of {ROWS} rows "
            f"with statistics, partitioned by a string `day`, on a fresh local MinIO, one copy "
            f"per engine. Delta Spark (s3a, local[2]) runs `DELETE ... WHERE day < "
            f"'{r['cutoff']}'`; deltakeeper `expire --column day --keep {keep}d`. Bytes "
            "written: the objects new under the table after the run. Requests: MinIO's count. "
            "Time: from the store to the commit for both (Spark's DeltaLog cache is cleared "
            f"first; its session is started), each after {SETTLE_S:g} s of quiet (the upload "
            "settled, the JVM's compiling done), deltakeeper first in a round, Spark second. "
            f"Each engine ran {runs} time(s), each on "
            "fresh copies, rounds interleaved; times are the median, requests and bytes the "
            "first round's (every round is the same work).",
            "- Delta Spark's DELETE on partition columns only is metadata-only too: it commits "
            "the same remove actions and rewrites no data, so the bytes both write are that "
            "commit's (the 0.001x target assumed a rewrite).",
            "",
            "| engine | time | bytes written | requests (MinIO) |",
            "|---|---|---|---|",
            row("Delta Spark DELETE", theirs),
            row("deltakeeper expire", ours),
            "",
            f"- deltakeeper removed {ours['files']:,} files ({ours['rows']:,} rows) in one "
            f"commit; its own count: {requests_text(ours['own'])}",
            f"- Time against Delta Spark's first DELETE in its JVM (after one read of the "
            f"table: Delta's classes loaded, DELETE's code not yet compiled, as in a job that "
            f"runs one): {x['time_first']:.3f}x; against the median round, where its JVM has "
            f"run DELETE before: {x['time']:.3f}x",
            f"- **time {x['time']:.3f}x (median rounds), bytes written {x['written']:.4f}x, "
            f"requests {x['requests']:.3f}x Delta Spark's** (targets: 0.05x, 0.001x, 0.1x)",
            f"- Rows left (count, sum of ids), read by Delta Spark: {r['rows_ours']} and "
            f"{r['rows_theirs']}: {'the same' if same else 'DIFFERENT'}",
        ]
    )


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    ap = argparse.ArgumentParser(prog="python -m benchmarks.expire", description=__doc__)
    ap.add_argument("--days", type=int, default=1000)
    ap.add_argument("--files", type=int, default=10, help="files a day")
    ap.add_argument("--keep", type=int, default=100, help="days kept (the newest)")
    ap.add_argument("--runs", type=int, default=5, help="rounds, each on fresh copies")
    ap.add_argument("--no-write", dest="write", action="store_false")
    ap.add_argument("--output", type=Path, default=REPO / "BENCHMARKS.md")
    a = ap.parse_args(argv)
    m = machine()
    r = measure(cached_table(a.days, a.files), a.days, a.keep, a.runs)
    cmd = "python -m benchmarks.expire" + "".join(f" {x}" for x in argv)
    text = report(cmd, m, a.days, a.files, a.keep, r)
    print("\n" + text, flush=True)
    if a.write:
        write_section(a.output, "bench", f"expire-{a.days}x{a.files}", text)
        print(f"wrote {a.output}")
    return 0 if r["same_rows"] else 1


if __name__ == "__main__":
    sys.exit(main())
