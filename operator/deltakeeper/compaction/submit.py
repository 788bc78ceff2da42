"""Run the compaction job with spark-submit (CLI and standalone mode) and read its result.

The job file ships inside the package (job.py beside this file), so the launcher needs only a
`spark-submit` (pip's pyspark has one) and Java. Delta's jars come from a folder (`jars_dir`,
e.g. the one scripts/spark/install.sh fills) or from Maven Central through `--packages`.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import tempfile
from dataclasses import dataclass, field
from importlib import metadata
from pathlib import Path
from typing import Any

from deltakeeper.compaction import job
from deltakeeper.compaction.spark_storage import SparkStorage

JOB_FILE = Path(job.__file__)
DELTA_EXTENSIONS = {
    "spark.sql.extensions": "io.delta.sql.DeltaSparkSessionExtension",
    "spark.sql.catalog.spark_catalog": "org.apache.spark.sql.delta.catalog.DeltaCatalog",
}


class SparkUnavailable(RuntimeError):
    """No spark-submit or no Java here; the message says what to install."""


@dataclass(frozen=True)
class SubmitConfig:
    master: str = "local[*]"
    jars_dir: str | None = None  # a folder of jars with jars.txt listing them, or every *.jar
    packages: str | None = None  # Maven coordinates; default: delta-spark matching pyspark
    conf: dict[str, str] = field(default_factory=dict)
    timeout_s: float = 3600.0


@dataclass(frozen=True)
class JobResult:
    exit_code: int
    result: dict[str, Any]  # the job's JSON line ("result": done / nothing-to-do / failed)
    stderr_tail: str

    @property
    def ok(self) -> bool:
        return self.exit_code == 0 and self.result.get("result") in ("done", "nothing-to-do")


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


def command(cfg: SubmitConfig, storage: SparkStorage, spec_file: str) -> list[str]:
    cmd = [spark_submit_path(), "--master", cfg.master]
    if cfg.jars_dir:
        cmd += ["--jars", ",".join(_jars(cfg.jars_dir))]
    else:
        cmd += ["--packages", cfg.packages or delta_packages()]
    conf = {**DELTA_EXTENSIONS, **storage.conf, **cfg.conf}
    for key in sorted(conf):
        cmd += ["--conf", f"{key}={conf[key]}"]
    return [*cmd, str(JOB_FILE), "--spec", spec_file]


def run(cfg: SubmitConfig, storage: SparkStorage, spec: dict[str, Any]) -> JobResult:
    """Run the job to its end; the credentials reach it through its environment only."""
    with tempfile.TemporaryDirectory(prefix="deltakeeper-compaction-") as tmp:
        spec_file = os.path.join(tmp, "spec.json")
        with open(spec_file, "w", encoding="utf-8") as f:
            json.dump({**spec, "table": storage.uri}, f)
        env = {**os.environ, **storage.env, "PYSPARK_PYTHON": sys.executable}
        done = subprocess.run(
            command(cfg, storage, spec_file),
            capture_output=True,
            text=True,
            env=env,
            timeout=cfg.timeout_s,
            check=False,
        )
    return JobResult(done.returncode, parse_result(done.stdout), done.stderr[-4000:])


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
