"""Real Delta tables written by Delta Spark, for tests that must match what Spark writes.

- `spark_session()`: a small local[2] SparkSession with Delta (jars from scripts/spark/install.sh).
- `generate_tables(dest_dir)`: writes the tables in `TABLES` below with Delta Spark, checks each
  really has its feature (by reading its `_delta_log`), records `tables.json` and returns
  name -> absolute path.
- `spark_tables`: session fixture (import it into a conftest) -> name -> path of the cached
  tables in `${XDG_CACHE_HOME:-~/.cache}/deltakeeper/spark-tables/<key>/`, where the key hashes
  this file and the pinned versions. Generation runs in a child process into a temp folder that
  is renamed into place when complete, so a crash never leaves a half cache. The cached tables
  are shared: copy before writing (`copy_table`).
- `table_manifest(path)`: what `tables.json` says about one table (rows, id_sum, version).
- `verify_table(name, path)`: the feature checks, raising AssertionError with the reason.

The tables (rows are tiny; every table has deletes or updates, so tombstones exist):
- dv: deletion vectors on; DELETEs and an UPDATE leave on-disk ('u') DVs, DVs replaced by
  larger ones, and a remove carrying a DV; v0..v7, no checkpoint.
- column_mapping: mode=name, partitioned by region, `name` renamed to `full_name` at v3
  (same physical name); partitionValues keyed by physical names; v0..v6.
- v2_checkpoint_sidecars: checkpointPolicy=v2, interval 5, partSize 3: a JSON-top-level UUID
  checkpoint at v5 and a parquet one at v10, each with sidecars in _delta_log/_sidecars/;
  _last_checkpoint carries v2Checkpoint; commits 11 and 12 after it.
- in_commit_timestamps: enabled at creation, every commitInfo has inCommitTimestamp; v0..v5.
- row_tracking: baseRowId/defaultRowCommitVersion on adds, delta.rowTracking domain; v0..v5.
- multipart_checkpoint: classic 4-part checkpoint at v5 (partSize 3), commits 6 and 7 after.
- partitioned_many_commits: partitioned by (country STRING, day DATE), v0..v31, classic
  checkpoints at 10, 20, 30; a partition value with a space and a null one.
As Spark leaves them on a local disk: Hadoop `.<name>.crc` files beside log and data files,
`.crc` version checksums, and an empty `_delta_log/_staged_commits/`.

Run `python -m tests.support.spark generate DEST` (from the repo root) to write them by hand.
"""

from __future__ import annotations

import contextlib
import datetime as dt
import fcntl
import glob
import hashlib
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterator, Mapping
from pathlib import Path
from typing import Any

import pytest

REPO = Path(__file__).resolve().parents[2]
INSTALL_SH = REPO / "scripts" / "spark" / "install.sh"
MANIFEST = "tables.json"
GENERATE_TIMEOUT_S = 900

TABLES = (
    "dv",
    "column_mapping",
    "v2_checkpoint_sidecars",
    "in_commit_timestamps",
    "row_tracking",
    "multipart_checkpoint",
    "partitioned_many_commits",
)


# --------------------------------------------------------------------------------------------
# Versions, cache and installation
# --------------------------------------------------------------------------------------------


# spark-submit settings for the compaction job in tests: loopback only, no UI, small on 2 cores.
SUBMIT_CONF = {
    "spark.driver.host": "127.0.0.1",
    "spark.driver.bindAddress": "127.0.0.1",
    "spark.ui.enabled": "false",
    "spark.sql.shuffle.partitions": "2",
    "spark.databricks.delta.snapshotPartitions": "2",
    # VACUUM lists the table in this many tasks (Spark's default, 10,000: over a minute of
    # empty tasks on local[2] for a table of a few files).
    "spark.sql.sources.parallelPartitionDiscovery.parallelism": "2",
    "spark.driver.extraJavaOptions": "-XX:+UseSerialGC -XX:TieredStopAtLevel=1",
}


def pinned_versions() -> dict[str, str]:
    """PYSPARK_VERSION / DELTA_VERSION as pinned in scripts/spark/install.sh (one place)."""
    text = INSTALL_SH.read_text()
    found = dict(re.findall(r"^(PYSPARK_VERSION|DELTA_VERSION)=(\S+)$", text, re.M))
    return {"pyspark": found["PYSPARK_VERSION"], "delta": found["DELTA_VERSION"]}


def cache_root() -> Path:
    explicit = os.environ.get("DELTAKEEPER_CACHE")
    if explicit:
        return Path(explicit)
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "deltakeeper"


