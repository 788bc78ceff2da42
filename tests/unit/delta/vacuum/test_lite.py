"""delta/vacuum/lite.py, and LITE plans through delta/vacuum/plan.py: which commits a LITE vacuum
reads (from the N `_last_vacuum_info` records to the newest commit before the cut-off), when Delta
refuses it, and which files those commits name."""

from __future__ import annotations

import uuid
from pathlib import Path

import pytest

from deltakeeper.delta import paths
from deltakeeper.delta.errors import LiteVacuumImpossible
from deltakeeper.delta.table import open_table
from deltakeeper.delta.vacuum import info as vacuum_info
from deltakeeper.delta.vacuum import lite as vacuum_lite
from deltakeeper.delta.vacuum import plan
from deltakeeper.delta.vacuum.lite import Named
from deltakeeper.delta.vacuum.modes import Mode
from deltakeeper.delta.vacuum.plan import (
    Root,
    dv_relative_path,
    execute_vacuum,
    lite_candidates,
    load_for_vacuum,
    plan_table_vacuum,
    record_vacuum,
)
from tests.support.logbuilder import (
    LogBuilder,
    add,
    commit_info,
    dv,
    metadata,
    protocol,
    remove,
)

DAY = 86_400_000
T0 = 1_700_000_000_000  # commit v is written at T0 + v days
NOW = T0 + 10 * DAY
RETENTION = 7 * DAY  # the cut-off falls on T0 + 3 days: N = 3


def history(root: Path, commits: int = 7) -> LogBuilder:
    """Commit v adds f{v} and removes f{v-1} (removed at its commit time); every file exists."""
    b = LogBuilder(root)
    b.commit(protocol(), metadata(), add("f0"), mtime_ms=T0)
    (root / "f0").write_bytes(b"x")
    for v in range(1, commits):
        b.commit(add(f"f{v}"), remove(f"f{v - 1}", ts=T0 + v * DAY), mtime_ms=T0 + v * DAY)
        (root / f"f{v}").write_bytes(b"x")
    return b


def lite(root: Path, now: int = NOW):
    table = open_table(str(root))
    return plan_table_vacuum(table, load_for_vacuum(table), RETENTION, now, True, Mode.LITE)


def test_a_first_lite_reads_every_commit_up_to_n_and_records_it(tmp_path):
    history(tmp_path)
    p = lite(tmp_path)
    assert p.newest_outside == 3 and (p.window.start, p.window.end) == (0, 3)
    # f0..f2 were removed at T0 + 1..3 days; the cut-off is T0 + 3 days: f2 is not older.
    assert [f.key for f in p.delete] == ["f0", "f1"] and p.record == 3
    assert "LITE: _last_vacuum_info is missing (no N recorded); read commits 0 to 3" in str(p)
    assert p.listed == 0 and p.scanned == 3


def test_the_next_lite_reads_only_the_commits_after_the_recorded_n(tmp_path):
    history(tmp_path)
    table = open_table(str(tmp_path))
    p = lite(tmp_path)
    execute_vacuum(table, p)
    assert record_vacuum(table, p) == 3
    assert vacuum_info.read(table.storage).version == 3
    later = lite(tmp_path, NOW + 2 * DAY)  # the cut-off moves to T0 + 5 days
    assert (later.window.start, later.window.end) == (4, 5)
    # f2's remove is in commit 3, read by the first run, when it was not older than the cut-off:
    # as in Delta Spark, no LITE run looks at it again (a FULL one deletes it).
    assert [f.key for f in later.delete] == ["f3"]


