"""A real Prometheus 3 scraping a live `deltakeeper run` (standalone mode) every second, with
the shipped rules loaded: delta-rs commits to one healthy table while the other manifest points
at a folder that is not a Delta table yet.

- every dashboard query, its Grafana variables substituted, returns data (the compaction
  panels excepted: nothing sets `deltakeeper_compaction_jobs` until Spark compaction exists,
  and the test says so by expecting them empty), and the namespace and table variables list
  the live ones;
- the not-Ready alert fires for the broken table only, and resolves once delta-rs creates the
  table there. The rules are loaded as shipped except that alert's `for:` (10m), which this
  test shortens to 3s in its own copy so the run takes a minute, not ten.
"""

from __future__ import annotations

import datetime as dt
import json
import os
import signal
import subprocess
import sys
import threading
import time
import urllib.parse
import urllib.request
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest
import yaml
from deltalake import DeltaTable, PostCommitHookProperties, write_deltalake

from tests.monitoring.conftest import alerts, load_dashboards, load_rules, panels, substitute
from tests.support.stores import free_port

DELTAKEEPER = Path(sys.executable).parent / "deltakeeper"
HOOKS = PostCommitHookProperties(create_checkpoint=False, cleanup_expired_logs=False)
NOT_READY = "DeltakeeperTableNotReady"
OLD = time.time() - 40 * 86400  # older than Delta's default log (30d) and file (7d) retention
COMPACTION = "deltakeeper_compaction_jobs"


def _batch(i: int) -> pa.Table:
    """Ten rows written now (`ts`: what the healthy table's dataRetention reads)."""
    now = [dt.datetime.now(dt.UTC)] * 10
    return pa.table(
        {
            "id": pa.array(range(i * 10, i * 10 + 10), pa.int64()),
            "ts": pa.array(now, pa.timestamp("us", tz="UTC")),
        }
    )


def _old_table(root: Path) -> None:
    """Twelve commits and a checkpoint, all 40 days old, and an unreferenced data file as old:
    deltakeeper's first log cleanup and vacuum have something to delete."""
    for i in range(12):
        write_deltalake(str(root), _batch(i), mode="append", post_commithook_properties=HOOKS)
    DeltaTable(str(root)).create_checkpoint()
    (root / "orphan.parquet").write_bytes(b"not referenced by any commit" * 100)
    for p in [*(root / "_delta_log").iterdir(), root / "orphan.parquet"]:
        # A second apart, in version order: equal times would read as time going backwards.
        at = OLD + int(p.name.split(".")[0]) if p.name[0].isdigit() else OLD
        os.utime(p, (at, at))


def _manifest(name: str, uri: Path, kind: str = "DeltaTable") -> str:
    """A DeltaTable polled every second with a log compaction file every 4 commits (the
    writers panel's series) and a data retention (the expiry panel's series; its rows are all
    recent, so nothing goes), or a DeltaLake scanned every two seconds."""
    table = {
        "pollInterval": "1s",
        "logCompaction": {"interval": 4},
        "dataRetention": {"column": "ts", "keep": "30d"},
    }
    spec = table if kind == "DeltaTable" else {"scanInterval": "2s"}
    return json.dumps(
        {
            "apiVersion": "deltakeeper.io/v1alpha1",
            "kind": kind,
            "metadata": {"name": name, "namespace": "lake"},
            "spec": {"uri": f"file://{uri}", **spec},
        }
    )


def _rules_for_test(path: Path) -> None:
    rules = load_rules()
    changed = 0
    for group in rules["groups"]:
        for rule in group["rules"]:
            if rule.get("alert") == NOT_READY:
                rule["for"], changed = "3s", changed + 1
    assert changed == 1
    path.write_text(yaml.safe_dump(rules))


def _get(url: str) -> Any:
    with urllib.request.urlopen(url, timeout=10) as r:
        return json.loads(r.read())


class Prometheus:
    def __init__(self, base: str) -> None:
        self.base = base

    def api(self, path: str, **params: Any) -> Any:
        body = _get(f"{self.base}/api/v1/{path}?{urllib.parse.urlencode(params, doseq=True)}")
        assert body["status"] == "success", body
        return body["data"]

    def query(self, expr: str, ranged: bool) -> list[Any]:
        if not ranged:
            return list(self.api("query", query=expr)["result"])
        now = time.time()
        data = self.api("query_range", query=expr, start=now - 60, end=now, step=2)
        return list(data["result"])

    def alerts(self, name: str) -> list[dict[str, Any]]:
        return [a for a in self.api("alerts")["alerts"] if a["labels"]["alertname"] == name]


