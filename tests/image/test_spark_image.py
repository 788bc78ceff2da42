"""The compaction job image (Dockerfile.spark): Spark with the Delta jars and delta-spark's
Python package, built with buildah on a local Debian + Java 17 + Spark base.

spark-submit runs inside the image twice: on a tiny PySpark + Delta script written here (create,
append, read back through delta-spark's DeltaTable API), and on the image's own compaction job
(/opt/deltakeeper/job.py) over a small-file table delta-rs wrote; delta-rs on the host reads
both tables afterwards; and the job once more on an s3a:// table on MinIO, through the image's
own s3a connector. Measured on two busy cores: the Spark base in 4 minutes cold, the image in
30 s, these tests in 2 minutes (on a machine six engineers shared: the image with the s3a jars
in 2 minutes, the four tests in 9, the s3a one 5 of them).
"""

from __future__ import annotations

import json
import os
import shutil
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from deltalake import DeltaTable

from tests.image.conftest import REPO, build, buildah, container, image_config
from tests.integration.conftest import minio, store_binaries  # noqa: F401 (fixtures)

pytestmark = pytest.mark.image
SPARK_UID = 185
DELTA_CONF = (
    "--conf", "spark.sql.extensions=io.delta.sql.DeltaSparkSessionExtension",
    "--conf", "spark.sql.catalog.spark_catalog=org.apache.spark.sql.delta.catalog.DeltaCatalog",
)  # fmt: skip
TINY_JOB = """
import json, sys
from pyspark.sql import SparkSession
from delta.tables import DeltaTable

path = sys.argv[1]
spark = SparkSession.builder.appName("tiny-delta").getOrCreate()
spark.range(0, 10).write.format("delta").save(path)
spark.range(10, 20).write.format("delta").mode("append").save(path)
table = DeltaTable.forPath(spark, path)
rows = table.toDF().count()
versions = [r.version for r in table.history().select("version").collect()]
print("RESULT " + json.dumps({"rows": rows, "versions": sorted(versions)}))
spark.stop()
"""


@pytest.fixture(scope="module")
def spark_image() -> str:
    return build("spark")


@pytest.fixture
def job_dirs() -> Iterator[tuple[Path, Path]]:
    dirs = []
    for prefix in ("deltakeeper-spark-job-", "deltakeeper-spark-data-"):
        path = Path(tempfile.mkdtemp(prefix=prefix))
        path.chmod(0o755)
        dirs.append(path)
    os.chown(dirs[1], SPARK_UID, SPARK_UID)
    yield dirs[0], dirs[1]
    for path in dirs:
        shutil.rmtree(path, ignore_errors=True)


def test_config_and_contents(spark_image: str) -> None:
    config = image_config(spark_image)
    assert config["User"] == str(SPARK_UID)
    assert config["Labels"]["org.opencontainers.image.title"] == "deltakeeper-spark"
    with container(spark_image) as name:
        root = Path(buildah("mount", name).stdout.strip())
        try:
            jars = {p.name for p in (root / "opt/spark/jars").iterdir()}
            assert any(j.startswith("delta-spark_") for j in jars), sorted(jars)[:10]
            assert any(j.startswith("delta-storage-") for j in jars)
            # s3a: hadoop-aws of the image's Hadoop and the AWS SDK v2 modules it loads
            [client] = [j for j in jars if j.startswith("hadoop-client-api-")]
            hadoop = client.removeprefix("hadoop-client-api-")
            assert f"hadoop-aws-{hadoop}" in jars and any(j.startswith("s3-2.") for j in jars)
            assert (root / "opt/deltakeeper/python/delta/tables.py").is_file()
            job = REPO / "operator/deltakeeper/compaction/job.py"
            assert (root / "opt/deltakeeper/job.py").read_bytes() == job.read_bytes()
        finally:
            buildah("umount", name, check=False)