def jars_dir() -> Path:
    v = pinned_versions()
    spark_mm = v["pyspark"].rsplit(".", 1)[0]
    return cache_root() / f"spark-jars-{v['delta']}-spark{spark_mm}"


def _installed_versions() -> tuple[str | None, str | None]:
    from importlib.metadata import PackageNotFoundError, version

    out: list[str | None] = []
    for dist in ("pyspark", "delta-spark"):
        try:
            out.append(version(dist))
        except PackageNotFoundError:
            out.append(None)
    return out[0], out[1]


def ensure_spark() -> Path:
    """Run scripts/spark/install.sh unless pyspark, delta-spark and the jars are all in place."""
    v = pinned_versions()
    jdir = jars_dir()
    if (jdir / "jars.txt").is_file() and _installed_versions() == (v["pyspark"], v["delta"]):
        return jdir
    env = dict(os.environ, PYTHON_VENV=str(Path(sys.executable).parent.parent))
    proc = subprocess.run(
        ["bash", str(INSTALL_SH)], cwd=REPO, env=env, capture_output=True, text=True
    )
    if proc.returncode != 0:
        raise RuntimeError(f"scripts/spark/install.sh failed ({proc.returncode}):\n{proc.stderr}")
    import importlib

    importlib.invalidate_caches()
    return jdir


_LOG4J2 = """\
rootLogger.level = error
rootLogger.appenderRef.stderr.ref = console
appender.console.type = Console
appender.console.name = console
appender.console.target = SYSTEM_ERR
appender.console.layout.type = PatternLayout
appender.console.layout.pattern = %d{HH:mm:ss} %p %c{1}: %m%n
"""


def _log4j2_file() -> Path:
    path = cache_root() / "spark-log4j2.properties"
    if not path.is_file() or path.read_text() != _LOG4J2:
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp = path.with_name(f".{path.name}.{os.getpid()}")
        tmp.write_text(_LOG4J2)
        os.replace(tmp, path)
    return path


def spark_session(app_name: str = "deltakeeper-tests") -> Any:
    """A local[2] SparkSession with Delta Lake: small memory, no UI, 2 shuffle partitions,
    errors-only logs, bound to 127.0.0.1. Reuses the running session if there is one."""
    jdir = ensure_spark()
    jars = [str(jdir / line) for line in (jdir / "jars.txt").read_text().split() if line]
    os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    os.environ.setdefault("PYSPARK_DRIVER_PYTHON", sys.executable)
    from pyspark.sql import SparkSession

    # C1-only JIT: these sessions are short and run tiny jobs; it halves their wall time.
    java_opts = (
        f"-Dlog4j2.configurationFile=file:{_log4j2_file()} -XX:+UseSerialGC -XX:TieredStopAtLevel=1"
    )
    # Tests use path-based tables only; the warehouse just must not land in the work tree.
    warehouse = os.path.join(tempfile.gettempdir(), "deltakeeper-spark-warehouse")
    builder = (
        SparkSession.builder.master("local[2]")
        .appName(app_name)
        .config("spark.jars", ",".join(jars))
        .config("spark.sql.extensions", "io.delta.sql.DeltaSparkSessionExtension")
        .config(
            "spark.sql.catalog.spark_catalog", "org.apache.spark.sql.delta.catalog.DeltaCatalog"
        )
        .config("spark.driver.memory", "1g")
        .config("spark.driver.extraJavaOptions", java_opts)
        .config("spark.driver.host", "127.0.0.1")
        .config("spark.driver.bindAddress", "127.0.0.1")
        .config("spark.ui.enabled", "false")
        .config("spark.ui.showConsoleProgress", "false")
        .config("spark.sql.shuffle.partitions", "2")
        .config("spark.default.parallelism", "2")
        .config("spark.sql.warehouse.dir", warehouse)
        .config("spark.sql.catalogImplementation", "in-memory")
        .config("spark.sql.session.timeZone", "UTC")
        # Delta's log replay defaults to 50 partitions: far too many for tables this small.
        .config("spark.databricks.delta.snapshotPartitions", "2")
        # VACUUM lists the table in this many tasks (default 10,000: minutes on local[2]).
        .config("spark.sql.sources.parallelPartitionDiscovery.parallelism", "2")
    )
    session = builder.getOrCreate()
    session.sparkContext.setLogLevel("ERROR")
    return session


# --------------------------------------------------------------------------------------------
# Generation
# --------------------------------------------------------------------------------------------


