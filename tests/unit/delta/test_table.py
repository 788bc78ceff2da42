"""delta/table.py: opening a log (protocol, hint fallbacks, damage), updates, time travel."""

import pytest

from deltakeeper.delta.errors import CorruptLogError, InvalidInputError, UnsupportedProtocolError
from deltakeeper.delta.table import open_table
from tests.support.logbuilder import LogBuilder, add, commit_info, metadata, protocol, remove


def live(snap) -> dict[str, int]:
    return dict(zip(snap.files["path"].to_pylist(), snap.files["size"].to_pylist(), strict=True))


def test_missing_protocol_is_corruption(tmp_path):
    LogBuilder(tmp_path).commit(metadata(), add("a"))
    with pytest.raises(CorruptLogError, match="no protocol"):
        open_table(str(tmp_path)).snapshot()


def test_unknown_reader_feature_is_refused(tmp_path):
    b = LogBuilder(tmp_path)
    b.commit(
        protocol(3, 7, readerFeatures=["fancyNewThing"], writerFeatures=["fancyNewThing"]),
        metadata(),
    )
    with pytest.raises(UnsupportedProtocolError, match="fancyNewThing"):
        open_table(str(tmp_path)).snapshot()


def test_unknown_writer_feature_is_reported_not_refused(tmp_path):
    b = LogBuilder(tmp_path)
    b.commit(protocol(1, 7, writerFeatures=["futureWriterThing"]), metadata())
    snap = open_table(str(tmp_path)).snapshot()
    assert snap.unsupported_features == ["futureWriterThing"]
    assert snap.unsupported_reader_features == []


# -- _last_checkpoint ----------------------------------------------------------------------------


def _expected(table) -> tuple[int, dict[str, int]]:
    snap = open_table(str(table)).snapshot()
    return snap.version, live(snap)


def test_stale_last_checkpoint_falls_back_to_listing(corpus_copy):
    t = corpus_copy("simple_table_with_checkpoint")
    want = _expected(t)
    (
        t / "_delta_log" / "00000000000000000010.checkpoint.parquet"
    ).unlink()  # hint now points nowhere
    table = open_table(str(t))
    assert table.read_hint().status == "ok"
    _listing, hint = table.listing_for(None)
    assert hint.status == "stale"
    assert _expected(t) == want


@pytest.mark.parametrize(
    "content", [b"{garbage", b'{"version": 10, "size": 13, "checksum": "bad"}']
)
def test_corrupt_last_checkpoint_falls_back_to_listing(corpus_copy, content):
    t = corpus_copy("simple_table_with_checkpoint")
    want = _expected(t)
    (t / "_delta_log" / "_last_checkpoint").write_bytes(content)
    assert open_table(str(t)).read_hint().status == "corrupt"
    assert _expected(t) == want


def test_last_checkpoint_behind_the_newest_checkpoint_still_reads_latest(corpus_copy):
    t = corpus_copy("simple_table_with_checkpoint")
    want = _expected(t)
    (t / "_delta_log" / "_last_checkpoint").write_text('{"version": 0, "size": 3}')
    assert _expected(t) == want


# -- incremental update and cost -----------------------------------------------------------------


def test_update_costs_one_listing_when_quiet_and_k_plus_one_with_k_commits(tmp_path):
    b = LogBuilder(tmp_path)
    b.commit(protocol(), metadata(), add("a", 1))
    table = open_table(str(tmp_path))
    snap = table.snapshot()
    table.storage.requests.clear()
    assert table.update(snap) is snap
    assert sum(table.storage.requests.values()) == 1
    b.commit(add("b", 2))
    b.commit(remove("a"), add("c", 3), {"txn": {"appId": "x", "version": 3}})
    table.storage.requests.clear()
    newer = table.update(snap)
    assert sum(table.storage.requests.values()) == 1 + 2
    assert newer.version == 2 and live(newer) == {"b": 2, "c": 3}
    assert newer.txns["x"]["version"] == 3
    assert live(newer) == live(open_table(str(tmp_path)).snapshot())


