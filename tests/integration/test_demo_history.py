"""What the `make run` demo promises a newcomer, checked on the demo's own pieces (its writer's
history, its manifest, its Spark flags).

Log cleanup within minutes: cleanup only removes commits older than midnight UTC of now minus
the retention, so the demo's writer seeds a new table with three days of backdated history and
the first cleanup already has work.

Compacted files count as healthy: every file the demo writes is far below the default
small-file size (32Mi), so SMALL once equalled FILES even right after a compaction; the demo's
manifest sizes the threshold for its own files.
"""

from __future__ import annotations

import importlib.util
import json
import os
import subprocess
import sys
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest
from deltalake import DeltaTable, write_deltalake

from tests.support.spark import ensure_spark

REPO = Path(__file__).resolve().parents[2]
CLI = [sys.executable, "-m", "deltakeeper"]


def script(name: str) -> ModuleType:
    spec = importlib.util.spec_from_file_location(name, REPO / "scripts" / f"{name}.py")
    assert spec and spec.loader
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def demo_writer() -> ModuleType:
    return script("demo_writer")


def test_a_new_demo_table_gets_its_log_cleaned_on_the_first_run(tmp_path):
    table = tmp_path / "events"
    writer = demo_writer()
    writer.seed_history(str(table))
    rows = DeltaTable(str(table)).to_pyarrow_table().num_rows
    # The demo manifest's retention (scripts/demo.py): logRetention 2m.
    out = subprocess.run(
        [*CLI, "cleanup", str(table), "--log-retention", "2m", "--json"],
        capture_output=True,
        text=True,
        check=True,
    )
    report = json.loads(out.stdout)
    assert report["checkpointVersion"] == writer.CHECKPOINT_AT
    assert report["deletedFiles"] == writer.CHECKPOINT_AT  # commits 0 .. 10
    log = sorted(p.name for p in (table / "_delta_log").iterdir() if p.name[:20].isdigit())
    assert log[0].startswith(f"{writer.CHECKPOINT_AT:020d}")
    assert DeltaTable(str(table)).to_pyarrow_table().num_rows == rows


def run_once(folder: Path, flags: list[str]) -> dict[str, Any]:
    """One pass of `deltakeeper run --once` on the demo's folder; the table's status."""
    argv = [*CLI, "run", "--manifests", str(folder), "--once", *flags]
    env = {**os.environ, "SPARK_LOCAL_IP": "127.0.0.1"}
    done = subprocess.run(argv, capture_output=True, text=True, env=env, timeout=600)
    assert done.returncode == 0, done.stdout + done.stderr
    body = json.loads((folder / ".deltakeeper" / "status.json").read_text())
    status: dict[str, Any] = body["tables"]["demo/events"]
    return status


@pytest.mark.spark
def test_after_a_demo_compaction_only_the_new_appends_count_as_small(tmp_path):
    demo, writer = script("demo"), demo_writer()
    table = tmp_path / "events"
    writer.seed_history(str(table))  # 24 appends over 3 days: 8 small files per partition
    folder = tmp_path / "manifests"
    folder.mkdir()
    (folder / "events.yaml").write_text(demo.manifest(table, compaction=True))
    flags = demo.spark_flags(str(ensure_spark()))

    status = run_once(folder, flags)
    compacted = status["lastMaintenance"]["compaction"]
    assert compacted["result"] == "done", compacted
    assert (compacted["filesRemoved"], compacted["filesAdded"]) == (24, 3)
    # The compacted files are healthy: SMALL drops below FILES, to none at all.
    assert status["files"] == 3
    assert status["smallFiles"] == 0

    # The writer's next append is small again (and no second job: minInterval is 2m).
    write_deltalake(str(table), writer.batch(24), mode="append")
    status = run_once(folder, flags)
    assert status["lastMaintenance"]["compaction"]["jobId"] == compacted["jobId"]
    assert (status["files"], status["smallFiles"]) == (4, 1)
