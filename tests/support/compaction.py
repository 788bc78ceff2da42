"""Running deltakeeper's compaction job under a real spark-submit, and reading what it did.

- `spark_submit(spec)`: the job through the spark-submit launcher, local[2], the Delta jars.
- `cli_spark_flags()`: the same settings as `deltakeeper compact` / `maintain` flags.
- `start_job(spec, ...)`: the same, in the background (a `SubmitJob` to `wait()` on).
- `run_in_session(spark, spec)`: the same job (its own entry point, `job.main`) in this
  process's Spark session instead of a JVM of its own; for tests of what the job does to a
  table, not of how it is launched (those keep spark-submit).
- `commit_actions`, `commit_info`, `file_changes`: one commit's actions as written in the log.
- `live_files`, `files_per_partition`: the live files as deltakeeper reads them.
- `plan_table(path, settings)`: deltakeeper's compaction plan for a local table.
- `s3a_jars()`: the Delta jars plus hadoop-aws and the AWS SDK modules s3a needs.
- `pausing_jars()`: the Delta jars plus `PausingLogStore` (java/ beside this file), compiled
  once per source and Delta version into the cache; with `gate_conf(folder)` in the job's conf,
  the job's first commit waits at the gate until the test lets it go (see the Java file).
"""

from __future__ import annotations

import contextlib
import hashlib
import io
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
from collections import Counter
from collections.abc import Callable
from pathlib import Path
from typing import Any

from deltakeeper.compaction import job, submit
from deltakeeper.compaction.launcher import JobResult
from deltakeeper.compaction.spark_storage import spark_storage
from deltakeeper.compaction.submit import SubmitConfig, SubmitJob
from deltakeeper.delta.table import open_table
from deltakeeper.maintenance import compaction_plan
from deltakeeper.maintenance.policy import CompactionSettings
from tests.support.spark import REPO, SUBMIT_CONF, cache_root, ensure_spark, pinned_versions

INSTALL_S3A = REPO / "scripts" / "spark" / "install_s3a.sh"
JAVA_SOURCE = Path(__file__).parent / "java" / "PausingLogStore.java"
PAUSING_CLASS = "deltakeeper.testing.PausingLogStore"
JOB_TIMEOUT_S = 600


def _config(jars: Path | None, conf: dict[str, str | None] | None) -> SubmitConfig:
    folder = jars or ensure_spark()
    os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
    merged = {k: v for k, v in {**SUBMIT_CONF, **(conf or {})}.items() if v is not None}
    return SubmitConfig("local[2]", jars_dir=str(folder), conf=merged, timeout_s=600)


def cli_spark_flags() -> list[str]:
    """The flags that make `deltakeeper compact` / `maintain --compact` submit as the tests do:
    local[2], the cached Delta jars, the tests' SUBMIT_CONF."""
    os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
    flags = ["--master", "local[2]", "--jars-dir", str(ensure_spark())]
    for key, value in SUBMIT_CONF.items():
        flags += ["--spark-conf", f"{key}={value}"]
    return flags


def spark_submit(
    spec: dict[str, Any], jars: Path | None = None, conf: dict[str, str | None] | None = None
) -> tuple[int, dict[str, Any], str]:
    """Run the job to its end; its exit code, JSON line and stderr tail. A conf value of None
    drops that key of the tests' SUBMIT_CONF."""
    done: JobResult = submit.run(_config(jars, conf), spark_storage(spec["table"], {}), spec)
    return done.exit_code, done.result, done.stderr_tail


# The session conf the job sets: put back after a job run in a shared session, so that the
# next test's Spark writes carry no job id and the next job starts from the same conf.
JOB_CONF = (
    job.USER_METADATA_CONF,
    job.CHECKPOINT_THROWS_CONF,
    job.RETENTION_CHECK_CONF,
    job.RETENTION_IGNORED_CONF,
    "spark.sql.session.timeZone",
    *job.OPTIMIZE_CONF.values(),
    *job.TUNING_CONF.values(),
)


def run_in_session(
    spark: Any, spec: dict[str, Any], conf: dict[str, str | None] | None = None
) -> tuple[int, dict[str, Any], str]:
    """`spark_submit`'s answer from the job's own entry point run here: the job takes the
    running session (its getOrCreate), and the conf it sets is put back afterwards. Saves the
    JVM start, Delta's class loading and a new session of a spark-submit (docs/testing.md).
    `conf`: session confs for the run, as spark_submit's (None unsets one)."""
    from tests.support.spark import session_conf

    out = io.StringIO()
    with session_conf(spark, conf or {}, restore=JOB_CONF), contextlib.redirect_stdout(out):
        code = job.main(["--spec-json", json.dumps(spec)])
    return code, submit.parse_result(out.getvalue()), ""


def start_job(
    spec: dict[str, Any], jars: Path | None = None, conf: dict[str, str | None] | None = None
) -> SubmitJob:
    cfg = _config(jars, conf)
    return SubmitJob(cfg, spark_storage(spec["table"], {}), spec, JOB_TIMEOUT_S)


def commit_actions(path: Path, version: int) -> list[dict[str, Any]]:
    log = path / "_delta_log" / f"{version:020d}.json"
    return [json.loads(line) for line in log.read_text().splitlines() if line.strip()]


