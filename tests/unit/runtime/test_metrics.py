"""runtime/metrics.py: gauges, counters, forgetting a table, the /metrics and /healthz server."""

from __future__ import annotations

import gzip
import random
import urllib.error
import urllib.request
import zlib
from collections import Counter
from collections.abc import Iterator
from types import SimpleNamespace
from typing import Any

import pytest
from prometheus_client.exposition import generate_latest
from prometheus_client.parser import text_string_to_metric_families

from deltakeeper.delta.expire.run import ExpiryRun
from deltakeeper.maintenance.operations import Operation
from deltakeeper.maintenance.operations.outcome import Outcome, Result
from deltakeeper.runtime import gzip_stream, metrics
from deltakeeper.runtime.health import Component, Health, Score
from deltakeeper.runtime.metrics import Metrics

T = {"namespace": "ns", "table": "t"}
STATUS = {
    "version": 5,
    "logFiles": 7,
    "logBytes": 7000,
    "commitsSinceCheckpoint": 3,
    "files": 40,
    "bytes": 123456,
    "smallFiles": 12,
    "tombstones": 2,
    "lastCheckpointVersion": 2,  # not a gauge
    "lastPoll": "2027-01-15T08:00:00Z",
}
GAUGES = {
    "version": "deltakeeper_table_version",
    "logFiles": "deltakeeper_table_log_files",
    "logBytes": "deltakeeper_table_log_bytes",
    "commitsSinceCheckpoint": "deltakeeper_table_commits_since_checkpoint",
    "files": "deltakeeper_table_files",
    "bytes": "deltakeeper_table_bytes",
    "smallFiles": "deltakeeper_table_small_files",
    "tombstones": "deltakeeper_table_tombstones",
}


def value(m: Metrics, name: str, **labels: str) -> float | None:
    return m.registry.get_sample_value(name, {**T, **labels})


def commits(m: Metrics) -> float | None:
    return value(m, "deltakeeper_table_commits_total")


def test_gauges_come_from_the_status_numbers() -> None:
    m = Metrics()
    m.table("ns", "t", STATUS)
    for key, name in GAUGES.items():
        assert value(m, name) == STATUS[key], name
    m.table("ns", "t", {**STATUS, "files": 41, "version": 6})
    assert value(m, "deltakeeper_table_files") == 41
    # A status without numbers (a failed poll) leaves the last known values.
    m.table("ns", "t", {"lastPoll": "x"})
    assert value(m, "deltakeeper_table_files") == 41


def test_commits_total_starts_at_zero_and_never_decreases() -> None:
    m = Metrics()
    m.table("ns", "t", {"version": 5})
    assert commits(m) == 0
    m.table("ns", "t", {"version": 9})
    assert commits(m) == 4
    m.table("ns", "t", {"version": 9})
    assert commits(m) == 4
    m.table("ns", "t", {"version": 2})  # table re-created: nothing counted
    assert commits(m) == 4 and value(m, "deltakeeper_table_version") == 2
    m.table("ns", "t", {"version": 3})  # and counting goes on from the new version
    assert commits(m) == 5
    m.table("ns", "other", {"version": 100})
    assert (
        m.registry.get_sample_value(
            "deltakeeper_table_commits_total", {"namespace": "ns", "table": "other"}
        )
        == 0
    )


