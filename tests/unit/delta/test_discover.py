"""delta/discover.py: which folders are tables (depth, nesting, include/exclude), and its cost.

On the local disk (LocalStorage counts one "list" per directory scan); the object stores are
covered by tests/integration/test_lake_discovery.py."""

from __future__ import annotations

from pathlib import Path

import pytest

from deltakeeper.delta.discover import ROOT, discover, is_table, reportable
from deltakeeper.delta.storage import open_storage
from tests.support.tables import make_table


@pytest.fixture
def lake(tmp_path: Path) -> Path:
    make_table(tmp_path, "events")
    make_table(tmp_path, "sales/orders")
    make_table(tmp_path, "sales/refunds", checkpoint_only=True)
    make_table(tmp_path, "sales/orders/nested")  # inside a table: its data, never entered
    make_table(tmp_path, "raw/a/b/deep")  # depth 4
    (tmp_path / "empty" / "_delta_log").mkdir(parents=True)  # no commit yet: not a table
    (tmp_path / "empty" / "_delta_log" / "_last_checkpoint").write_text("{}")
    make_table(tmp_path, "empty/inner")  # an empty log does not stop the descent
    make_table(tmp_path, "_tmp/hidden")  # '_' folders are bookkeeping
    make_table(tmp_path, ".staging/hidden")
    (tmp_path / "csv").mkdir()
    for i in range(50):
        (tmp_path / "csv" / f"part-{i}.csv").write_text("x")
    return tmp_path


def test_finds_tables_not_nested_not_hidden(lake: Path) -> None:
    scan = discover(open_storage(str(lake)))
    assert scan.tables == ("empty/inner", "events", "sales/orders", "sales/refunds")
    assert scan.empty_logs == ("empty",)


def test_max_depth_bounds_the_descent(lake: Path) -> None:
    assert "raw/a/b/deep" in discover(open_storage(str(lake)), max_depth=4).tables
    assert discover(open_storage(str(lake)), max_depth=1).tables == ("events",)
    assert discover(open_storage(str(lake)), max_depth=0).tables == ()


def test_prefix_that_is_a_table_is_dot(lake: Path) -> None:
    scan = discover(open_storage(str(lake / "events")))
    assert scan.tables == (ROOT,)
    assert scan.requests == 1  # its log: nothing in or below a table is listed
    assert discover(open_storage(str(lake / "events")), max_depth=0).tables == (ROOT,)


def test_requests_count_folders_not_files(lake: Path) -> None:
    storage = open_storage(str(lake))
    scan = discover(storage)
    # Every folder visited has its log looked into: root, events, sales, raw, empty, csv,
    # sales/orders, sales/refunds, raw/a, empty/inner and (at depth 3) raw/a/b. The ones that
    # are not tables, above depth 3, are listed too: root, sales, raw, empty, csv, raw/a.
    assert scan.logs_checked == 11
    assert scan.folders_listed == 6
    assert scan.requests == scan.folders_listed + scan.logs_checked
    assert storage.requests["list"] == scan.requests  # also added to the caller's counter
    for i in range(200):  # data files in a table's root: never listed
        (lake / "events" / f"part-{i}.parquet").write_bytes(b"x")
    assert discover(open_storage(str(lake))).requests == scan.requests


def test_include_and_exclude_patterns_choose_the_tables(lake: Path) -> None:
    storage = open_storage(str(lake))
    assert discover(storage, include=["sales/*"]).tables == ("sales/orders", "sales/refunds")
    assert discover(storage, exclude=["sales/*"]).tables == ("empty/inner", "events")
    only = discover(storage, include=["sales/orders"], exclude=[])
    assert only.tables == ("sales/orders",)
    assert only.excluded == 0  # the other folders were never listed
    both = discover(storage, include=["*"], exclude=["*/refunds", "events"])
    assert both.tables == ("empty/inner", "sales/orders")
    assert both.excluded == 2
    # '*' crosses '/', and '**' is the same
    assert discover(storage, include=["**/orders"]).tables == ("sales/orders",)


def test_patterns_prune_listings(lake: Path) -> None:
    everything = discover(open_storage(str(lake)))
    sales = discover(open_storage(str(lake)), include=["sales/*"])
    no_raw = discover(open_storage(str(lake)), exclude=["raw*", "csv*"])
    assert sales.requests == 2 + 2 + 1 + 1  # root and sales (log, listing), the two tables
    assert no_raw.requests == everything.requests - 7  # raw (2), raw/a (2), raw/a/b (1), csv (2)
    assert no_raw.tables == everything.tables