@contextlib.contextmanager
def session_conf(
    spark: Any, settings: Mapping[str, str | None], restore: tuple[str, ...] = ()
) -> Iterator[None]:
    """Set session confs (None: unset) for the duration of a block; put them back, and also
    the confs in `restore` (ones Spark itself may change inside the block)."""
    old = {k: spark.conf.get(k, None) for k in (*settings, *restore)}
    for k, v in settings.items():
        if v is None:
            spark.conf.unset(k)
        else:
            spark.conf.set(k, v)
    try:
        yield
    finally:
        for k, v in old.items():
            if v is None:
                spark.conf.unset(k)
            else:
                spark.conf.set(k, v)


def _conf(spark: Any, **settings: str) -> contextlib.AbstractContextManager[None]:
    """`session_conf` with the keys spelled as keyword arguments (dots as '__')."""
    return session_conf(spark, {k.replace("__", "."): v for k, v in settings.items()})


class _Table:
    """A table being written, with a plain-Python model of its rows (id -> row dict)."""

    def __init__(self, spark: Any, path: Path, schema: str) -> None:
        self.spark = spark
        self.path = path
        self.schema = schema
        self.cols = [c.strip().split()[0] for c in schema.split(",")]
        self.rows: dict[int, dict[str, Any]] = {}

    @property
    def ident(self) -> str:
        return f"delta.`{self.path}`"

    def sql(self, statement: str) -> None:
        self.spark.sql(statement.replace("{t}", self.ident))

    def create(self, partitioned_by: str = "", **props: str) -> None:
        tbl = ", ".join(f"'{k}' = '{v}'" for k, v in props.items())
        part = f"PARTITIONED BY ({partitioned_by})" if partitioned_by else ""
        self.sql(f"CREATE TABLE {{t}} ({self.schema}) USING delta {part} TBLPROPERTIES ({tbl})")

    def append(self, rows: list[dict[str, Any]], files: int = 1) -> None:
        df = self.spark.createDataFrame([tuple(r[c] for c in self.cols) for r in rows], self.schema)
        # A local DataFrame already has min(rows, defaultParallelism=2) slices; coalesce is
        # cheaper than a repartition shuffle, which is only used for more files than that.
        df = df.coalesce(files) if files <= 2 else df.repartition(files)
        df.write.format("delta").mode("append").save(str(self.path))
        for r in rows:
            assert r["id"] not in self.rows, r
            self.rows[r["id"]] = dict(r)

    def delete(self, where_sql: str, where: Callable[[dict[str, Any]], bool]) -> None:
        self.sql(f"DELETE FROM {{t}} WHERE {where_sql}")
        self.rows = {k: r for k, r in self.rows.items() if not where(r)}

    def update(
        self,
        set_sql: str,
        where_sql: str,
        change: Callable[[dict[str, Any]], None],
        where: Callable[[dict[str, Any]], bool],
    ) -> None:
        self.sql(f"UPDATE {{t}} SET {set_sql} WHERE {where_sql}")
        for r in self.rows.values():
            if where(r):
                change(r)

    def manifest(self) -> dict[str, Any]:
        return {
            "rows": len(self.rows),
            "id_sum": sum(self.rows),
            "version": max(_commit_versions(self.path)),
        }


def _rows(ids: range, **cols: Callable[[int], Any]) -> list[dict[str, Any]]:
    return [{"id": i, **{c: f(i) for c, f in cols.items()}} for i in ids]


def _gen_dv(spark: Any, path: Path) -> _Table:
    t = _Table(spark, path, "id INT, grp STRING, val INT")
    t.create(**{"delta.enableDeletionVectors": "true"})
    t.append(_rows(range(0, 20), grp=lambda i: "abc"[i % 3], val=lambda i: i * 10))
    t.append(_rows(range(20, 40), grp=lambda i: "abc"[i % 3], val=lambda i: i * 10))
    t.append(_rows(range(40, 60), grp=lambda i: "abc"[i % 3], val=lambda i: i * 10), files=2)
    t.delete("id % 5 = 0", lambda r: r["id"] % 5 == 0)  # DVs on every file
    t.update(
        "val = val + 1",
        "id % 7 = 1",
        lambda r: r.update(val=r["val"] + 1),
        lambda r: r["id"] % 7 == 1,
    )  # DVs on the old files, updated rows in new files
    t.delete("id % 5 = 2", lambda r: r["id"] % 5 == 2)  # DVs replaced by bigger DVs
    t.delete("id >= 20 AND id < 40", lambda r: 20 <= r["id"] < 40)  # whole file: remove w/ DV
    return t