def test_maintenance_deleted_and_request_counters() -> None:
    m = Metrics()
    m.maintenance("ns", "t", "vacuum", "done", 0.2)
    m.maintenance("ns", "t", "vacuum", "done", 3.0)
    m.maintenance("ns", "t", "checkpoint", "failed", 0.01)
    runs = "deltakeeper_maintenance_runs_total"
    assert value(m, runs, operation="vacuum", result="done") == 2
    assert value(m, runs, operation="checkpoint", result="failed") == 1
    assert value(m, runs, operation="checkpoint", result="done") == 0  # known: at 0 until run
    hist = "deltakeeper_maintenance_duration_seconds"
    assert value(m, hist + "_count", operation="vacuum") == 2
    assert value(m, hist + "_sum", operation="vacuum") == pytest.approx(3.2)
    assert value(m, hist + "_bucket", operation="vacuum", le="0.5") == 1

    m.deleted("ns", "t", "data", 3, 300)
    m.deleted("ns", "t", "data", 1, 50)
    m.deleted("ns", "t", "log", 10, 1000)
    assert value(m, "deltakeeper_deleted_files_total", kind="data") == 4
    assert value(m, "deltakeeper_deleted_bytes_total", kind="data") == 350
    assert value(m, "deltakeeper_deleted_bytes_total", kind="log") == 1000

    written = "deltakeeper_written_files_total"
    assert value(m, written, operation="stats") == 0  # every writer at 0 from the start
    m.written("ns", "t", "stats", 10_000)
    m.written("ns", "t", "stats", 5)
    m.written("ns", "t", "manifest", 3)
    assert value(m, written, operation="stats") == 10_005
    assert value(m, written, operation="manifest") == 3
    assert value(m, written, operation="logCompaction") == 0

    m.requests("ns", "t", Counter({"list": 1, "read": 0}))
    m.requests("ns", "t", {"list": 2, "delete": 1})
    req = "deltakeeper_storage_requests_total"
    assert value(m, req, operation="list") == 3 and value(m, req, operation="delete") == 1
    assert value(m, req, operation="read") == 0  # every kind of request at 0 until sent
    m.requests("ns", "t", {"copy": 1})  # a kind not known up front shows once it happens
    assert value(m, req, operation="copy") == 1


def test_vacuum_mode_runs_candidates_and_requests() -> None:
    m = Metrics()
    assert value(m, "deltakeeper_vacuum_mode", mode="lite") is None  # nothing before a vacuum
    m.vacuum("ns", "t", "full", "done", (1000, 1012), {"list": 2, "read": 6, "delete": 1})
    m.vacuum("ns", "t", "lite", "done", (30, 0), {"list": 2, "read": 3})
    m.vacuum("ns", "t", "lite", "dry-run", (30, 0), {"list": 2, "read": 3})
    runs = "deltakeeper_vacuum_runs_total"
    assert value(m, runs, mode="lite", result="done") == 1
    assert value(m, runs, mode="lite", result="dry-run") == 1
    assert value(m, runs, mode="full", result="done") == 1
    assert value(m, "deltakeeper_vacuum_mode", mode="lite") == 1
    assert value(m, "deltakeeper_vacuum_mode", mode="full") is None  # only the last one shows
    assert value(m, "deltakeeper_vacuum_candidates_total") == 1060
    assert value(m, "deltakeeper_vacuum_listed_objects_total") == 1012
    req = "deltakeeper_vacuum_requests_total"
    assert value(m, req, operation="read") == 12 and value(m, req, operation="delete") == 1
    m.forget("ns", "t")
    assert value(m, runs, mode="lite", result="done") is None


def test_conditions_are_1_when_true_0_when_false_and_absent_while_unknown() -> None:
    m = Metrics()
    cond = "deltakeeper_table_condition"
    m.conditions("ns", "t", {"Ready": "True", "Degraded": "False", "StorageReachable": "Unknown"})
    assert value(m, cond, condition="Ready") == 1
    assert value(m, cond, condition="Degraded") == 0
    assert value(m, cond, condition="StorageReachable") is None
    # Each call replaces the set: a condition gone Unknown stops being exported.
    m.conditions("ns", "t", {"Ready": "False", "StorageReachable": "Unknown"})
    assert value(m, cond, condition="Ready") == 0
    assert value(m, cond, condition="Degraded") is None


def test_checkpoint_age_is_computed_at_scrape_time() -> None:
    now = [1_000.0]
    m = Metrics(clock=lambda: now[0])
    age = "deltakeeper_table_checkpoint_age_seconds"
    assert value(m, age) is None
    m.checkpoint_written("ns", "t", 400_000)
    assert value(m, age) == 600.0
    now[0] = 1_030.0
    assert value(m, age) == 630.0
    m.checkpoint_written("ns", "t", 2_000_000)  # written "after" now (clock skew): not negative
    assert value(m, age) == 0.0
    m.checkpoint_written("ns", "t", None)
    assert value(m, age) is None


