"""`run` and `operator` with an operation history that can never be written (issue 49,
2.2-2.4): refused when they start, exit 2 and a message naming what to change, the location
left as it was; never exit 0 with the rows dropped."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import kopf
import pyarrow as pa
import pytest
from deltalake import write_deltalake

from deltakeeper.runtime.history import COLUMNS
from tests.support.cli import run
from tests.support.oracles import Unreadable, deltars_rows, duckdb_rows

TABLE = """\
apiVersion: deltakeeper.io/v1alpha1
kind: DeltaTable
metadata: {{name: t, namespace: default}}
spec: {{uri: "{uri}"}}
"""


def tree(root: Path) -> dict[str, bytes]:
    return {p.relative_to(root).as_posix(): p.read_bytes() for p in root.rglob("*") if p.is_file()}


@pytest.fixture
def manifests(tmp_path: Path) -> Path:
    """A manifest folder naming one real table, so that `run --once` has rows to write."""
    write_deltalake(str(tmp_path / "t"), pa.table({"x": [1, 2]}))
    folder = tmp_path / "manifests"
    folder.mkdir()
    (folder / "t.yaml").write_text(TABLE.format(uri=tmp_path / "t"))
    return folder


def run_once(capsys: pytest.CaptureFixture[str], manifests: Path, *flags: str) -> tuple[int, str]:
    status = manifests.parent / "status.json"
    code, out, err = run(
        capsys, "run", "--once", "--manifests", str(manifests), "--status-file", str(status), *flags
    )
    return code, out + err


def test_a_table_with_the_history_names_but_other_types_is_refused(
    capsys: pytest.CaptureFixture[str], tmp_path: Path, manifests: Path
) -> None:
    history = tmp_path / "h"
    names = [name for name, _, _ in COLUMNS] + ["metrics"]
    write_deltalake(str(history), pa.table({n: ["x"] for n in names}))
    before = tree(history)
    code, said = run_once(capsys, manifests, "--history-uri", str(history))
    assert code == 2, said
    assert "column start_time is string, not timestamp" in said, said
    assert tree(history) == before
    for reader in (deltars_rows, duckdb_rows):
        got = reader(str(history))
        assert not isinstance(got, Unreadable) and got == 1, (reader.__name__, got)


def test_a_folder_of_other_files_is_refused_and_left_alone(
    capsys: pytest.CaptureFixture[str], tmp_path: Path, manifests: Path
) -> None:
    history = tmp_path / "mine"
    history.mkdir()
    (history / "notes.txt").write_text("keep me")
    code, said = run_once(capsys, manifests, "--history-uri", str(history))
    assert code == 2, said
    assert "is not empty and not a Delta table" in said, said
    assert tree(history) == {"notes.txt": b"keep me"}


@pytest.mark.parametrize("where", ["under a file", "sysfs"])
def test_a_location_that_can_never_hold_it_is_refused(
    capsys: pytest.CaptureFixture[str], tmp_path: Path, manifests: Path, where: str
) -> None:
    (tmp_path / "plain").write_text("a file")
    uri = str(tmp_path / "plain" / "h") if where == "under a file" else "/sys/deltakeeper-h"
    code, said = run_once(capsys, manifests, "--history-uri", uri)
    assert code == 2, said
    assert "cannot hold the operation history" in said, said
    assert "Traceback" not in said


@pytest.mark.parametrize("uri", ["local", "s3://bucket/history"])
def test_an_option_the_store_cannot_use_is_refused(
    capsys: pytest.CaptureFixture[str], tmp_path: Path, manifests: Path, uri: str
) -> None:
    history = str(tmp_path / "h") if uri == "local" else uri
    flags = ["--history-uri", history, "--history-option", "bogus=1"]
    code, said = run_once(capsys, manifests, *flags)
    assert code == 2, said
    assert "takes no storage options" in said or "storage option 'bogus'" in said, said
    assert not (tmp_path / "h").exists()


def test_the_operator_checks_the_history_of_its_variable(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    started: list[Any] = []
    monkeypatch.setattr(kopf, "configure", lambda **_: None)
    monkeypatch.setattr(kopf, "run", lambda **kw: started.append(kw))
    (tmp_path / "mine").mkdir()
    (tmp_path / "mine" / "notes.txt").write_text("keep me")
    monkeypatch.setenv("DELTAKEEPER_HISTORY_URI", str(tmp_path / "mine"))
    code, _, err = run(capsys, "operator")
    assert code == 2 and "is not empty and not a Delta table" in err, err
    code, _, err = run(capsys, "operator", "--history-uri", str(tmp_path / "plain" / "h"))
    assert code == 0 and len(started) == 1, err  # a new location: created
    assert (tmp_path / "plain" / "h" / "_delta_log").is_dir()
