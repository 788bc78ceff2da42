"""delta/crc.py: version checksum files: every field, written only where none is, and the check."""

from __future__ import annotations

import json

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from deltakeeper.delta import schema
from deltakeeper.delta.crc import (
    DELETED_RECORD_BINS,
    FILE_SIZE_BINS,
    build_crc,
    crc_mismatches,
    file_size_histogram,
    read_crc,
    write_crc,
)
from deltakeeper.delta.errors import CorruptLogError, UnsupportedProtocolError
from deltakeeper.delta.table import open_table
from tests.support.logbuilder import LogBuilder, add, commit_info, dv, metadata, protocol, remove

MB = 1024 * 1024
DV_PROTOCOL = protocol(3, 7, readerFeatures=["deletionVectors"], writerFeatures=["deletionVectors"])


def snapshot(path, version=None, full=True):
    table = open_table(str(path))
    cols = schema.FULL_ADD if full else schema.LEAN_ADD
    return table, table.snapshot(version, add_cols=cols)


def test_a_checksum_has_counts_sizes_histogram_metadata_and_protocol(tmp_path):
    b = LogBuilder(tmp_path)
    b.commit(protocol(), metadata(("day",)), add("a", 10, day="1"), add("b", 20, day="2"))
    b.commit(remove("a"), add("c", 9 * MB, day=None))
    _, snap = snapshot(tmp_path)
    crc = build_crc(snap)
    assert (crc["tableSizeBytes"], crc["numFiles"]) == (20 + 9 * MB, 2)
    assert (crc["numMetadata"], crc["numProtocol"]) == (1, 1)
    assert crc["protocol"] == {"minReaderVersion": 1, "minWriterVersion": 2}
    meta = metadata(("day",))["metaData"]
    assert crc["metadata"] == meta
    assert crc["setTransactions"] == [] and crc["domainMetadata"] == []
    assert "inCommitTimestampOpt" not in crc and "numDeletionVectorsOpt" not in crc
    hist = crc["fileSizeHistogram"]
    assert hist["sortedBinBoundaries"] == list(FILE_SIZE_BINS)
    assert hist["fileCounts"][0] == 1 and hist["totalBytes"][0] == 20  # [0, 8 KiB)
    nine = FILE_SIZE_BINS.index(8 * MB)  # [8 MiB, 12 MiB)
    assert hist["fileCounts"][nine] == 1 and hist["totalBytes"][nine] == 9 * MB
    assert sum(hist["fileCounts"]) == 2
    paths_listed = {f["path"]: f for f in crc["allFiles"]}
    assert set(paths_listed) == {"b", "c"}
    assert paths_listed["c"]["partitionValues"] == {"day": None}  # null values are kept
    assert paths_listed["c"]["dataChange"] is False
    assert crc_mismatches(crc, snap) == []


def test_file_size_bins_are_delta_sparks():
    assert len(FILE_SIZE_BINS) == 95 and FILE_SIZE_BINS[:3] == (0, 8192, 16384)
    assert FILE_SIZE_BINS[-1] == 256 * 1024**3 and list(FILE_SIZE_BINS) == sorted(FILE_SIZE_BINS)
    assert DELETED_RECORD_BINS == (0, 1, 10, 100, 1000, 10**4, 10**5, 10**6, 10**7, 2**31 - 1)


@settings(max_examples=60, deadline=None)
@given(st.lists(st.integers(0, 2**40), max_size=40))
def test_histogram_matches_a_plain_bin_search(sizes):
    import pyarrow as pa

    hist = file_size_histogram(pa.chunked_array([pa.array(sizes, pa.int64())]))
    counts = [0] * len(FILE_SIZE_BINS)
    totals = [0] * len(FILE_SIZE_BINS)
    for s in sizes:
        i = max(i for i, b in enumerate(FILE_SIZE_BINS) if b <= s)
        counts[i] += 1
        totals[i] += s
    assert hist["fileCounts"] == counts and hist["totalBytes"] == totals


