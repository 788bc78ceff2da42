"""The Grafana dashboards' JSON, checked without Grafana (none can run here): schema version,
unique uids, the datasource/namespace/table variables, and for every panel a description, a
unit, at least one target and the datasource variable; every query parses as PromQL (promtool)."""

from __future__ import annotations

import re
import subprocess
from typing import Any

import pytest

from tests.monitoring.conftest import DASHBOARDS, load_dashboards, panels, substitute

DATASOURCE = {"type": "prometheus", "uid": "${datasource}"}
# Values that make every query concrete for the parser (the live test uses real ones).
SELECTOR = 'namespace=~"$namespace", table=~"$table"'
PARSE_VALUES = {"namespace": "lake", "table": "events", "datasource": "prom"}


def test_there_are_three_dashboards_with_unique_uids_and_titles() -> None:
    boards = load_dashboards()
    assert len(boards) == len(DASHBOARDS) == 3
    uids = [b["uid"] for b in boards.values()]
    titles = [b["title"] for b in boards.values()]
    assert len(set(uids)) == 3 and len(set(titles)) == 3
    assert all(re.fullmatch(r"[a-zA-Z0-9_-]{1,40}", uid) for uid in uids), uids


@pytest.mark.parametrize("name", [p.name for p in DASHBOARDS])
def test_dashboard_has_schema_39_and_the_three_variables(name: str) -> None:
    board = load_dashboards()[name]
    assert board["schemaVersion"] >= 39
    assert board["description"]
    variables = {v["name"]: v for v in board["templating"]["list"]}
    assert set(variables) == {"datasource", "namespace", "table"}
    assert variables["datasource"]["type"] == "datasource"
    assert variables["datasource"]["query"] == "prometheus"
    for key in ("namespace", "table"):
        var = variables[key]
        assert var["type"] == "query" and var["datasource"] == DATASOURCE, key
        assert var["definition"].startswith("label_values(") and var["definition"].endswith(
            f", {key})"
        ), var["definition"]
        assert var["query"]["query"] == var["definition"], key
    assert "$namespace" in variables["table"]["definition"], "tables follow the namespace"


@pytest.mark.parametrize("name", [p.name for p in DASHBOARDS])
def test_every_panel_has_a_description_unit_target_and_the_datasource_variable(
    name: str,
) -> None:
    board = load_dashboards()[name]
    shown = panels(board)
    assert len(shown) >= 12
    ids = [p["id"] for p in board["panels"]]
    assert len(ids) == len(set(ids)), "panel ids repeat"
    for p in shown:
        where = f"{name}: {p['title']!r}"
        assert p["description"].strip(), where
        assert p["fieldConfig"]["defaults"]["unit"], where
        assert p["datasource"] == DATASOURCE, where
        assert p["targets"], where
        for t in p["targets"]:
            assert t["datasource"] == DATASOURCE, where
            assert t["expr"].strip() and t["refId"], where
        grid = p["gridPos"]
        assert grid["x"] + grid["w"] <= 24 and grid["h"] > 0, where


def test_the_lake_health_board_shows_bands_worst_tables_reclaimable_and_per_day() -> None:
    board = load_dashboards()["lake-health.json"]
    exprs = [t["expr"] for p in panels(board) for t in p["targets"]]
    joined = " ".join(exprs)
    for band in (">= bool 80", ">= bool 50", "< bool 50"):  # healthy, fair, poor
        assert f"deltakeeper_table_health_score{{{SELECTOR}}} {band}" in joined, band
    assert f"bottomk(10, deltakeeper_table_health_score{{{SELECTOR}}})" in exprs
    assert "deltakeeper_table_health_component_score" in joined
    assert "sum by (kind) (deltakeeper_table_reclaimable_bytes" in joined
    assert "sum by (kind) (increase(deltakeeper_deleted_bytes_total" in joined and "[1d]" in joined
    assert "increase(deltakeeper_maintenance_runs_total" in joined


def test_the_fleet_overview_shows_what_the_issue_asks_for() -> None:
    board = load_dashboards()["fleet-overview.json"]
    exprs = " ".join(t["expr"] for p in panels(board) for t in p["targets"])
    assert "rate(deltakeeper_table_commits_total{" in exprs
    assert "[$__rate_interval])" in exprs
    for metric in (
        'deltakeeper_table_condition{condition="Ready"',
        "deltakeeper_table_log_bytes",
        "deltakeeper_table_log_files",
        "deltakeeper_table_commits_since_checkpoint",
        "deltakeeper_table_checkpoint_age_seconds",
        "deltakeeper_table_small_files",
        "deltakeeper_maintenance_runs_total",
        "deltakeeper_deleted_bytes_total",
        "deltakeeper_compaction_jobs",
        "deltakeeper_storage_requests_total",
        "deltakeeper_vacuum_runs_total{",
        "deltakeeper_vacuum_mode{",
        "deltakeeper_vacuum_requests_total{",
        "deltakeeper_lake_tables{",
        "deltakeeper_lake_scan_duration_seconds{",
        "deltakeeper_lake_scan_requests_total{",
    ):
        assert metric in exprs, metric


def _all_queries() -> list[tuple[str, str, str]]:
    return [
        (name, p["title"], t["expr"])
        for name, board in load_dashboards().items()
        for p in panels(board)
        for t in p["targets"]
    ]


def test_every_query_parses_as_promql(prometheus_tools: dict[str, str]) -> None:
    failures: list[Any] = []
    for name, title, expr in _all_queries():
        query = substitute(expr, PARSE_VALUES)
        done = subprocess.run(
            [prometheus_tools["PROMTOOL"], "--experimental", "promql", "format", query],
            capture_output=True,
            text=True,
            timeout=60,
            check=False,
        )
        if done.returncode != 0:
            failures.append((name, title, query, done.stderr.strip()))
    assert not failures, failures
    # And the parser does reject what is not PromQL, so the loop above could fail.
    bad = subprocess.run(
        [prometheus_tools["PROMTOOL"], "--experimental", "promql", "format", "rate(x[$__range])"],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert bad.returncode != 0