def commit_info(path: Path, version: int) -> dict[str, Any]:
    return next(a["commitInfo"] for a in commit_actions(path, version) if "commitInfo" in a)


def file_changes(path: Path, version: int) -> list[dict[str, Any]]:
    """The add and remove actions of one commit."""
    actions = commit_actions(path, version)
    return [a.get("add") or a["remove"] for a in actions if "add" in a or "remove" in a]


def live_files(path: Path) -> list[dict[str, Any]]:
    return list(open_table(str(path)).snapshot().files.to_pylist())


def files_per_partition(path: Path) -> Counter[tuple[tuple[str, str | None], ...]]:
    """Live files per partition, keyed by the log's (physical name, serialized value) pairs."""
    return Counter(tuple(sorted(row["partitionValues"] or [])) for row in live_files(path))


def plan_table(
    path: Path, settings: CompactionSettings
) -> tuple[compaction_plan.CompactionPlan, dict[str, str], int]:
    """deltakeeper's plan for a local table, as the daemon makes it: the plan, the partition
    columns' physical -> logical names, and the version planned at."""
    snap = open_table(str(path)).snapshot()
    names = compaction_plan.logical_partition_names(snap.metadata)
    timestamps = compaction_plan.timestamp_partitions(snap.metadata)
    return (
        compaction_plan.plan(snap.files, tuple(names), settings, 0, timestamps),
        names,
        snap.version,
    )


def gate_conf(gate: Path) -> dict[str, str]:
    return {
        "spark.delta.logStore.file.impl": PAUSING_CLASS,
        "spark.hadoop.deltakeeper.test.gate": str(gate),
    }


def pausing_jars() -> Path:
    """A jar folder (jars.txt and links) with the Delta jars and PausingLogStore's jar."""
    key = hashlib.sha256(JAVA_SOURCE.read_bytes())
    key.update(json.dumps(pinned_versions(), sort_keys=True).encode())
    return _jar_folder(f"pausing-logstore-{key.hexdigest()[:16]}", _build_jar)


def s3a_jars() -> Path:
    """A jar folder with the Delta jars and the s3a connector's (scripts/spark/install_s3a.sh,
    cached by version)."""
    env = dict(os.environ, PYTHON_VENV=str(Path(sys.executable).parent.parent))
    done = subprocess.run(
        ["bash", str(INSTALL_S3A)], cwd=REPO, env=env, capture_output=True, text=True
    )
    if done.returncode != 0:
        raise RuntimeError(f"{INSTALL_S3A} failed ({done.returncode}):\n{done.stderr}")
    s3a = Path(done.stdout.split()[-1])

    def link(out: Path) -> None:
        for name in (s3a / "jars.txt").read_text().split():
            os.symlink(s3a / name, out / name)

    return _jar_folder(f"spark-jars-with-{s3a.name}", link)


def _jar_folder(name: str, add: Callable[[Path], None]) -> Path:
    """The Delta jars plus what `add` puts in the folder, listed in jars.txt; built once into
    the cache (complete or absent). A jar whose artifact the Delta jars have already is left
    out of the listing."""
    delta = ensure_spark()
    folder = cache_root() / name
    if (folder / "jars.txt").is_file():
        return folder
    names = (delta / "jars.txt").read_text().split()
    work = Path(tempfile.mkdtemp(dir=cache_root(), prefix=f".{name}-"))
    try:
        for jar in names:
            os.symlink(delta / jar, work / jar)
        add(work)
        have = {_artifact(n) for n in names}
        extra = sorted(p.name for p in work.glob("*.jar") if p.name not in names)
        names += [n for n in extra if _artifact(n) not in have]
        (work / "jars.txt").write_text("\n".join(names) + "\n")
        os.rename(work, folder)
    except OSError:
        if not (folder / "jars.txt").is_file():
            raise
    finally:
        shutil.rmtree(work, ignore_errors=True)  # only left when another run finished first
    return folder


def _artifact(jar: str) -> str:
    return re.sub(r"-[0-9][^-]*(-[0-9]+)?$", "", jar.removesuffix(".jar"))


def _build_jar(out: Path) -> None:
    delta_storage = ensure_spark() / f"delta-storage-{pinned_versions()['delta']}.jar"
    javac, jar = shutil.which("javac"), shutil.which("jar")
    if not javac or not jar:
        raise RuntimeError(
            "the concurrency tests compile a test LogStore: install a JDK 17 "
            "(openjdk-17-jdk-headless; scripts/spark/install.sh does)"
        )
    import pyspark

    hadoop = sorted((Path(pyspark.__file__).parent / "jars").glob("hadoop-client-api-*.jar"))
    classes = out / "classes"
    classpath = os.pathsep.join(map(str, [delta_storage, *hadoop]))
    run = {"check": True, "capture_output": True, "text": True}
    subprocess.run(
        [javac, "--release", "17", "-cp", classpath, "-d", str(classes), str(JAVA_SOURCE)], **run
    )
    subprocess.run([jar, "cf", str(out / "pausing-logstore.jar"), "-C", str(classes), "."], **run)
    shutil.rmtree(classes)