def _gen_column_mapping(spark: Any, path: Path) -> _Table:
    t = _Table(spark, path, "id INT, name STRING, region STRING")
    t.create(
        partitioned_by="region",
        **{"delta.columnMapping.mode": "name"},
    )
    regions = ["eu", "us", "ap"]
    t.append(_rows(range(0, 12), name=lambda i: f"n{i}", region=lambda i: regions[i % 3]))
    t.append(_rows(range(12, 24), name=lambda i: f"n{i}", region=lambda i: regions[i % 3]))
    t.sql("ALTER TABLE {t} RENAME COLUMN name TO full_name")
    t.cols = ["id", "full_name", "region"]
    t.schema = "id INT, full_name STRING, region STRING"
    for r in t.rows.values():
        r["full_name"] = r.pop("name")
    t.append(_rows(range(24, 36), full_name=lambda i: f"n{i}", region=lambda i: regions[i % 3]))
    t.delete("region = 'ap'", lambda r: r["region"] == "ap")
    t.update(
        "full_name = upper(full_name)",
        "id % 4 = 0",
        lambda r: r.update(full_name=r["full_name"].upper()),
        lambda r: r["id"] % 4 == 0,
    )
    return t


def _gen_v2_checkpoint_sidecars(spark: Any, path: Path) -> _Table:
    t = _Table(spark, path, "id INT, val STRING")
    t.create(**{"delta.checkpointPolicy": "v2", "delta.checkpointInterval": "5"})
    # partSize caps actions per checkpoint file; for V2 checkpoints each part is a sidecar.
    with _conf(spark, spark__databricks__delta__checkpoint__partSize="3"):
        with _conf(spark, spark__databricks__delta__checkpointV2__topLevelFileFormat="json"):
            for v in range(1, 5):
                t.append(_rows(range(v * 10, v * 10 + 6), val=lambda i: f"v{i}"), files=3)
            t.delete("id % 10 = 0", lambda r: r["id"] % 10 == 0)  # v5: json checkpoint
        with _conf(spark, spark__databricks__delta__checkpointV2__topLevelFileFormat="parquet"):
            for v in range(6, 10):
                t.append(_rows(range(v * 10, v * 10 + 6), val=lambda i: f"v{i}"), files=3)
            t.delete("id % 10 = 1", lambda r: r["id"] % 10 == 1)  # v10: parquet checkpoint
        t.append(_rows(range(110, 114), val=lambda i: f"v{i}"))  # v11, after the checkpoint
        t.delete("id = 112", lambda r: r["id"] == 112)  # v12
    return t


def _gen_in_commit_timestamps(spark: Any, path: Path) -> _Table:
    t = _Table(spark, path, "id INT, val STRING")
    t.create(**{"delta.enableInCommitTimestamps": "true"})
    for v in range(1, 4):
        t.append(_rows(range(v * 10, v * 10 + 5), val=lambda i: f"v{i}"))
    t.delete("id % 2 = 0", lambda r: r["id"] % 2 == 0)
    t.update(
        "val = concat(val, '!')",
        "id > 20",
        lambda r: r.update(val=r["val"] + "!"),
        lambda r: r["id"] > 20,
    )
    return t


def _gen_row_tracking(spark: Any, path: Path) -> _Table:
    t = _Table(spark, path, "id INT, val STRING")
    t.create(**{"delta.enableRowTracking": "true"})
    t.append(_rows(range(0, 10), val=lambda i: f"v{i}"))
    t.append(_rows(range(10, 20), val=lambda i: f"v{i}"), files=2)
    t.update(
        "val = upper(val)",
        "id % 3 = 0",
        lambda r: r.update(val=r["val"].upper()),
        lambda r: r["id"] % 3 == 0,
    )
    t.delete("id >= 15", lambda r: r["id"] >= 15)
    t.append(_rows(range(20, 25), val=lambda i: f"v{i}"))
    return t


def _gen_multipart_checkpoint(spark: Any, path: Path) -> _Table:
    t = _Table(spark, path, "id INT, val STRING")
    t.create(**{"delta.checkpointInterval": "5"})
    with _conf(spark, spark__databricks__delta__checkpoint__partSize="3"):
        for v in range(1, 5):
            t.append(_rows(range(v * 10, v * 10 + 4), val=lambda i: f"v{i}"), files=2)
        t.delete("id = 10 OR id = 11", lambda r: r["id"] in (10, 11))  # v5: checkpoint
        t.append(_rows(range(60, 64), val=lambda i: f"v{i}"))  # v6
        t.delete("id = 60", lambda r: r["id"] == 60)  # v7
    return t