OPERATIONS = ("checkpoint", "cleanup", "vacuum")
RESULTS = ("done", "skipped", "refused", "failed")
DELETED = ("deltakeeper_deleted_files_total", "deltakeeper_deleted_bytes_total")
VACUUM_RESULTS = ("done", "dry-run", "skipped")
REQUESTS = ("list", "read", "head", "put", "delete")


def _values(m: Metrics, name: str, table: str = "t") -> dict[tuple[str, ...], float]:
    """One family's samples of one table as served (our writer's text), by their other labels;
    a label set served twice fails."""
    out: dict[tuple[str, ...], float] = {}
    for family in text_string_to_metric_families("".join(m.exposition())):
        for s in family.samples:
            if s.name == name and s.labels.get("table") == table:
                key = tuple(v for k, v in s.labels.items() if k not in ("namespace", "table"))
                assert key not in out, (name, key)
                out[key] = s.value
    return out


def test_a_watched_table_has_its_known_series_at_0_until_they_move() -> None:
    m = Metrics()
    m.table("ns", "t", STATUS)
    text = "".join(m.exposition())
    for name in DELETED:
        for kind in ("log", "data"):
            assert f'{name}{{namespace="ns",table="t",kind="{kind}"}} 0.0\n' in text
    runs = "deltakeeper_maintenance_runs_total"
    known = {(op, r) for op in OPERATIONS for r in RESULTS} | {("vacuum", "dry-run")}
    assert _values(m, runs) == dict.fromkeys(known, 0.0)
    hist = "deltakeeper_maintenance_duration_seconds"
    buckets = _values(m, hist + "_bucket")
    assert buckets == {(op, le): 0.0 for op in OPERATIONS for le in _BOUNDS}
    zeros = {(op,): 0.0 for op in OPERATIONS}
    assert _values(m, hist + "_count") == _values(m, hist + "_sum") == zeros
    assert "deltakeeper_compaction_jobs{" not in text  # compaction is not enabled
    written = _values(m, "deltakeeper_written_files_total")
    assert written == {(op,): 0.0 for op in ("stats", "logCompaction", "manifest")}
    vacuums = _values(m, "deltakeeper_vacuum_runs_total")
    assert vacuums == {(mode, r): 0.0 for mode in ("lite", "full") for r in VACUUM_RESULTS}
    for counter in ("candidates_total", "listed_objects_total"):
        assert _values(m, f"deltakeeper_vacuum_{counter}") == {(): 0.0}
    for requests in ("deltakeeper_vacuum_requests_total", "deltakeeper_storage_requests_total"):
        assert _values(m, requests) == {(op,): 0.0 for op in REQUESTS}
    assert _values(m, "deltakeeper_vacuum_mode") == {}  # no last mode before a vacuum

    # The first cleanup counts from 0; what did not happen stays at 0.
    m.maintenance("ns", "t", "cleanup", "done", 0.2)
    m.deleted("ns", "t", "log", 10, 1000)
    assert _values(m, runs)[("cleanup", "done")] == 1
    assert sum(_values(m, runs).values()) == 1
    assert _values(m, hist + "_bucket")[("cleanup", "0.5")] == 1
    assert _values(m, hist + "_count") == {("checkpoint",): 0, ("cleanup",): 1, ("vacuum",): 0}
    assert _values(m, DELETED[0]) == {("log",): 10, ("data",): 0}
    assert _values(m, DELETED[1]) == {("log",): 1000, ("data",): 0}
    # A combination not known up front still shows once it happens, once.
    m.maintenance("ns", "t", "checkpoint", "dry-run", 0.1)
    assert len(_values(m, runs)) == len(known) + 1

    m.table("ns", "other", STATUS)
    m.forget("ns", "t")
    assert 'table="t"' not in "".join(m.exposition())
    assert _values(m, DELETED[0], "other") == {("log",): 0, ("data",): 0}


