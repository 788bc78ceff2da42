"""`run --memory-budget` (issue 49, 2.8): a refusal over the budget is this daemon's, not the
table's: restarted with a bigger budget, the refused steps run at once and the status stops
naming the old budget. A bad budget names its flag as typed."""

from __future__ import annotations

import json
import os
import time
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest
from deltalake import write_deltalake

from tests.support.cli import run
from tests.support.oracles import Unreadable, deltars_rows, duckdb_rows

TABLE = """\
apiVersion: deltakeeper.io/v1alpha1
kind: DeltaTable
metadata: {{name: t, namespace: default}}
spec:
  uri: "{uri}"
  checkpoint: {{engine: local}}
  vacuum: {{engine: local}}
"""


@pytest.fixture
def lake(tmp_path: Path) -> Path:
    """A table of 12 commits (a checkpoint due), a file no version references written a
    month ago (a vacuum due), and its manifest."""
    for i in range(12):
        write_deltalake(str(tmp_path / "t"), pa.table({"x": [i]}), mode="append")
    orphan = tmp_path / "t" / "orphan.parquet"
    orphan.write_bytes(b"left by a failed writer")
    month_ago = time.time() - 30 * 86_400
    os.utime(orphan, (month_ago, month_ago))
    (tmp_path / "manifests").mkdir()
    (tmp_path / "manifests" / "t.yaml").write_text(TABLE.format(uri=tmp_path / "t"))
    return tmp_path


def run_once(capsys: pytest.CaptureFixture[str], lake: Path, budget: str) -> dict[str, Any]:
    status = ["--status-file", str(lake / "status.json")]
    argv = ["--manifests", str(lake / "manifests"), *status, f"--memory-budget={budget}"]
    code, out, err = run(capsys, "run", "--once", *argv)
    assert code == 0, (out, err)
    code, out, err = run(capsys, "status", *status, "--json")
    assert code == 0, err
    return json.loads(out)["default/t"]


def degraded(table: dict[str, Any]) -> dict[str, Any]:
    return next(c for c in table["conditions"] if c["type"] == "Degraded")


def test_a_refusal_over_the_budget_does_not_outlive_a_restart_with_a_bigger_one(
    capsys: pytest.CaptureFixture[str], lake: Path
) -> None:
    small = run_once(capsys, lake, "1")
    refused = {op for op, e in small["lastMaintenance"].items() if e["result"] == "refused"}
    assert {"checkpoint", "vacuum"} <= refused, small["lastMaintenance"]
    assert degraded(small)["reason"] == "MaintenanceRefused"
    assert not list((lake / "t" / "_delta_log").glob("*.checkpoint.parquet"))
    assert (lake / "t" / "orphan.parquet").exists()

    big = run_once(capsys, lake, "10Ti")
    runs = big["lastMaintenance"]
    assert runs["checkpoint"]["result"] == "done" and runs["vacuum"]["result"] == "done", runs
    assert all(e["result"] != "refused" for e in runs.values()), runs
    assert "1 B" not in json.dumps(big), big
    assert degraded(big)["status"] == "False", degraded(big)
    assert list((lake / "t" / "_delta_log").glob("00000000000000000011.checkpoint.parquet"))
    assert runs["vacuum"]["deletedFiles"] == 1 and not (lake / "t" / "orphan.parquet").exists()
    for reader in (deltars_rows, duckdb_rows):
        got = reader(str(lake / "t"))
        assert not isinstance(got, Unreadable) and got == 12, (reader.__name__, got)


@pytest.mark.parametrize("command", ["run", "operator"])
def test_a_negative_budget_names_the_flag(
    capsys: pytest.CaptureFixture[str], tmp_path: Path, command: str
) -> None:
    where = ["--manifests", str(tmp_path)] if command == "run" else []
    code, _, err = run(capsys, command, *where, "--memory-budget=-1Mi")
    assert code == 2, err
    assert "--memory-budget: " in err and "--memory budget" not in err, err
