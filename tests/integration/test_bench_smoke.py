"""The maintenance benchmarks' --quick variants measure real, verified work.

Checkpoint: each engine checkpoints its own copy of the same small log, and both deltakeeper
and delta-rs read every engine's checkpoint back at the right version with every live file.
Cleanup: 1,000 expired commits on a fresh MinIO go in one delete request (counted by us and by
MinIO), and the table still reads at its version.
Vacuum: on a small local table, LITE deletes the removed files as delta-rs does, FULL and
INVENTORY the strays too, and a quiet LITE costs one listing, as a poll does.
Checkpoint on MinIO: the same log checkpointed on the local disk and on MinIO, twice each (the
MinIO copy put back between runs).
Held memory: every engine watches its copy of a 20,000-file log to the last new commit.
Memory budget: both daemons checkpoint the big table and see every new commit; delta-rs loads all.
Daemon poll: the standalone daemon and delta-rs each poll every quiet MinIO table about once a
poll interval, one listing a poll.
Events: on MinIO with its own webhook delivery, quiet tables with events list (almost) never
where polling lists every interval; every timed commit, the burst's last versions and a lake's
new table show up.
Scheduling: every sick table of a small local lake is maintained in both modes.
"""

from __future__ import annotations

import argparse
import os
import time

import pytest

from benchmarks import (
    checkpoint,
    checkpoint_minio,
    cleanup,
    compaction,
    daemon_poll,
    events,
    held_memory,
    memory_budget,
    scheduling,
    vacuum,
)
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
    assert r["server_requests"].get("delete") == 1  # one DeleteObjects of 1,000 keys
    assert r["answers"] == {"deltakeeper": (1000, 1000), "delta-rs": (1000, 1000)}


def test_checkpoint_minio_quick_checkpoints_each_store_twice_at_the_right_version():
    result = checkpoint_minio.measure(quick=True, repeats=2)
    version = result["params"].version
    assert set(result["runs"]) == set(result["cpus"])
    for name, by_store in result["runs"].items():
        for store, runs in by_store.items():
            where = (name, store, runs)
            assert [r.get("ok") for r in runs] == [True, True], where
            assert [r["version"] for r in runs] == [version, version], where
            assert all(r["seconds"] > 0 and r["peak_rss"] > 0 for r in runs), where
            assert all(r["cpu"] > 0 for r in runs), where
        assert all(r["requests"].get("read", 0) > 0 for r in by_store["minio"])
        assert all("store_cpu" in r for r in by_store["minio"])
    text = checkpoint_minio.report("cmd", machine(), result)
    assert "MinIO / local disk: time" in text and "ours and MinIO's over ours" in text


def test_checkpoint_minio_store_apart_runs_each_process_on_its_own_cpus():
    if len(os.sched_getaffinity(0)) < 2:
        pytest.skip("one CPU: no layout sets the store apart")
    result = checkpoint_minio.measure(quick=True, repeats=1)
    ours, store = result["cpus"]["store apart"]
    assert ours and store and not ours & store
    apart, shared = result["runs"]["store apart"], result["runs"]["shared"]
    assert [r["cpus"] for r in apart["local"] + apart["minio"]] == [sorted(ours)] * 2
    assert [r["store_cpus"] for r in apart["minio"]] == [sorted(store)]
    everything = sorted(ours | store)
    assert [r["cpus"] for r in shared["local"] + shared["minio"]] == [everything] * 2
    assert [r["store_cpus"] for r in shared["minio"]] == [everything]
    assert "`store apart`: deltakeeper's runs" in checkpoint_minio.report("c", machine(), result)


def test_daemon_poll_quick_polls_each_table_once_an_interval_on_both_engines():
    tables, poll_s, window_s = 50, 2, 10.0
    r = daemon_poll.measure(tables, poll_s, window_s)
    expected = tables * window_s / poll_s  # 250 polls; jitter and the window's edges move it
    ours, peer = r["ours"], r["peer"]
    assert 0.7 * expected <= ours["polls"] <= 1.3 * expected, ours
    assert set(ours["requests"]) == {"list"}, ours  # quiet: listings only
    assert peer["polls"] >= 0.7 * expected, peer
    assert ours["cpu_s"] > 0 and peer["cpu_s"] > 0 and r["ratio"] > 0
    text = daemon_poll.report("cmd", machine(), tables, poll_s, window_s, r)
    assert "deltakeeper / delta-rs:" in text


