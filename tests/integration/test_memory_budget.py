"""`deltakeeper run --memory-budget`: a step estimated to need more than the whole budget is
refused with both figures (status, exit code, no write), the steps that fit still run, and a
budget that is not a size is exit 2."""

from __future__ import annotations

import json
import re
import shutil
import signal
import subprocess
import time
import urllib.request
from collections import defaultdict
from datetime import datetime
from pathlib import Path
from typing import Any

import pytest
import yaml
from deltalake import DeltaTable

from benchmarks import synth
from benchmarks.harness import proc_status_bytes
from deltakeeper.maintenance import memory
from tests.integration.test_standalone import DELTAKEEPER, _statuses
from tests.support.manifests import table_doc
from tests.support.stores import free_port
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
    assert "--memory-budget: 'lots' is not a size" in done.stderr


def _requests(port: int) -> dict[str, float]:
    """Storage requests so far, by table (a quiet poll sends one listing)."""
    with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=10) as r:
        text = r.read().decode()
    found: dict[str, float] = defaultdict(float)
    for m in re.finditer(
        r'^deltakeeper_storage_requests_total\{[^}]*table="([^"]+)"[^}]*\} (\S+)$', text, re.M
    ):
        found[m.group(1)] += float(m.group(2))
    return found


def _window(entry: dict[str, Any]) -> tuple[float, float]:
    """When a lastMaintenance step ran (its poll's time, then its seconds), in epoch seconds."""
    start = datetime.fromisoformat(entry["time"].replace("Z", "+00:00")).timestamp()
    return start, start + entry["seconds"]


def test_a_big_table_and_small_ones_under_a_low_budget(tmp_path: Path) -> None:
    """A 400,000-file table and 20 small ones under the budget a 512 MiB container gets by
    default (256 MiB), which the big table's checkpoint fits and its vacuum does not: the
    checkpoint runs with no small table's step beside it, the vacuum is refused naming both
    figures, every table goes on being polled, and the daemon stays within the 512 MiB."""
    big, _ = synth.ensure(
        synth.Params(files=400_000, commits=1_000, commits_after_checkpoint=20), tmp_path / "src"
    )
    small_src, _ = synth.ensure(
        synth.Params(files=10, commits=30, commits_after_checkpoint=5), tmp_path / "src"
    )
    folder = tmp_path / "manifests"
    folder.mkdir()
    lake = tmp_path / "lake"
    docs = []
    for name, src in [("big", big), *((f"small{n:02d}", small_src) for n in range(20))]:
        shutil.copytree(src / "_delta_log", lake / name / "_delta_log")
        spec = {"pollInterval": "2s", "vacuum": {"engine": "local"}}
        docs.append(table_doc(name, f"file://{lake / name}", **spec))
    (folder / "tables.yaml").write_text(yaml.safe_dump_all(docs))
    # checkpoint, streamed: 32 MiB + 131,072 rows x 1.5 KiB + 16 B x 400,000 = 230 MiB, fits;
    # vacuum (640 B an action) 276 MiB does not; the checkpoint and any small step (32 MiB at
    # least) do not fit together.
    limit = 512 * 2**20
    budget = memory.default_budget(limit)
    assert budget == 256 * 2**20
    port = free_port()
    argv = [str(DELTAKEEPER), "run", "--manifests", str(folder), "--metrics-port", str(port)]
    argv += ["--memory-budget", f"{budget}", "--max-concurrent", "4", "--summary-every", "0"]
    proc = subprocess.Popen(argv, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    try:
        peak, first, requests = 0, None, {}
        deadline = time.monotonic() + 240
        while time.monotonic() < deadline:
            assert proc.poll() is None, proc.communicate()[1][-3000:]
            peak = max(peak, proc_status_bytes("VmHWM", proc.pid))
            done = _statuses(folder).get("lake/big", {}).get("lastMaintenance", {})
            if "checkpoint" in done and "vacuum" in done:
                requests = _requests(port)
                first = first or requests
                # every table has polled (a quiet poll: one listing) several times since
                if len(requests) == 21 and all(requests[t] - first[t] >= 3 for t in requests):
                    break
            time.sleep(0.2)
        else:
            raise AssertionError(f"not settled: {requests} {_statuses(folder).get('lake/big')}")
        time.sleep(6)  # idle: quiet polls only
        idle = proc_status_bytes("VmRSS", proc.pid)
        statuses = _statuses(folder)
    finally:
        proc.send_signal(signal.SIGTERM)
        proc.wait(timeout=60)
    steps = statuses["lake/big"]["lastMaintenance"]
    assert steps["checkpoint"]["result"] == "done", steps
    assert (lake / "big" / "_delta_log" / f"{999:020d}.checkpoint.parquet").exists()
    assert steps["checkpoint"]["message"].startswith("_delta_log/00000000000000000999.checkpoint")
    assert DeltaTable(str(lake / "big")).version() == 999
    refused = steps["vacuum"]
    assert refused["result"] == "refused", steps
    assert "vacuum needs about" in refused["message"]
    assert "the memory budget is 256.0 MiB" in refused["message"]
    checkpoint = _window(steps["checkpoint"])
    beside = [
        (name, op)
        for name, s in statuses.items()
        if name != "lake/big"
        for op, entry in (s.get("lastMaintenance") or {}).items()
        if _window(entry)[0] < checkpoint[1] and checkpoint[0] < _window(entry)[1]
    ]
    assert beside == [], (checkpoint, beside)
    assert peak <= limit, (peak / 2**20, idle / 2**20)
