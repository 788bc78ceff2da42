"""`compact-log` with a range the log cannot hold (issue 49, 2.1): refused at once, naming the
newest published commit, before anything is allocated per version of the range."""

from __future__ import annotations

import tracemalloc
from pathlib import Path

import pytest

from tests.support.cli import run
from tests.support.logbuilder import LogBuilder, add, commit_info, metadata, protocol

NEWEST = 6


def seven_commits(root: Path) -> None:
    b = LogBuilder(root)
    b.commit(protocol(), metadata(), commit_info())
    for i in range(1, NEWEST + 1):
        b.commit(add(f"f{i}"), commit_info())


@pytest.mark.parametrize(
    ("start", "end"),
    [("0", "99999999999999999999999"), ("99999999999999999999990", "99999999999999999999999")],
)
def test_an_absurd_to_is_refused_naming_the_newest_commit(
    capsys: pytest.CaptureFixture[str], tmp_path: Path, start: str, end: str
) -> None:
    seven_commits(tmp_path)
    code, out, err = run(capsys, "compact-log", str(tmp_path), "--from", start, "--to", end)
    assert code == 2, (out, err)
    assert f"newest published commit is {NEWEST}" in err, err
    assert not list((tmp_path / "_delta_log").glob("*.compacted.json"))


def test_a_range_past_the_log_allocates_nothing_per_version(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    seven_commits(tmp_path)
    tracemalloc.start()
    try:
        code, _, err = run(capsys, "compact-log", str(tmp_path), "--from", "0", "--to", "3000000")
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert code == 2, err
    assert f"newest published commit is {NEWEST}" in err, err
    # 3 million versions listed one by one would take over 100 MB.
    assert peak < 20_000_000, peak
