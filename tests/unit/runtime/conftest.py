"""Fixtures the runtime tests share."""

from __future__ import annotations

import pytest

from deltakeeper.runtime import watcher


@pytest.fixture(params=["full", "held"])
def holding(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> str:
    """Run the test with every snapshot held with its file actions, then with none (as a
    table above watcher.HOLD_FILE_ACTIONS is held): the outcomes must not differ."""
    if request.param == "held":
        monkeypatch.setattr(watcher, "HOLD_FILE_ACTIONS", -1)
    return str(request.param)
