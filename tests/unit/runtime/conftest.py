"""Fixtures the runtime tests share."""

from __future__ import annotations

import pytest

from deltakeeper.runtime import watcher


@pytest.fixture(params=["full", "held"])
def holding(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> str:
    """Run the test with every snapshot held with its file actions (as before
    watcher.HOLD_FILE_ACTIONS was 0), then with none, even an empty table's: the outcomes must
    not differ."""
    held = request.param == "held"
    monkeypatch.setattr(watcher, "HOLD_FILE_ACTIONS", -1 if held else 10**12)
    return str(request.param)
