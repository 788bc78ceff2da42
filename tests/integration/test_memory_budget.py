"""`deltakeeper run --memory-budget`: a step estimated to need more than the whole budget is
refused with both figures (status, exit code, no write), the steps that fit still run, and a
budget that is not a size is exit 2."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest

from tests.integration.test_standalone import DELTAKEEPER, _statuses
from tests.support.manifests import table_doc
from tests.support.tables import small_table

pytestmark = pytest.mark.integration


def run_once(folder: Path, budget: str) -> subprocess.CompletedProcess[str]:
    argv = [str(DELTAKEEPER), "run", "--manifests", str(folder), "--once"]
    return subprocess.run([*argv, "--memory-budget", budget], capture_output=True, text=True)


def test_a_checkpoint_too_big_for_the_budget_is_refused_naming_both(tmp_path: Path) -> None:
    small_table(tmp_path / "t", commits=12)  # 12 files and no checkpoint: one is due
    folder = tmp_path / "manifests"
    folder.mkdir()
    # engine local: with auto, this machine's spark-submit would take the checkpoint
    # (test_spark_engine_job.py).
    checkpoint = {"interval": 10, "engine": "local"}
    doc = table_doc("t", f"file://{tmp_path / 't'}", checkpoint=checkpoint)
    (folder / "t.json").write_text(json.dumps(doc))
    # 32 MiB and 16 KiB: past every step's 32 MiB base, a vacuum of 12 files (640 bytes each)
    # and a cleanup of 13 log files fit, a checkpoint of 12 files from JSON (2 KiB each) not.
    done = run_once(folder, "32784Ki")
    status = _statuses(folder)["lake/t"]
    refused = status["lastMaintenance"]["checkpoint"]
    assert refused["result"] == "refused", status
    assert "checkpoint needs about" in refused["message"]
    assert "the memory budget is 32.0 MiB" in refused["message"]
    # vacuum and cleanup ran (nothing to delete yet: skipped, so not in lastMaintenance)
    assert "MaintenanceRefused: checkpoint:" in done.stderr
    assert "MaintenanceRefused: vacuum:" not in done.stderr
    assert "MaintenanceRefused: cleanup:" not in done.stderr
    assert set(status["lastMaintenance"]) == {"checkpoint"}
    degraded = next(c for c in status["conditions"] if c["type"] == "Degraded")
    assert (degraded["status"], degraded["reason"]) == ("True", "MaintenanceRefused")
    assert not list((tmp_path / "t" / "_delta_log").glob("*.checkpoint.parquet"))
    assert done.returncode == 0, done.stderr  # Ready: the table is watched, not broken

    again = run_once(folder, "none")  # no budget: the checkpoint is written
    assert again.returncode == 0, again.stderr
    assert list((tmp_path / "t" / "_delta_log").glob("*.checkpoint.parquet"))


def test_a_budget_that_is_not_a_size_is_exit_2(tmp_path: Path) -> None:
    done = run_once(tmp_path, "lots")
    assert done.returncode == 2
    assert "--memory budget: 'lots' is not a size" in done.stderr