def test_a_quiet_poll_reuses_the_last_grouping_and_a_changed_listing_is_grouped_again(
    tmp_path, monkeypatch
):
    from deltakeeper.delta import table as table_module

    calls = []
    real = table_module.group
    monkeypatch.setattr(table_module, "group", lambda infos: calls.append(1) or real(infos))
    b = LogBuilder(tmp_path)
    b.commit(protocol(), metadata(), add("a", 1))
    b.commit(add("a2", 1))
    table = open_table(str(tmp_path))
    snap = table.snapshot()
    first = table.list_log(snap.version)
    assert table.list_log(snap.version) is first and table.update(snap) is snap
    assert len(calls) == 2  # the snapshot's own listing, then the one kept
    # The tip rewritten under the same name (another size): grouped again, and read afresh.
    tip = tmp_path / "_delta_log" / "00000000000000000001.json"
    tip.write_bytes(tip.read_bytes() + b"\n")
    assert table.list_log(snap.version) is not first
    assert table.update(snap) is not snap
    b.commit(add("b", 2))
    assert table.update(snap).version == 2
    # A whole log longer than a poll's listing is not kept.
    for n in range(table_module.KEEP_LISTING_FILES):
        b.commit(add(f"c{n}", 3))
    whole = table.list_log()
    assert table.list_log() is not whole and table.list_log() == whole


def test_a_table_checkpointed_at_its_tip_is_watched_from_after_that_checkpoint(tmp_path):
    from deltakeeper.cli import main

    b = LogBuilder(tmp_path)
    b.commit(protocol(), metadata(), add("a", 1))
    b.commit(add("b", 2))
    assert main(["checkpoint", str(tmp_path)]) == 0
    table = open_table(str(tmp_path))
    snap = table.snapshot()
    assert snap.segment.checkpoint is not None and snap.segment.checkpoint.version == 1
    listed = []
    real = table.storage.list_from
    table.storage.list_from = lambda folder, start: listed.append(real(folder, start)) or listed[-1]
    assert not table.moved_on(snap) and table.update(snap) is snap
    # Only the tip commit and the hint: not the checkpoint at the tip, which the snapshot uses.
    names = [[f.key.rsplit("/", 1)[-1] for f in found] for found in listed]
    assert names == [["00000000000000000001.json", "_last_checkpoint"]] * 2
    # What the listing must still show: the tip rewritten, and a newer commit.
    tip = tmp_path / "_delta_log" / "00000000000000000001.json"
    tip.write_bytes(tip.read_bytes() + b"\n")
    assert table.moved_on(snap)
    b.commit(add("c", 3))
    assert table.update(snap).version == 2


# -- time travel by timestamp --------------------------------------------------------------------


def test_timestamp_uses_file_times_made_monotonic(tmp_path):
    b = LogBuilder(tmp_path)
    b.commit(protocol(), metadata(), add("a"), mtime_ms=1000)
    b.commit(add("b"), mtime_ms=2000)
    b.commit(add("c"), mtime_ms=1500)  # clock went backwards: treated as 2001
    b.commit(add("d"), mtime_ms=5000)
    t = open_table(str(tmp_path))
    assert t.version_at(1000) == 0
    assert t.version_at(1999) == 0
    assert t.version_at(2000) == 1
    assert t.version_at(2001) == 2
    assert t.version_at(10**13) == 3
    with pytest.raises(InvalidInputError, match="earliest available version is 0"):
        t.version_at(999)


def test_timestamp_uses_in_commit_timestamps_when_enabled(tmp_path):
    ict = protocol(1, 7, writerFeatures=["inCommitTimestamp"])
    conf = {"delta.enableInCommitTimestamps": "true"}
    b = LogBuilder(tmp_path)
    b.commit(commit_info(ict=100), ict, metadata(**conf), add("a"), mtime_ms=9_000)
    b.commit(commit_info(ict=200), add("b"), mtime_ms=8_000)
    b.commit(commit_info(ict=300), add("c"), mtime_ms=7_000)
    t = open_table(str(tmp_path))
    assert [t.version_at(x) for x in (100, 250, 300, 10**6)] == [0, 1, 2, 2]
    assert t.snapshot(version=1).timestamp_ms == 200


def test_in_commit_timestamps_enabled_later_splits_the_history(tmp_path):
    b = LogBuilder(tmp_path)
    b.commit(protocol(), metadata(), add("a"), mtime_ms=1_000)
    b.commit(add("b"), mtime_ms=2_000)
    conf = {
        "delta.enableInCommitTimestamps": "true",
        "delta.inCommitTimestampEnablementVersion": "2",
        "delta.inCommitTimestampEnablementTimestamp": "5000",
    }
    b.commit(
        commit_info(ict=5_000),
        protocol(1, 7, writerFeatures=["inCommitTimestamp"]),
        metadata(**conf),
        add("c"),
        mtime_ms=100,
    )
    b.commit(commit_info(ict=6_000), add("d"), mtime_ms=100)
    t = open_table(str(tmp_path))
    assert t.version_at(1_500) == 0
    assert t.version_at(4_999) == 1
    assert t.version_at(5_000) == 2
    assert t.version_at(7_000) == 3