def _gen_partitioned_many_commits(spark: Any, path: Path) -> _Table:
    t = _Table(spark, path, "id INT, val INT, country STRING, day DATE")
    t.create(partitioned_by="country, day", **{"delta.checkpointInterval": "10"})
    countries = ["de", "us", "new zealand"]  # a space, so partition paths need escaping
    day0 = dt.date(2024, 1, 1)
    next_id = 0
    for v in range(1, 32):  # versions 1..31: checkpoints at 10, 20 and 30, one commit after
        if v % 7 == 0:
            c = countries[v % 3]
            t.delete(
                f"country = '{c}' AND day < DATE'2024-01-03'",
                lambda r, c=c: r["country"] == c and r["day"] < dt.date(2024, 1, 3),
            )
        elif v % 9 == 0:
            t.update(
                "val = val + 1000",
                "id % 4 = 1",
                lambda r: r.update(val=r["val"] + 1000),
                lambda r: r["id"] % 4 == 1,
            )
        else:
            ids = range(next_id, next_id + 3)
            next_id += 3
            t.append(
                _rows(
                    ids,
                    val=lambda i: i,
                    country=lambda i, v=v: None if (v == 13 and i % 3 == 0) else countries[i % 3],
                    day=lambda i, v=v: day0 + dt.timedelta(days=v % 4),
                ),
                files=2,
            )
    return t


_GENERATORS: dict[str, Callable[[Any, Path], _Table]] = {
    "dv": _gen_dv,
    "column_mapping": _gen_column_mapping,
    "v2_checkpoint_sidecars": _gen_v2_checkpoint_sidecars,
    "in_commit_timestamps": _gen_in_commit_timestamps,
    "row_tracking": _gen_row_tracking,
    "multipart_checkpoint": _gen_multipart_checkpoint,
    "partitioned_many_commits": _gen_partitioned_many_commits,
}


# Relative generation cost (seconds on an idle 2-core machine, roughly), to schedule the pool.
_COST = {
    "dv": 25,
    "column_mapping": 7,
    "v2_checkpoint_sidecars": 20,
    "in_commit_timestamps": 9,
    "row_tracking": 9,
    "multipart_checkpoint": 9,
    "partitioned_many_commits": 27,
}


def generate_tables(dest_dir: str | os.PathLike[str], workers: int = 2) -> dict[str, str]:
    """Write every table in TABLES under dest_dir with Delta Spark, verify each one's feature,
    write dest_dir/tables.json and return name -> absolute path.

    Tables are written `workers` at a time from threads of one JVM, each in its own
    SparkSession (`newSession()`: shared SparkContext, separate SQL confs, so one table's
    checkpoint confs never leak into another's)."""
    from concurrent.futures import ThreadPoolExecutor

    dest = Path(dest_dir).resolve()
    dest.mkdir(parents=True, exist_ok=True)
    for name in TABLES:
        if (dest / name).exists():
            raise FileExistsError(dest / name)
    spark = spark_session("deltakeeper-generate-tables")

    def one(name: str) -> dict[str, Any]:
        started = time.monotonic()
        path = dest / name
        table = _GENERATORS[name](spark.newSession(), path)
        verify_table(name, path)
        entry = table.manifest()
        entry["seconds"] = round(time.monotonic() - started, 1)
        print(f"generated {name}: {entry}", file=sys.stderr, flush=True)
        return {"path": name, **entry}

    # Longest first, so the pool does not end on one long table.
    order = sorted(TABLES, key=lambda n: -_COST[n])
    with ThreadPoolExecutor(max_workers=max(1, workers)) as pool:
        entries = dict(zip(order, pool.map(one, order), strict=True))
    manifest: dict[str, Any] = {
        "versions": pinned_versions(),
        "tables": {name: entries[name] for name in TABLES},
    }
    (dest / MANIFEST).write_text(json.dumps(manifest, indent=2, sort_keys=True) + "\n")
    return {name: str(dest / name) for name in TABLES}


# --------------------------------------------------------------------------------------------
# Checks on the written logs
# --------------------------------------------------------------------------------------------

_COMMIT = re.compile(r"^(\d{20})\.json$")
_UUID = r"[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}"


def _commit_versions(path: Path) -> list[int]:
    names = os.listdir(Path(path) / "_delta_log")
    return sorted(int(m.group(1)) for n in names if (m := _COMMIT.match(n)))


