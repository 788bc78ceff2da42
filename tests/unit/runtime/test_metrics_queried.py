"""Every metric the chart's dashboards and alerts query is exported from a table's first poll,
before any maintenance: a panel or rule over a series that only appears once something happens
shows "No data" (and increase() misses the first event) on a healthy fleet."""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml
from prometheus_client.parser import text_string_to_metric_families

from deltakeeper.maintenance.operations.outcome import Compactor
from deltakeeper.maintenance.policy import DAY_MS, DataRetention
from deltakeeper.runtime.events import WEBHOOK, Events
from deltakeeper.runtime.metrics import Metrics
from deltakeeper.runtime.model import ScanResult, Target
from deltakeeper.runtime.registry import record
from deltakeeper.runtime.watcher import TableWatcher
from tests.support.checkpoints import NOW, checkpoint, partitioned_table
from tests.support.jobs import StandInLauncher

CHART = Path(__file__).resolve().parents[3] / "charts" / "deltakeeper"
# `name{matchers}`: a metric in a PromQL expression or a Grafana label_values() query.
_SELECTOR = re.compile(r"\b(deltakeeper_\w+)\s*(?:\{([^}]*)\})?")
_MATCHER = re.compile(r'(\w+)\s*(=~|!~|!=|=)\s*"([^"]*)"')
# Gauges of something that has not happened on a table that was only read: there is no true
# value to show before it. Each is checked where it exists (tests/monitoring/test_live.py).
_NOT_BEFORE_IT_HAPPENS = {
    "deltakeeper_vacuum_mode": "the mode of the table's last vacuum",
}


def _expressions() -> Iterator[tuple[str, str]]:
    """(where, expression) of every dashboard query and variable, and every rule."""
    for board in sorted((CHART / "dashboards").glob("*.json")):
        for text in _strings(json.loads(board.read_text()), ("expr", "query", "definition")):
            yield board.name, text
    rules = yaml.safe_load((CHART / "alerts" / "deltakeeper-rules.yaml").read_text())
    for group in rules["groups"]:
        for rule in group["rules"]:
            yield rule.get("alert") or rule["record"], rule["expr"]


def _strings(node: Any, keys: tuple[str, ...]) -> Iterator[str]:
    if isinstance(node, dict):
        for key, value in node.items():
            if key in keys and isinstance(value, str):
                yield value
            else:
                yield from _strings(value, keys)
    elif isinstance(node, list):
        for item in node:
            yield from _strings(item, keys)


def _queried() -> set[tuple[str, tuple[tuple[str, str, str], ...]]]:
    """(sample name, its fixed label matchers) for every metric queried. Matchers on the
    namespace and table, or on a Grafana variable, name no fixed value and are left out."""
    out = set()
    for _, expr in _expressions():
        for m in _SELECTOR.finditer(expr):
            matchers = tuple(
                (label, op, value)
                for label, op, value in _MATCHER.findall(m.group(2) or "")
                if label not in ("namespace", "table") and "$" not in value
            )
            out.add((m.group(1), matchers))
    return out


def _matches(labels: dict[str, str], matchers: tuple[tuple[str, str, str], ...]) -> bool:
    """PromQL's matchers: regular expressions anchored at both ends."""
    for label, op, value in matchers:
        got = labels.get(label, "")
        if (op == "=" and got != value) or (op == "!=" and got == value):
            return False
        if op in ("=~", "!~") and bool(re.fullmatch(value, got)) != (op == "=~"):
            return False
    return True


@pytest.fixture
def first_polls(tmp_path: Path) -> Metrics:
    """A daemon's metrics after the first poll of four tables, one compacting, one with a
    data retention, one with storage events, and the first scan of a lake: read, nothing
    maintained."""
    metrics = Metrics(clock=lambda: NOW / 1000)
    watcher = TableWatcher(NOW, compactor=Compactor(StandInLauncher(), wait=False))
    retention = DataRetention("day", 90 * DAY_MS)
    for name, settings in (
        ("plain", {}),
        ("compacting", {"compaction_enabled": True}),
        ("expiring", {"data_retention": retention}),
    ):
        root = partitioned_table(tmp_path / name)
        checkpoint(root)
        target = Target("lake", name, str(root), settings=settings, suspend=True)
        obs = watcher.observe(target, NOW)
        assert obs.outcomes == []  # nothing has happened to either table
        record(metrics, target, obs)
    # A table with storage events: its EventsDegraded condition from its first poll too.
    hub = Events(metrics)
    root = partitioned_table(tmp_path / "evented")
    target = Target(
        "lake", "evented", str(root), suspend=True, events_source=WEBHOOK, resync_interval_s=3600
    )
    events = hub.table(lambda: None)
    events.follow(target)
    events.begin()
    record(metrics, target, events.polled(watcher.observe(target, NOW)))
    metrics.lake_scan("lake", "lake", ScanResult.OK, 2, 0.01, 1)
    return metrics


def test_the_chart_queries_metrics_and_the_parser_finds_them() -> None:
    queried = _queried()
    names = {name for name, _ in queried}
    assert len(names) >= 30  # every family the dashboards show, not a parse that found none
    assert ("deltakeeper_written_files_total", ()) in queried
    ready = ("condition", "=", "Ready")
    assert ("deltakeeper_table_condition", (ready,)) in queried
    cleanup = (("operation", "=", "cleanup"), ("result", "=~", "done|skipped"))
    assert ("deltakeeper_maintenance_runs_total", cleanup) in queried
    assert _matches({"result": "skipped", "operation": "cleanup"}, cleanup)
    assert not _matches({"result": "done", "operation": "vacuum"}, cleanup)


def test_every_metric_the_chart_queries_is_exported_from_the_first_poll(
    first_polls: Metrics,
) -> None:
    text = "".join(first_polls.exposition())
    samples = [(s.name, s.labels) for f in text_string_to_metric_families(text) for s in f.samples]
    missing = sorted(
        (name, matchers)
        for name, matchers in _queried()
        if name not in _NOT_BEFORE_IT_HAPPENS
        and not any(n == name and _matches(labels, matchers) for n, labels in samples)
    )
    assert missing == []
