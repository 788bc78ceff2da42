"""Run the compaction job with spark-submit (CLI and standalone mode) and read its result.

The job file ships inside the package (job.py beside this file), so the launcher needs only a
`spark-submit` (pip's pyspark has one) and Java. Delta's jars come from a folder (`jars_dir`,
e.g. the one scripts/spark/install.sh fills) or from Maven Central through `--packages`.
"""

from __future__ import annotations

import contextlib
import fcntl
import hashlib
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Mapping
from dataclasses import dataclass, field
from importlib import metadata
from pathlib import Path
from typing import IO, Any

from deltakeeper.compaction import job
from deltakeeper.compaction.launcher import JobRequest, JobResult, JobRunning
from deltakeeper.compaction.spark_storage import SparkStorage, spark_storage
from deltakeeper.delta.errors import InvalidInputError

JOB_FILE = Path(job.__file__)
DELTA_EXTENSIONS = {
    "spark.sql.extensions": "io.delta.sql.DeltaSparkSessionExtension",
    "spark.sql.catalog.spark_catalog": "org.apache.spark.sql.delta.catalog.DeltaCatalog",
}
# A short job on a local master (the driver JVM runs the tasks too) is mostly JVM warm-up:
# C2's compiler threads took ~40% of the CPU of one rewriting 22 MiB on 2 cores, and C1-only JIT
# with the serial GC cut it by that. A job rewriting 1 GiB ran slower with them (C1's code is
# slower), so only plans up to SHORT_JOB_BYTES get them. Neither changes what Java computes;
# the user's spark.driver.extraJavaOptions replaces them.
SHORT_JOB_BYTES = 256 * 2**20
LOCAL_JVM_CONF = {"spark.driver.extraJavaOptions": "-XX:+UseSerialGC -XX:TieredStopAtLevel=1"}
# Delta Spark's VACUUM lists the table in this many tasks, 10,000 by default (sized for a
# cluster): on a local master, about a minute of empty tasks a vacuum. There, one per thread.
LISTING_PARALLELISM = "spark.sql.sources.parallelPartitionDiscovery.parallelism"


class SparkUnavailable(RuntimeError):
    """No spark-submit or no Java here; the message says what to install."""


@dataclass(frozen=True)
class SubmitConfig:
    master: str  # --master (maintenance/policy.py SPARK_MASTER unless given)
    jars_dir: str | None = None  # a folder of jars with jars.txt listing them, or every *.jar
    packages: str | None = None  # Maven coordinates; default: delta-spark matching pyspark
    conf: dict[str, str] = field(default_factory=dict)
    timeout_s: float = 3600.0


def submit_cores(master: str, conf: Mapping[str, str]) -> int:
    m = re.fullmatch(r"local(?:\[(\*|\d+)(?:,\s*\d+)?\])?", master.strip())
    if m is not None:
        threads = m.group(1) or "1"
        return (os.cpu_count() or 1) if threads == "*" else int(threads)
    try:
        cores = int(conf.get("spark.executor.cores", "1"))
        instances = int(conf.get("spark.executor.instances", "2"))
    except ValueError:
        return 1
    return max(1, cores * instances)


def spark_submit_path() -> str:
    here = Path(sys.executable).parent / "spark-submit"
    found = str(here) if here.is_file() else shutil.which("spark-submit")
    if not found:
        raise SparkUnavailable(
            "compaction needs spark-submit: pip install 'deltakeeper[spark]' (PySpark and "
            "delta-spark) and Java 17"
        )
    if not shutil.which("java") and not os.environ.get("JAVA_HOME"):
        raise SparkUnavailable("compaction needs Java 17 for Spark: install a JRE (java on PATH)")
    return found


def delta_packages() -> str:
    """delta-spark's Maven coordinates for the installed PySpark, as delta-spark's own
    configure_spark_with_delta_pip names them."""
    try:
        delta, spark = metadata.version("delta-spark"), metadata.version("pyspark")
    except metadata.PackageNotFoundError as e:
        raise SparkUnavailable(
            f"compaction needs {e.name}: pip install 'deltakeeper[spark]'"
        ) from e
    major, minor = spark.split(".")[:2]
    return f"io.delta:delta-spark_{major}.{minor}_2.13:{delta}"


def _jars(folder: str) -> list[str]:
    listing = Path(folder) / "jars.txt"
    names = listing.read_text().split() if listing.is_file() else None
    if names is None:
        names = sorted(p.name for p in Path(folder).glob("*.jar"))
    return [str(Path(folder) / n) for n in names]


def command(
    cfg: SubmitConfig, storage: SparkStorage, spec_file: str, planned_bytes: int | None = None
) -> list[str]:
    cmd = [spark_submit_path(), "--master", cfg.master]
    if cfg.jars_dir:
        cmd += ["--jars", ",".join(_jars(cfg.jars_dir))]
    else:
        cmd += ["--packages", cfg.packages or delta_packages()]
    short = planned_bytes is not None and planned_bytes <= SHORT_JOB_BYTES
    on_local = cfg.master.startswith("local")
    local = LOCAL_JVM_CONF if short and on_local else {}
    if on_local:
        local = {**local, LISTING_PARALLELISM: str(submit_cores(cfg.master, cfg.conf))}
    conf = {**DELTA_EXTENSIONS, **local, **storage.conf, **cfg.conf}
    for key in sorted(conf):
        cmd += ["--conf", f"{key}={conf[key]}"]
    return [*cmd, str(JOB_FILE), "--spec", spec_file]


