"""The compaction job on an s3a:// table in MinIO: storage options mapped by spark_storage.

The table's storage options (endpoint, keys) go through `spark_storage` exactly as a launcher
passes them: the endpoint as Spark conf, the keys as environment variables only, which the job
copies into Hadoop's configuration in-process. Spark reads and writes MinIO through hadoop-aws
(scripts/spark/install_s3a.sh). Afterwards the table is copied back and read by the oracles.
"""

from __future__ import annotations

from pathlib import Path

import pyarrow as pa
import pytest

from deltakeeper.compaction import submit
from deltakeeper.compaction.spark_storage import spark_storage
from deltakeeper.delta.table import open_table
from deltakeeper.maintenance import compaction_plan
from deltakeeper.maintenance.policy import CompactionSettings
from tests.support.compaction import commit_info, file_changes, s3a_jars
from tests.support.oracles import table_versions
from tests.support.rows import deltars_digest, duckdb_digest
from tests.support.spark import SUBMIT_CONF
from tests.support.stores import Emulator

pytestmark = pytest.mark.spark


def test_the_job_compacts_a_minio_table_through_s3a(minio: Emulator, tmp_path: Path) -> None:
    from deltalake import write_deltalake

    local = tmp_path / "written"
    for round_ in range(3):
        ids = [round_ * 4 + i for i in range(4)]
        batch = pa.table({"id": pa.array(ids, pa.int64()), "p": ["ab"[i % 2] for i in ids]})
        write_deltalake(str(local), batch, mode="append", partition_by=["p"])
    uri = minio.uri("s3a-compaction")
    minio.upload_folder(local, uri)
    rows = deltars_digest(str(local))

    snap = open_table(uri, minio.storage_options).snapshot()
    names = compaction_plan.logical_partition_names(snap.metadata)
    found = compaction_plan.plan(
        snap.files, tuple(names), CompactionSettings(min_files_per_partition=2), 0
    )
    assert found.due and found.files == 6, found.reason()
    spec = compaction_plan.job_spec(found, names, "dk-s3a", snap.version)
    storage = spark_storage(uri, minio.storage_options)
    assert storage.uri.startswith("s3a://") and minio.secret not in str(storage.conf)
    cfg = submit.SubmitConfig("local[2]", jars_dir=str(s3a_jars()), conf=SUBMIT_CONF, timeout_s=600)

    done = submit.run(cfg, storage, spec)

    assert done.exit_code == 0, done.stderr_tail
    assert done.result["result"] == "done", done.result
    assert minio.secret not in done.stderr_tail + str(done.result)
    after = open_table(uri, minio.storage_options).snapshot()
    assert after.version == snap.version + 1 and after.num_files == 2
    # Back on a local disk, the oracles read the same rows at every version.
    copy = tmp_path / "copy"
    minio.fs.get(uri.split("://", 1)[1], str(copy), recursive=True)
    assert commit_info(copy, after.version)["userMetadata"] == "dk-s3a"
    assert all(c["dataChange"] is False for c in file_changes(copy, after.version))
    for version in table_versions(str(copy)):
        assert deltars_digest(str(copy), version) == duckdb_digest(str(copy), version)
    assert deltars_digest(str(copy)) == rows