def test_nothing_new_past_the_cut_off_reads_no_commit_and_writes_nothing(tmp_path):
    history(tmp_path)
    table = open_table(str(tmp_path))
    vacuum_info.write(table.storage, 3)
    before = (tmp_path / "_delta_log" / paths.LAST_VACUUM_INFO).stat().st_mtime_ns
    snap = load_for_vacuum(table)
    table.storage.requests.clear()
    p = plan_table_vacuum(table, snap, RETENTION, NOW, True, Mode.LITE)
    assert p.window.empty and p.delete == [] and p.record is None
    # _last_vacuum_info, and one listing from commit 3 (that also updates the snapshot)
    assert dict(table.storage.requests) == {"list": 1, "read": 1}
    table.storage.requests.clear()
    known = vacuum_info.read(table.storage)  # a watcher knows it from its own last vacuum
    table.storage.requests.clear()
    plan_table_vacuum(table, snap, RETENTION, NOW, True, Mode.LITE, info=known)
    assert dict(table.storage.requests) == {"list": 1}
    assert record_vacuum(table, p) is None
    assert (tmp_path / "_delta_log" / paths.LAST_VACUUM_INFO).stat().st_mtime_ns == before


def test_a_quiet_lite_builds_no_reference_set(tmp_path, monkeypatch):
    """No candidate, nothing to check: the snapshot's references (seconds at a million files)
    are not built."""
    history(tmp_path)
    table = open_table(str(tmp_path))
    vacuum_info.write(table.storage, 3)
    snap = load_for_vacuum(table)

    def refuse(*_args):
        raise AssertionError("references built for a vacuum with no candidates")

    monkeypatch.setattr(plan, "referenced_keys", refuse)
    p = plan_table_vacuum(table, snap, RETENTION, NOW, True, Mode.LITE)
    assert p.scanned == 0 and p.delete == [] and p.referenced == 0
    assert "no candidates, so no references to check" in str(p)
    monkeypatch.undo()
    vacuum_info.write(table.storage, 1)  # commits 2 and 3 name f1 and f2: checked again
    p = plan_table_vacuum(table, snap, RETENTION, NOW, True, Mode.LITE)
    assert p.scanned == 2 and p.referenced == 5  # f3..f6 live, f2's unexpired tombstone


def test_n_never_moves_backwards(tmp_path):
    history(tmp_path)
    vacuum_info.write(open_table(str(tmp_path)).storage, 5)  # Spark ran later, or with less
    p = lite(tmp_path)  # N = 3 < 5: the listing from commit 5 has no commit that old
    assert p.newest_outside is None and p.window is None and p.record is None
    assert p.delete == [] and f"{paths.LAST_VACUUM_INFO} stays as it is" in str(p)


def test_an_n_beyond_the_tables_version_is_another_tables_and_full_replaces_it(tmp_path):
    history(tmp_path)
    table = open_table(str(tmp_path))
    vacuum_info.write(table.storage, 500)  # the table was deleted and written again in place
    with pytest.raises(LiteVacuumImpossible, match="beyond the table's version 6"):
        lite(tmp_path)
    full = plan_table_vacuum(table, load_for_vacuum(table), RETENTION, NOW, True, Mode.FULL)
    assert full.newest_outside == 3 and full.record == 3  # backwards, but 500 is not ours


def test_no_commit_past_the_cut_off_means_nothing_to_read(tmp_path):
    history(tmp_path)
    p = lite(tmp_path, now=T0 + RETENTION - 1)
    assert p.newest_outside is None and p.window is None and p.record is None
    assert "no commit is older than the cut-off" in str(p)


def cleaned(root: Path, below: int) -> None:
    for v in range(below):
        (root / "_delta_log" / paths.commit(v)).unlink()


@pytest.mark.parametrize("recorded", [None, 1])
def test_lite_is_refused_as_delta_refuses_it(tmp_path, recorded):
    b = history(tmp_path)
    from deltakeeper.delta.checkpoint import load_for_checkpoint, write_checkpoint

    table = open_table(str(tmp_path))
    write_checkpoint(table, load_for_checkpoint(table, 2), NOW, RETENTION)
    cleaned(tmp_path, 2)  # a log cleanup at checkpoint 2: commits 0 and 1 are gone
    if recorded is not None:
        vacuum_info.write(table.storage, recorded)
    with pytest.raises(LiteVacuumImpossible, match="DELTA_CANNOT_VACUUM_LITE"):
        lite(tmp_path)
    vacuum_info.write(table.storage, 2)  # the earliest commit itself: Delta allows it
    assert (lite(tmp_path).window.start, lite(tmp_path).window.end) == (3, 3)
    assert b.next_version == 7


