"""The alert rules: promtool accepts them, its unit tests (one firing and one quiet case per
alert) pass, and every alert carries a summary, a description and a runbook link whose anchor
is a section of docs/runbook.md."""

from __future__ import annotations

import re
import subprocess
from typing import Any

import yaml

from tests.monitoring.conftest import RULE_TESTS, RULES, RUNBOOK, alerts

RUNBOOK_BASE = "https://github.com/deltakeeper/deltakeeper/blob/main/docs/runbook.md#"


def _promtool(tools: dict[str, str], *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [tools["PROMTOOL"], *args], capture_output=True, text=True, timeout=120, check=False
    )


def test_promtool_check_rules_accepts_the_file(prometheus_tools: dict[str, str]) -> None:
    done = _promtool(prometheus_tools, "check", "rules", "--lint=all", "--lint-fatal", str(RULES))
    assert done.returncode == 0, done.stdout + done.stderr
    assert f"SUCCESS: {len(alerts())} rules found" in done.stdout + done.stderr


def test_promtool_unit_tests_pass(prometheus_tools: dict[str, str]) -> None:
    done = _promtool(prometheus_tools, "test", "rules", str(RULE_TESTS))
    assert done.returncode == 0, done.stdout + done.stderr
    assert "SUCCESS" in done.stdout + done.stderr


def _checks(tests: dict[str, Any]) -> list[tuple[str, bool]]:
    """(alertname, expects it firing) for every alert_rule_test of every unit test."""
    return [
        (check["alertname"], bool(check.get("exp_alerts")))
        for test in tests["tests"]
        for check in test.get("alert_rule_test", [])
    ]


def test_every_alert_is_unit_tested_firing_and_not_firing() -> None:
    tests = yaml.safe_load(RULE_TESTS.read_text())
    assert tests["rule_files"] == [RULES.name]
    checks = _checks(tests)
    for rule in alerts():
        assert (rule["alert"], True) in checks, f"{rule['alert']}: no test where it fires"
        assert (rule["alert"], False) in checks, f"{rule['alert']}: no test where it stays quiet"
    assert {name for name, _ in checks} == {r["alert"] for r in alerts()}


def _anchors(markdown: str) -> set[str]:
    """GitHub's heading anchors: lower case, punctuation dropped, spaces as hyphens."""
    headings = re.findall(r"^#{1,6}\s+(.+?)\s*$", markdown, flags=re.M)
    return {re.sub(r"[^\w\- ]", "", h.lower()).replace(" ", "-") for h in headings}


def test_every_alert_has_a_summary_a_description_and_a_runbook_section() -> None:
    anchors = _anchors(RUNBOOK.read_text())
    names = [r["alert"] for r in alerts()]
    assert len(names) == len(set(names)) == 9
    for rule in alerts():
        notes = rule["annotations"]
        assert notes["summary"].strip() and notes["description"].strip(), rule["alert"]
        url = notes["runbook_url"]
        assert url.startswith(RUNBOOK_BASE), url
        anchor = url.removeprefix(RUNBOOK_BASE)
        assert anchor in anchors, f"{rule['alert']}: docs/runbook.md has no section #{anchor}"
        assert anchor == rule["alert"].lower(), "each alert's section is named after it"
        assert rule["labels"]["severity"] in {"info", "warning", "critical"}, rule["alert"]


def test_the_anchor_rule_matches_githubs_on_a_few_headings() -> None:
    assert _anchors("## DeltakeeperTableNotReady\n# Dashboards and alerts\n") == {
        "deltakeepertablenotready",
        "dashboards-and-alerts",
    }