def _actions(path: Path, version: int) -> list[dict[str, Any]]:
    text = (Path(path) / "_delta_log" / f"{version:020d}.json").read_text()
    return [json.loads(line) for line in text.splitlines() if line.strip()]


def _all_actions(path: Path) -> list[tuple[int, dict[str, Any]]]:
    return [(v, a) for v in _commit_versions(path) for a in _actions(path, v)]


def _of(actions: list[tuple[int, dict[str, Any]]], kind: str) -> list[dict[str, Any]]:
    return [a[kind] for _, a in actions if kind in a]


def _latest(actions: list[tuple[int, dict[str, Any]]], kind: str) -> dict[str, Any]:
    found = _of(actions, kind)
    assert found, f"no {kind} action in the log"
    return found[-1]


def _features(actions: list[tuple[int, dict[str, Any]]]) -> tuple[set[str], set[str]]:
    p = _latest(actions, "protocol")
    return set(p.get("readerFeatures") or ()), set(p.get("writerFeatures") or ())


def _log_names(path: Path) -> list[str]:
    return sorted(os.listdir(Path(path) / "_delta_log"))


def _matching(names: list[str], pattern: str) -> list[str]:
    return [n for n in names if re.fullmatch(pattern, n)]


def _read_parquet_rows(file: Path) -> list[dict[str, Any]]:
    import pyarrow.parquet as pq

    return pq.read_table(file).to_pylist()


def _check_dv(path: Path) -> None:
    acts = _all_actions(path)
    reader, writer = _features(acts)
    assert "deletionVectors" in reader and "deletionVectors" in writer, (reader, writer)
    dv_adds = [a for a in _of(acts, "add") if a.get("deletionVector")]
    assert len(dv_adds) >= 4, f"expected adds with deletion vectors, got {len(dv_adds)}"
    assert {a["deletionVector"]["storageType"] for a in dv_adds} == {"u"}
    dv_removes = [r for r in _of(acts, "remove") if r.get("deletionVector")]
    assert dv_removes, "no remove (tombstone) carrying a deletion vector"
    dv_files = glob.glob(str(Path(path) / "deletion_vector_*.bin"))
    assert len(dv_files) >= 2, dv_files
    assert max(_commit_versions(path)) >= 6


def _check_column_mapping(path: Path) -> None:
    acts = _all_actions(path)
    metas = _of(acts, "metaData")
    meta = metas[-1]
    assert meta["configuration"].get("delta.columnMapping.mode") == "name", meta["configuration"]
    assert meta["partitionColumns"] == ["region"], meta["partitionColumns"]
    fields = {f["name"]: f["metadata"] for f in json.loads(meta["schemaString"])["fields"]}
    assert "full_name" in fields and "name" not in fields, sorted(fields)
    first = {f["name"]: f["metadata"] for f in json.loads(metas[0]["schemaString"])["fields"]}
    phys = "delta.columnMapping.physicalName"
    assert fields["full_name"][phys] == first["name"][phys], "rename changed the physical name"
    assert all(phys in m and "delta.columnMapping.id" in m for m in fields.values()), fields
    region_phys = fields["region"][phys]
    assert region_phys != "region", "physical names should be generated (col-<uuid>)"
    adds = _of(acts, "add")
    assert adds and all(list(a["partitionValues"]) == [region_phys] for a in adds)
    assert _of(acts, "remove"), "no tombstones"
    reader, writer = _features(acts)
    p = _latest(acts, "protocol")
    assert "columnMapping" in writer or p["minWriterVersion"] == 5, p
    assert "columnMapping" in reader or p["minReaderVersion"] == 2, p


def _check_v2_checkpoint_sidecars(path: Path) -> None:
    log = Path(path) / "_delta_log"
    names = _log_names(path)
    json_cp = _matching(names, rf"0{{19}}5\.checkpoint\.{_UUID}\.json")
    pq_cp = _matching(names, rf"0{{18}}10\.checkpoint\.{_UUID}\.parquet")
    assert len(json_cp) == 1 and len(pq_cp) == 1, names
    sidecars = sorted(n for n in os.listdir(log / "_sidecars") if not n.startswith("."))
    assert len(sidecars) >= 4 and all(s.endswith(".parquet") for s in sidecars), sidecars
    top = [json.loads(line) for line in (log / json_cp[0]).read_text().splitlines() if line]
    top_sidecars = [a["sidecar"]["path"] for a in top if "sidecar" in a]
    assert len(top_sidecars) >= 2, f"json V2 checkpoint names {len(top_sidecars)} sidecars"
    assert any("checkpointMetadata" in a for a in top), "no checkpointMetadata action"
    assert all(s in sidecars for s in top_sidecars), (top_sidecars, sidecars)
    top_pq = _read_parquet_rows(log / pq_cp[0])
    pq_sidecars = [r["sidecar"]["path"] for r in top_pq if r.get("sidecar")]
    assert len(pq_sidecars) >= 2 and all(s in sidecars for s in pq_sidecars), pq_sidecars
    last = json.loads((log / "_last_checkpoint").read_text())
    assert last["version"] == 10, last
    assert max(_commit_versions(path)) == 12
    reader, writer = _features(_all_actions(path))
    assert "v2Checkpoint" in reader and "v2Checkpoint" in writer, (reader, writer)


