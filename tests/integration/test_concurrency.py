"""Maintenance while a writer commits: no commit lost, nothing the log retention promises gone.

A writer in a child process (tests/support/writers.py) appends small batches with unique ids
and records every commit it saw succeed; commit files get compressed times, one day per
version, so a run of seconds is years of history. Meanwhile deltakeeper's maintenance runs in a
loop on the same table: `maintain --no-vacuum` with a 30-day log retention (3 days beside the
slower Spark writer) when the CLI has it (the table's checkpoint interval is 5), else
`checkpoint` and `cleanup`; then `vacuum` when the CLI has it. The log's `--now` is one hour
after the writer's newest commit time; vacuum, which judges data files by their real times,
gets the real clock.

Then: the writer never failed; every batch it committed is in the table exactly once (delta-rs,
DuckDB, Delta Spark); the latest version is the writer's last; every version from each
cleanup's cut-off commit on is still readable, with the rows the model says; `inspect` counts
the files the writer wrote.
"""

from __future__ import annotations

import contextlib
import io
import json
import os
import subprocess
import sys
import time
from datetime import UTC, datetime
from pathlib import Path

import pytest

from deltakeeper.cli import build_parser, main
from tests.support.oracles import duckdb_connect, table_versions
from tests.support.writers import BATCH, DAY_MS, commit_time, read_model

pytestmark = [pytest.mark.integration, pytest.mark.spark]

REPO = Path(__file__).resolve().parents[2]
HOUR_MS = 3_600_000
LOOP_S = 30


def commands() -> set[str]:
    sub = next(a for a in build_parser()._actions if a.dest == "command")
    return set(sub.choices)


def maintenance(uri: str, log_now_ms: int, retention: str) -> list[list[str]]:
    """The commands of one maintenance pass, for what this build of the CLI offers.

    The log runs on the compressed clock; vacuum gets the real one, since it judges data files
    by their real modification times (with the compressed clock it would take the writer's
    not yet committed files for week-old orphans)."""
    have = commands()
    log_now = ["--now", str(log_now_ms), "--log-retention", retention]
    vacuum = [["vacuum", uri, "--now", str(int(time.time() * 1000))]] if "vacuum" in have else []
    if "maintain" in have:
        return [["maintain", uri, *log_now, "--no-vacuum"], *vacuum]
    return [["checkpoint", uri, "--now", str(log_now_ms)], ["cleanup", uri, *log_now], *vacuum]


def midnight(ms: int) -> int:
    return ms - ms % DAY_MS


def run_json(argv: list[str]) -> dict:
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        code = main([*argv, "--json"])
    assert code == 0, f"{argv[0]} exited {code} while the writer ran"
    return json.loads(out.getvalue())


def start_writer(kind: str, table: Path, model: Path, stop: Path, base_ms: int, pause: float):
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(REPO), env.get("PYTHONPATH")]))
    cmd = [sys.executable, "-m", "tests.support.writers", kind, str(table), str(model)]
    cmd += [str(stop), str(base_ms), str(pause)]
    return subprocess.Popen(
        cmd, cwd=REPO, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True
    )


def wait_for_commits(writer, model: Path, count: int, timeout_s: float) -> None:
    deadline = time.monotonic() + timeout_s
    while len(read_model(model)) < count:
        if writer.poll() is not None:
            pytest.fail(f"the writer died before committing: {writer.stderr.read()[-3000:]}")
        if time.monotonic() > deadline:
            pytest.fail(f"the writer made fewer than {count} commits in {timeout_s}s")
        time.sleep(0.2)


def stop_writer(writer, stop: Path) -> None:
    stop.touch()
    try:
        _, err = writer.communicate(timeout=120)
    except subprocess.TimeoutExpired:
        writer.kill()
        _, err = writer.communicate()
    assert writer.returncode == 0, f"the writer failed while maintenance ran: {err[-3000:]}"


def midnight_utc_today() -> int:
    today = datetime.now(UTC).replace(hour=0, minute=0, second=0, microsecond=0)
    return int(today.timestamp() * 1000)


def maintain_while_writing(
    kind: str, tmp_path: Path, loop_s: float, pause: float, commits: int, retention: str
):
    """Run the writer and the maintenance loop for `loop_s` and at least `commits` commits;
    returns (base, model, reports, passes)."""
    table, model, stop = tmp_path / "t", tmp_path / "model.jsonl", tmp_path / "stop"
    base = midnight_utc_today()
    writer = start_writer(kind, table, model, stop, base, pause)
    reports: list[dict] = []
    passes: list[int] = []  # the log clock of each pass
    try:
        wait_for_commits(writer, model, 1, timeout_s=180)
        deadline = time.monotonic() + loop_s
        give_up = deadline + 240
        while time.monotonic() < deadline or len(read_model(model)) < commits:
            assert time.monotonic() < give_up, f"fewer than {commits} commits in {loop_s + 240}s"
            log_now = commit_time(base, read_model(model)[-1]["version"]) + HOUR_MS
            for argv in maintenance(str(table), log_now, retention):
                reports.append(run_json(argv))
            passes.append(log_now)
            assert writer.poll() is None, f"the writer stopped: {writer.stderr.read()[-3000:]}"
    finally:
        stop_writer(writer, stop)
    return base, read_model(model), reports, passes


