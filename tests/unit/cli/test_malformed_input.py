"""Hostile input that must stop one command, or one step, and nothing else (issue 49, section
2, items 5, 9 and 10): malformed actions in a commit, files and folders where the other is
expected, a NUL in a partition value, unparseable vacuum records and inventories. Each case
asserts the exit code, a message naming what is wrong, and that nothing was left behind or
deleted."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.support.cli import run
from tests.support.logbuilder import LogBuilder, add, metadata, protocol
from tests.support.tables import daily_table

BAD_COMMIT = "00000000000000000003.json"
MANIFESTS = {"delta.compatibility.symlinkFormatManifest.enabled": "true"}


def files_under(root: Path) -> set[str]:
    return {p.relative_to(root).as_posix() for p in root.rglob("*")}


def malformed_table(root: Path, line: str) -> None:
    """Commits 0-3; commit 3 holds `line`, an action of the right name and the wrong shape."""
    b = LogBuilder(root)
    b.commit(protocol(), metadata(**MANIFESTS), add("a.parquet"))
    b.commit(add("b.parquet"))
    b.commit(add("c.parquet"))
    b.raw(BAD_COMMIT, line + "\n")


COMMANDS = [
    ["inspect"],
    ["checkpoint"],
    ["vacuum"],
    ["compute-stats"],
    ["manifest"],
    ["compact-log", "--from", "0", "--to", "3"],
    ["maintain"],
]


@pytest.mark.parametrize(
    "line",
    [
        '{"txn": "x"}',
        '{"domainMetadata": [1]}',
        '{"remove": {"path": "x", "deletionVector": 7}}',
        '{"metaData": 5}',
    ],
)
@pytest.mark.parametrize("command", COMMANDS, ids=lambda c: c[0])
def test_a_malformed_action_is_exit_2_naming_file_and_line(capsys, tmp_path, line, command):
    root = tmp_path / "t"
    malformed_table(root, line)
    before = files_under(root)
    code, out, err = run(capsys, command[0], str(root), *command[1:])
    assert code == 2, (out, err)
    assert f"{BAD_COMMIT}: line 1:" in err and "not an object" in err, err
    assert "Traceback" not in err and "AttributeError" not in err
    assert files_under(root) == before  # no compaction file, checkpoint or manifest written


# -- item 9: a folder where a file goes, a file where a folder goes, a NUL ----------------------


def temp_files(root: Path) -> list[str]:
    return [p.name for p in root.rglob("*") if p.name.endswith(".tmp")]


def test_last_vacuum_info_as_a_folder_refuses_the_vacuum_before_any_delete(capsys, tmp_path):
    root = tmp_path / "t"
    daily_table(root)  # f1.parquet, removed long ago, is due for deletion
    (root / "_delta_log" / "_last_vacuum_info").mkdir()
    before = files_under(root)
    code, out, err = run(capsys, "vacuum", str(root))
    assert code == 2, (out, err)
    assert "_last_vacuum_info is a folder" in err and "nothing deleted" in err, err
    assert files_under(root) == before and not temp_files(root)
    # maintain: the vacuum is refused under its own name, the steps that can run do
    code, out, err = run(capsys, "maintain", str(root), "--json")
    results = {r["operation"]: r for r in json.loads(out)["results"]}
    assert code == 2 and results["vacuum"]["result"] == "refused", out
    assert results["checkpoint"]["result"] == "done", out
    assert (root / "f1.parquet").exists() and not temp_files(root)


def manifest_table(root: Path, **pv: str) -> None:
    b = LogBuilder(root)
    partitions = tuple(pv)
    b.commit(protocol(), metadata(partitions, **MANIFESTS), add("a.parquet", **pv))


@pytest.mark.parametrize(
    ("make", "says"),
    [
        (lambda r: (r / "_symlink_format_manifest").write_text("x"), "is a file, where a folder"),
        (lambda r: (r / "_symlink_format_manifest" / "manifest").mkdir(parents=True), "a folder"),
    ],
    ids=["manifest-folder-is-a-file", "manifest-is-a-folder"],
)
@pytest.mark.parametrize("command", ["manifest", "maintain"])
def test_a_manifest_path_taken_by_the_other_kind_is_exit_2(capsys, tmp_path, make, says, command):
    root = tmp_path / "t"
    manifest_table(root)
    make(root)
    before = files_under(root)
    code, out, err = run(capsys, command, str(root))
    assert code == 2, (out, err)
    assert f"_symlink_format_manifest{'' if 'file' in says else '/manifest'}" in out + err
    assert says in out + err and "Traceback" not in err
    assert not temp_files(root)
    if command == "manifest":
        assert files_under(root) == before


@pytest.mark.parametrize("command", ["manifest", "maintain"])
def test_a_nul_partition_value_is_exit_2_naming_it(capsys, tmp_path, command):
    root = tmp_path / "t"
    manifest_table(root, day="\0")
    code, out, err = run(capsys, command, str(root))
    assert code == 2, (out, err)
    assert "a NUL character" in out + err and "embedded null byte" not in out + err
    assert not (root / "_symlink_format_manifest").exists() and not temp_files(root)


# -- item 5: an unparseable input stops its own step, under its own name, and nothing else ------


def deeply_nested(path: Path) -> None:
    path.write_text('{"a":' * 100_000 + "1" + "}" * 100_000)


@pytest.mark.parametrize("command", ["cleanup", "vacuum", "maintain"])
def test_a_deeply_nested_last_vacuum_info_is_read_as_corrupt(capsys, tmp_path, command):
    root = tmp_path / "t"
    daily_table(root)
    deeply_nested(root / "_delta_log" / "_last_vacuum_info")
    code, out, err = run(capsys, command, str(root), "--dry-run")
    assert code == 0, (out, err)
    assert "RecursionError" not in out + err


def bad_inventories(tmp_path: Path, root: Path) -> dict[str, tuple[str, str]]:
    """Each kind of inventory the issue names, as (URI, what the error says)."""
    import pyarrow as pa
    from deltalake import write_deltalake

    out = {}
    (tmp_path / "notpq.parquet").write_bytes(b"hello, not Parquet")
    out["not-parquet"] = (str(tmp_path / "notpq.parquet"), "not a Parquet file")
    dest = tmp_path / "dest"
    (dest / "data").mkdir(parents=True)
    (dest / "data" / "x.csv").write_text(f'"b","{root}/f1.parquet","100","yesterday"\n')
    manifest = {
        "sourceBucket": "b",
        "destinationBucket": f"arn:aws:s3:::{dest}",
        "fileFormat": "CSV",
        "fileSchema": "Bucket, Key, Size, LastModifiedDate",
        "files": [{"key": "data/x.csv"}],
    }
    cases = {
        "no-files": {k: v for k, v in manifest.items() if k != "files"},
        "no-bucket": {**manifest, "destinationBucket": f"arn:aws:s3:::{tmp_path}/nope"},
        "csv-yesterday": manifest,
        "dot-dot": {**manifest, "files": [{"key": "../../../../etc/passwd"}]},
    }
    says = {
        "no-files": "is not an S3 Inventory manifest",
        "no-bucket": "data/x.csv not found",
        "csv-yesterday": "LastModifiedDate 'yesterday'",
        "dot-dot": "lies outside the destination bucket",
    }
    for name, body in cases.items():
        (tmp_path / name).mkdir()
        (tmp_path / name / "manifest.json").write_text(json.dumps(body))
        out[name] = (f"file://{tmp_path / name}/manifest.json", says[name])
    table = pa.table(
        {
            "path": [f"file:{root}/f1.parquet"],
            "length": pa.array([100], pa.int64()),
            "isDir": [False],
            "modificationTime": pa.array([0], pa.int64()),
        }
    )
    write_deltalake(str(tmp_path / "inv-table"), table)
    for data in (tmp_path / "inv-table").glob("*.parquet"):
        data.unlink()
    out["table-file-gone"] = (str(tmp_path / "inv-table"), "not found")
    return out


INVENTORY_CASES = [
    "not-parquet",
    "no-files",
    "no-bucket",
    "csv-yesterday",
    "dot-dot",
    "table-file-gone",
]


@pytest.mark.parametrize("case", INVENTORY_CASES)
def test_an_unreadable_inventory_is_exit_2_and_stops_only_the_vacuum(capsys, tmp_path, case):
    root = tmp_path / "t"
    daily_table(root)
    uri, says = bad_inventories(tmp_path, root)[case]
    before = files_under(root)
    code, out, err = run(capsys, "vacuum", str(root), "--inventory", uri)
    assert code == 2, (out, err)
    assert f"inventory {uri}" in err and says in err, err
    assert files_under(root) == before
    code, out, err = run(capsys, "maintain", str(root), "--inventory", uri, "--json")
    results = {r["operation"]: r for r in json.loads(out)["results"]}
    assert code == 2, (out, err)
    assert results["vacuum"]["result"] in ("refused", "failed") and says in out, out
    assert results["checkpoint"]["result"] == "done", out
    assert (root / "f1.parquet").exists()