def test_a_checksum_has_deletion_vector_metrics_and_histogram(tmp_path):
    b = LogBuilder(tmp_path)
    big = {**dv("big"), "cardinality": 2**31 - 1}
    b.commit(DV_PROTOCOL, metadata(), add("a"), add("b", dv={**dv("x"), "cardinality": 12}))
    b.commit(add("c", dv={**dv("y"), "cardinality": 3}), add("d", dv=big))
    _, snap = snapshot(tmp_path)
    crc = build_crc(snap)
    assert crc["numDeletionVectorsOpt"] == 3
    assert crc["numDeletedRecordsOpt"] == 12 + 3 + 2**31 - 1
    assert crc["deletedRecordCountsHistogramOpt"] == {
        "deletedRecordCounts": [1, 1, 1, 0, 0, 0, 0, 0, 0, 1]
    }
    listed = {f["path"]: f for f in crc["allFiles"]}
    assert listed["b"]["deletionVector"]["cardinality"] == 12
    assert "maxRowIndex" not in listed["b"]["deletionVector"]  # nulls are left out
    assert crc_mismatches(crc, snap) == []


def test_a_checksum_has_the_in_commit_timestamp_txns_and_live_domains(tmp_path):
    b = LogBuilder(tmp_path)
    ict = protocol(3, 7, readerFeatures=[], writerFeatures=["inCommitTimestamp", "domainMetadata"])
    b.commit(
        commit_info(ict=1_700_000_000_123),
        ict,
        metadata(**{"delta.enableInCommitTimestamps": "true"}),
        {"txn": {"appId": "app", "version": 3, "lastUpdated": 5}},
        {"domainMetadata": {"domain": "d1", "configuration": "{}", "removed": False}},
        {"domainMetadata": {"domain": "d2", "configuration": "{}", "removed": False}},
    )
    b.commit(
        commit_info(ict=1_700_000_000_456),
        {"domainMetadata": {"domain": "d2", "configuration": "{}", "removed": True}},
    )
    _, snap = snapshot(tmp_path)
    crc = build_crc(snap)
    assert crc["inCommitTimestampOpt"] == 1_700_000_000_456
    assert crc["setTransactions"] == [{"appId": "app", "version": 3, "lastUpdated": 5}]
    assert crc["domainMetadata"] == [{"domain": "d1", "configuration": "{}", "removed": False}]
    assert crc["protocol"]["readerFeatures"] == []


def test_in_commit_timestamp_missing_is_refused(tmp_path):
    b = LogBuilder(tmp_path)
    ict = protocol(3, 7, readerFeatures=[], writerFeatures=["inCommitTimestamp"])
    b.commit(commit_info(), ict, metadata(**{"delta.enableInCommitTimestamps": "true"}))
    _, snap = snapshot(tmp_path)
    with pytest.raises(CorruptLogError, match="inCommitTimestamp"):
        build_crc(snap)


def test_txns_left_out_when_their_retention_makes_them_time_dependent(tmp_path):
    b = LogBuilder(tmp_path)
    conf = {"delta.setTransactionRetentionDuration": "interval 1 days"}
    b.commit(protocol(), metadata(**conf), {"txn": {"appId": "app", "version": 1}})
    _, snap = snapshot(tmp_path)
    assert "setTransactions" not in build_crc(snap)


def test_all_files_only_for_small_tables_with_full_columns(tmp_path):
    b = LogBuilder(tmp_path)
    b.commit(protocol(), metadata(), *(add(f"f{i}") for i in range(5)))
    _, snap = snapshot(tmp_path)
    assert len(build_crc(snap, max_files=5)["allFiles"]) == 5
    assert "allFiles" not in build_crc(snap, max_files=4)
    _, lean = snapshot(tmp_path, full=False)
    assert "allFiles" not in build_crc(lean)
    b.commit(metadata(**{"delta.checkpoint.writeStatsAsJson": "false"}))
    _, no_json_stats = snapshot(tmp_path)
    assert "allFiles" not in build_crc(no_json_stats)


def test_write_is_create_only_and_dry_run_writes_nothing(tmp_path):
    b = LogBuilder(tmp_path)
    b.commit(commit_info(), protocol(), metadata(), add("a"))
    table, snap = snapshot(tmp_path)
    crc_file = tmp_path / "_delta_log" / "00000000000000000000.crc"
    dry = write_crc(table, snap, dry_run=True)
    assert not crc_file.exists() and not dry.written and not dry.existed
    result = write_crc(table, snap)
    assert result.written and not result.existed and crc_file.stat().st_size == result.size_bytes
    body = crc_file.read_bytes()
    assert body.endswith(b"\n") and body.count(b"\n") == 1
    assert json.loads(body) == build_crc(snap) == read_crc(table, 0)
    crc_file.write_text('{"theirs": true}\n')
    again = write_crc(table, snap)
    assert again.existed and not again.written
    assert crc_file.read_text() == '{"theirs": true}\n'  # never overwritten
    assert write_crc(table, snap, dry_run=True).existed