def test_is_table_needs_a_commit_or_a_checkpoint(lake: Path) -> None:
    storage = open_storage(str(lake))
    assert is_table(storage, "events")
    assert is_table(storage, "sales/refunds")
    assert not is_table(storage, "empty")
    assert not is_table(storage, "csv")
    assert not is_table(storage, "missing")


def test_a_negative_max_depth_is_refused(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="max_depth"):
        discover(open_storage(str(tmp_path)), max_depth=-1)


def test_missing_prefix_is_empty(tmp_path: Path) -> None:
    scan = discover(open_storage(str(tmp_path / "nothing")))
    assert scan.tables == ()
    assert scan.requests == 2  # its log, its sub-folders


@pytest.mark.parametrize(
    ("include", "exclude"),
    [
        (["sales"], []),
        (["sales/or*"], []),
        (["s*"], ["sales/r*"]),
        (["*/inner", "ev?nts"], []),
        (["[es]*"], ["empty*"]),
        (["raw/a/b/deep"], []),
        ([], ["sales"]),
        ([], ["*"]),
        (["em*/in*"], ["sales/*"]),
    ],
)
def test_pruning_never_loses_a_wanted_table(
    lake: Path, include: list[str], exclude: list[str]
) -> None:
    from fnmatch import fnmatchcase

    every = discover(open_storage(str(lake)), max_depth=4).tables
    wanted = tuple(
        t
        for t in every
        if (not include or any(fnmatchcase(t, p) for p in include))
        and not any(fnmatchcase(t, p) for p in exclude)
    )
    scan = discover(open_storage(str(lake)), include=include, exclude=exclude, max_depth=4)
    assert scan.tables == wanted


@pytest.fixture
def looped(tmp_path: Path) -> Path:
    """A lake of 4 tables with symlinks back up (loops), a second name for a table, and a
    link to a table outside the lake (issue 49, section 2, item 7)."""
    lake = tmp_path / "lake"
    for rel in ("t0", "t1", "sub/t2", "sub/deeper/t3"):
        make_table(lake, rel)
    make_table(tmp_path, "outside/t9")
    (lake / "loop").symlink_to(lake)  # the lake itself, again
    (lake / "sub" / "up").symlink_to("..")  # relative, one level up
    (lake / "sub" / "deeper" / "self").symlink_to(".")
    (lake / "alias").symlink_to(lake / "t0")  # one table under two names
    (lake / "out").symlink_to(tmp_path / "outside")  # leaves the prefix
    (lake / "out9").symlink_to(tmp_path / "outside" / "t9")
    return lake


@pytest.mark.parametrize("depth", [6, 1000])
def test_symlinks_are_followed_once_within_the_prefix(looped: Path, depth: int) -> None:
    scan = discover(open_storage(str(looped)), max_depth=depth)
    # each real folder once, under its own name: no alias, nothing outside the lake
    assert scan.tables == ("sub/deeper/t3", "sub/t2", "t0", "t1")
    assert scan.logs_checked == 7  # the root, t0, t1, sub, sub/t2, sub/deeper, sub/deeper/t3
    assert discover(open_storage(str(looped)), max_depth=3).tables == scan.tables


def test_a_prefix_reached_through_a_symlink_is_scanned(looped: Path, tmp_path: Path) -> None:
    (tmp_path / "link").symlink_to(looped)
    scan = discover(open_storage(str(tmp_path / "link")), max_depth=10)
    assert scan.tables == ("sub/deeper/t3", "sub/t2", "t0", "t1")


def test_a_link_into_a_table_finds_its_data_not_a_table(tmp_path: Path) -> None:
    make_table(tmp_path, "t0")
    make_table(tmp_path, "t0/part=1")  # inside a table: its data
    (tmp_path / "a").symlink_to(tmp_path / "t0" / "part=1")  # sorts before t0
    assert discover(open_storage(str(tmp_path))).tables == ("t0",)


def test_reportable_says_what_a_scan_would_report_of_one_path(lake: Path) -> None:
    """The check a storage event's new table passes before its log is listed: the same
    answers as a scan, path by path, for the tables the scan found and those it did not."""
    storage = open_storage(str(lake))
    for kw in ({}, {"include": ["sales/*"]}, {"exclude": ["sales/*"]}, {"max_depth": 1}):
        found = set(discover(storage, **kw).tables)  # type: ignore[arg-type]
        for path in ("events", "sales/orders", "sales/refunds", "empty/inner", "raw/a/b/deep"):
            assert reportable(path, **kw) is (path in found), (path, kw)  # type: ignore[arg-type]
    assert not reportable("_tmp/hidden") and not reportable(".staging/hidden")
    assert not reportable("a//b")
    assert reportable(ROOT) and not reportable(ROOT, include=["sales/*"])
