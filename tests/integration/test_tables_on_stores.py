"""Tables on MinIO (S3), Azurite (Azure Blob) and fake-gcs-server (GCS) read exactly as on disk,
and watching a table costs what ARCHITECTURE.md promises (one listing), counted on MinIO."""

from __future__ import annotations

import json
import random
import uuid
from pathlib import Path

import pytest

from deltakeeper.delta import paths
from deltakeeper.delta.checkpoint import checkpoint_table
from deltakeeper.delta.errors import DeltaError
from deltakeeper.delta.storage import S3Storage
from deltakeeper.delta.table import open_table
from tests.conftest import CORPUS
from tests.support import stores
from tests.support.compare import EVERY_VERSION, check_against_oracles, ours, state
from tests.support.oracles import table_versions


@pytest.fixture(params=["minio", "azurite", "fake_gcs"])
def store(request):
    return request.getfixturevalue(request.param)


def test_corpus_tables_read_the_same_as_on_disk(store, tally):
    prefix = f"corpus-{uuid.uuid4().hex[:8]}"
    checked = 0
    for table in sorted(p.name for p in CORPUS.iterdir() if p.is_dir()):
        local = CORPUS / table
        uri = store.uri(f"{prefix}/{table}")
        store.upload_folder(local, uri)
        versions = table_versions(str(local)) if (local / "_delta_log").is_dir() else []
        wanted = versions if table in EVERY_VERSION else [None]
        for version in wanted:
            assert state(uri, store.storage_options, version) == state(str(local), {}, version), (
                f"{store.name}: {table}@{version}"
            )
            checked += 1
    tally[f"{store.name} table-versions matching disk"] += checked
    assert checked >= 45


def test_spark_tables_with_sidecars_and_multipart_checkpoints(minio):
    from tests.support.spark import ensure_tables

    tables = ensure_tables()
    for name in ("v2_checkpoint_sidecars", "multipart_checkpoint", "dv"):
        uri = minio.uri(f"spark-{uuid.uuid4().hex[:8]}/{name}")
        minio.upload_folder(tables[name], uri)
        for version in table_versions(tables[name]):
            assert state(uri, minio.storage_options, version) == state(tables[name], {}, version)


# -- cost ---------------------------------------------------------------------------------------


def _commit(version: int) -> bytes:
    lines = [{"commitInfo": {"timestamp": 1_700_000_000_000 + version, "operation": "WRITE"}}]
    if version == 0:
        schema = {
            "type": "struct",
            "fields": [{"name": "id", "type": "long", "nullable": True, "metadata": {}}],
        }
        lines += [
            {"protocol": {"minReaderVersion": 1, "minWriterVersion": 2}},
            {
                "metaData": {
                    "id": "cost",
                    "format": {"provider": "parquet", "options": {}},
                    "schemaString": json.dumps(schema),
                    "partitionColumns": [],
                    "configuration": {},
                }
            },
        ]
    lines.append(
        {
            "add": {
                "path": f"part-{version:05d}.parquet",
                "partitionValues": {},
                "size": 10,
                "modificationTime": 1,
                "dataChange": True,
            }
        }
    )
    return b"".join(json.dumps(x).encode() + b"\n" for x in lines)


@pytest.fixture(scope="module")
def long_table(minio, tmp_path_factory) -> str:
    """10,000 commits and a checkpoint at the last one, written with delta-rs's checkpointer."""
    import deltalake

    local = tmp_path_factory.mktemp("long") / "t"
    log = local / "_delta_log"
    log.mkdir(parents=True)
    for v in range(10_000):
        (log / paths.commit(v)).write_bytes(_commit(v))
    deltalake.DeltaTable(str(local)).create_checkpoint()
    assert (log / paths.checkpoint(9_999)).exists()
    uri = minio.uri(f"long-{uuid.uuid4().hex[:8]}/t")
    assert minio.upload_folder(local, uri) >= 10_002
    return uri


def test_checking_a_quiet_table_costs_at_most_two_requests(minio, long_table):
    table = open_table(long_table, minio.storage_options)
    table.storage.requests.clear()
    assert table.latest_version() == 9_999
    # the target is at most 2; exactly: _last_checkpoint, then one listing from the checkpoint
    assert dict(table.storage.requests) == {"read": 1, "list": 1}

    snap = table.snapshot()
    assert snap.num_files == 10_000
    table.storage.requests.clear()
    assert table.update(snap) is snap
    assert dict(table.storage.requests) == {"list": 1}


@pytest.mark.parametrize("k", [1, 5, 20])
def test_k_new_commits_cost_at_most_k_plus_two(minio, long_table, k):
    table = open_table(long_table, minio.storage_options)
    snap = table.snapshot()
    for v in range(snap.version + 1, snap.version + 1 + k):
        table.storage.put_if_absent(f"{paths.LOG_DIR}/{paths.commit(v)}", _commit(v))
    table.storage.requests.clear()
    newer = table.update(snap)
    cost = sum(table.storage.requests.values())
    assert newer.version == snap.version + k and newer.num_files == snap.num_files + k
    assert cost <= k + 2, dict(table.storage.requests)
    assert dict(table.storage.requests) == {"list": 1, "read": k}

    fresh = open_table(long_table, minio.storage_options)
    fresh.storage.requests.clear()
    assert fresh.latest_version() == snap.version + k
    assert dict(fresh.storage.requests) == {"read": 1, "list": 1}