def _until(check: Callable[[], Any], timeout: float, what: str) -> Any:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if value := check():
            return value
        time.sleep(1)
    raise AssertionError(f"timed out after {timeout:.0f}s waiting for {what}")


@pytest.fixture
def live(tmp_path: Path, prometheus_tools: dict[str, str]) -> Iterator[tuple[Prometheus, Path]]:
    events, broken, manifests = tmp_path / "events", tmp_path / "broken", tmp_path / "manifests"
    _old_table(events)
    broken.mkdir()
    manifests.mkdir()
    (manifests / "events.json").write_text(_manifest("events", events))
    (manifests / "broken.json").write_text(_manifest("broken", broken))
    # A DeltaLake with one table under its prefix: the lake panels' series.
    write_deltalake(str(tmp_path / "lake" / "t1"), _batch(0), post_commithook_properties=HOOKS)
    (manifests / "lake.json").write_text(_manifest("lake", tmp_path / "lake", "DeltaLake"))

    metrics_port, prom_port = free_port(), free_port()
    rules = tmp_path / "rules.yaml"
    _rules_for_test(rules)
    config = {
        "global": {"scrape_interval": "1s", "evaluation_interval": "1s"},
        "rule_files": [str(rules)],
        "scrape_configs": [
            {
                "job_name": "deltakeeper",
                "static_configs": [{"targets": [f"127.0.0.1:{metrics_port}"]}],
            }
        ],
    }
    (tmp_path / "prometheus.yml").write_text(yaml.safe_dump(config))

    stop = threading.Event()

    def writer() -> None:  # an external writer: a commit every half second
        i = 100
        while not stop.wait(0.5):
            write_deltalake(str(events), _batch(i), mode="append", post_commithook_properties=HOOKS)
            i += 1

    procs: list[subprocess.Popen[bytes]] = []
    thread = threading.Thread(target=writer, daemon=True)
    try:
        with open(tmp_path / "deltakeeper.log", "wb") as out:
            procs.append(
                subprocess.Popen(
                    [str(DELTAKEEPER), "run", "--manifests", str(manifests),
                     "--metrics-port", str(metrics_port)],
                    stdout=out, stderr=subprocess.STDOUT,
                )
            )  # fmt: skip
        with open(tmp_path / "prometheus.log", "wb") as out:
            procs.append(
                subprocess.Popen(
                    [prometheus_tools["PROMETHEUS"],
                     f"--config.file={tmp_path / 'prometheus.yml'}",
                     f"--storage.tsdb.path={tmp_path / 'tsdb'}",
                     f"--web.listen-address=127.0.0.1:{prom_port}"],
                    stdout=out, stderr=subprocess.STDOUT,
                )
            )  # fmt: skip
        thread.start()
        yield Prometheus(f"http://127.0.0.1:{prom_port}"), broken
    finally:
        stop.set()
        thread.join(timeout=30)
        for proc in procs:
            proc.send_signal(signal.SIGINT if proc is procs[0] else signal.SIGTERM)
        for proc in procs:
            try:
                proc.wait(timeout=30)
            except subprocess.TimeoutExpired:
                proc.kill()


def _queries() -> list[tuple[str, str, str, bool]]:
    """(dashboard, panel, query, ranged) with the variables substituted as Grafana would: the
    fleet overview and lake health with every table (All), the drill-down on the healthy
    table."""
    values = {
        "deltakeeper-fleet": {"namespace": "lake", "table": ".*"},
        "deltakeeper-lake": {"namespace": "lake", "table": ".*"},
        "deltakeeper-table": {"namespace": "lake", "table": "events"},
    }
    return [
        (
            board["uid"],
            p["title"],
            substitute(t["expr"], values[board["uid"]]),
            not t.get("instant"),
        )
        for board in load_dashboards().values()
        for p in panels(board)
        for t in p["targets"]
    ]


