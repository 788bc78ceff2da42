"""delta/log/replay.py: which actions win (newest per path and deletion vector), on hand-made
logs."""

import pytest

from deltakeeper.delta.errors import CorruptLogError
from deltakeeper.delta.table import open_table
from tests.support.logbuilder import LogBuilder, add, dv, metadata, protocol, remove

DV_PROTOCOL = protocol(3, 7, readerFeatures=["deletionVectors"], writerFeatures=["deletionVectors"])


def live(snap) -> dict[str, int]:
    return dict(zip(snap.files["path"].to_pylist(), snap.files["size"].to_pylist(), strict=True))


def test_newest_action_wins_per_path(tmp_path):
    b = LogBuilder(tmp_path)
    b.commit(protocol(), metadata(), add("a", 1), add("b", 2))
    b.commit(remove("a"), add("c", 3))
    b.commit(add("a", 4))  # re-added after removal
    snap = open_table(str(tmp_path)).snapshot()
    assert snap.version == 2
    assert live(snap) == {"a": 4, "b": 2, "c": 3}
    assert snap.num_tombstones == 0  # the re-add cancels the tombstone for ("a", None)
    assert live(open_table(str(tmp_path)).snapshot(version=1)) == {"b": 2, "c": 3}


def test_deletion_vectors_make_distinct_logical_files(tmp_path):
    b = LogBuilder(tmp_path)
    b.commit(DV_PROTOCOL, metadata(), add("f", 10))
    b.commit(remove("f"), add("f", 10, dv=dv("abc")))
    b.commit(remove("f", dv=dv("abc")), add("f", 10, dv=dv("abc", offset=9)))
    snap = open_table(str(tmp_path)).snapshot()
    assert snap.num_files == 1
    row = snap.files.to_pylist()[0]
    assert row["deletionVector"]["pathOrInlineDv"] == "abc" and row["deletionVector"]["offset"] == 9
    # tombstones: (f, None) and (f, "uabc@1") both remain, they are different logical files
    assert snap.num_tombstones == 2


def test_txns_keep_the_newest_version_and_domains_honour_removal(tmp_path):
    b = LogBuilder(tmp_path)
    b.commit(
        protocol(),
        metadata(),
        {"txn": {"appId": "app", "version": 1}},
        {"domainMetadata": {"domain": "d1", "configuration": "{}", "removed": False}},
        {"domainMetadata": {"domain": "d2", "configuration": "{}", "removed": False}},
    )
    b.commit(
        {"txn": {"appId": "app", "version": 7}},
        {"domainMetadata": {"domain": "d1", "configuration": "{}", "removed": True}},
    )
    snap = open_table(str(tmp_path)).snapshot()
    assert snap.txns["app"]["version"] == 7
    assert set(snap.domains) == {"d2"}


def test_the_newest_metadata_and_protocol_win(tmp_path):
    b = LogBuilder(tmp_path)
    b.commit(protocol(1, 2), metadata())
    b.commit(protocol(1, 4), metadata(("day",), **{"delta.appendOnly": "true"}))
    snap = open_table(str(tmp_path)).snapshot()
    assert snap.protocol.min_writer_version == 4
    assert snap.metadata.partition_columns == ("day",)
    assert snap.metadata.configuration == {"delta.appendOnly": "true"}


def test_a_field_of_the_wrong_type_names_file_and_line(tmp_path):
    b = LogBuilder(tmp_path)
    b.commit(protocol(), metadata(), add("a"))
    b.raw(
        "00000000000000000001.json",
        '{"add": {"path": "b", "size": "big", "partitionValues": {}}}\n',
    )
    with pytest.raises(
        CorruptLogError, match=r"00000000000000000001\.json: line 1: add has a field"
    ):
        open_table(str(tmp_path)).snapshot()