# -- a quiet poll, counted by the stores themselves -----------------------------------------------

QUIET_COMMITS = 6_000  # longer than a listing page everywhere (S3, GCS 1000; Azure 5000)


@pytest.fixture(scope="module", params=["minio", "azurite", "fake_gcs"])
def quiet_table(request, tmp_path_factory) -> tuple[stores.Emulator, str]:
    """A log of QUIET_COMMITS commits and a checkpoint at the last, on each store."""
    import deltalake

    store: stores.Emulator = request.getfixturevalue(request.param)
    local = tmp_path_factory.mktemp("quiet") / "t"
    log = local / "_delta_log"
    log.mkdir(parents=True)
    for v in range(QUIET_COMMITS):
        (log / paths.commit(v)).write_bytes(_commit(v))
    deltalake.DeltaTable(str(local)).create_checkpoint()
    uri = store.uri(f"quiet-{uuid.uuid4().hex[:8]}/t")
    assert store.upload_folder(local, uri) >= QUIET_COMMITS + 2
    return store, uri


def test_a_quiet_poll_is_one_list_request_on_every_store(quiet_table):
    """Table.update of a table with no new commit: one LIST, however long the log, as the
    store itself counts it (MinIO's metrics, Azurite's log, the GCS gateway's log)."""
    store, uri = quiet_table
    table = open_table(uri, store.storage_options)
    snap = table.snapshot()
    assert snap.version == QUIET_COMMITS - 1
    full = open_table(uri, store.storage_options)
    full.storage.requests.clear()
    full.list_log()  # the whole log: more than one page
    assert full.storage.requests["list"] >= 2
    table.storage.requests.clear()
    before = store.requests()
    for _ in range(10):
        assert table.update(snap) is snap
    served = store.requests() - before
    assert dict(table.storage.requests) == {"list": 10}
    assert dict(served) == {"list": 10}, served


# -- a checkpoint larger than one upload part -----------------------------------------------------


def _many_files_table(log: Path, files: int) -> None:
    """Commit 0: protocol, metadata and `files` adds with random paths and stats, so the
    checkpoint is several MiB that do not compress away."""
    rng = random.Random(11)
    lines = [json.loads(line) for line in _commit(0).splitlines()[:3]]
    for i in range(files):
        low, high = sorted(rng.randrange(-(2**62), 2**62) for _ in range(2))
        stats = {"numRecords": high % 10**6, "minValues": {"id": low}, "maxValues": {"id": high}}
        name = f"{rng.getrandbits(448):0112x}"
        lines.append(
            {
                "add": {
                    "path": f"part-{i:06d}-{name}.parquet",
                    "partitionValues": {},
                    "size": rng.randrange(1, 10**9),
                    "modificationTime": 1_700_000_000_000 + i,
                    "dataChange": True,
                    "stats": json.dumps(stats),
                }
            }
        )
    log.mkdir(parents=True)
    (log / paths.commit(0)).write_text("".join(json.dumps(x) + "\n" for x in lines))


def test_a_checkpoint_larger_than_a_part_is_streamed_to_minio_and_readers_agree(
    minio, tmp_path, tally
):
    """On S3 a checkpoint goes up as a multipart upload, part by part while it is written, not
    held whole in memory: the object is the same bytes as on local disk, and delta-rs and
    DuckDB read the table from it (the commit it replaces removed) as deltakeeper does."""
    local = tmp_path / "local"
    _many_files_table(local / "_delta_log", 60_000)
    uri = minio.uri(f"big-{uuid.uuid4().hex[:8]}/t")
    minio.upload_folder(local, uri)
    now = 1_800_000_000_000

    table = open_table(uri, minio.storage_options)
    table.storage.requests.clear()
    result = checkpoint_table(table, None, now, 7 * 86_400_000)
    parts = -(-result.size_bytes // S3Storage.PART_BYTES)
    assert result.version == 0 and result.adds == 60_000 and parts >= 2, result
    # create, the parts, complete; then one PUT of _last_checkpoint
    assert table.storage.requests["put"] == parts + 3, dict(table.storage.requests)
    uploads = minio.fs.call_s3("list_multipart_uploads", Bucket=minio.bucket)
    assert not uploads.get("Uploads"), "an upload left unfinished"

    on_disk = checkpoint_table(open_table(str(local)), None, now, 7 * 86_400_000)
    key = f"{paths.LOG_DIR}/{paths.checkpoint(0)}"
    assert on_disk.size_bytes == result.size_bytes
    assert table.storage.read(key) == (local / key).read_bytes()

    back = tmp_path / "back"
    minio.fs.get(f"{uri.split('://', 1)[1]}/_delta_log", str(back / "_delta_log"), recursive=True)
    (back / key).with_name(paths.commit(0)).unlink()  # readers must use the checkpoint
    mine = ours(back, None)
    assert not isinstance(mine, DeltaError), mine
    assert mine["numFiles"] == 60_000 and mine["lastCheckpointVersion"] == 0
    assert check_against_oracles(mine, back, None, tally) == ["delta-rs", "duckdb"]