def test_a_table_that_compacts_also_has_its_compaction_series_at_0() -> None:
    m = Metrics()
    m.compaction_jobs("ns", "t", {"RUNNING": 0, "COMPLETED": 0, "FAILED": 0})
    states = {("RUNNING",): 0, ("COMPLETED",): 0, ("FAILED",): 0}
    assert _values(m, "deltakeeper_compaction_jobs") == states
    runs = _values(m, "deltakeeper_maintenance_runs_total")
    assert {key: n for key, n in runs.items() if key[0] == "compaction"} == {
        ("compaction", r): 0 for r in RESULTS
    }
    counts = _values(m, "deltakeeper_maintenance_duration_seconds_count")
    assert counts == {(op,): 0 for op in (*OPERATIONS, "compaction")}
    # It stops compacting (before any job): the gauge and the compaction series at 0 go.
    m.compaction_jobs("ns", "t", {})
    assert _values(m, "deltakeeper_compaction_jobs") == {}
    assert "compaction" not in {key[0] for key in _values(m, "deltakeeper_maintenance_runs_total")}


_BOUNDS = (*(str(b) for b in metrics.DURATION_BUCKETS), "+Inf")


def _series(m: Metrics, table: str) -> set[str]:
    text = _exposition(m)
    return {
        s.name
        for family in text_string_to_metric_families(text)
        for s in family.samples
        if s.labels.get("table") == table
    }


def _exposition(m: Metrics) -> str:
    return generate_latest(m.registry).decode()


def _fill(m: Metrics, table: str) -> None:
    m.table("ns", table, STATUS)
    m.checkpoint_written("ns", table, 1)
    m.maintenance("ns", table, "cleanup", "done", 0.1)
    m.deleted("ns", table, "log", 1, 10)
    m.written("ns", table, "logCompaction", 1)
    m.requests("ns", table, {"list": 1})
    m.compaction_jobs("ns", table, {"RUNNING": 1, "COMPLETED": 0, "FAILED": 0})
    m.conditions("ns", table, {"Ready": "True"})


def test_forget_drops_every_series_of_one_table_only() -> None:
    m = Metrics()
    _fill(m, "t")
    _fill(m, "keep")
    before = _series(m, "t")
    assert "deltakeeper_table_checkpoint_age_seconds" in before
    assert "deltakeeper_compaction_jobs" in before and len(before) > 15
    assert "deltakeeper_table_condition" in before
    m.forget("ns", "t")
    assert _series(m, "t") == set()
    assert _series(m, "keep") == before
    # Watched again: the counter starts over at 0, and the same status is not skipped as quiet.
    m.table("ns", "t", STATUS)
    assert commits(m) == 0 and value(m, "deltakeeper_table_files") == STATUS["files"]


@pytest.fixture
def server() -> Iterator[tuple[Metrics, list[bool], str]]:
    m = Metrics()
    health = [True]
    srv = metrics.serve(m, 0, "127.0.0.1", healthy=lambda: health[0])
    try:
        yield m, health, f"http://127.0.0.1:{srv.server_address[1]}"
    finally:
        srv.shutdown()
        srv.server_close()


def _get(url: str) -> tuple[int, str, str]:
    try:
        with urllib.request.urlopen(url, timeout=5) as r:
            return r.status, r.headers["Content-Type"], r.read().decode()
    except urllib.error.HTTPError as e:
        return e.code, e.headers["Content-Type"], e.read().decode()


