"""The chart tests: helm and kubeconform built by scripts/helm/install.sh (cached), and the
schemas kubeconform validates against (tests/support/chart.py)."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.support import chart


@pytest.fixture(scope="session")
def chart_tools() -> dict[str, str]:
    return chart.install()


@pytest.fixture(scope="session")
def schemas(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return chart.schema_dir(tmp_path_factory.mktemp("schemas"))
