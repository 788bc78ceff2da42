"""cli/inspect.py: `inspect` and `files`, their JSON keys (a contract for scripts), time travel."""

import json

from tests.support.cli import run
from tests.support.logbuilder import LogBuilder, add, metadata, protocol

INSPECT_KEYS = {
    "uri",
    "version",
    "timestamp",
    "protocol",
    "unsupportedFeatures",
    "tableId",
    "partitionColumns",
    "configuration",
    "numFiles",
    "sizeBytes",
    "numTombstones",
    "numTxns",
    "lastCheckpointVersion",
    "commitsSinceCheckpoint",
    "logFiles",
    "logBytes",
    "smallFiles",
}


def test_inspect_json_has_the_documented_keys(capsys, corpus):
    code, out, _ = run(capsys, "inspect", str(corpus / "simple_table_with_checkpoint"), "--json")
    assert code == 0
    report = json.loads(out)
    assert set(report) >= INSPECT_KEYS
    assert report["version"] == 10 and report["lastCheckpointVersion"] == 10
    assert report["commitsSinceCheckpoint"] == 0 and report["numFiles"] == 11
    assert report["logFiles"] == 13  # 11 commits, the checkpoint and _last_checkpoint


def test_inspect_human_output_flags_unsupported_writer_features(capsys, tmp_path):
    LogBuilder(tmp_path).commit(
        protocol(1, 7, writerFeatures=["appendOnly", "brandNew"]), metadata()
    )
    code, out, err = run(capsys, "inspect", str(tmp_path))
    assert code == 0
    assert "brandNew (unsupported)" in out and "appendOnly (unsupported)" not in out
    assert "refuse to write" in err


def test_files_json_lines(capsys, tmp_path):
    b = LogBuilder(tmp_path)
    b.commit(protocol(), metadata(("day",)), add("day=1/a.parquet", 5, day="1"))
    code, out, _ = run(capsys, "files", str(tmp_path), "--json")
    assert code == 0
    assert [json.loads(line) for line in out.splitlines()] == [
        {
            "path": "day=1/a.parquet",
            "size": 5,
            "partitionValues": {"day": "1"},
            "deletionVector": None,
        }
    ]


def test_version_and_timestamp_select_the_snapshot(capsys, tmp_path):
    b = LogBuilder(tmp_path)
    b.commit(protocol(), metadata(), add("a"), mtime_ms=1_000)
    b.commit(add("b"), mtime_ms=2_000)
    assert (
        json.loads(run(capsys, "inspect", str(tmp_path), "--version", "0", "--json")[1])["numFiles"]
        == 1
    )
    report = json.loads(
        run(capsys, "inspect", str(tmp_path), "--timestamp", "1970-01-01T00:00:01.5Z", "--json")[1]
    )
    assert report["version"] == 0