def test_latest_version_reads_no_commit(corpus):
    table = open_table(str(corpus / "simple_table_with_checkpoint"))
    assert table.latest_version() == 10
    assert dict(table.storage.requests) == {"read": 1, "list": 1}  # _last_checkpoint + listing


def test_staged_commits_are_reported_but_never_read(tmp_path):
    from deltakeeper.delta.summary import summarize

    b = LogBuilder(tmp_path)
    b.commit(protocol(), metadata(), add("a"))
    b.staged(0)  # already published
    b.staged(1)  # not published: must not become version 1
    b.raw("_staged_commits/00000000000000000002.3a0d65cd-4056-49b8-937b-95f9e3ee90e5.json", "{bad")
    table = open_table(str(tmp_path))
    snap = table.snapshot()
    assert snap.version == 0
    report = summarize(table, snap, 1024)
    assert report["unpublishedCommits"] == 2
    assert report["logFiles"] == 4


def test_truncated_checkpoint_is_read_past_and_named(corpus_copy):
    t = corpus_copy("simple_table_with_checkpoint")
    want = _expected(t)
    cp = t / "_delta_log" / "00000000000000000010.checkpoint.parquet"
    cp.write_bytes(cp.read_bytes()[:200])
    snap = open_table(str(t)).snapshot()  # from the commits, as Delta Spark reads it
    assert (snap.version, live(snap)) == want and snap.segment.checkpoint is None
    (damaged,) = snap.damaged_checkpoints
    assert damaged.version == 10 and damaged.keys == ("_delta_log/" + cp.name,)
    assert cp.name in damaged.error and cp.name in str(snap.damage_note())


def test_a_file_deleted_after_listing_is_retried_then_reported(tmp_path, monkeypatch):
    from deltakeeper.delta.errors import MissingLogFileError
    from deltakeeper.delta.storage import LocalStorage

    b = LogBuilder(tmp_path)
    b.commit(protocol(), metadata(), add("a"))
    real_read = LocalStorage._read
    calls = {"n": 0}

    def flaky(self, key):
        calls["n"] += 1
        if calls["n"] == 2:  # the first read of the commit after _last_checkpoint: gone
            raise FileNotFoundError(key)
        return real_read(self, key)

    monkeypatch.setattr(LocalStorage, "_read", flaky)
    assert open_table(str(tmp_path)).snapshot().num_files == 1  # retried with a fresh listing
    monkeypatch.setattr(
        LocalStorage, "_read", lambda self, key: (_ for _ in ()).throw(FileNotFoundError(key))
    )
    with pytest.raises(MissingLogFileError, match="was listed but is gone"):
        open_table(str(tmp_path)).snapshot()


def _segment(snap) -> tuple[int | None, list[int]]:
    cp = snap.segment.checkpoint
    return (cp.version if cp else None), [c.name.version for c in snap.segment.commits]


def test_an_updated_snapshot_has_the_segment_a_fresh_one_has(tmp_path):
    from deltakeeper.delta.checkpoint import checkpoint_table
    from deltakeeper.delta.summary import summarize

    day, now = 86_400_000, 1_800_000_000_000
    b = LogBuilder(tmp_path)
    b.commit(protocol(), metadata(), add("a", 1))
    b.commit(add("b", 2))
    table = open_table(str(tmp_path))
    checkpoint_table(table, None, now, day)
    b.commit(add("c", 3))
    snap = table.snapshot()
    b.commit(add("d", 4))
    newer = table.update(snap)
    assert _segment(newer) == _segment(open_table(str(tmp_path)).snapshot()) == (1, [2, 3])
    assert summarize(table, newer, 1)["commitsSinceCheckpoint"] == 2
    checkpoint_table(table, None, now, day)  # a checkpoint written since: a fresh one uses it
    b.commit(add("e", 5))
    newer = table.update(newer)
    assert _segment(newer) == _segment(open_table(str(tmp_path)).snapshot()) == (3, [4])
