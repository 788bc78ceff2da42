"""Hostile input that must stop one command, or one step, and nothing else (issue 49, section
2, items 5, 9 and 10): malformed actions in a commit, files and folders where the other is
expected, a NUL in a partition value, unparseable vacuum records and inventories. Each case
asserts the exit code, a message naming what is wrong, and that nothing was left behind or
deleted."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.support.cli import run
from tests.support.logbuilder import LogBuilder, add, metadata, protocol

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