def test_dashboards_have_data_and_the_not_ready_alert_fires_and_resolves(
    live: tuple[Prometheus, Path],
) -> None:
    prom, broken = live
    _until(lambda: _ready(prom), 60, "Prometheus to be ready")
    _until(lambda: prom.query('up{job="deltakeeper"} == 1', False), 60, "a scrape of deltakeeper")

    # Every rule of the chart's file loaded (9: the events' two came with issue 47) and
    # evaluates without error.
    written = [r for g in load_rules()["groups"] for r in g["rules"]]
    assert len(written) == 9 and len(_rules(prom)) == len(written)
    _until(lambda: all(r["health"] == "ok" for r in _rules(prom)), 30, "rules evaluated")

    # The not-Ready alert fires for the broken table, not for the healthy one.
    firing = _until(
        lambda: [a for a in prom.alerts(NOT_READY) if a["state"] == "firing"], 60, NOT_READY
    )
    assert [(a["labels"]["namespace"], a["labels"]["table"]) for a in firing] == [
        ("lake", "broken")
    ]
    assert firing[0]["annotations"]["summary"] == "DeltaTable lake/broken is not Ready"
    # The absent-metrics rule, as shipped, sees this plain scrape job (named "deltakeeper").
    absent = next(r["expr"] for r in alerts() if r["alert"] == "DeltakeeperMetricsAbsent")
    assert prom.query(absent, False) == []
    assert prom.query(absent.replace("deltakeeper", "no-such-job"), False) != []

    # Every dashboard query returns data once the healthy table has been maintained.
    queries = _queries()
    deadline = time.monotonic() + 120
    while (empty := _without_data(prom, queries)) and time.monotonic() < deadline:
        time.sleep(2)
    assert not empty, f"panels without data after 120 s: {empty}"
    for uid, title, query, ranged in queries:
        if COMPACTION in query:  # nothing exports it until Spark compaction exists
            assert prom.query(query, ranged) == [], (uid, title)
    assert _scalar(prom, 'sum(deltakeeper_table_condition{condition="Ready"} == bool 0)') == 1
    assert _scalar(prom, 'sum(deltakeeper_deleted_files_total{kind="log"})') >= 11
    assert _scalar(prom, 'sum(deltakeeper_deleted_files_total{kind="data"})') >= 1
    assert _scalar(prom, 'deltakeeper_lake_tables{namespace="lake", lake="lake"}') == 1
    for board in load_dashboards().values():
        _variables_list(prom, board)

    # delta-rs creates the table the broken manifest points at: Ready, and the alert resolves.
    write_deltalake(str(broken), _batch(0), post_commithook_properties=HOOKS)
    _until(
        lambda: _scalar(prom, 'deltakeeper_table_condition{condition="Ready",table="broken"}') == 1,
        60,
        "the broken table to become Ready",
    )
    _until(lambda: not prom.alerts(NOT_READY), 30, f"{NOT_READY} to resolve")


def _ready(prom: Prometheus) -> bool:
    try:
        with urllib.request.urlopen(f"{prom.base}/-/ready", timeout=5) as r:
            return r.status == 200
    except OSError:
        return False


def _rules(prom: Prometheus) -> list[dict[str, Any]]:
    return [r for g in prom.api("rules")["groups"] for r in g["rules"]]


def _scalar(prom: Prometheus, expr: str) -> float | None:
    result = prom.query(expr, False)
    return float(result[0]["value"][1]) if len(result) == 1 else None


def _without_data(
    prom: Prometheus, queries: list[tuple[str, str, str, bool]]
) -> list[tuple[str, str, str]]:
    return [
        (uid, title, query)
        for uid, title, query, ranged in queries
        if COMPACTION not in query and not prom.query(query, ranged)
    ]


def _variables_list(prom: Prometheus, board: dict[str, Any]) -> None:
    """Each label_values() variable lists the live namespace and both tables."""
    for var in board["templating"]["list"]:
        if var["type"] != "query":
            continue
        metric, label = var["definition"][len("label_values(") : -1].rsplit(", ", 1)
        match = substitute(metric, {"namespace": "lake"})
        listed = set(prom.api(f"label/{label}/values", **{"match[]": match}))
        expected = {"lake"} if label == "namespace" else {"events", "broken"}
        assert expected <= listed, (board["uid"], var["name"], listed)
