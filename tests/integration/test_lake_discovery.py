"""discover() on MinIO and the local disk: a lake of 200 tables at mixed depths (partitioned ones
with deep partition folders, a table nested in another, an empty `_delta_log`, non-Delta
folders full of files, a few real delta-rs tables). Exactly the right tables are found, delta-rs
agrees on what is a table, and a scan's requests follow the folders above table roots, not the
data files. Azure and GCS list folders too (a small lake each)."""

from __future__ import annotations

import asyncio
import json
import shutil
from collections.abc import Iterator
from pathlib import Path

import pyarrow as pa
import pytest
from deltalake import DeltaTable, write_deltalake
from deltalake.exceptions import TableNotFoundError

from deltakeeper.cli import main
from deltakeeper.delta.discover import discover
from deltakeeper.delta.storage import open_storage
from tests.support import stores
from tests.support.logbuilder import add, commit_info, metadata, protocol

COMMIT = "\n".join(json.dumps(a) for a in (protocol(), metadata(), commit_info())) + "\n"


def _commit(root: Path, rel: str, files: int = 0, partitions: int = 0) -> None:
    """A minimal valid table: one commit (protocol, metadata, adds), and its data files."""
    table = root / rel
    (table / "_delta_log").mkdir(parents=True)
    adds = []
    for i in range(files):
        folder = "/".join(f"p{d}={i % 3}" for d in range(partitions))
        name = f"{folder}/part-{i:05d}.parquet" if folder else f"part-{i:05d}.parquet"
        (table / name).parent.mkdir(parents=True, exist_ok=True)
        (table / name).write_bytes(b"x")
        adds.append(json.dumps(add(name, size=1)))
    text = COMMIT + "".join(a + "\n" for a in adds)
    (table / "_delta_log" / "00000000000000000000.json").write_text(text)


def build_lake(root: Path) -> tuple[set[str], set[str]]:
    """The lake; returns (tables at depth <= 3, tables only max_depth=4 finds)."""
    tables: set[str] = set()
    for i in range(60):
        tables.add(f"t{i:03d}")
    for i in range(60):
        tables.add(f"sales/s{i:03d}")
    for i in range(37):
        tables.add(f"ops/o{i:02d}")
    for region in range(4):
        for i in range(10):
            tables.add(f"raw/region{region}/r{i:02d}")
    for rel in sorted(tables):
        partitioned = rel in {f"sales/s{i:03d}" for i in range(5)}
        data = 60 if partitioned else (20 if rel.startswith("t00") else 0)
        _commit(root, rel, files=data, partitions=4 if partitioned else 0)
    for i in range(3):  # real delta-rs tables, partitioned
        rel = f"real/rs{i}"
        batch = pa.table({"id": list(range(20)), "day": [f"d{j % 4}" for j in range(20)]})
        write_deltalake(str(root / rel), batch, partition_by=["day"])
        tables.add(rel)
    _commit(root, "ops/o00/nested")  # inside a table: that table's data
    empty = root / "ops" / "empty" / "_delta_log"  # a log with no commit yet
    empty.mkdir(parents=True)
    (empty / "_last_checkpoint").write_text("{}")
    (empty / ".00000000000000000000.json.3f2a0bd6-7cfc-4c3a-9a9b-2d8e8a1d5b7e.tmp").write_text("")
    for folder in ("landing", "landing/archive"):  # non-Delta folders full of files
        (root / folder).mkdir(parents=True, exist_ok=True)
        for i in range(400):
            (root / folder / f"event-{i:04d}.csv").write_text("a,b\n")
    _commit(root, "_scratch/hidden")  # '_' folders are not entered
    _commit(root, "raw/deep/a/b")  # depth 4
    assert len(tables) == 200
    return tables, {"raw/deep/a/b"}


def folders_above_roots(root: Path, tables: set[str], max_depth: int) -> int:
    """Folders a scan may list: not inside a table, not hidden, at most max_depth deep."""
    count = 0
    for folder in [root, *root.rglob("*")]:
        rel = folder.relative_to(root).as_posix()
        parts = [] if rel == "." else rel.split("/")
        if not folder.is_dir() or len(parts) > max_depth:
            continue
        if any(p.startswith(("_", ".")) for p in parts):
            continue
        inside = any(rel.startswith(t + "/") for t in tables | {"ops/o00"})
        if not inside and rel not in tables:
            count += 1
    return count