def test_serve_answers_metrics_and_health_and_drops_a_forgotten_table(
    server: tuple[Metrics, list[bool], str],
) -> None:
    m, health, base = server
    m.table("ns", "t", STATUS)
    code, ctype, body = _get(base + "/metrics")
    assert code == 200 and ctype == "text/plain; version=0.0.4; charset=utf-8"
    assert 'deltakeeper_table_version{namespace="ns",table="t"} 5.0' in body
    assert 'deltakeeper_table_commits_total{namespace="ns",table="t"} 0.0' in body
    assert _get(base + "/metrics?name=x")[0] == 200
    assert _get(base + "/healthz")[::2] == (200, "ok\n")
    health[0] = False
    assert _get(base + "/healthz")[::2] == (503, "unhealthy\n")
    for path in ("/", "/metric", "/healthz/x", "/favicon.ico"):
        assert _get(base + path)[0] == 404, path
    # The counters as served: commits never decrease, not even when the table is re-created.
    m.table("ns", "t", {"version": 9})
    m.table("ns", "t", {"version": 2})
    m.maintenance("ns", "t", "vacuum", "done", 0.2)
    m.deleted("ns", "t", "data", 3, 300)
    body = _get(base + "/metrics")[2]
    assert 'deltakeeper_table_version{namespace="ns",table="t"} 2.0' in body
    assert 'deltakeeper_table_commits_total{namespace="ns",table="t"} 4.0' in body
    assert 'deltakeeper_deleted_bytes_total{namespace="ns",table="t",kind="data"} 300.0' in body
    # A forgotten table is gone from what is served.
    m.forget("ns", "t")
    assert 'table="t"' not in _get(base + "/metrics")[2]


def test_name_asks_for_those_families_only(server: tuple[Metrics, list[bool], str]) -> None:
    """`/metrics?name[]=F` (as Prometheus's client libraries take it): a scraper that wants one
    family of a big fleet does not get tens of megabytes."""
    m, _, base = server
    m.table("ns", "t", STATUS)
    wanted = "name[]=deltakeeper_table_version&name[]=deltakeeper_table_files"
    body = _get(f"{base}/metrics?{wanted}")[2]
    families = {f.name for f in text_string_to_metric_families(body)}
    assert families == {"deltakeeper_table_version", "deltakeeper_table_files"}, families
    assert 'deltakeeper_table_version{namespace="ns",table="t"} 5.0' in body
    assert _get(f"{base}/metrics?name[]=nothing_of_ours") == (200, metrics.CONTENT_TYPE, "")
    assert len(_get(base + "/metrics")[2]) > 10 * len(body)  # no name[]: every family


def test_http_exposition_equals_the_registry_and_gzips(
    server: tuple[Metrics, list[bool], str],
) -> None:
    """What /metrics serves (our writer, plain and gzipped) parses to exactly the samples
    prometheus-client reads from the registry, with label values that need escaping."""
    m, _, base = server
    m.clock = lambda: 5_000.0  # checkpoint age: the same at both reads
    for table in ("t", 'we"ird\\name\n'):
        _fill(m, table)
        m.maintenance("ns", table, "vacuum", "failed", 4000.0)
    expected = _samples(generate_latest(m.registry).decode())
    assert len(expected) > 40
    assert _samples(_get(base + "/metrics")[2]) == expected
    request = urllib.request.Request(base + "/metrics", headers={"Accept-Encoding": "gzip"})
    with urllib.request.urlopen(request, timeout=5) as r:
        assert r.headers["Content-Encoding"] == "gzip"
        assert _samples(gzip.decompress(r.read()).decode()) == expected


def _samples(text: str) -> set[tuple[str, tuple[tuple[str, str], ...], float]]:
    return {
        (s.name, tuple(sorted(s.labels.items())), s.value)
        for family in text_string_to_metric_families(text)
        for s in family.samples
        if not s.name.endswith("_created")
    }


def test_exposition_is_chunked() -> None:
    m = Metrics()
    for i in range(30):
        m.table("ns", f"t{i}", STATUS)
    chunks = list(m.exposition(chunk_lines=10))
    assert len(chunks) > len(metrics._TABLE_GAUGES) * 3
    assert sum(c.count("deltakeeper_table_files{") for c in chunks) == 30


EXPIRED = ("deltakeeper_expired_files_total", "deltakeeper_expired_rows_total")


