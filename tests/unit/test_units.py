"""units.py: sizes, durations, intervals and times as flags and manifests write them."""

from __future__ import annotations

import pytest

from deltakeeper.units import parse_interval_ms


def test_an_interval_is_a_duration_above_zero() -> None:
    assert parse_interval_ms("2m") == 120_000
    for bad, why in (("0s", "more than 0s"), ("-1s", "not a duration"), ("2", "not a duration")):
        with pytest.raises(ValueError, match=why):
            parse_interval_ms(bad)
    with pytest.raises(ValueError, match="too long"):
        parse_interval_ms("99999999999d")