def test_write_after_a_checkpoint_reads_the_commit_for_txn_id_and_timestamp(tmp_path):
    from deltakeeper.delta.checkpoint import load_for_checkpoint, write_checkpoint

    b = LogBuilder(tmp_path)
    ict = protocol(3, 7, readerFeatures=[], writerFeatures=["inCommitTimestamp"])
    info = {"commitInfo": {"timestamp": 1, "inCommitTimestamp": 77, "txnId": "t-1"}}
    b.commit(info, ict, metadata(**{"delta.enableInCommitTimestamps": "true"}), add("a"))
    table = open_table(str(tmp_path))
    write_checkpoint(table, load_for_checkpoint(table), 1_800_000_000_000, 1)
    snap = table.snapshot(add_cols=schema.FULL_ADD)  # from the checkpoint: no commitInfo
    assert snap.commit_info is None
    write_crc(table, snap)
    crc = read_crc(table, 0)
    assert crc is not None and (crc["txnId"], crc["inCommitTimestampOpt"]) == ("t-1", 77)


def test_read_crc_missing_corrupt_and_legacy_histogram_name(tmp_path):
    b = LogBuilder(tmp_path)
    b.commit(protocol(), metadata(), add("a", 10))
    table, snap = snapshot(tmp_path)
    assert read_crc(table, 0) is None
    legacy = build_crc(snap)
    legacy["histogramOpt"] = legacy.pop("fileSizeHistogram")
    b.raw("00000000000000000000.crc", json.dumps(legacy))
    crc = read_crc(table, 0)
    assert crc is not None and "fileSizeHistogram" in crc and crc_mismatches(crc, snap) == []
    b.raw("00000000000000000000.crc", "{not json")
    with pytest.raises(CorruptLogError, match=r"00000000000000000000\.crc"):
        read_crc(table, 0)


def test_mismatches_name_each_wrong_field(tmp_path):
    b = LogBuilder(tmp_path)
    b.commit(DV_PROTOCOL, metadata(), add("a", 10), add("b", 20, dv=dv("x")))
    _, snap = snapshot(tmp_path)
    good = build_crc(snap)
    wrong = {
        **good,
        "numFiles": 3,
        "tableSizeBytes": 31,
        "numDeletedRecordsOpt": 2,
        "metadata": {**good["metadata"], "configuration": {"x": "y"}},
        "protocol": {**good["protocol"], "writerFeatures": []},
        "allFiles": good["allFiles"][:1],
    }
    del wrong["numProtocol"]
    found = crc_mismatches(wrong, snap)
    fields = sorted(line.split(":")[0] for line in found)
    assert fields == sorted(
        [
            "numFiles",
            "tableSizeBytes",
            "numDeletedRecordsOpt",
            "metadata",
            "protocol",
            "allFiles",
            "numProtocol",
        ]
    ), found


def test_equivalent_spellings_of_a_field_are_no_mismatch(tmp_path):
    b = LogBuilder(tmp_path)
    b.commit(DV_PROTOCOL, metadata(), add("a", 10))
    _, snap = snapshot(tmp_path)
    crc = build_crc(snap)
    crc["protocol"]["writerFeatures"] = list(reversed(crc["protocol"]["writerFeatures"]))
    crc["allFiles"][0]["tags"] = {}  # Delta Spark writes {} or nothing for no tags
    crc["allFiles"][0]["stats"] = None
    del crc["metadata"]["format"]["options"]
    # another writer's histogram bins are checked with its own bins
    crc["fileSizeHistogram"] = {
        "sortedBinBoundaries": [0, 5],
        "fileCounts": [0, 1],
        "totalBytes": [0, 10],
    }
    assert crc_mismatches(crc, snap) == []


def test_unknown_writer_feature_writes_nothing(tmp_path):
    b = LogBuilder(tmp_path)
    b.commit(protocol(1, 7, writerFeatures=["somethingNew"]), metadata(), add("a"))
    table, snap = snapshot(tmp_path)
    with pytest.raises(UnsupportedProtocolError, match="somethingNew"):
        write_crc(table, snap)
    assert [p.name for p in (tmp_path / "_delta_log").iterdir()] == ["00000000000000000000.json"]