def test_a_table_that_expires_has_its_expiry_series_at_0_then_counts() -> None:
    m = Metrics()
    m.table("ns", "t", STATUS)
    m.table("ns", "plain", STATUS)
    m.asks("ns", "t", frozenset({Operation.EXPIRE}))
    m.asks("ns", "plain", frozenset())
    for name in (*EXPIRED, "deltakeeper_expired_bytes_total"):
        assert _values(m, name) == {(): 0.0}
        assert _values(m, name, "plain") == {}
    runs = _values(m, "deltakeeper_maintenance_runs_total")
    assert {k: v for k, v in runs.items() if k[0] == "expire"} == {
        ("expire", r): 0.0 for r in (*RESULTS, "dry-run")
    }
    assert not any(
        k[0] == "expire" for k in _values(m, "deltakeeper_maintenance_runs_total", "plain")
    )
    m.counted("ns", "t", _expired(4, 40, 400))
    m.counted("ns", "t", _expired(1, 10, 100))
    m.counted("ns", "t", _expired(9, 90, 900, Result.DRY_RUN))  # a dry run removes nothing
    assert _values(m, "deltakeeper_expired_rows_total") == {(): 50.0}
    assert _values(m, "deltakeeper_expired_bytes_total") == {(): 500.0}
    m.asks("ns", "t", frozenset())  # dataRetention taken away: the series go
    assert _values(m, "deltakeeper_expired_rows_total") == {}


def _expired(files: int, rows: int, size: int, result: Result = Result.DONE) -> Outcome:
    """An expiry's Outcome as its run makes it (the plan's counts are what it removed)."""
    plan = SimpleNamespace(files=files, rows=rows, bytes=size)
    run = ExpiryRun(plan, dry_run=result is Result.DRY_RUN)  # type: ignore[arg-type]
    return Outcome(Operation.EXPIRE, result, "", detail=run)


def _gunzip(parts: Iterator[bytes]) -> str:
    """The body as a strict reader takes it: one gzip member, its CRC and size checked, with
    nothing after it (curl reads only a first member)."""
    reader = zlib.decompressobj(31)
    text = reader.decompress(b"".join(parts))
    assert reader.eof and not reader.unused_data
    return text.decode()


def _write_something(m: Metrics, rng: random.Random, table: str) -> None:
    """One writer call of any kind, on `table`, with values drawn from `rng`."""
    n = rng.randrange(1, 50)
    op = rng.choice(["checkpoint", "cleanup", "vacuum", "expire", "compaction"])
    health = Health(
        n, tuple(Score(c, rng.choice([n, 100]), {}) for c in Component), {"data": n, "log": 0}
    )
    writes = [
        lambda: m.table("ns", table, {**STATUS, "version": n, "files": n}),
        lambda: m.conditions("ns", table, {"Ready": rng.choice(["True", "False", "Unknown"])}),
        lambda: m.checkpoint_written("ns", table, rng.choice([None, n * 1000])),
        lambda: m.maintenance("ns", table, op, rng.choice(RESULTS), n / 7),
        lambda: m.deleted("ns", table, rng.choice(["log", "data"]), n, n * 10),
        lambda: m.written("ns", table, "logCompaction", n),
        lambda: m.requests("ns", table, {rng.choice(REQUESTS): n}),
        lambda: m.vacuum("ns", table, rng.choice(["lite", "full"]), "done", (n, n), {"list": 1}),
        lambda: m.asks("ns", table, rng.choice([frozenset(), frozenset({Operation.EXPIRE})])),
        lambda: m.counted("ns", table, _expired(n, n, n)),
        lambda: m.health("ns", table, health),
        lambda: m.compaction_jobs("ns", table, rng.choice([{}, {"RUNNING": n}])),
        lambda: m.forget("ns", table),
    ]
    rng.choice(writes)()