def _check_in_commit_timestamps(path: Path) -> None:
    versions = _commit_versions(path)
    assert len(versions) >= 5
    stamps = []
    for v in versions:
        first = _actions(path, v)[0]
        assert "commitInfo" in first, f"commit {v}: commitInfo must be the first action"
        stamps.append(first["commitInfo"]["inCommitTimestamp"])
    assert stamps == sorted(stamps) and len(set(stamps)) == len(stamps), stamps
    acts = _all_actions(path)
    _, writer = _features(acts)
    assert "inCommitTimestamp" in writer, writer
    conf = _latest(acts, "metaData")["configuration"]
    assert conf.get("delta.enableInCommitTimestamps") == "true", conf


def _check_row_tracking(path: Path) -> None:
    acts = _all_actions(path)
    _, writer = _features(acts)
    assert {"rowTracking", "domainMetadata"} <= writer, writer
    adds = _of(acts, "add")
    assert adds and all("baseRowId" in a and "defaultRowCommitVersion" in a for a in adds)
    domains = [d for d in _of(acts, "domainMetadata") if d["domain"] == "delta.rowTracking"]
    assert domains and "rowIdHighWaterMark" in json.loads(domains[-1]["configuration"])
    conf = _latest(acts, "metaData")["configuration"]
    assert conf.get("delta.enableRowTracking") == "true", conf
    assert "delta.rowTracking.materializedRowIdColumnName" in conf, conf
    assert _of(acts, "remove"), "no tombstones"


def _check_multipart_checkpoint(path: Path) -> None:
    names = _log_names(path)
    parts = _matching(names, r"0{19}5\.checkpoint\.\d{10}\.\d{10}\.parquet")
    assert len(parts) >= 2, names
    total = {int(n.split(".")[3]) for n in parts}
    assert total == {len(parts)}, parts
    assert not any(re.search(_UUID, n) for n in names if ".checkpoint." in n), names
    last = json.loads((Path(path) / "_delta_log" / "_last_checkpoint").read_text())
    assert last["version"] == 5 and last.get("parts") == len(parts), last
    assert max(_commit_versions(path)) == 7
    rows = [r for p in parts for r in _read_parquet_rows(Path(path) / "_delta_log" / p)]
    assert any(r.get("remove") for r in rows), "checkpoint carries no tombstone"


def _check_partitioned_many_commits(path: Path) -> None:
    versions = _commit_versions(path)
    assert versions == list(range(32)), versions
    names = _log_names(path)
    for v in (10, 20, 30):
        assert f"{v:020d}.checkpoint.parquet" in names, (v, names)
    last = json.loads((Path(path) / "_delta_log" / "_last_checkpoint").read_text())
    assert last["version"] == 30, last
    acts = _all_actions(path)
    assert _latest(acts, "metaData")["partitionColumns"] == ["country", "day"]
    assert len(_of(acts, "remove")) >= 5, "expected tombstones from deletes and updates"
    values = {tuple(sorted(a["partitionValues"].items())) for a in _of(acts, "add")}
    assert any(dict(v)["country"] is None for v in values), "no null partition value"
    assert any(dict(v)["country"] == "new zealand" for v in values)


_CHECKS: dict[str, Callable[[Path], None]] = {
    "dv": _check_dv,
    "column_mapping": _check_column_mapping,
    "v2_checkpoint_sidecars": _check_v2_checkpoint_sidecars,
    "in_commit_timestamps": _check_in_commit_timestamps,
    "row_tracking": _check_row_tracking,
    "multipart_checkpoint": _check_multipart_checkpoint,
    "partitioned_many_commits": _check_partitioned_many_commits,
}


