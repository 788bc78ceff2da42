"""delta/log_compaction.py: commits x..y reconciled into `<x>.<y>.compacted.json`."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from deltakeeper.cli import main
from deltakeeper.delta.errors import InvalidInputError
from deltakeeper.delta.log_compaction import compact_log, due, ranges
from deltakeeper.delta.table import open_table
from tests.support.logbuilder import LogBuilder, add, commit_info, dv, metadata, protocol, remove


def lines(path: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in path.read_text().splitlines()]


def protocol_example(root: Path) -> LogBuilder:
    """PROTOCOL.md's example: commits 4, 5 and 6 of a table."""
    b = LogBuilder(root)
    b.commit(protocol(), metadata(), commit_info())
    for i in range(1, 4):
        b.commit(add(f"f{i}"), commit_info())
    b.commit(commit_info(), add("f2"), remove("f1"))  # 4
    txn = "3ae45b72-24e1-865a-a211-34987ae02f2a"
    b.commit(commit_info(), add("f3"), add("f4"), {"txn": {"appId": txn, "version": 4389}})
    b.commit(commit_info(), remove("f3"), {"txn": {"appId": txn, "version": 4390}})  # 6
    return b


def test_the_protocol_example(tmp_path: Path) -> None:
    protocol_example(tmp_path)
    done = compact_log(open_table(str(tmp_path)), 4, 6)
    assert done.written and not done.existed and done.actions == 5
    got = lines(tmp_path / "_delta_log" / f"{4:020d}.{6:020d}.compacted.json")
    assert [(k, b.get("path", b.get("version"))) for a in got for k, b in a.items()] == [
        ("txn", 4390),
        ("add", "f2"),
        ("add", "f4"),
        ("remove", "f1"),
        ("remove", "f3"),
    ]
    assert all("commitInfo" not in a for a in got)


def test_tables_level_actions_domains_and_deletion_vectors(tmp_path: Path) -> None:
    b = LogBuilder(tmp_path)
    b.commit(
        protocol(
            3,
            7,
            readerFeatures=["deletionVectors"],
            writerFeatures=["deletionVectors", "domainMetadata"],
        ),
        metadata(),
    )
    b.commit(
        add("a"), {"domainMetadata": {"domain": "d1", "configuration": "{}", "removed": False}}
    )
    b.commit(metadata(x="1"), remove("a"), add("a", dv=dv("u1")))  # a DV update: two keys
    b.commit({"domainMetadata": {"domain": "d1", "configuration": "{}", "removed": True}})
    compact_log(open_table(str(tmp_path)), 1, 3)
    got = lines(tmp_path / "_delta_log" / f"{1:020d}.{3:020d}.compacted.json")
    kinds = [next(iter(a)) for a in got]
    assert kinds == ["metaData", "domainMetadata", "add", "remove"]
    assert got[0]["metaData"]["configuration"] == {"x": "1"}
    assert got[1]["domainMetadata"]["removed"] is True  # an older domain stays removed
    assert got[2]["add"]["deletionVector"]["pathOrInlineDv"] == "u1"
    assert "deletionVector" not in got[3]["remove"]


def test_a_tombstone_past_the_retention_is_kept(tmp_path: Path) -> None:
    """Dropping it would bring back, for a reader of an older checkpoint and this file, a file
    added before the range."""
    b = LogBuilder(tmp_path)
    b.commit(protocol(), metadata(), add("old"))
    b.commit(add("x"))
    b.commit(remove("old", ts=1))  # removed in 1970: long expired
    compact_log(open_table(str(tmp_path)), 1, 2)
    got = lines(tmp_path / "_delta_log" / f"{1:020d}.{2:020d}.compacted.json")
    assert {"remove": remove("old", ts=1)["remove"]} in got


def test_unpublished_or_cleaned_commits_and_bad_ranges_are_refused(tmp_path: Path) -> None:
    protocol_example(tmp_path)
    table = open_table(str(tmp_path))
    with pytest.raises(InvalidInputError, match="commit 7 is not published"):
        compact_log(table, 5, 7)
    (tmp_path / "_delta_log" / f"{1:020d}.json").unlink()
    with pytest.raises(InvalidInputError, match="commit 1 is not published"):
        compact_log(table, 1, 3)
    with pytest.raises(InvalidInputError, match="at least two commits"):
        compact_log(table, 4, 4)
    assert not list((tmp_path / "_delta_log").glob("*.compacted.json"))


def test_an_existing_file_is_left_alone_and_a_dry_run_writes_nothing(tmp_path: Path) -> None:
    protocol_example(tmp_path)
    table = open_table(str(tmp_path))
    dry = compact_log(table, 4, 6, dry_run=True)
    assert not dry.written and dry.actions == 5
    assert not list((tmp_path / "_delta_log").glob("*.compacted.json"))
    target = tmp_path / "_delta_log" / f"{4:020d}.{6:020d}.compacted.json"
    target.write_text("{}\n")
    again = compact_log(table, 4, 6)
    assert again.existed and not again.written and target.read_text() == "{}\n"


def test_due_every_n_commits_as_kernel_does() -> None:
    assert [v for v in range(30) if due(v, 10)] == [9, 19, 29]
    assert not any(due(v, 1) for v in range(5)) and not due(0, 1)
    assert ranges(8, 20, 10) == [(0, 9), (10, 19)]
    assert ranges(9, 18, 10) == []


def test_the_command(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    protocol_example(tmp_path)
    assert main(["compact-log", str(tmp_path), "--from", "4", "--to", "6", "--json"]) == 0
    report = json.loads(capsys.readouterr().out)
    assert (report["from"], report["to"], report["actions"], report["written"]) == (4, 6, 5, True)
    assert main(["compact-log", str(tmp_path), "--from", "5", "--to", "9"]) == 2
    assert "commit 7 is not published" in capsys.readouterr().err