@pytest.mark.spark
def test_compaction_quick_rewrites_the_small_files_and_keeps_every_row(minio):
    """deltakeeper (planner, spark-submit, job) and delta-rs on the quick shape in MinIO, as the
    full benchmark runs; OPTIMIZE runs in the full benchmark (one more spark-submit is too slow
    for here).

    Slow: two spark-submit jobs (the first compaction and the steady state), as the benchmark
    launches them, and scans of every small file on MinIO by DuckDB and delta-rs."""
    shape = compaction.QUICK
    engines = ("deltakeeper", "delta-rs compact")
    results = compaction.measure(shape, compaction.MinIO(minio), engines)
    info = results["info"]
    # Before: DuckDB and delta-rs each read every small file from MinIO (a GET at least).
    assert results["scan_before"]["requests"] >= shape.files, results["scan_before"]
    assert results["deltars_scan_before"]["requests"] >= shape.files, results
    for engine in engines:
        a = results["A"][engine]
        assert a["ok"], (engine, a.get("error"))
        assert a["rows_identical"] and a["rows"] == shape.rows, (engine, a)
        assert a["files_read"] == a["files_before"] == shape.files, (engine, a)
        assert a["bytes_read"] == info["bytes"] and a["bytes_written"] > 0, (engine, a)
        assert 0 < a["files_after"] < shape.files // 10, (engine, a)
        assert a["wall"] >= a["job"] >= a["work"] > 0 and a["cpu"] > 0, (engine, a)
        for scan in ("scan", "deltars_scan"):
            assert a[scan]["seconds"] > 0, (engine, scan, a)
            # fewer files, fewer requests
            assert 0 < a[scan]["requests"] < results[f"{scan}_before"]["requests"], (engine, a)
    # (B): only the new small files are rewritten; the files (A) wrote are left alone.
    (b,) = results["B"].values()
    assert b["ok"] and b["rows_identical"], b
    assert b["rows"] == shape.rows + shape.new_files * shape.rows_per_file, b
    assert b["files_read"] == shape.new_files and b["bytes_read"] == info["new_bytes"], b
    text = compaction.report("cmd", shape, results, machine())
    assert "### (A) first compaction" in text and "### (B) steady state" in text, text
    assert text.count("| deltakeeper |") == 2 and text.count("| delta-rs compact |") == 1, text
    assert "- Target identical rows, every run: yes, **met**" in text, text
    # (A) plans at version 0 (one commit), (B) at 2 (three): below Delta's interval of 10.
    for part, commits in (("A", 1), ("B", 3)):
        line = f"({part}) deltakeeper's checkpoint before the job: skipped: {commits} commits"
        assert f"{line} and no checkpoint yet; the interval is 10" in text, text


def test_vacuum_quick_on_the_local_disk(tmp_path):
    src = tmp_path / "table"
    vacuum.build(src, 2000, 100)
    engines = ["deltakeeper-lite", "deltakeeper-full", "deltakeeper-inventory", "delta-rs"]
    r = vacuum.measure_local(src, engines, tmp_path)
    assert all(x["ok"] for x in r.values()), r
    removed = {vacuum.data_key(n) for n in vacuum.removed_ids(2000, 100)}
    assert set(r["deltakeeper-lite"]["gone"]) == removed == set(r["delta-rs"]["gone"])
    full = set(r["deltakeeper-full"]["gone"])
    assert full == set(r["deltakeeper-inventory"]["gone"]) and len(full - removed) == vacuum.STRAYS
    quiet = r["deltakeeper-quiet"]
    assert quiet["gone"] == [] and quiet["vacuum_requests"] == quiet["poll_requests"] == {"list": 1}
    assert r["deltakeeper-lite"]["vacuum_requests"]["list"] == 1  # no data folder listed
    text = vacuum.report("cmd", machine(), _args(), r)
    assert "deltakeeper LITE" not in text or "NOT the same" not in text


