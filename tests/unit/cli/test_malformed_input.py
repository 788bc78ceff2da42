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
