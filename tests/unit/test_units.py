"""units.py: sizes, durations, intervals and times as flags and manifests write them."""

from __future__ import annotations

import pytest

from deltakeeper.units import (
    format_duration,
    format_size,
    parse_duration_ms,
    parse_interval_ms,
    parse_size,
)


def test_an_interval_is_a_duration_above_zero() -> None:
    assert parse_interval_ms("2m") == 120_000
    for bad, why in (("0s", "more than 0s"), ("-1s", "not a duration"), ("2", "not a duration")):
        with pytest.raises(ValueError, match=why):
            parse_interval_ms(bad)
    with pytest.raises(ValueError, match="too long"):
        parse_interval_ms("99999999999d")


def test_a_duration_and_a_size_are_written_as_they_are_parsed() -> None:
    for text in ("30d", "1h", "10m", "30s", "90m"):
        assert format_duration(parse_duration_ms(text)) == text
    assert format_duration(1500) == "1.5s"
    for text in ("32Mi", "128Mi", "1Gi", "4000", "3Ki"):
        assert format_size(parse_size(text)) == text
    assert format_size(1000) == "1000"
