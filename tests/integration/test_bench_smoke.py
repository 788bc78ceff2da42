"""The maintenance benchmarks' --quick variants measure real, verified work.

Checkpoint: each engine checkpoints its own copy of the same small log, and both deltakeeper
and delta-rs read every engine's checkpoint back at the right version with every live file.
Cleanup: 1,000 expired commits on a fresh MinIO go in one delete request (counted by us and by
MinIO), and the table still reads at its version.
"""

from __future__ import annotations

import time

import pytest

from benchmarks import checkpoint, cleanup
from benchmarks.harness import machine

pytestmark = pytest.mark.integration

ENGINES = ["deltakeeper", "delta-rs"]  # Spark runs in the full benchmark; too slow for here


@pytest.mark.parametrize("scenario", list(checkpoint.QUICK))
def test_checkpoint_quick_runs_are_read_back_by_every_reader(scenario):
    params = checkpoint.QUICK[scenario]
    info, results = checkpoint.measure(scenario, params, ENGINES, 1, int(time.time() * 1000))
    assert info["version"] == params.version
    for engine, s in results.items():
        assert s["ok"], (engine, s.get("error"))
        (run,) = s["runs"]
        assert run["verified"] and run["version"] == params.version, (engine, run)
        assert s["seconds"] > 0 and s["peak_rss"] > s["rss_after_import"] > 0, (engine, s)
    # All tombstones of this log are older than 7 days, so every engine writes the same rows:
    # protocol, metaData, the streaming txn and one add per live file.
    rows = {e: s["cp_rows"] for e, s in results.items()}
    assert set(rows.values()) == {params.files + 3}, rows
    text = checkpoint.report(scenario, "cmd", machine(), params, info, results, 1)
    assert "deltakeeper / delta-rs: time" in text


def test_cleanup_quick_deletes_1000_files_in_one_request():
    _info, r = cleanup.measure(cleanup.QUICK)
    assert r["problems"] == []
    assert r["planned"] == r["deleted"] == 1000
    assert r["requests"]["execute"] == {"delete": 1}
    assert r["server_requests"].get("deletemultipleobjects") == 1
    assert r["answers"] == {"deltakeeper": (1000, 1000), "delta-rs": (1000, 1000)}