def expected_cutoff(model: list[dict], base: int, cutoff_ms: int) -> int | None:
    """The newest committed version whose commit time is not after the cut-off."""
    old = [c["version"] for c in model if commit_time(base, c["version"]) <= cutoff_ms]
    return max(old, default=None)


def ids_duckdb(path: Path, version: int | None = None) -> list[int]:
    sql, args = "SELECT id FROM delta_scan(?) ORDER BY id", [str(path)]
    if version is not None:
        sql, args = "SELECT id FROM delta_scan(?, version => ?) ORDER BY id", [str(path), version]
    with duckdb_connect() as con:
        return [r[0] for r in con.execute(sql, args).fetchall()]


def ids_deltars(path: Path, version: int | None = None) -> list[int]:
    import pyarrow as pa
    from deltalake import DeltaTable, QueryBuilder

    qb = QueryBuilder().register("t", DeltaTable(str(path), version=version))
    return pa.table(qb.execute("SELECT id FROM t ORDER BY id").read_all())["id"].to_pylist()


def ids_up_to(model: list[dict], version: int) -> list[int]:
    return sorted(i for c in model if c["version"] <= version for i in range(c["first"], c["end"]))


def check_outcome(
    path: Path, base: int, model: list[dict], reports: list[dict], passes, days, tally
):
    last = model[-1]["version"]
    versions = [c["version"] for c in model]
    assert versions == sorted(set(versions)), "the writer saw a version twice or out of order"
    every_id = ids_up_to(model, last)
    assert len(every_id) == len(set(every_id)) == BATCH * len(model)

    from deltalake import DeltaTable

    assert DeltaTable(str(path)).version() == last, "the latest version is not the writer's last"
    assert ids_deltars(path) == every_id, "delta-rs: a committed batch is missing or doubled"
    assert ids_duckdb(path) == every_id, "DuckDB: a committed batch is missing or doubled"
    inspect = run_json(["inspect", str(path)])
    assert inspect["version"] == last
    assert inspect["numFiles"] == len(model) == len(DeltaTable(str(path)).file_uris())

    failed = [o for r in reports for o in r.get("results", []) if o["result"] == "failed"]
    assert not failed, failed
    retention = days * DAY_MS
    for r in reports:  # each cut where the model says, though the writer moved on meanwhile
        if r["operation"] == "cleanup":
            assert r["cutoffCommit"] == expected_cutoff(model, base, r["cutoffTimestamp"]), r
    log_deletes = sum(r["deletedFiles"] for r in reports if r["operation"] != "vacuum")
    assert log_deletes > 0, "the log was never cleaned: the retention promise was not tested"
    vacuumed = sum(r["deletedFiles"] for r in reports if r["operation"] == "vacuum")
    assert vacuumed == 0, "vacuum deleted files of an append-only table"
    promised = expected_cutoff(model, base, midnight(passes[-1] - retention))
    assert promised is not None
    readable = table_versions(str(path))
    assert readable == list(range(readable[0], last + 1)), "a gap in the readable versions"
    assert readable[0] <= promised, f"versions {readable[0]}..{promised} were promised, are gone"
    for v in sorted({promised, (promised + last) // 2, last}):
        want = ids_up_to(model, v)
        assert ids_deltars(path, v) == want, f"delta-rs at version {v}"
        assert ids_duckdb(path, v) == want, f"DuckDB at version {v}"
        tally["versions inside retention re-read after concurrent maintenance"] += 1


def check_with_spark(path: Path, model: list[dict]) -> None:
    from tests.support.spark import spark_session

    spark = spark_session("deltakeeper-concurrency")
    df = spark.read.format("delta").load(str(path))
    row = df.selectExpr("count(*) AS n", "count(DISTINCT id) AS d", "sum(id) AS s").collect()[0]
    every_id = ids_up_to(model, model[-1]["version"])
    assert (row["n"], row["d"], row["s"]) == (len(every_id), len(every_id), sum(every_id))


def test_no_commit_of_a_delta_rs_writer_is_lost(tmp_path, tally):
    base, model, reports, passes = maintain_while_writing(
        "deltars", tmp_path, LOOP_S, pause=0.01, commits=100, retention="30d"
    )
    checkpoints = {r["checkpointVersion"] for r in reports if r["operation"] != "vacuum"}
    assert len(passes) >= 5 and len(checkpoints - {None}) >= 5, (len(passes), checkpoints)
    check_outcome(tmp_path / "t", base, model, reports, passes, 30, tally)
    check_with_spark(tmp_path / "t", model)
    tally["commits made during maintenance (delta-rs writer)"] += len(model)
    tally["maintenance passes beside a writer"] += len(passes)


def test_no_commit_of_a_spark_writer_is_lost(tmp_path, tally):
    """The same beside Delta Spark, which also writes its own checkpoints; fewer commits, so a
    3-day log retention."""
    base, model, reports, passes = maintain_while_writing(
        "spark", tmp_path, LOOP_S, pause=0.0, commits=12, retention="3d"
    )
    ours = {r["checkpointVersion"] for r in reports if r["operation"] != "vacuum"} - {None}
    assert ours, "deltakeeper wrote no checkpoint beside the Spark writer"
    check_outcome(tmp_path / "t", base, model, reports, passes, 3, tally)
    check_with_spark(tmp_path / "t", model)
    tally["commits made during maintenance (Delta Spark writer)"] += len(model)
