"""The CLI contract: JSON keys, and one test per exit code."""

import json
import socket
import subprocess
import sys

import pytest

from deltakeeper.cli import main
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


def run(capsys, *argv: str) -> tuple[int, str, str]:
    code = main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


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


def test_exit_2_not_a_delta_table_names_the_uri(capsys, tmp_path):
    code, _, err = run(capsys, "inspect", str(tmp_path / "nothing-here"))
    assert code == 2
    assert str(tmp_path / "nothing-here") in err and "_delta_log" in err


def test_exit_2_bad_input(capsys, tmp_path):
    LogBuilder(tmp_path).commit(protocol(), metadata())
    assert run(capsys, "inspect", str(tmp_path), "--version", "5")[0] == 2
    assert run(capsys, "inspect", str(tmp_path), "--timestamp", "yesterday-ish")[0] == 2
    assert run(capsys, "inspect", str(tmp_path), "--small-file-size", "lots")[0] == 2
    assert run(capsys, "inspect", "ftp://host/table")[0] == 2
    assert run(capsys, "inspect", str(tmp_path), "--storage-option", "novalue")[0] == 2


def test_exit_2_corrupt_log_line(capsys, tmp_path):
    b = LogBuilder(tmp_path)
    b.commit(protocol(), metadata())
    b.raw("00000000000000000001.json", '{"add": {"path": "x"}}\n{{{\n')
    code, _, err = run(capsys, "inspect", str(tmp_path))
    assert code == 2
    assert "00000000000000000001.json: line 2" in err


def test_exit_3_unsupported_protocol(capsys, corpus):
    code, out, err = run(capsys, "inspect", str(corpus / "simple_table_features"), "--json")
    assert code == 3 and "blahabl" in err
    # --json: the error as one JSON object on stdout too, so a script always gets JSON.
    error = json.loads(out)
    assert error["error"] == "UnsupportedProtocol" and error["exitCode"] == 3
    assert "blahabl" in error["message"]


def test_exit_4_storage_unreachable_without_leaking_the_secret(capsys):
    with socket.socket() as s:  # a port that nothing listens on
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    secret = "s3cr3t-value-never-printed"
    code, out, err = run(
        capsys,
        "inspect",
        "s3://bucket/table",
        "--storage-option",
        f"endpoint_url=http://127.0.0.1:{port}",
        "--storage-option",
        "key=AKIAEXAMPLE",
        "--storage-option",
        f"secret={secret}",
    )
    assert code == 4, err
    assert "s3://bucket/table" in err
    assert secret not in out + err


def test_console_script_runs(corpus):
    proc = subprocess.run(
        [sys.executable, "-m", "deltakeeper", "inspect", str(corpus / "simple_table"), "--json"],
        capture_output=True,
        text=True,
        check=False,
    )
    assert proc.returncode == 0, proc.stderr
    assert json.loads(proc.stdout)["version"] == 4


@pytest.mark.parametrize("argv", [["--help"], ["inspect", "--help"], ["files", "--help"]])
def test_help(argv, capsys):
    with pytest.raises(SystemExit) as e:
        main(argv)
    assert e.value.code == 0
    assert "usage" in capsys.readouterr().out


def test_version_flag_and_version_option_do_not_clash(capsys, corpus):
    with pytest.raises(SystemExit) as e:
        main(["--version"])
    assert e.value.code == 0 and capsys.readouterr().out.startswith("deltakeeper ")
    code, out, _ = run(capsys, "inspect", str(corpus / "simple_table"), "--version", "2", "--json")
    assert code == 0 and json.loads(out)["version"] == 2
