"""Compaction end to end, where users' tables live (MinIO by default): deltakeeper (plan +
spark-submit + job) against a hand-run OPTIMIZE in the same Spark at deltakeeper's file sizes
(the same bins as the job: the first pass's target), OPTIMIZE with Delta's defaults, and
delta-rs `optimize.compact()` as a reference.

The table comes from this file's own generator: an event table (ids, timestamps, users, event
names, countries, amounts, quantities, session ids) in many small parquet files across day
partitions, written with pyarrow and committed in one JSON commit, then checked with delta-rs.
It is cached under ${XDG_CACHE_HOME:-~/.cache}/deltakeeper/bench-data by its shape and
generator version; every engine run works on its own copy, uploaded to a MinIO the run starts
(or, with --store local, hard linked on the local disk, the log copied).

(A) first compaction, one run per engine on a fresh copy. (B) steady state: on the tables (A)
left, a batch of new small files lands in a few partitions, and deltakeeper and OPTIMIZE run
again. Measured per run: the process's wall time (JVM start included), the job's own time (the
job and the OPTIMIZE script time themselves from their start, after the JVM's, and say how
much of it went to starting the Spark session), bytes read and written and files after (the
log's adds and removes, read by delta-rs), DuckDB's and delta-rs's full scans (time and store
requests), and a digest of the sorted rows (delta-rs) that must equal the one before.

    python -m benchmarks.compaction                 # full shape on MinIO, then the planner
                                                    # on the 1,000,000-file log; BENCHMARKS.md
    python -m benchmarks.compaction --store local   # the same on the local disk
    python -m benchmarks.compaction --quick         # tiny shape; prints only
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import random
import resource
import shutil
import subprocess
import sys
import tempfile
import time
import uuid
from collections import Counter
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import asdict, dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from benchmarks.harness import MIB, REPO, building, emit, machine, machine_line, write_section
from benchmarks.synth import cache_dir
from deltakeeper.compaction.job import OPTIMIZE_CONF
from deltakeeper.maintenance.policy import CompactionSettings

GENERATOR_VERSION = 2
KIB = 1024
MASTER = "local[2]"
# In its own folder: spark-submit puts the script's folder first on sys.path, and
# benchmarks/operator.py would hide the standard library's `operator`.
OPTIMIZE_SCRIPT = Path(__file__).with_name("spark_jobs") / "optimize.py"
T0_MS = 1_700_000_000_000  # the files' modification time: long past any max age
DAY0_US = 20_716 * 86_400 * 1_000_000  # the first partition's day: 2026-09-21, midnight UTC
DAY_US = 86_400 * 1_000_000
# An event table as a shop's pipeline appends it: sequential ids, increasing timestamps, users,
# two low-cardinality strings, an amount, a quantity and a session id; partitioned by day.
COLUMNS = pa.schema(
    [
        ("id", pa.int64()),
        ("ts", pa.timestamp("us", tz="UTC")),
        ("user_id", pa.int64()),
        ("event", pa.string()),
        ("country", pa.string()),
        ("amount", pa.float64()),
        ("quantity", pa.int32()),
        ("session", pa.string()),
    ]
)
DELTA_TYPES = {
    "id": "long",
    "ts": "timestamp",
    "user_id": "long",
    "event": "string",
    "country": "string",
    "amount": "double",
    "quantity": "integer",
    "session": "string",
    "day": "string",
}
ROW_SCHEMA = COLUMNS.append(pa.field("day", pa.string()))
SCHEMA_STRING = json.dumps(
    {
        "type": "struct",
        "fields": [
            {"name": name, "type": kind, "nullable": True, "metadata": {}}
            for name, kind in DELTA_TYPES.items()
        ],
    }
)
EVENTS = pa.array(
    ["view", "click", "search", "add_to_cart", "purchase", "login", "logout", "share"]
)
# A random byte to an event, skewed as a shop's events are (views most, shares least).
EVENT_OF_BYTE = pa.array(
    [0] * 110 + [1] * 60 + [2] * 40 + [3] * 20 + [4] * 10 + [5] * 8 + [6] * 5 + [7] * 3, pa.uint8()
)
_COUNTRY_CODES = "US DE GB FR IN BR JP CA ES IT NL SE PL MX AU KR TR AR CH BE AT NO DK FI IE"
COUNTRIES = pa.array([*_COUNTRY_CODES.split(), "PT", "CZ", "NZ", "ZA", "SG"])
# The same for both Spark runs: loopback only, no UI, room for 50 MiB bins.
SPARK_CONF = {
    "spark.driver.host": "127.0.0.1",
    "spark.driver.bindAddress": "127.0.0.1",
    "spark.ui.enabled": "false",
    "spark.driver.memory": "2g",
}
# --quick's tiny tables: C1-only JIT and two log-replay tasks halve a short job's time.
QUICK_CONF = {
    **SPARK_CONF,
    "spark.driver.extraJavaOptions": "-XX:+UseSerialGC -XX:TieredStopAtLevel=1",
    "spark.databricks.delta.snapshotPartitions": "2",
    "spark.sql.shuffle.partitions": "2",
}


@dataclass(frozen=True)
class Shape:
    files: int
    partitions: int
    rows_per_file: int
    target_file_size: int  # deltakeeper's, delta-rs's and the sized OPTIMIZE's target
    new_files: int  # (B): new small files ...
    new_partitions: int  # ... spread over this many partitions
    quick: bool = False  # Spark runs with QUICK_CONF
    seed: int = 1

    def key(self) -> str:
        blob = json.dumps({**asdict(self), "generator": GENERATOR_VERSION}, sort_keys=True)
        return hashlib.sha256(blob.encode()).hexdigest()[:16]

    @property
    def rows(self) -> int:
        return self.files * self.rows_per_file

    @property
    def spark_conf(self) -> dict[str, str]:
        return QUICK_CONF if self.quick else SPARK_CONF


# Files of about 114 KiB, 500 per partition (56 MiB): each partition compacts into seven 8 MiB
# files and a small eighth (the three files the bins leave over), which (B) rewrites with the new
# files where they land. The quick shape's 2.4 MiB partitions and 660 KiB target leave no small
# file, so its (B) rewrites exactly the new files.
FULL = Shape(10_000, 20, 2_500, 8 * MIB, 200, 4)
QUICK = Shape(200, 2, 500, 660 * KIB, 100, 2, quick=True)


# ------------------------------------------------------------------------------------------
# The generator
# ------------------------------------------------------------------------------------------


def _part(index: int) -> str:
    return datetime.fromtimestamp((DAY0_US + index * DAY_US) / 1e6, UTC).strftime("%Y-%m-%d")


def _ints(rng: random.Random, kind: pa.DataType, width: int, rows: int) -> pa.Array:
    """`rows` random integers of `width` bytes, without a Python object per value."""
    return pa.Array.from_buffers(kind, rows, [None, pa.py_buffer(rng.randbytes(rows * width))])


def _hex_strings(rng: random.Random, rows: int, chars: int) -> pa.Array:
    data = pa.py_buffer(rng.randbytes(rows * chars // 2).hex().encode())
    offsets = pa.array(range(0, rows * chars + 1, chars), pa.int32()).buffers()[1]
    return pa.Array.from_buffers(pa.string(), rows, [None, offsets, data])


def rows_of(shape: Shape, number: int, part_index: int) -> pa.Table:
    """File `number`'s rows: ids number*rows .., timestamps rising through its day."""
    rng = random.Random(f"{shape.seed}/{number}")
    rows = shape.rows_per_file
    first = number * rows
    per_day = shape.rows_per_file * (shape.files // shape.partitions + 1)
    step = DAY_US // per_day
    start = DAY0_US + part_index * DAY_US + (number // shape.partitions) * rows * step
    ts = pa.array(range(start, start + rows * step, step), pa.int64())
    cents = pc.cast(_ints(rng, pa.uint16(), 2, rows), pa.float64())
    return pa.table(
        {
            "id": pa.array(range(first, first + rows), pa.int64()),
            "ts": ts.cast(pa.timestamp("us", tz="UTC")),
            "user_id": pc.cast(
                pc.remainder(_ints(rng, pa.uint32(), 4, rows), 1_000_000), pa.int64()
            ),
            "event": pc.take(EVENTS, pc.take(EVENT_OF_BYTE, _ints(rng, pa.uint8(), 1, rows))),
            "country": pc.take(COUNTRIES, pc.remainder(_ints(rng, pa.uint8(), 1, rows), 30)),
            "amount": pc.divide(cents, 100.0),
            "quantity": pc.cast(
                pc.add(pc.bit_wise_and(_ints(rng, pa.uint8(), 1, rows), 7), 1), pa.int32()
            ),
            "session": _hex_strings(rng, rows, 16),
        },
        schema=COLUMNS,
    )


def _write_file(root: Path, shape: Shape, number: int, part_index: int) -> dict[str, Any]:
    """One parquet file of `rows_of(number)`; its add action."""
    data = rows_of(shape, number, part_index)
    part = _part(part_index)
    rel = f"day={part}/part-{number:05d}-{shape.key()}.snappy.parquet"
    (root / rel).parent.mkdir(parents=True, exist_ok=True)
    pq.write_table(data, root / rel, compression="snappy")
    first, rows = number * shape.rows_per_file, shape.rows_per_file
    stats = {
        "numRecords": rows,
        "minValues": {"id": first},
        "maxValues": {"id": first + rows - 1},
        "nullCount": {name: 0 for name in COLUMNS.names},
    }
    return {
        "path": rel,
        "partitionValues": {"day": part},
        "size": (root / rel).stat().st_size,
        "modificationTime": T0_MS,
        "dataChange": True,
        "stats": json.dumps(stats),
    }


def _write_files(root: Path, shape: Shape, numbers: range, parts: int) -> list[dict[str, Any]]:
    with ThreadPoolExecutor(max_workers=2) as pool:
        return list(pool.map(lambda i: _write_file(root, shape, i, i % parts), numbers))


def _commit_text(version: int, operation: str, actions: list[dict[str, Any]]) -> str:
    info = {"commitInfo": {"timestamp": T0_MS + version, "operation": operation}}
    return "\n".join([json.dumps(info), *(json.dumps(a) for a in actions)]) + "\n"


def _commit(log: Path, version: int, operation: str, actions: list[dict[str, Any]]) -> None:
    (log / f"{version:020d}.json").write_text(_commit_text(version, operation, actions))


def generate(shape: Shape, out: Path) -> dict[str, Any]:
    """`out`/table: the table at version 0; `out`/new: (B)'s files and their adds."""
    started = time.perf_counter()
    with building(out) as tmp:
        table, new = tmp / "table", tmp / "new"
        (table / "_delta_log").mkdir(parents=True)
        adds = _write_files(table, shape, range(shape.files), shape.partitions)
        meta = {
            "id": f"bench-compaction-{shape.key()}",
            "format": {"provider": "parquet", "options": {}},
            "schemaString": SCHEMA_STRING,
            "partitionColumns": ["day"],
            "configuration": {},
            "createdTime": T0_MS,
        }
        protocol = {"minReaderVersion": 1, "minWriterVersion": 2}
        actions = [{"protocol": protocol}, {"metaData": meta}, *({"add": a} for a in adds)]
        _commit(table / "_delta_log", 0, "WRITE", actions)
        numbers = range(shape.files, shape.files + shape.new_files)
        new_adds = _write_files(new, shape, numbers, shape.new_partitions)
        (new / "adds.json").write_text(json.dumps(new_adds))
        info = {
            "shape": asdict(shape),
            "generator": GENERATOR_VERSION,
            "bytes": sum(a["size"] for a in adds),
            "new_bytes": sum(a["size"] for a in new_adds),
            "generation_seconds": round(time.perf_counter() - started, 1),
        }
        info.update(check(table, shape.files, shape.rows))
        (tmp / "info.json").write_text(json.dumps(info, indent=2) + "\n")
    return info


def check(table: Path, files: int, rows: int) -> dict[str, Any]:
    """delta-rs must read the generated table: every file, every row; the rows' digest."""
    found = len(live_files(str(table)))
    count, digest = rows_digest(str(table))
    if (found, count) != (files, rows):
        raise RuntimeError(f"delta-rs reads {found} files, {count} rows; wrote {files}, {rows}")
    return {"digest": digest}


def ensure(shape: Shape) -> tuple[Path, dict[str, Any]]:
    out = cache_dir() / f"compaction-{shape.key()}"
    if not (out / "info.json").exists():
        generate(shape, out)
    return out, json.loads((out / "info.json").read_text())


def _link(src: str, dest: str) -> None:
    try:
        os.link(src, dest)
    except OSError:  # another file system
        shutil.copy2(src, dest)


def _data_keys(root: Path) -> list[str]:
    return sorted(
        p.relative_to(root).as_posix()
        for p in root.rglob("*.parquet")
        if "_delta_log" not in p.parts
    )


def _next_version(keys: list[str]) -> int:
    return 1 + max(int(k.rsplit("/", 1)[-1][:20]) for k in keys if k.endswith(".json"))


class Local:
    """The engines' tables on the local disk: data files hard linked (no engine modifies one),
    the log copied."""

    name = "local disk"

    def __init__(self, work: Path) -> None:
        self.work = work

    def put(self, src: Path, name: str) -> str:
        dest = self.work / name
        shutil.copytree(src, dest, copy_function=_link, ignore=shutil.ignore_patterns("_delta_log"))
        shutil.copytree(src / "_delta_log", dest / "_delta_log")
        return str(dest)

    def append_new(self, uri: str, new: Path) -> None:
        """(B)'s small files land in the table as one more WRITE commit."""
        table = Path(uri)
        adds = json.loads((new / "adds.json").read_text())
        for a in adds:
            (table / a["path"]).parent.mkdir(parents=True, exist_ok=True)
            _link(str(new / a["path"]), str(table / a["path"]))
        log = table / "_delta_log"
        version = _next_version([p.name for p in log.iterdir()])
        _commit(log, version, "WRITE", [{"add": a} for a in adds])

    def deltars(self) -> dict[str, str] | None:
        return None

    def duckdb(self, con: Any) -> None:
        pass

    def deltakeeper_args(self) -> list[str]:
        return ["--jars-dir", str(_jars())]

    def spark(self, uri: str) -> tuple[str, dict[str, str], Path]:
        """The table as Spark names it, the Hadoop settings and the jar folder."""
        return uri, {}, _jars()

    def requests(self) -> Counter[str]:
        return Counter()


class MinIO:
    """The engines' tables in a MinIO this run starts: each its own prefix, uploaded from the
    generated table. Requests are MinIO's own count."""

    name = "MinIO"

    def __init__(self, emu: Any) -> None:
        self.emu = emu
        self.options = emu.storage_options
        self.prefix = f"bench-compaction-{uuid.uuid4().hex[:8]}"  # a shared MinIO's bucket too

    @classmethod
    def start(cls, work: Path) -> MinIO:
        from benchmarks.vacuum import start_minio

        return cls(start_minio(work))

    def put(self, src: Path, name: str) -> str:
        from benchmarks.vacuum import upload

        uri = self.emu.uri(f"{self.prefix}/{name}")
        log = sorted(f"_delta_log/{p.name}" for p in (src / "_delta_log").iterdir())
        upload(self.emu, src, uri, [*_data_keys(src), *log])
        return uri

    def append_new(self, uri: str, new: Path) -> None:
        from benchmarks.vacuum import upload

        adds = json.loads((new / "adds.json").read_text())
        upload(self.emu, new, uri, [a["path"] for a in adds])
        base = uri.split("://", 1)[1]
        version = _next_version(self.emu.fs.ls(f"{base}/_delta_log", refresh=True))
        text = _commit_text(version, "WRITE", [{"add": a} for a in adds])
        self.emu.fs.pipe(f"{base}/_delta_log/{version:020d}.json", text.encode())

    def deltars(self) -> dict[str, str]:
        from benchmarks.vacuum import deltars_options

        # delta-rs's compact commits too: one writer per copy, no lock needed
        return {**deltars_options(self.options), "AWS_S3_ALLOW_UNSAFE_RENAME": "true"}

    def duckdb(self, con: Any) -> None:
        import duckdb_extension_httpfs

        (folder,) = duckdb_extension_httpfs.__path__
        (ext,) = Path(folder).glob("extensions/*/httpfs.duckdb_extension")
        con.execute(f"LOAD '{ext}'")
        host = self.options["endpoint_url"].split("://", 1)[1]
        con.execute(
            f"CREATE SECRET minio (TYPE S3, KEY_ID '{self.options['key']}', "
            f"SECRET '{self.options['secret']}', ENDPOINT '{host}', URL_STYLE 'path', "
            "USE_SSL false, REGION 'us-east-1')"
        )

    def deltakeeper_args(self) -> list[str]:
        from tests.support.compaction import s3a_jars

        args = ["--jars-dir", str(s3a_jars())]
        for key in ("endpoint_url", "key", "secret"):
            args += ["--storage-option", f"{key}={self.options[key]}"]
        return args

    def spark(self, uri: str) -> tuple[str, dict[str, str], Path]:
        from benchmarks.vacuum import s3a_settings
        from tests.support.compaction import s3a_jars

        conf = {f"spark.hadoop.{k}": v for k, v in s3a_settings(self.options).items()}
        return uri.replace("s3://", "s3a://", 1), conf, s3a_jars()

    def requests(self) -> Counter[str]:
        from benchmarks.vacuum import minio_requests

        return minio_requests(self.emu.endpoint)

    def stop(self) -> None:
        self.emu.stop()


Store = Local | MinIO
STORES = ("local", "minio")


# ------------------------------------------------------------------------------------------
# What a table holds (delta-rs) and how fast DuckDB and delta-rs scan it
# ------------------------------------------------------------------------------------------


def _open_deltars(uri: str, options: dict[str, str] | None) -> Any:
    from deltalake import DeltaTable

    return DeltaTable(uri, storage_options=options)


def live_files(uri: str, options: dict[str, str] | None = None) -> dict[str, int]:
    adds = _open_deltars(uri, options).get_add_actions(flatten=True)
    return dict(zip(adds["path"].to_pylist(), adds["size_bytes"].to_pylist(), strict=True))


def rows_digest(uri: str, options: dict[str, str] | None = None) -> tuple[int, str]:
    """Row count and SHA-256 of the rows sorted by id, in one Arrow schema whatever the reader
    or writer chose (views, dictionaries, timestamp units), so equal rows give equal digests."""
    from deltalake import QueryBuilder

    qb = QueryBuilder().register("t", _open_deltars(uri, options))
    query = f"SELECT {', '.join(ROW_SCHEMA.names)} FROM t ORDER BY id"
    rows = pa.table(qb.execute(query).read_all())
    rows = rows.cast(ROW_SCHEMA).combine_chunks()
    h = hashlib.sha256()
    for batch in rows.to_batches(max_chunksize=1 << 20):
        h.update(batch.serialize())
    return rows.num_rows, h.hexdigest()


@dataclass(frozen=True)
class Scan:
    """A full scan's best time of two, and the store requests one scan sent."""

    seconds: float
    requests: int


def _best(run: Callable[[], int], rows: int, store: Store, what: str) -> Scan:
    best, before = float("inf"), store.requests()
    for repeat in range(2):
        started = time.perf_counter()
        count = run()
        best = min(best, time.perf_counter() - started)
        if repeat == 0:
            sent = sum((store.requests() - before).values())
        if count != rows:
            raise RuntimeError(f"{what} reads {count} rows, expected {rows}")
    return Scan(best, sent)


def duckdb_scan(uri: str, rows: int, store: Store) -> Scan:
    """DuckDB's full scan (every column decoded: count of the whole row)."""
    from tests.support.oracles import duckdb_connect

    def run() -> int:
        with duckdb_connect() as con:
            store.duckdb(con)
            (count,) = con.execute("SELECT count(t) FROM delta_scan(?) t", [uri]).fetchone()
        return int(count)

    return _best(run, rows, store, f"DuckDB on {uri}")


def deltars_scan(uri: str, rows: int, store: Store) -> Scan:
    """delta-rs's full scan: every column of every file into Arrow."""
    return _best(
        lambda: _open_deltars(uri, store.deltars()).to_pyarrow_table().num_rows,
        rows,
        store,
        f"delta-rs on {uri}",
    )


# ------------------------------------------------------------------------------------------
# The engines: each runs to its end and says what it measured of itself
# ------------------------------------------------------------------------------------------


def _spark_env() -> dict[str, str]:
    return {**os.environ, "SPARK_LOCAL_IP": "127.0.0.1", "PYSPARK_PYTHON": sys.executable}


def _cpu_of_children() -> float:
    used = resource.getrusage(resource.RUSAGE_CHILDREN)
    return used.ru_utime + used.ru_stime


def _timed(cmd: list[str], env: dict[str, str] | None = None) -> tuple[dict[str, Any], float]:
    """Run `cmd`; its last stdout line as JSON (plus `cpu`: user + system seconds of its whole
    process tree, JVM and job included), and its wall time."""
    started, cpu = time.perf_counter(), _cpu_of_children()
    proc = subprocess.run(cmd, cwd=REPO, env=env, capture_output=True, text=True)
    wall = time.perf_counter() - started
    cpu = _cpu_of_children() - cpu
    try:
        return json.loads(proc.stdout.strip().splitlines()[-1]) | {"cpu": cpu}, wall
    except (IndexError, ValueError):
        tail = "\n".join(proc.stderr.strip().splitlines()[-15:])
        raise RuntimeError(f"{cmd[:3]} exited {proc.returncode} with no result:\n{tail}") from None


def _jars() -> Path:
    from tests.support.spark import ensure_spark

    return ensure_spark()


def run_deltakeeper(uri: str, shape: Shape, store: Store) -> dict[str, Any]:
    cmd = [sys.executable, "-m", "deltakeeper", "compact", uri, "--json"]
    cmd += ["--target-file-size", str(shape.target_file_size), "--master", MASTER]
    cmd += store.deltakeeper_args()
    for key, value in shape.spark_conf.items():
        cmd += ["--spark-conf", f"{key}={value}"]
    out, wall = _timed(cmd, _spark_env())
    job = out.get("job") or {}
    if job.get("result") != "done":
        raise RuntimeError(f"deltakeeper compact did not compact: {json.dumps(out)[:2000]}")
    plan = out["plan"]
    checkpoint = out.get("checkpoint") or {}
    return {
        "wall": wall,
        "cpu": out["cpu"],
        "job": job["seconds"],
        "session": job["sessionSeconds"],
        "planned": f"{len(plan['partitions'])} partitions, {plan['files']} files",
        # compact's checkpoint before the job: its result and why (the interval's rule)
        "checkpoint": f"{checkpoint.get('result', 'not planned')}: {checkpoint.get('message')}",
    }


def optimize_sizes(shape: Shape) -> dict[str, str]:
    """Delta's OPTIMIZE conf at the file sizes deltakeeper's job sets (planner defaults)."""
    settings = CompactionSettings(target_file_size=shape.target_file_size)
    return {
        OPTIMIZE_CONF["minFileSize"]: str(settings.small_below),
        OPTIMIZE_CONF["maxFileSize"]: str(settings.target_file_size),
    }


def run_optimize(uri: str, shape: Shape, store: Store) -> dict[str, Any]:
    return _optimize(uri, shape, store, {})


def run_optimize_sized(uri: str, shape: Shape, store: Store) -> dict[str, Any]:
    return _optimize(uri, shape, store, optimize_sizes(shape))


def _optimize(uri: str, shape: Shape, store: Store, sizes: dict[str, str]) -> dict[str, Any]:
    from deltakeeper.compaction.submit import DELTA_EXTENSIONS, spark_submit_path

    table, hadoop, jars = store.spark(uri)
    names = (jars / "jars.txt").read_text().split()
    cmd = [
        spark_submit_path(),
        "--master",
        MASTER,
        "--jars",
        ",".join(str(jars / n) for n in names),
    ]
    for key, value in {**DELTA_EXTENSIONS, **shape.spark_conf, **hadoop, **sizes}.items():
        cmd += ["--conf", f"{key}={value}"]
    out, wall = _timed([*cmd, str(OPTIMIZE_SCRIPT), table], _spark_env())
    return {
        "wall": wall,
        "cpu": out["cpu"],
        "job": out["seconds"],
        "session": out["sessionSeconds"],
    }


def run_deltars(uri: str, shape: Shape, store: Store) -> dict[str, Any]:
    options = json.dumps(store.deltars())
    cmd = [sys.executable, "-m", "benchmarks.compaction", "--child", uri, options]
    out, wall = _timed([*cmd, str(shape.target_file_size)])
    return {"wall": wall, "cpu": out["cpu"], "job": out["seconds"], "session": 0.0}


def _child(uri: str, options: str, target: str) -> int:
    started = time.perf_counter()
    _open_deltars(uri, json.loads(options)).optimize.compact(target_size=int(target))
    emit({"seconds": time.perf_counter() - started})
    return 0


Engine = Callable[[str, Shape, Store], dict[str, Any]]
SIZED = "OPTIMIZE (deltakeeper's sizes)"
DEFAULTS = "OPTIMIZE (Delta defaults)"
ENGINES: dict[str, Engine] = {
    "deltakeeper": run_deltakeeper,
    # The same bins as deltakeeper's job: the first pass's target compares with this one.
    SIZED: run_optimize_sized,
    DEFAULTS: run_optimize,
    "delta-rs compact": run_deltars,
}
# (B) runs these again.
STEADY = ("deltakeeper", DEFAULTS, SIZED)


def measure_run(
    engine: str, uri: str, shape: Shape, store: Store, rows: int, digest: str
) -> dict[str, Any]:
    """One engine on `uri`: its own timing, then what changed, read from the table."""
    options = store.deltars()
    before = live_files(uri, options)
    try:
        run = ENGINES[engine](uri, shape, store)
    except Exception as e:
        return {"ok": False, "error": f"{type(e).__name__}: {e}"}
    after = live_files(uri, options)
    removed = set(before) - set(after)
    added = set(after) - set(before)
    count, got = rows_digest(uri, options)
    return {
        "ok": True,
        **run,
        "work": run["job"] - run["session"],
        "files_before": len(before),
        "files_after": len(after),
        "bytes_read": sum(before[p] for p in removed),
        "bytes_written": sum(after[p] for p in added),
        "files_read": len(removed),
        "scan": asdict(duckdb_scan(uri, rows, store)),
        "deltars_scan": asdict(deltars_scan(uri, rows, store)),
        "rows": count,
        "rows_identical": (count, got) == (rows, digest),
    }


def measure(
    shape: Shape, store: Store, engines: tuple[str, ...] = tuple(ENGINES)
) -> dict[str, Any]:
    """(A) and (B), each engine on its own copy of the cached table in `store`."""
    src, info = ensure(shape)
    out: dict[str, Any] = {"info": info, "store": store.name, "A": {}, "B": {}}
    before = store.put(src / "table", "before")
    out["scan_before"] = asdict(duckdb_scan(before, shape.rows, store))
    out["deltars_scan_before"] = asdict(deltars_scan(before, shape.rows, store))
    tables: dict[str, str] = {}
    for engine in engines:
        tables[engine] = store.put(src / "table", f"a-{len(tables)}")
        print(f"  (A) {engine} ...", flush=True)
        out["A"][engine] = measure_run(
            engine, tables[engine], shape, store, shape.rows, info["digest"]
        )
    rows_b = shape.rows + shape.new_files * shape.rows_per_file
    for engine in (e for e in STEADY if e in engines):
        if not out["A"][engine]["ok"]:
            out["B"][engine] = {"ok": False, "error": "(A) failed"}
            continue
        store.append_new(tables[engine], src / "new")
        digest = rows_digest(tables[engine], store.deltars())[1]
        print(f"  (B) {engine} ...", flush=True)
        out["B"][engine] = measure_run(engine, tables[engine], shape, store, rows_b, digest)
    return out


# ------------------------------------------------------------------------------------------
# The report
# ------------------------------------------------------------------------------------------


def _ratio(a: float, b: float) -> float:
    return a / b if b else float("inf")


def _scan(s: dict[str, Any]) -> str:
    return f"{s['seconds']:.2f} s ({s['requests']:,} req.)"


def _row(engine: str, r: dict[str, Any]) -> str:
    if not r["ok"]:
        return f"| {engine} | not measured: {r['error']} |" + " |" * 10
    return (
        f"| {engine} | {r['wall']:.1f} s | {r['cpu']:.1f} s | {r['job']:.1f} s | {r['work']:.1f} s "
        f"| {r['files_read']:,} files, {r['bytes_read'] / MIB:,.1f} MiB "
        f"| {r['bytes_written'] / MIB:,.1f} MiB | {r['files_after']:,} | {_scan(r['scan'])} "
        f"| {_scan(r['deltars_scan'])} "
        f"| {'identical' if r['rows_identical'] else 'DIFFERENT'} ({r['rows']:,}) |"
    )


def _met(ok: bool) -> str:
    return "**met**" if ok else "**NOT met**"


def targets(results: dict[str, Any]) -> dict[str, tuple[str, bool]]:
    """Each target of the benchmark (issues 12 and 27): the figure and whether it holds."""
    a, b = results["A"], results["B"]
    dk, sized = a.get("deltakeeper", {}), a.get(SIZED, {})
    out: dict[str, tuple[str, bool]] = {}
    if dk.get("ok") and sized.get("ok"):
        wall = _ratio(dk["wall"], sized["wall"])
        out["(A) wall <= 1.0x OPTIMIZE at the same target size"] = (f"{wall:.2f}x", wall <= 1.0)
    if dk.get("ok"):
        for reader, key in (("DuckDB", "scan"), ("delta-rs", "deltars_scan")):
            before = results[f"{key}_before"]["seconds"]
            speed = _ratio(before, dk[key]["seconds"])
            name = f"(A) {reader} scan after >= 10x faster"
            out[name] = (f"{speed:.1f}x faster", speed >= 10)
    same = all(r["ok"] and r["rows_identical"] for part in (a, b) for r in part.values())
    out["identical rows, every run"] = ("yes" if same else "no", same)
    dk, opt = b.get("deltakeeper", {}), b.get(DEFAULTS, {})
    if dk.get("ok") and opt.get("ok"):
        new = results["info"]["new_bytes"]
        own = _ratio(dk["bytes_written"], new)
        out["(B) written <= 1.1x the new files' bytes"] = (f"{own:.2f}x", own <= 1.1)
        written = _ratio(dk["bytes_written"], opt["bytes_written"])
        out["(B) written <= 0.5x OPTIMIZE"] = (f"{written:.2f}x", written <= 0.5)
        work = _ratio(dk["work"], opt["work"])
        out["(B) job time (JVM, session excluded) <= 0.5x"] = (f"{work:.2f}x", work <= 0.5)
        wall = _ratio(dk["wall"], opt["wall"])
        out["(B) wall <= 1.0x OPTIMIZE"] = (f"{wall:.2f}x", wall <= 1.0)
    return out


def report(cmd: str, shape: Shape, results: dict[str, Any], m: dict[str, Any]) -> str:
    info = results["info"]
    header = (
        "| engine | wall (process) | CPU (process tree) | job (JVM up) "
        "| job, session start excluded | read "
        "| written | files after | DuckDB scan after | delta-rs scan after | rows |"
    )
    rule = "|---|---|---|---|---|---|---|---|---|---|---|"
    lines = [
        f"## Compaction on {results['store']}: {shape.files:,} small files in "
        f"{shape.partitions} partitions",
        "",
        f"- Date: {datetime.now(UTC).strftime('%Y-%m-%d %H:%M UTC')}, "
        f"deltakeeper commit {m['deltakeeper_commit']}",
        machine_line(m, spark=True),
        f"- Command: `{cmd}`",
        f"- Table: `benchmarks/compaction.py`'s generator (v{GENERATOR_VERSION}, seed "
        f"{shape.seed}), an event table: {', '.join(f'{k} {v}' for k, v in DELTA_TYPES.items())}"
        " (sequential ids, timestamps rising through the day, a million users, 8 event "
        f"names, 30 countries, 16-hex-digit sessions), partitioned by day. {shape.files:,} "
        f"files of {shape.rows_per_file:,} rows, {info['bytes'] / MIB:,.1f} MiB "
        f"({info['bytes'] / shape.files / KIB:.0f} KiB a file), one commit; {shape.rows:,} "
        f"rows. Each engine works on its own copy ({results['store']}).",
        f"- Spark: `spark-submit --master {MASTER}`, the same jars and `--conf` for every Spark "
        f"run ({', '.join(f'{k}={v}' for k, v in shape.spark_conf.items())}; on MinIO the s3a "
        "connector). deltakeeper: "
        f"`deltakeeper compact TABLE --target-file-size {shape.target_file_size // KIB}Ki` "
        "(planner defaults: minFileSize half the target, 50 small files make a partition due). "
        "OPTIMIZE at deltakeeper's sizes: `OPTIMIZE delta.`TABLE`` with "
        f"`{', '.join(f'{k}={v}' for k, v in optimize_sizes(shape).items())}` (the job's bins); "
        "OPTIMIZE with Delta's defaults (min = max file size 1 GiB). "
        f"delta-rs: `optimize.compact(target_size={shape.target_file_size // KIB}Ki)`.",
        "- Wall is the whole process (Python, JVM and Spark session start included), CPU its "
        "process tree's user + system time (what the load of other work does not inflate); the job "
        "times itself from its start (JVM up) and reports the session's start apart. Read and "
        "written are the sizes of the files the commit removed and added; rows: delta-rs reads "
        "every row, sorted by id, digest compared with the one before. Scans, best of 2, with "
        "the store requests of one: DuckDB `count(t)` over `delta_scan` (every column decoded), "
        "delta-rs `to_pyarrow_table()`.",
        "",
        f"### (A) first compaction; before it a DuckDB scan takes "
        f"{_scan(results['scan_before'])}, delta-rs {_scan(results['deltars_scan_before'])}",
        "",
        header,
        rule,
        *(_row(e, r) for e, r in results["A"].items()),
        "",
        f"### (B) steady state: {shape.new_files} new files ({info['new_bytes'] / MIB:.1f} MiB) "
        f"in {shape.new_partitions} partitions after (A)",
        "",
        header,
        rule,
        *(_row(e, r) for e, r in results["B"].items()),
        "",
    ]
    for name, (figure, ok) in targets(results).items():
        lines.append(f"- Target {name}: {figure}, {_met(ok)}")
    lines += against_sized(results)
    lines += checkpoints(results)
    return "\n".join(lines) + "\n"


def checkpoints(results: dict[str, Any]) -> list[str]:
    """What each run started from, and deltakeeper's checkpoint before its job."""
    lines = [
        "- Each engine works on its own copy: (A) from the generator's one-commit log, (B) from "
        "the log its own (A) left plus the new files' commit; no engine sees another's commits "
        "or checkpoints. OPTIMIZE writes no checkpoint before it starts."
    ]
    for part in ("A", "B"):
        dk = results[part].get("deltakeeper", {})
        if dk.get("ok"):
            lines.append(f"- ({part}) deltakeeper's checkpoint before the job: {dk['checkpoint']}")
    return lines


def against_sized(results: dict[str, Any]) -> list[str]:
    """deltakeeper against OPTIMIZE with the same bins: the job's own cost."""
    lines = []
    for part in ("A", "B"):
        dk, sized = results[part].get("deltakeeper", {}), results[part].get(SIZED, {})
        if dk.get("ok") and sized.get("ok"):
            wall, cpu = _ratio(dk["wall"], sized["wall"]), _ratio(dk["cpu"], sized["cpu"])
            lines.append(
                f"- ({part}) deltakeeper / {SIZED}: wall {wall:.2f}x, "
                f"CPU {cpu:.2f}x, job with session start excluded "
                f"{_ratio(dk['work'], sized['work']):.2f}x"
            )
    return lines


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    if argv[:1] == ["--child"]:
        return _child(argv[1], argv[2], argv[3])
    ap = argparse.ArgumentParser(prog="python -m benchmarks.compaction", description=__doc__)
    ap.add_argument("--quick", action="store_true", help="a tiny table; prints only")
    ap.add_argument(
        "--store",
        choices=STORES,
        default="minio",
        help="where the tables live (default: a MinIO the run starts)",
    )
    ap.add_argument("--output", type=Path, default=REPO / "BENCHMARKS.md")
    ap.add_argument(
        "--no-planner",
        action="store_true",
        help="skip the planner on the 1,000,000-file log (benchmarks.compaction_plan, which the "
        "full run also runs, once, into the same file)",
    )
    a = ap.parse_args(argv)
    shape = QUICK if a.quick else FULL
    m = machine()
    with tempfile.TemporaryDirectory(prefix="bench-compaction-", dir=cache_dir()) as work:
        store: Store = MinIO.start(Path(work)) if a.store == "minio" else Local(Path(work))
        try:
            results = measure(shape, store)
        finally:
            if isinstance(store, MinIO):
                store.stop()
    cmd = "python -m benchmarks.compaction" + "".join(f" {x}" for x in argv)
    text = report(cmd, shape, results, m)
    print("\n" + text)
    if not a.quick:
        write_section(a.output, "compaction", f"{a.store}-{shape.key()}", text)
        print(f"wrote {a.output}")
    if not (a.quick or a.no_planner):
        from benchmarks import compaction_plan

        compaction_plan.main(["--repeats", "1", "--output", str(a.output)])
    # A missed target is a finding, written above; only a run that failed fails the command.
    return 0 if all(r["ok"] for part in ("A", "B") for r in results[part].values()) else 1


if __name__ == "__main__":
    sys.exit(main())