@pytest.fixture(scope="module")
def lake(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, set[str], set[str]]:
    root = tmp_path_factory.mktemp("discovery") / "lake"
    tables, deep = build_lake(root)
    return root, tables, deep


@pytest.fixture(scope="module")
def on_minio(minio: stores.Emulator, lake: tuple[Path, set[str], set[str]]) -> str:
    uri = minio.uri("discovery/lake")
    minio.upload_folder(lake[0], uri)
    return uri


def test_local_finds_exactly_the_tables(lake: tuple[Path, set[str], set[str]]) -> None:
    root, tables, deep = lake
    scan = discover(open_storage(str(root)))
    assert set(scan.tables) == tables
    assert scan.empty_logs == ("ops/empty",)
    assert set(discover(open_storage(str(root)), max_depth=4).tables) == tables | deep
    bound = folders_above_roots(root, tables, 3)
    assert scan.requests <= 2 * bound + len(tables)
    assert scan.requests == scan.folders_listed + scan.logs_checked


def test_delta_rs_agrees_on_what_is_a_table(lake: tuple[Path, set[str], set[str]]) -> None:
    root, tables, _ = lake
    for rel in [*sorted(tables)[::10], "real/rs0", "sales/s000"]:
        assert DeltaTable(str(root / rel)).version() >= 0, rel
    for rel in ("ops/empty", "landing", "sales"):
        with pytest.raises(TableNotFoundError):
            DeltaTable(str(root / rel))


def test_minio_finds_exactly_the_tables(
    minio: stores.Emulator, on_minio: str, lake: tuple[Path, set[str], set[str]]
) -> None:
    root, tables, _ = lake
    storage = open_storage(on_minio, minio.storage_options)
    scan = discover(storage)
    assert set(scan.tables) == tables
    assert scan.empty_logs == ("ops/empty",)
    # One request per folder listed and per log looked into; no folder listed here holds
    # 1,000 entries, so no second pages.
    assert scan.requests == scan.folders_listed + scan.logs_checked
    assert storage.requests == {"list": scan.requests}
    bound = folders_above_roots(root, tables, 3)
    assert scan.requests <= 2 * bound + len(tables)  # a folder: log and listing; a table: log
    # The same as on the local disk, request for request: both list the same folders.
    assert scan.requests == discover(open_storage(str(root))).requests


