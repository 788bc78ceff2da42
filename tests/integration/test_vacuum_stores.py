"""Vacuum modes on the object stores: a LITE vacuum on MinIO, Azurite and fake-gcs-server deletes
what it deletes on disk and lists no data folder; an INVENTORY vacuum on MinIO reads S3 Inventory
reports (CSV and Parquet) written here as S3 writes them: manifest.json in a dated folder, data
files in the destination bucket, URL-encoded keys in CSV only."""

from __future__ import annotations

import contextlib
import gzip
import io
import json
import shutil
import time
import uuid
from datetime import UTC, datetime
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from deltakeeper.cli import main
from deltakeeper.delta import paths
from tests.conftest import CORPUS

pytestmark = pytest.mark.integration

DAY = 86_400_000
NOW = int(time.time() * 1000) + 100 * DAY  # every tombstone and upload is past the retention
TABLE = "cdf-table"  # partitioned, removes and change data files


@pytest.fixture(params=["minio", "azurite", "fake_gcs"])
def store(request):
    return request.getfixturevalue(request.param)


def vacuum(uri: str, options: dict, *flags: str) -> tuple[int, dict]:
    argv = ["vacuum", uri, "--now", str(NOW), "--json", *flags]
    argv += [f"--storage-option={k}={v}" for k, v in options.items()]
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        code = main(argv)
    return code, json.loads(out.getvalue()) if out.getvalue() else {}


def test_lite_on_every_store_deletes_what_it_deletes_on_disk(store, tmp_path, tally):
    local = Path(shutil.copytree(CORPUS / TABLE, tmp_path / TABLE))
    uri = store.uri(f"lite-{uuid.uuid4().hex[:8]}/{TABLE}")
    store.upload_folder(local, uri)
    _, on_disk = vacuum(str(local), {}, "--mode", "lite")
    code, dry = vacuum(uri, store.storage_options, "--mode", "lite", "--dry-run")
    assert code == 0 and dry["files"] and on_disk["deletedFiles"] == len(dry["files"])
    # The store was listed once, in _delta_log: no data folder.
    assert dry["requests"]["list"] == 1 and dry["listedObjects"] == 0
    code, done = vacuum(uri, store.storage_options, "--mode", "lite")
    assert code == 0 and done["deletedFiles"] == len(dry["files"])
    bucket_path = uri.split("://", 1)[1]
    left = {p.split(bucket_path + "/", 1)[1] for p in store.fs.find(bucket_path)}
    assert not set(dry["files"]) & left
    info = store.fs.cat(f"{bucket_path}/{paths.LOG_DIR}/{paths.LAST_VACUUM_INFO}")
    assert info == (local / paths.LOG_DIR / paths.LAST_VACUUM_INFO).read_bytes()
    tally[f"LITE vacuums on {store.name}, equal to the local disk's"] += 1


# -- S3 Inventory on MinIO ------------------------------------------------------------------------
CSV_SCHEMA = "Bucket, Key, VersionId, IsLatest, IsDeleteMarker, Size, LastModifiedDate, ETag"


def objects(minio, uri: str) -> list[tuple[str, str, int, datetime]]:
    """(bucket, key, size, last modified) of every object below `uri`, as S3 lists them."""
    found = minio.fs.find(uri.split("://", 1)[1], detail=True)
    return [
        (*name.split("/", 1), info["size"], info["LastModified"].astimezone(UTC))
        for name, info in found.items()
    ]


