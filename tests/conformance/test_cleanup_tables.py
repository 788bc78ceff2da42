"""Metadata cleanup on real tables: what stays reads exactly as before, in every oracle."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from deltakeeper.cli import main
from deltakeeper.delta import paths
from deltakeeper.delta.errors import DeltaError
from tests.conformance.test_checkpoint_write import checkpoint, readable_tables
from tests.support.compare import check_against_oracles, ours
from tests.support.oracles import table_versions

DAY = 86_400_000
BASE = 1_600_000_000_000  # 2020-09-13


def one_commit_a_day(path: Path) -> None:
    """Give a copied table the file times of a real history: version v committed on day v."""
    for f in (path / "_delta_log").iterdir():
        name = paths.parse(f.name)
        if name is not None and name.version >= 0:
            ns = (BASE + name.version * DAY) * 1_000_000
            os.utime(f, ns=(ns, ns))


def cleanup(capsys, path: Path, now_ms: int, *flags: str) -> dict:
    code = main(["cleanup", str(path), "--now", str(now_ms), "--json", *flags])
    out, err = capsys.readouterr()
    assert code == 0, err
    return json.loads(out)


@pytest.mark.parametrize("name", readable_tables())
def test_checkpoint_then_cleanup_keeps_the_latest_state(name, corpus_copy, capsys, tally):
    path = corpus_copy(name)
    one_commit_a_day(path)
    before = ours(path, None)
    latest = checkpoint(path).version
    far_future = BASE + (latest + 400) * DAY
    dry = cleanup(capsys, path, far_future, "--dry-run")
    listed = sorted(p.name for p in (path / "_delta_log").rglob("*") if p.is_file())
    has_commit = (path / "_delta_log" / paths.commit(latest)).exists()
    report = cleanup(capsys, path, far_future)
    # a log with no commit files (cleaned by another tool) has no cut-off commit: nothing goes
    assert report["checkpointVersion"] == (latest if has_commit else None)
    left = sorted(p.name for p in (path / "_delta_log").rglob("*") if p.is_file())
    assert len(listed) - len(left) == report["deletedFiles"] == len(dry["files"])
    assert paths.checkpoint(latest) in left and (paths.commit(latest) in left or not has_commit)
    assert not any((p := paths.parse(n)) and 0 <= p.version < latest for n in left)
    after = ours(path, None)
    assert not isinstance(after, DeltaError), after
    assert after["files"] == before["files"] and after["version"] == before["version"]
    assert check_against_oracles(after, path, None, tally) == ["delta-rs", "duckdb"]
    tally["tables cleaned and re-read by both oracles"] += 1


@pytest.mark.spark
def test_retention_window_keeps_time_travel_inside_it(tmp_path, capsys, tally):
    from tests.support.spark import copy_table, ensure_tables

    path = copy_table(ensure_tables()["partitioned_many_commits"], tmp_path / "t")
    one_commit_a_day(path)
    versions = table_versions(str(path))
    before = {v: ours(path, v) for v in versions}
    latest = versions[-1]
    # 15 days of retention, a day after the last commit: the cut-off commit is latest - 14
    now = BASE + (latest + 1) * DAY
    report = cleanup(capsys, path, now, "--log-retention", "15d")
    cutoff_checkpoint = report["checkpointVersion"]
    assert cutoff_checkpoint is not None
    assert cutoff_checkpoint <= report["cutoffCommit"] <= latest - 14
    assert report["deletedFiles"] > 0
    kept = table_versions(str(path))
    assert kept[0] == cutoff_checkpoint and kept[-1] == latest
    for v in range(report["cutoffCommit"], latest + 1):
        assert v in kept
        after = ours(path, v)
        assert not isinstance(after, DeltaError), after
        assert after["files"] == before[v]["files"], v
        assert check_against_oracles(after, path, v, tally) == ["delta-rs", "duckdb"]
        tally["versions inside retention re-read after cleanup"] += 1


def test_disabled_cleanup_deletes_nothing(tmp_path, capsys):
    from tests.support.logbuilder import LogBuilder, add, metadata, protocol

    b = LogBuilder(tmp_path)
    b.commit(protocol(), metadata(**{"delta.enableExpiredLogCleanup": "false"}), add("a"))
    for i in range(3):
        b.commit(add(f"f{i}"))
    checkpoint(tmp_path)
    one_commit_a_day(tmp_path)
    report = cleanup(capsys, tmp_path, BASE + 1000 * DAY)
    assert report["deletedFiles"] == 0 and "disabled" in report["reasons"][0]
    assert len(list((tmp_path / "_delta_log").glob("*.json"))) == 4
