"""Counts what the conformance tests compared, for the end-of-run summary."""

from __future__ import annotations

from collections import Counter

import pytest

TALLY: Counter[str] = Counter()


@pytest.fixture
def tally() -> Counter[str]:
    return TALLY


def pytest_terminal_summary(terminalreporter) -> None:  # type: ignore[no-untyped-def]
    if TALLY:
        parts = ", ".join(f"{k} {v}" for k, v in sorted(TALLY.items()))
        terminalreporter.write_line(f"conformance: {parts}")