def test_a_gap_inside_the_window_is_refused_too(tmp_path):
    history(tmp_path)
    (tmp_path / "_delta_log" / paths.commit(2)).unlink()
    table = open_table(str(tmp_path))
    listing = table.list_log()
    header = table.snapshot(version=1)
    with pytest.raises(LiteVacuumImpossible, match="commit 2 is missing"):
        vacuum_lite.window(header, listing, vacuum_info.read(table.storage), 1 + 2)


def test_n_follows_in_commit_timestamps_not_file_times(tmp_path):
    ict = protocol(1, 7, writerFeatures=["inCommitTimestamp"])
    conf = {"delta.enableInCommitTimestamps": "true"}
    b = LogBuilder(tmp_path)
    b.commit(commit_info(ict=T0), ict, metadata(**conf), add("f0"), mtime_ms=NOW)
    for v in range(1, 5):  # file times all NOW; in-commit timestamps one a day from T0
        b.commit(
            commit_info(ict=T0 + v * DAY),
            add(f"f{v}"),
            remove(f"f{v - 1}", ts=T0 + v * DAY),
            mtime_ms=NOW,
        )
    p = lite(tmp_path)
    assert p.newest_outside == 3 and (p.window.start, p.window.end) == (0, 3)


def test_named_files_are_removes_their_dv_files_and_cdc_files(tmp_path):
    b = LogBuilder(tmp_path)
    b.commit(protocol(), metadata(), add("a"), add("b"))
    d = dv("ab" + "0" * 20)
    b.commit(
        remove("a", ts=5, dv=d),
        {"remove": {"path": "b", "dataChange": True}},
        {"cdc": {"path": "_change_data/c.parquet", "size": 7, "partitionValues": {}}},
    )
    table = open_table(str(tmp_path))
    named = list(vacuum_lite.named_files(table.storage, table.list_log().commits.values()))
    assert named == [
        Named("a", 100, 5, d),
        Named("b", 0, 0),  # no deletionTimestamp: as old as can be, as Delta reads it
        Named("_change_data/c.parquet", 7, 0),
    ]


def test_candidates_are_decoded_keys_inside_the_root_each_once_with_its_newest_time():
    root = Root("s3", "lake", ("/t",))
    u = uuid.UUID(int=7)
    from tests.unit.delta.vacuum.test_plan import u_dv

    relative_dv, absolute_dv = (
        u_dv(u, "xy"),
        {"storageType": "p", "pathOrInlineDv": "s3://lake/t/p.bin"},
    )
    named = [
        Named("p%3D1/a%20b.parquet", 10, 5),
        Named("p%3D1/a%20b.parquet", 10, 9),  # removed again later: the newest time counts
        Named("s3a://lake/t/abs.parquet", 3, 1),  # absolute, inside the root
        Named("s3://other/t/x.parquet", 3, 1),  # another bucket: not this table's
        Named("../escape.parquet", 3, 1),
        Named("d.parquet", 4, 2, relative_dv),
        Named("e.parquet", 4, 2, absolute_dv),  # Delta never vacuums absolute DVs
    ]
    found = {f.key: (f.size, f.mtime_ms) for f in lite_candidates(named, root)}
    assert found == {
        "p=1/a b.parquet": (10, 9),
        "abs.parquet": (3, 1),
        "d.parquet": (4, 2),
        dv_relative_path(relative_dv["pathOrInlineDv"]): (10, 2),
        "e.parquet": (4, 2),
    }


def test_cleanup_floor_is_the_recorded_n(tmp_path):
    history(tmp_path)
    table = open_table(str(tmp_path))
    assert vacuum_lite.cleanup_floor(table) is None
    vacuum_info.write(table.storage, 4)
    assert vacuum_lite.cleanup_floor(table) == 4