def test_the_gzipped_exposition_is_the_text_whatever_was_written_between_scrapes() -> None:
    """Each block of tables keeps each family compressed until a value in it changes: after
    any mix of writes (every writer, tables added and forgotten across blocks), what a scrape
    serves gzipped is one gzip member of exactly the text, which is rendered afresh."""
    rng = random.Random(7)
    m = Metrics(clock=lambda: 9_000.0)
    names = [f"t{i}" for i in range(3 * metrics.BLOCK_TABLES + 5)]
    for name in names:
        m.table("ns", name, STATUS)
    for scrape in range(60):
        for _ in range(rng.randrange(1, 40)):
            _write_something(m, rng, rng.choice(names))
        assert _gunzip(m.exposition_gzip()) == "".join(m.exposition()), f"scrape {scrape}"
    assert len(m._blocks) > 1


def test_a_scrape_compresses_again_only_the_families_that_changed(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A quiet poll changes a table's request counts: the next scrape compresses that block's
    requests family again and reuses every other member (the checkpoint age, which moves with
    the clock, and the daemon's few series are rendered at every scrape)."""
    m = Metrics(clock=lambda: 9_000.0)
    for i in range(2 * metrics.BLOCK_TABLES):
        _fill(m, f"t{i}")
    list(m.exposition_gzip())
    compressed: list[str] = []
    real = gzip_stream.piece
    monkeypatch.setattr(
        gzip_stream, "piece", lambda text: compressed.append(text.decode()) or real(text)
    )
    list(m.exposition_gzip())
    per_table = {line.split("{")[0] for text in compressed for line in text.splitlines()}
    assert "deltakeeper_storage_requests_total" not in per_table
    assert "deltakeeper_table_checkpoint_age_seconds" in per_table
    compressed.clear()
    m.requests("ns", "t3", {"list": 1})
    body = _gunzip(m.exposition_gzip())
    requests = [t for t in compressed if "deltakeeper_storage_requests_total{" in t]
    assert len(requests) == 1 and 'table="t3"' in requests[0] and 'table="t20"' not in requests[0]
    assert not any("deltakeeper_maintenance_runs_total{" in t for t in compressed)
    line = 'deltakeeper_storage_requests_total{namespace="ns",table="t3",operation="list"} 2.0'
    assert line in body.splitlines()


def test_a_scrape_cut_short_keeps_what_it_rendered_for_the_next() -> None:
    """A scraper that times out hangs up mid-way: the blocks rendered so far are not rendered
    again, so the next scrape of a big fleet right after a start gets further."""
    m = Metrics(clock=lambda: 9_000.0)
    for i in range(40 * metrics.BLOCK_TABLES):
        _fill(m, f"t{i}")
    parts = m.exposition_gzip()
    for _ in range(300):
        next(parts)
    parts.close()
    kept = [member is not None for b in m._blocks for member in b.members]
    assert 0 < sum(kept) < len(kept)
    assert _gunzip(m.exposition_gzip()) == "".join(m.exposition())


def test_a_table_placed_while_its_block_renders_is_in_the_next_scrape(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A poll thread adds a table to a block while a scrape renders that block: the piece
    that scrape keeps lacks the table, so the next scrape must render the block again."""
    m = Metrics(clock=lambda: 9_000.0)
    for i in range(3):
        m.table("ns", f"t{i}", STATUS)
    list(m.exposition_gzip())
    m.requests("ns", "t0", {"list": 1})  # the block's requests piece is stale
    real, added = metrics._lines, []
    requests = "deltakeeper_storage_requests_total"

    def render_then_add(name: str, samples: Any, chunk_lines: int) -> Iterator[list[str]]:
        rendered = list(real(name, samples, chunk_lines))
        if name == requests and not added:  # a new table: its requests at 0, not marked
            added.append(m.table("ns", "late", STATUS))
        return iter(rendered)

    monkeypatch.setattr(metrics, "_lines", render_then_add)
    list(m.exposition_gzip())
    monkeypatch.undo()
    assert added and len(m._blocks) == 1
    text = _gunzip(m.exposition_gzip())
    late = f'{requests}{{namespace="ns",table="late",operation="list"}} 0.0'
    assert late in text.splitlines()
    assert text == "".join(m.exposition())
