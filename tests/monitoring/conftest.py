"""Prometheus 3 and promtool for the monitoring tests, built by scripts/prometheus/install.sh
(cached outside the clone), and the shipped dashboards and rules these tests check."""

from __future__ import annotations

import json
import os
import re
import subprocess
from pathlib import Path
from typing import Any

import pytest
import yaml

ROOT = Path(__file__).resolve().parents[2]
INSTALL = ROOT / "scripts" / "prometheus" / "install.sh"
CHART = ROOT / "charts" / "deltakeeper"
DASHBOARDS = sorted((CHART / "dashboards").glob("*.json"))
RULES = CHART / "alerts" / "deltakeeper-rules.yaml"
RULE_TESTS = CHART / "alerts" / "deltakeeper-rules.test.yaml"
RUNBOOK = ROOT / "docs" / "runbook.md"

# Grafana's variables as these tests substitute them: `$__rate_interval` is what Grafana
# computes for a 1 s scrape interval at most (4 x scrape, at least interval + scrape), with
# margin; `$__range` covers the whole live run.
BUILTINS = {"__rate_interval": "10s", "__range": "5m", "__interval": "1s"}


@pytest.fixture(scope="session")
def prometheus_tools() -> dict[str, str]:
    """{"PROMETHEUS": path, "PROMTOOL": path}; builds them on the first run (cached after)."""
    done = subprocess.run(["bash", str(INSTALL)], stdout=subprocess.PIPE, text=True, check=False)
    assert done.returncode == 0, f"{INSTALL} failed with exit code {done.returncode}"
    paths = dict(line.split("=", 1) for line in done.stdout.splitlines() if "=" in line)
    for name in ("PROMETHEUS", "PROMTOOL"):
        assert os.access(paths.get(name, ""), os.X_OK), f"{INSTALL} gave no executable {name}"
    return paths


def load_dashboards() -> dict[str, dict[str, Any]]:
    return {p.name: json.loads(p.read_text()) for p in DASHBOARDS}


def load_rules() -> dict[str, Any]:
    return yaml.safe_load(RULES.read_text())


def alerts() -> list[dict[str, Any]]:
    return [r for g in load_rules()["groups"] for r in g["rules"] if "alert" in r]


def panels(board: dict[str, Any]) -> list[dict[str, Any]]:
    """Every panel that shows data (rows are containers), nested rows included."""
    out = []
    for p in board["panels"]:
        if p["type"] == "row":
            out.extend(p.get("panels", []))
        else:
            out.append(p)
    return out


def substitute(expr: str, values: dict[str, str]) -> str:
    """`$name`, `${name}` and `[[name]]` replaced as Grafana does; an unknown one is an error."""

    def one(m: re.Match[str]) -> str:
        name = m.group(1) or m.group(2) or m.group(3)
        merged = {**BUILTINS, **values}
        assert name in merged, f"no value for ${name} in {expr!r}"
        return merged[name]

    return re.sub(r"\$\{(\w+)(?::\w+)?\}|\$(\w+)|\[\[(\w+)\]\]", one, expr)