def run(cfg: SubmitConfig, storage: SparkStorage, spec: dict[str, Any]) -> JobResult:
    """Run the job to its end; the credentials reach it through its environment only."""
    return SubmitJob(cfg, storage, spec, cfg.timeout_s).wait()


class SubmitLauncher:
    """The Launcher of the CLI and standalone mode: spark-submit on this machine."""

    def __init__(self, cfg: SubmitConfig) -> None:
        self.cfg = cfg

    def cores(self, request: JobRequest) -> int:
        """The executor cores a job takes: local[N] threads (local[*]: this machine's), else
        spark.executor.cores x spark.executor.instances (Spark's defaults: 1 and 2)."""
        return submit_cores(self.cfg.master, self.cfg.conf)

    def start(self, request: JobRequest) -> SubmitJob:
        try:
            spark_submit_path()
        except SparkUnavailable as e:
            raise InvalidInputError(str(e)) from e
        storage = spark_storage(request.uri, request.storage_options)
        planned = request.planned.bytes if request.planned else None
        spec = dict(request.spec)
        return SubmitJob(self.cfg, storage, spec, request.deadline_s, planned)


class SubmitJob:
    """One spark-submit in the background. It holds the table's lock file until it ends, so
    no second deltakeeper job (this process or another on this machine) compacts the table
    meanwhile. Output goes to files, not pipes: nobody has to drain them while it runs."""

    def __init__(
        self,
        cfg: SubmitConfig,
        storage: SparkStorage,
        spec: dict[str, Any],
        deadline_s: float,
        planned_bytes: int | None = None,
    ) -> None:
        self.job_id = str(spec.get("jobId", ""))
        self._lock = _table_lock(storage.uri)
        self._tmp = tempfile.TemporaryDirectory(prefix="deltakeeper-compaction-")
        try:
            spec_file = os.path.join(self._tmp.name, "spec.json")
            with open(spec_file, "w", encoding="utf-8") as f:
                json.dump({**spec, "table": storage.uri}, f)
            self._out = open(os.path.join(self._tmp.name, "stdout"), "w+", encoding="utf-8")  # noqa: SIM115
            self._err = open(os.path.join(self._tmp.name, "stderr"), "w+", encoding="utf-8")  # noqa: SIM115
            env = {**os.environ, **storage.env, "PYSPARK_PYTHON": sys.executable}
            # The job holds the lock too: it outlives a daemon killed while the job runs.
            self._proc = subprocess.Popen(
                command(cfg, storage, spec_file, planned_bytes),
                stdout=self._out,
                stderr=self._err,
                env=env,
                pass_fds=(self._lock.fileno(),),
                start_new_session=True,  # a process group: a deadline stops Python and JVM
            )
        except BaseException:
            self._close()
            raise
        self._deadline = time.monotonic() + deadline_s
        self._deadline_s = deadline_s
        self._result: JobResult | None = None

    def poll(self) -> JobResult | None:
        if self._result is None and self._proc.poll() is None:
            if time.monotonic() < self._deadline:
                return None
            self._stop()
        return self._finish()

    def wait(self) -> JobResult:
        try:
            self._proc.wait(timeout=max(0.0, self._deadline - time.monotonic()))
        except subprocess.TimeoutExpired:
            self._stop()
        except BaseException:  # Ctrl-C: the job is in its own session, so stop it here
            self._stop()
            self._close()
            raise
        return self._finish()

    def stop(self) -> None:
        if self._result is None and self._proc.poll() is None:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(self._proc.pid, signal.SIGKILL)
            self._proc.wait()
        self._close()

    def _stop(self) -> None:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(self._proc.pid, signal.SIGKILL)
        self._proc.wait()
        self._result = JobResult(
            -9,
            {
                "result": "failed",
                "error": "DeadlineExceeded",
                "message": f"the job ran longer than its deadline ({self._deadline_s:.0f}s) "
                "and was stopped",
            },
            _tail(self._err),
        )

    def _finish(self) -> JobResult:
        if self._result is None:
            self._out.seek(0)
            code = self._proc.returncode
            self._result = JobResult(code, parse_result(self._out.read()), _tail(self._err))
        self._close()
        return self._result

    def _close(self) -> None:
        for f in (getattr(self, "_out", None), getattr(self, "_err", None)):
            if f is not None and not f.closed:
                f.close()
        self._tmp.cleanup()
        if not self._lock.closed:
            self._lock.close()  # releases the flock


def _tail(f: IO[str]) -> str:
    if f.closed:
        return ""
    f.seek(0)
    return f.read()[-4000:]


def _table_lock(spark_uri: str) -> IO[str]:
    """An exclusive lock per table on this machine, released when the file is closed (or the
    process dies); JobRunning when another holder has it."""
    folder = Path(tempfile.gettempdir()) / "deltakeeper-compaction-locks"
    folder.mkdir(exist_ok=True)
    name = hashlib.sha256(spark_uri.rstrip("/").encode()).hexdigest()[:24]
    f = open(folder / f"{name}.lock", "w")  # noqa: SIM115
    try:
        fcntl.flock(f, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        f.close()
        raise JobRunning(
            f"a deltakeeper compaction job for {spark_uri} is running already"
        ) from None
    return f


def parse_result(stdout: str) -> dict[str, Any]:
    """The job's one JSON line; a job that died before printing it is a failure."""
    for line in reversed(stdout.splitlines()):
        if job.MARK in line:
            try:
                out = json.loads(line)
            except ValueError:
                continue
            if isinstance(out, dict):
                return out
    return {"result": "failed", "error": "NoResult", "message": "the job printed no result"}
