"""`deltakeeper discover`: output, JSON keys, flags and exit codes (local disk)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.support.cli import run
from tests.support.tables import make_table

DISCOVER_KEYS = {
    "uri",
    "tables",
    "requests",
    "seconds",
    "foldersListed",
    "logsChecked",
    "emptyLogs",
    "excluded",
}


@pytest.fixture
def lake(tmp_path: Path) -> Path:
    for rel in ("events", "sales/orders", "sales/eu/refunds", "a/b/c/d"):
        make_table(tmp_path, rel)
    staging = tmp_path / "sales" / "staging" / "_delta_log"  # a writer's temp file, no commit
    staging.mkdir(parents=True)
    (staging / "_commit_3f2a0bd6-7cfc-4c3a-9a9b-2d8e8a1d5b7e.json.tmp").write_text("{}")
    return tmp_path


def test_prints_paths_and_cost(capsys: pytest.CaptureFixture[str], lake: Path) -> None:
    code, out, err = run(capsys, "discover", str(lake))
    assert code == 0, err
    assert out.splitlines() == ["events", "sales/eu/refunds", "sales/orders"]
    assert f"3 tables under {lake}" in err
    assert "1 _delta_log folders without commits" in err
    assert " requests in " in err


def test_json(capsys: pytest.CaptureFixture[str], lake: Path) -> None:
    code, out, _ = run(
        capsys, "discover", f"file://{lake}", "--json", "--max-depth", "4", "--exclude", "a/*"
    )
    assert code == 0
    body = json.loads(out)
    assert set(body) == DISCOVER_KEYS
    assert body["tables"][0] == {"path": "events", "uri": f"file://{lake}/events"}
    assert [t["path"] for t in body["tables"]] == ["events", "sales/eu/refunds", "sales/orders"]
    assert body["emptyLogs"] == ["sales/staging"]
    assert body["requests"] == body["foldersListed"] + body["logsChecked"]


def test_depth_and_include(capsys: pytest.CaptureFixture[str], lake: Path) -> None:
    _, out, _ = run(capsys, "discover", str(lake), "--max-depth", "4", "--include", "a/*")
    assert out.splitlines() == ["a/b/c/d"]
    _, out, _ = run(capsys, "discover", str(lake), "--max-depth", "1")
    assert out.splitlines() == ["events"]
    _, out, _ = run(capsys, "discover", str(lake / "events"))
    assert out.splitlines() == ["."]


def test_bad_input_exits_2(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    code, out, err = run(capsys, "discover", str(tmp_path / "missing"), "--json")
    assert code == 2
    assert "no such folder" in err
    assert json.loads(out)["error"] == "InvalidInput"
    code, _, err = run(capsys, "discover", str(tmp_path), "--max-depth", "-1")
    assert code == 2 and "--max-depth" in err
    code, _, err = run(capsys, "discover", "nosuch://host/x")  # a scheme fsspec does not know
    assert code == 2 and "scheme" in err


def test_symlink_loops_end_and_aliases_are_not_tables(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    """Issue 49, section 2, item 7: a loop listed every alias until ELOOP (exit 1)."""
    lake = tmp_path / "lake"
    for rel in ("t0", "t1", "sub/t2", "sub/t3"):
        make_table(lake, rel)
    make_table(tmp_path, "outside")
    (lake / "loop").symlink_to(lake)
    (lake / "sub" / "up").symlink_to("..")
    (lake / "again").symlink_to(lake / "sub" / "t2")
    (lake / "out").symlink_to(tmp_path / "outside")
    code, out, err = run(capsys, "discover", str(lake), "--max-depth", "1000")
    assert code == 0, err
    assert out.splitlines() == ["sub/t2", "sub/t3", "t0", "t1"]


@pytest.mark.parametrize("uri", ["", " "])
def test_an_empty_uri_is_exit_2(capsys: pytest.CaptureFixture[str], uri: str) -> None:
    """Issue 49, section 2, item 11: `discover ""` scanned the current folder and printed
    URIs rooted at `/`."""
    code, out, err = run(capsys, "discover", uri, "--json")
    assert code == 2, err
    assert json.loads(out)["error"] == "InvalidInput"
    assert "no URI given" in err
    code, _, err = run(capsys, "inspect", uri)  # the table commands said so already
    assert code == 2 and ("URI is required" in err or "no URI given" in err)