def verify_table(name: str, path: str | os.PathLike[str]) -> None:
    """Raise AssertionError unless the table's _delta_log shows the feature it was made for."""
    try:
        _CHECKS[name](Path(path))
    except AssertionError as e:
        raise AssertionError(f"{name} ({path}): {e}") from e


# --------------------------------------------------------------------------------------------
# The cache and the pytest fixture
# --------------------------------------------------------------------------------------------


def cache_key() -> str:
    v = pinned_versions()
    h = hashlib.sha256(Path(__file__).read_bytes())
    h.update(json.dumps(v, sort_keys=True).encode())
    return f"delta{v['delta']}-spark{v['pyspark']}-{h.hexdigest()[:16]}"


def _load(dir_: Path) -> dict[str, str]:
    manifest = json.loads((dir_ / MANIFEST).read_text())
    return {name: str(dir_ / entry["path"]) for name, entry in manifest["tables"].items()}


def table_manifest(path: str | os.PathLike[str]) -> dict[str, Any]:
    """The tables.json entry (rows, id_sum, version, ...) for a generated table's path."""
    p = Path(path)
    manifest = json.loads((p.parent / MANIFEST).read_text())
    return dict(manifest["tables"][p.name])


def ensure_tables() -> dict[str, str]:
    """The cached Spark-written tables, generating them first if this key has none yet."""
    root = cache_root() / "spark-tables"
    key = cache_key()
    final = root / key
    if (final / MANIFEST).is_file():
        os.utime(final / MANIFEST)  # last use, for pruning
        return _load(final)
    root.mkdir(parents=True, exist_ok=True)
    with open(root / f".{key}.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)  # one generator at a time (xdist workers, parallel CI)
        if (final / MANIFEST).is_file():
            return _load(final)
        for stale in root.glob(f".{key}.tmp-*"):  # a crashed run's leftovers; we hold the lock
            shutil.rmtree(stale, ignore_errors=True)
        if final.exists():  # no manifest: never complete, never trusted
            shutil.rmtree(final)
        _prune(root, keep=key)
        ensure_spark()
        work = Path(tempfile.mkdtemp(dir=root, prefix=f".{key}.tmp-"))
        try:
            log_path = root / f"{key}.generate.log"
            env = dict(os.environ)
            env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(REPO), env.get("PYTHONPATH")]))
            with open(log_path, "w") as log:
                proc = subprocess.run(
                    [sys.executable, "-m", "tests.support.spark", "generate", str(work / "t")],
                    cwd=REPO,
                    env=env,
                    stdin=subprocess.DEVNULL,
                    stdout=log,
                    stderr=subprocess.STDOUT,
                    timeout=GENERATE_TIMEOUT_S,
                )
            if proc.returncode != 0:
                tail = "".join(log_path.read_text().splitlines(keepends=True)[-40:])
                raise RuntimeError(f"generating Spark tables failed; log {log_path}:\n{tail}")
            os.rename(work / "t", final)  # atomic: the key folder appears complete or not at all
        finally:
            shutil.rmtree(work, ignore_errors=True)
    return _load(final)


def _prune(root: Path, keep: str, unused_days: float = 3) -> None:
    """Remove other keys' tables (older generators) not used for `unused_days`."""
    cutoff = time.time() - unused_days * 86400
    for manifest in root.glob(f"*/{MANIFEST}"):
        other = manifest.parent
        if other.name != keep and manifest.stat().st_mtime < cutoff:
            shutil.rmtree(other, ignore_errors=True)
            for leftover in (root / f"{other.name}.generate.log", root / f".{other.name}.lock"):
                leftover.unlink(missing_ok=True)


@pytest.fixture(scope="session")
def spark_tables() -> dict[str, str]:
    """name -> path of the cached Spark-written tables. Shared: copy before writing."""
    return ensure_tables()


def copy_table(src: str | os.PathLike[str], dest: str | os.PathLike[str]) -> Path:
    """Copy a cached table to a writable folder and return the copy's path."""
    shutil.copytree(src, dest)
    return Path(dest)


def _main(argv: list[str]) -> int:
    if len(argv) == 2 and argv[0] == "generate":
        started = time.monotonic()
        tables = generate_tables(argv[1])
        print(json.dumps(tables, indent=2))
        print(
            f"generated {len(tables)} tables in {time.monotonic() - started:.1f}s", file=sys.stderr
        )
        return 0
    if argv == ["ensure"]:
        print(json.dumps(ensure_tables(), indent=2))
        return 0
    print("usage: spark.py generate DEST | ensure", file=sys.stderr)
    return 2


if __name__ == "__main__":
    sys.exit(_main(sys.argv[1:]))