def _args():
    import argparse

    return argparse.Namespace(store="local", files=2000, removed=100)


def test_held_memory_quick_reports_every_engine_at_the_version_it_reached():
    """Every engine reaches the last appended commit; the report names the target."""
    result = held_memory.run(files=20_000, rounds=3, repeats=1)
    for engine, runs in result["runs"].items():
        (r,) = runs
        assert r["ok"], (engine, r.get("error"))
        assert r["version"] == 9_999 + 3, (engine, r)  # the table's latest, then three commits
        assert r["held_after_rounds"] > 0 and r["peak_rss"] >= r["held_after_first"], (engine, r)
    text, verdict = held_memory.report(result)
    assert "more than an empty one" in text and verdict["held_vs_delta_rs"] > 0


@pytest.mark.spark
def test_memory_budget_quick_runs_the_daemon_to_its_checkpoint_and_past_the_commits():
    """Both daemons poll every table, write the big table's checkpoint and see every new
    commit; delta-rs loads every table; the report judges the budgeted run. The tables poll
    every 3 s, not the benchmark's 15: the daemon waits two polls for a vacuum to settle and
    up to a poll for each new commit, and nothing asserted here depends on the interval."""
    results = memory_budget.run(files=20_000, small=20, rounds=2, poll_s=3)
    for name, r in results.items():
        assert r["ok"], (name, r)
        assert r["peak_first_pass"] >= r["held_after_rounds"] > 0, (name, r)
    for name in ("deltakeeper --memory-budget 512Mi", "deltakeeper --memory-budget none"):
        assert results[name]["checkpoint"] == "done", results[name]
    text, verdict = memory_budget.report(results)
    assert "target <= 600 MiB" in text and verdict["held_vs_delta_rs"] > 0


def test_events_quick_lists_far_less_than_polling_and_every_commit_shows_up():
    """The events benchmark's every phase at a small size, as it runs them.

    Slow: two daemons in turn over the same tables on MinIO, each watched through an 8-s quiet
    window after its first pass, then timed commits, a burst and a lake's new table."""
    args = argparse.Namespace(
        tables=20,
        poll=2,
        resync="1h",
        window=8.0,
        commits=6,
        commits_poll=2,
        burst=20,
        burst_tables=2,
        burst_writer="raw",
        burst_seconds=2.0,
        queue_dir=True,
        probe_every=0.05,
    )
    r = events.measure(args)
    polling, evented = r["polling"], r["events"]
    expected = 20 * 8.0 / 2  # polls in the window at a 2 s interval; jitter moves it
    assert polling["lists"] >= 0.6 * expected, polling
    assert evented["lists"] <= 2, evented  # a 1 h resync: none are due in 8 s
    assert len(r["events_lag"]["metrics"]) == 6 and len(r["polling_lag"]["metrics"]) == 2
    assert all(0 < s < 60 for s in r["events_lag"]["metrics"] + r["events_lag"]["status"])
    b = r["burst"]
    assert b["commits"] == 20 and len(b["after_last"]) == 2
    assert b["polls"].get("event", 0) >= 1
    assert r["new_table_s"] < 60 and r["events_counted"]["new_table"] >= 1
    assert r["events_counted"]["woke"] >= 6
    text = events.report("cmd", machine(), args, r)
    assert "LISTs per table-hour" in text and "; commit to status p50 (" in text


def test_scheduling_small_maintains_every_sick_table_in_both_modes(tmp_path):
    """The fleet of the scheduling benchmark, on the local disk at a small size: both modes
    end with every sick table maintained (a Target change once broke every child at start)."""
    args = argparse.Namespace(tables=40, sick=4, timeout=300.0, local_only=True)
    results = scheduling.measure(args, tmp_path)
    for mode in scheduling.MODES:
        r = results[f"local disk/{mode}"]
        assert r["ok"] and r["sick_done_s"] is not None, r
        assert 0 < r["first_sick_s"] <= r["sick_done_s"] < 300, r
