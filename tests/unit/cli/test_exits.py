"""cli/exits.py: each kind of error becomes its exit code, and the message says what to do."""

import json
import socket

from deltakeeper.cli import exits
from deltakeeper.compaction.launcher import JobFailed
from deltakeeper.delta import errors
from deltakeeper.runtime.metrics import MetricsBindError
from tests.support.cli import run
from tests.support.logbuilder import LogBuilder, metadata, protocol


def test_exit_2_not_a_delta_table_names_the_uri(capsys, tmp_path):
    code, _, err = run(capsys, "inspect", str(tmp_path / "nothing-here"))
    assert code == 2
    assert str(tmp_path / "nothing-here") in err and "_delta_log" in err


def test_exit_2_bad_input(capsys, tmp_path):
    LogBuilder(tmp_path).commit(protocol(), metadata())
    assert run(capsys, "inspect", str(tmp_path), "--version", "5")[0] == 2
    assert run(capsys, "inspect", str(tmp_path), "--timestamp", "yesterday-ish")[0] == 2
    assert run(capsys, "inspect", str(tmp_path), "--small-file-size", "lots")[0] == 2
    assert run(capsys, "inspect", "nosuch://host/table")[0] == 2  # no store has the scheme
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


def test_an_errors_code_and_name_are_its_kinds_and_subclasses_keep_them() -> None:
    assert (exits.exit_code(None), exits.OK) == (0, 0)
    for error, name, code in (
        (errors.InvalidCredentialsError("x"), "InvalidCredentials", 2),
        (errors.LiteVacuumImpossible("x"), "InvalidInput", 2),
        (MetricsBindError("x"), "InvalidInput", 2),  # a subclass outside the library
        (errors.MissingLogFileError("x"), "CorruptLog", 2),
        (errors.UnsupportedProtocolError("x"), "UnsupportedProtocol", 3),
        (errors.StorageUnreachableError("x"), "StorageUnreachable", 4),
        (JobFailed("x"), "Unexpected", 1),  # a kind the contract does not name
    ):
        assert (exits.error_name(error), exits.exit_code(error)) == (name, code)