def write_report(minio, source: str, rows, fmt: str, config: str) -> str:
    """An S3 Inventory report of `rows` for bucket `source`, in the `inventory` bucket; returns
    the configuration's folder (whose newest dated report deltakeeper reads)."""
    if not minio.fs.exists("inventory"):
        minio.create_bucket("inventory")
    base = f"inventory/{source}/{config}"
    name = f"data/{uuid.uuid4()}.{'csv.gz' if fmt == 'CSV' else 'parquet'}"
    if fmt == "CSV":
        lines = [
            ",".join(
                f'"{v}"'
                for v in (
                    bucket,
                    _s3_encoded(key),
                    "",
                    "true",
                    "false",
                    size,
                    when.strftime("%Y-%m-%dT%H:%M:%S.000Z"),
                    "etag",
                )
            )
            for bucket, key, size, when in rows
        ]
        minio.fs.pipe(f"{base}/{name}", gzip.compress("\n".join(lines).encode()))
    else:
        table = pa.table(
            {
                "bucket": [r[0] for r in rows],
                "key": [r[1] for r in rows],  # not encoded in Parquet reports
                "size": pa.array([r[2] for r in rows], pa.int64()),
                "last_modified_date": pa.array([r[3] for r in rows], pa.timestamp("ms", "UTC")),
            }
        )
        sink = io.BytesIO()
        pq.write_table(table, sink)
        minio.fs.pipe(f"{base}/{name}", sink.getvalue())
    manifest = {
        "sourceBucket": source,
        "destinationBucket": "arn:aws:s3:::inventory",
        "version": "2016-11-30",
        "creationTimestamp": str(int(time.time() * 1000)),
        "fileFormat": fmt,
        "fileSchema": CSV_SCHEMA if fmt == "CSV" else "message s3.inventory { ... }",
        "files": [{"key": f"{source}/{config}/{name}", "size": 1, "MD5checksum": "x"}],
    }
    minio.fs.pipe(f"{base}/2020-01-01T00-00Z/manifest.json", b"{}")  # an older, broken report
    minio.fs.pipe(f"{base}/2026-01-01T00-00Z/manifest.json", json.dumps(manifest).encode())
    return f"s3://{base}/"


def _s3_encoded(key: str) -> str:
    from urllib.parse import quote_plus

    return quote_plus(key, safe="/")


@pytest.mark.parametrize("fmt", ["CSV", "Parquet"])
def test_an_s3_inventory_report_replaces_the_listing(minio, tmp_path, fmt, tally):
    local = Path(shutil.copytree(CORPUS / TABLE, tmp_path / TABLE))
    (local / "stray old+%.parquet").write_bytes(b"stray")  # no commit names it
    prefix = f"inv-{uuid.uuid4().hex[:8]}"
    uri, other = minio.uri(f"{prefix}/{TABLE}"), minio.uri(f"{prefix}/other")
    minio.upload_folder(local, uri)
    minio.upload_folder(CORPUS / "simple_table", other)
    rows = objects(minio, uri) + objects(minio, other)
    folder = write_report(minio, "lake", rows, fmt, f"cfg-{fmt}")
    recent = uri.split("://", 1)[1] + "/recent.parquet"
    minio.fs.pipe(recent, b"written after the report")
    opts = minio.storage_options
    code, dry = vacuum(uri, opts, "--inventory", folder, "--dry-run")
    assert code == 0 and dry["mode"] == "inventory", dry
    _, full = vacuum(uri, opts, "--mode", "full", "--dry-run")
    assert set(full["files"]) - set(dry["files"]) == {"recent.parquet"}
    assert "stray old+%.parquet" in dry["files"]
    assert dry["listedObjects"] == len(rows) and dry["lastVacuumInfo"]["after"] is None
    assert any("2026-01-01T00-00Z/manifest.json" in r for r in dry["reasons"])
    code, done = vacuum(uri, opts, "--inventory", folder)
    assert code == 0 and done["deletedFiles"] == len(dry["files"])
    assert minio.fs.exists(recent)
    tally["S3 Inventory vacuums on MinIO"] += 1


def test_a_report_of_another_bucket_or_prefix_is_a_clear_error(minio, tmp_path):
    prefix = f"inv-{uuid.uuid4().hex[:8]}"
    uri, other = minio.uri(f"{prefix}/{TABLE}"), minio.uri(f"{prefix}/other")
    minio.upload_folder(CORPUS / TABLE, uri)
    minio.upload_folder(CORPUS / "simple_table", other)
    opts = minio.storage_options
    elsewhere = write_report(minio, "elsewhere", objects(minio, uri), "CSV", "cfg-bucket")
    wrong = write_report(minio, "lake", objects(minio, other), "CSV", "cfg-prefix")
    for report, message in ((elsewhere, "covers bucket elsewhere, not lake"), (wrong, "prefix")):
        out = io.StringIO()
        with contextlib.redirect_stderr(out):
            code, _ = vacuum(uri, opts, "--inventory", report)
        assert code == 2 and message in out.getvalue(), out.getvalue()
        assert minio.secret not in out.getvalue()
    assert "does not cover the table's prefix" in out.getvalue()