def test_requests_do_not_follow_data_files(
    minio: stores.Emulator, on_minio: str, lake: tuple[Path, set[str], set[str]]
) -> None:
    before = discover(open_storage(on_minio, minio.storage_options))
    # More than a listing page of data files in an unpartitioned table's root
    bucket_path = on_minio.split("://", 1)[1]
    extra = {f"{bucket_path}/t000/part-{i:05d}-more.parquet": b"x" for i in range(1100)}
    minio.fs.pipe(extra, batch_size=64)
    try:
        after = discover(open_storage(on_minio, minio.storage_options))
        assert after.tables == before.tables
        assert after.requests == before.requests  # 1,100 more data files, not one more request
        naive = open_storage(on_minio, minio.storage_options)
        objects = sum(1 for _ in naive.walk())
        assert objects > 2500
        assert naive.requests["list"] == -(-objects // 1000)  # a recursive listing pages them all
    finally:
        minio.fs.rm(list(extra))


def test_patterns_on_minio(minio: stores.Emulator, on_minio: str) -> None:
    storage = open_storage(on_minio, minio.storage_options)
    sales = discover(storage, include=["sales/*"], exclude=["sales/s00*"])
    assert len(sales.tables) == 50 and all(t.startswith("sales/s") for t in sales.tables)
    # only the root and sales/ (log, listing) and the 50 wanted tables' logs were asked
    # about: the patterns prune t*, ops/, raw/... and sales/s00* before they are visited
    assert sales.requests == 2 + 2 + 50
    assert sales.excluded == 0


def test_cli_on_minio_and_an_unreachable_endpoint(
    minio: stores.Emulator, on_minio: str, capsys: pytest.CaptureFixture[str]
) -> None:
    options = [f"--storage-option={k}={v}" for k, v in minio.storage_options.items()]
    assert main(["discover", on_minio, "--json", "--include", "real/*", *options]) == 0
    body = json.loads(capsys.readouterr().out)
    assert [t["uri"] for t in body["tables"]] == [f"{on_minio}/real/rs{i}" for i in range(3)]
    port = stores.free_port()
    bad = [o for o in options if "endpoint_url" not in o]
    bad.append(f"--storage-option=endpoint_url=http://127.0.0.1:{port}")
    code = main(["discover", "s3://nowhere/lake", "--json", *bad])
    out, err = capsys.readouterr()
    assert code == 4, err
    assert json.loads(out)["error"] == "StorageUnreachable"
    assert "s3://nowhere/lake" in err
    assert minio.secret not in out + err


@pytest.fixture
def small_lake(tmp_path: Path) -> Iterator[Path]:
    root = tmp_path / "small"
    for rel in ("a", "b/c", "b/d/e"):
        _commit(root, rel, files=3, partitions=1)
    (root / "b" / "notes").mkdir()
    (root / "b" / "notes" / "readme.txt").write_text("x")
    yield root
    shutil.rmtree(root)


@pytest.mark.parametrize("store", ["azurite", "fake_gcs"])
def test_other_stores_list_folders(
    store: str, small_lake: Path, request: pytest.FixtureRequest
) -> None:
    emu: stores.Emulator = request.getfixturevalue(store)
    uri = emu.uri("discovery/small")
    emu.upload_folder(small_lake, uri)
    storage = open_storage(uri, emu.storage_options)
    assert storage.list_folders("b") == ["c", "d", "notes"]
    scan = discover(storage)
    assert scan.tables == ("a", "b/c", "b/d/e")
    assert scan.requests == scan.folders_listed + scan.logs_checked == 4 + 7


def test_standalone_scans_a_lake_on_minio_with_a_secret(
    minio: stores.Emulator, small_lake: Path, tmp_path: Path
) -> None:
    from deltakeeper.resources.lake import table_name
    from deltakeeper.runtime.metrics import Metrics
    from deltakeeper.standalone import tables as standalone
    from tests.support.standalone import cycle

    uri = minio.uri("discovery/standalone")
    minio.upload_folder(small_lake, uri)
    folder = tmp_path / "manifests"
    folder.mkdir()
    secret = {
        "apiVersion": "v1",
        "kind": "Secret",
        "metadata": {"name": "creds", "namespace": "data"},
        "stringData": {
            "AWS_ACCESS_KEY_ID": minio.storage_options["key"],
            "AWS_SECRET_ACCESS_KEY": minio.storage_options["secret"],
        },
    }
    lake = {
        "apiVersion": "deltakeeper.io/v1alpha1",
        "kind": "DeltaLake",
        "metadata": {"name": "minio", "namespace": "data"},
        "spec": {
            "uri": uri,
            "storage": {
                "secretRef": {"name": "creds"},
                "options": {"endpoint_url": minio.storage_options["endpoint_url"]},
            },
            "tableTemplate": {"vacuum": {"enabled": False}},
        },
    }
    (folder / "lake.json").write_text(json.dumps(lake))
    (folder / "secret.json").write_text(json.dumps(secret))
    daemon = standalone.Standalone(folder, folder / "status.json", Metrics())
    try:
        asyncio.run(cycle(daemon))
    finally:
        daemon.fleet.close()
    body = json.loads((folder / "status.json").read_text())
    names = {f"data/{table_name(p, 'minio')}": p for p in ("a", "b/c", "b/d/e")}
    assert set(body["tables"]) == set(names)
    for name, path in names.items():
        table = body["tables"][name]
        assert table["discovery"]["path"] == path
        assert table["version"] == 0
        ready = {c["type"]: c["status"] for c in table["conditions"]}["Ready"]
        assert ready == "True", table["conditions"]
    scan = body["lakes"]["data/minio"]["lastScan"]
    assert scan["result"] == "ok" and scan["requests"] == 11
    assert minio.secret not in (folder / "status.json").read_text()
