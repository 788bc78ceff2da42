"""The generic fsspec backend (delta/storage/fsspec.py) on memory://, an fsspec filesystem that
needs no server: every corpus table reads as it does on disk, at every version where the store
tests read every version; maintenance does what needs no create-only write (a classic
checkpoint, `_last_checkpoint`, cleanup, vacuum) and refuses, before writing it, what needs one
(a checksum file, a V2 checkpoint and its sidecars), with exit 2 and a message saying why."""

from __future__ import annotations

import uuid
from pathlib import Path

import fsspec
import pytest

from deltakeeper.cli import main
from deltakeeper.delta import paths
from deltakeeper.delta.storage import FsspecStorage, open_storage
from tests.support.cli import run
from tests.support.compare import EVERY_VERSION, state
from tests.support.logbuilder import LogBuilder, add, metadata, protocol
from tests.support.oracles import table_versions

NOW = "2030-01-01T00:00:00Z"


@pytest.fixture
def memory() -> fsspec.AbstractFileSystem:
    return fsspec.filesystem("memory")


def upload(fs: fsspec.AbstractFileSystem, local: Path) -> str:
    """Copy the table folder `local` into memory://; its URI there."""
    root = f"/deltakeeper-{uuid.uuid4().hex[:8]}/{local.name}"
    for p in sorted(local.rglob("*")):
        if p.is_file():
            fs.pipe_file(f"{root}/{p.relative_to(local).as_posix()}", p.read_bytes())
    return f"memory:/{root}"


def log_names(fs: fsspec.AbstractFileSystem, uri: str) -> list[str]:
    folder = uri.removeprefix("memory:/") + "/_delta_log"
    return sorted(name.rsplit("/", 1)[-1] for name in fs.ls(folder, detail=False))


def test_memory_uris_open_through_fsspec(memory, corpus):
    uri = upload(memory, corpus / "simple_table")
    storage = open_storage(uri)
    assert isinstance(storage, FsspecStorage)
    assert [f.key for f in storage.list_from("_delta_log", f"_delta_log/{paths.commit(2)}")] == [
        f"_delta_log/{paths.commit(3)}",
        f"_delta_log/{paths.commit(4)}",
    ]


def test_every_corpus_table_reads_through_memory_as_on_disk(memory, corpus, tally):
    checked = 0
    for local in sorted(p for p in corpus.iterdir() if p.is_dir()):
        uri = upload(memory, local)
        versions = table_versions(str(local)) if (local / "_delta_log").is_dir() else []
        for version in versions if local.name in EVERY_VERSION else [None]:
            assert state(uri, {}, version) == state(str(local), {}, version), (local.name, version)
            checked += 1
    tally["memory:// table-versions matching disk"] += checked


def test_maintenance_runs_where_no_create_only_write_is_needed(memory, corpus, capsys):
    uri = upload(memory, corpus / "simple_table")
    stray = uri.removeprefix("memory:/") + "/stray.parquet"
    memory.pipe_file(stray, b"not data")
    before = state(uri, {})
    assert main(["checkpoint", uri, "--now", NOW]) == 0  # classic: overwrites only
    # cleanup and vacuum: deletes; a FULL vacuum, since no commit names the stray
    assert main(["maintain", uri, "--now", NOW, "--mode", "full"]) == 0
    assert log_names(memory, uri) == [
        ".tmp",  # a folder the corpus copy has
        paths.checkpoint(4),
        paths.commit(4),
        paths.LAST_CHECKPOINT,
        paths.LAST_VACUUM_INFO,  # an overwrite, which needs no create-only write
    ]
    assert not memory.exists(stray)
    after = state(uri, {})
    assert isinstance(before, dict) and isinstance(after, dict)
    assert after["files"] == before["files"] and after["lastCheckpointVersion"] == 4
    capsys.readouterr()


def test_a_checksum_file_is_refused_without_a_create_only_write(memory, corpus, capsys):
    for argv in (["checkpoint"], ["maintain", "--checkpoint-interval", "1"]):
        uri = upload(memory, corpus / "simple_table")
        code, out, err = run(capsys, *argv, uri, "--now", NOW, "--write-checksum", "--json")
        assert code == 2, err
        assert "has no create-only write" in out + err  # maintain: in its step's result
        assert paths.crc(4) not in log_names(memory, uri)


def test_a_v2_checkpoint_is_refused_before_any_file_of_it_is_written(memory, tmp_path, capsys):
    local = tmp_path / "v2"
    log = LogBuilder(local)
    features = {"readerFeatures": ["v2Checkpoint"], "writerFeatures": ["v2Checkpoint"]}
    log.commit(protocol(3, 7, **features), metadata(**{"delta.checkpointPolicy": "v2"}))
    for i in range(3):
        log.commit(add(f"part-{i}.parquet"))
    uri = upload(memory, local)
    before = log_names(memory, uri)
    code, _out, err = run(capsys, "checkpoint", uri, "--now", NOW, "--json")
    assert code == 2, err
    assert "has no create-only write" in err
    assert log_names(memory, uri) == before  # no sidecar, no checkpoint, no hint
    assert not memory.exists(uri.removeprefix("memory:/") + "/_delta_log/_sidecars")
