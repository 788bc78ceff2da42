"""The `make run` demo promises log cleanup within minutes. Cleanup only removes commits older
than midnight UTC of now minus the retention, so the demo's writer seeds a new table with three
days of backdated history (issue 14, finding 16): the first cleanup already has work."""

from __future__ import annotations

import importlib.util
import json
import subprocess
import sys
from pathlib import Path
from types import ModuleType

from deltalake import DeltaTable

REPO = Path(__file__).resolve().parents[2]
CLI = [sys.executable, "-m", "deltakeeper"]


def demo_writer() -> ModuleType:
    spec = importlib.util.spec_from_file_location("demo_writer", REPO / "scripts/demo_writer.py")
    assert spec and spec.loader
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


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