def test_spark_submit_writes_and_reads_a_delta_table(
    spark_image: str, job_dirs: tuple[Path, Path]
) -> None:
    job_dir, data = job_dirs
    (job_dir / "tiny.py").write_text(TINY_JOB)
    (job_dir / "tiny.py").chmod(0o644)
    with container(spark_image) as name:
        done = buildah(
            "run", "--isolation", "chroot",
            "--env", "SPARK_LOCAL_IP=127.0.0.1",
            "--volume", f"{job_dir}:/job:ro",
            "--volume", f"{data}:/data",
            name, "--",
            "/opt/spark/bin/spark-submit", "--master", "local[1]", "--driver-memory", "512m",
            "--conf", "spark.ui.enabled=false",
            *DELTA_CONF,
            "/job/tiny.py", "/data/t",
            check=False, timeout=900,
        )  # fmt: skip
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-5000:]
    line = next(x for x in done.stdout.splitlines() if x.startswith("RESULT "))
    assert json.loads(line[len("RESULT ") :]) == {"rows": 20, "versions": [0, 1]}
    # delta-rs on the host reads what Spark in the image wrote
    table = DeltaTable(str(data / "t"))
    assert table.version() == 1
    assert sorted(table.to_pyarrow_table()["id"].to_pylist()) == list(range(20))


def run_job(
    image: str, spec: dict[str, Any], run_args: list[str], conf: list[str] | None = None
) -> dict[str, Any]:
    """The image's compaction job under spark-submit, local[1]; its JSON result line."""
    with container(image) as name:
        done = buildah(
            "run", "--isolation", "chroot",
            "--env", "SPARK_LOCAL_IP=127.0.0.1", *run_args,
            name, "--",
            "/opt/spark/bin/spark-submit", "--master", "local[1]", "--driver-memory", "512m",
            "--conf", "spark.ui.enabled=false",
            *DELTA_CONF, *(conf or []),
            "/opt/deltakeeper/job.py", "--spec-json", json.dumps(spec),
            check=False, timeout=900,
        )  # fmt: skip
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-5000:]
    line = next(x for x in done.stdout.splitlines() if "deltakeeperCompaction" in x)
    result: dict[str, Any] = json.loads(line)
    return result


def test_the_compaction_job_compacts_a_table_in_the_image(
    spark_image: str, job_dirs: tuple[Path, Path]
) -> None:
    """Slow: spark-submit inside the image (a JVM in a container) on a mounted table."""
    import pyarrow as pa
    from deltalake import write_deltalake

    _, data = job_dirs
    table = data / "events"
    for i in range(4):
        write_deltalake(str(table), pa.table({"id": pa.array([i], pa.int64())}), mode="append")
    for path in [table, *table.rglob("*")]:
        os.chown(path, SPARK_UID, SPARK_UID)
    spec = {"jobId": "dk-image-1", "table": "file:/data/events", "compact": [{}]}
    result = run_job(spark_image, spec, ["--volume", f"{data}:/data"])
    assert result["result"] == "done" and result["filesRemoved"] == 4 and result["filesAdded"] == 1
    after = DeltaTable(str(table))
    assert after.version() == 4 and len(after.file_uris()) == 1
    rows = after.to_pyarrow_dataset().to_table()["id"].to_pylist()
    assert sorted(rows) == [0, 1, 2, 3]


def test_the_compaction_job_compacts_an_s3a_table_on_minio(
    spark_image: str,
    minio: Any,  # noqa: F811 (the fixture imported above)
    tmp_path: Path,
) -> None:
    """Through the image's own s3a connector, with the credentials in the environment only (as
    a SparkApplication's secretKeyRefs give them) and the endpoint in Spark conf.

    Slow: spark-submit inside the image (a JVM in a container), reading and writing through
    s3a."""
    import pyarrow as pa
    from deltalake import write_deltalake

    from deltakeeper.compaction.spark_storage import spark_storage
    from deltakeeper.delta.table import open_table

    local = tmp_path / "events"
    for i in range(4):
        write_deltalake(str(local), pa.table({"id": pa.array([i], pa.int64())}), mode="append")
    uri = minio.uri("image-s3a/events")
    minio.upload_folder(local, uri)
    storage = spark_storage(uri, minio.storage_options)
    spec = {"jobId": "dk-image-s3a", "table": storage.uri, "compact": [{}]}
    env = [x for k, v in sorted(storage.env.items()) for x in ("--env", f"{k}={v}")]
    conf = [x for k, v in sorted(storage.conf.items()) for x in ("--conf", f"{k}={v}")]
    # With AWS_* set, spark-submit resolves its own host name (as a pod's resolves).
    result = run_job(spark_image, spec, ["--hostname", "localhost", *env], conf)
    assert result["result"] == "done" and result["filesRemoved"] == 4 and result["filesAdded"] == 1
    after = open_table(uri, minio.storage_options).snapshot()
    assert after.version == 4 and after.num_files == 1
