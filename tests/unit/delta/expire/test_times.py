"""delta/expire/times.py: the cutoff, and what span of time each kind of value stands for."""

from __future__ import annotations

import datetime as dt

import pytest

from deltakeeper.delta.expire import times
from deltakeeper.delta.expire.times import Period, Span

DAY_US = 86_400_000_000
HOUR_US = 3_600_000_000


def us(*args: int) -> int:
    return times.micros(dt.datetime(*args))


def test_the_cutoff_is_now_minus_keep_in_utc_microseconds() -> None:
    now_ms = us(2026, 3, 1, 12) // 1000
    assert times.cutoff_us(now_ms, 90 * 86_400_000) == us(2025, 12, 1, 12)


@pytest.mark.parametrize(
    ("text", "start", "period", "separator"),
    [
        ("2026-01-05", (2026, 1, 5), Period.DAY, ""),
        ("2026-01-05T07", (2026, 1, 5, 7), Period.HOUR, "T"),
        ("2026-01-05 07", (2026, 1, 5, 7), Period.HOUR, " "),
        ("2026-01-05T07:30", (2026, 1, 5, 7, 30), Period.MINUTE, "T"),
        ("2026-01-05 07:00:00", (2026, 1, 5, 7), Period.SECOND, " "),
        ("2026-01-05 07:00:00.250", (2026, 1, 5, 7, 0, 0, 250_000), Period.MILLI, " "),
        ("2026-01-05T07:00:00.000001", (2026, 1, 5, 7, 0, 0, 1), Period.MICRO, "T"),
        ("2026-01", (2026, 1, 1), Period.MONTH, ""),
        ("2026-01-05T07:00:00Z", (2026, 1, 5, 7), Period.SECOND, "T"),
    ],
)
def test_iso_partition_values_stand_for_the_period_their_precision_names(
    text: str, start: tuple[int, ...], period: Period, separator: str
) -> None:
    iso = times.parse_iso(text)
    assert iso is not None
    assert (iso.span.start, iso.period, iso.separator) == (us(*start), period, separator)
    assert iso.span == times.span_of(dt.datetime(*start), period)


def test_an_offset_moves_the_span_to_utc() -> None:
    iso = times.parse_iso("2026-01-05T07+02:00")
    assert iso is not None and iso.span == Span(us(2026, 1, 5, 5), us(2026, 1, 5, 6))


@pytest.mark.parametrize("text", ["20260105", "2026/01/05", "05-01-2026", "2026-13-01", "x", ""])
def test_anything_else_is_not_an_iso_value(text: str) -> None:
    assert times.parse_iso(text) is None


def test_month_and_year_periods_end_at_the_next_one() -> None:
    assert times.span_of(dt.datetime(2026, 12, 1), Period.MONTH).end == us(2027, 1, 1)
    assert times.span_of(dt.datetime(2024, 2, 1), Period.MONTH).end == us(2024, 3, 1)
    assert times.span_of(dt.datetime(2026, 1, 1), Period.YEAR).end == us(2027, 1, 1)


def test_a_day_expires_when_it_is_before_the_cutoffs_day() -> None:
    cutoff = us(2026, 1, 5, 12)
    day = times.value_span("2026-01-04", "date")
    today = times.value_span("2026-01-05", "date")
    assert day is not None and today is not None
    assert day.expired(cutoff)
    assert not today.expired(cutoff) and today.older(cutoff)  # half its hours are older
    assert times.value_span("2026-01-05", "date").expired(us(2026, 1, 6))  # type: ignore[union-attr]


def test_a_timestamp_expires_when_it_is_before_the_cutoff() -> None:
    cutoff = us(2026, 1, 5, 12)
    assert times.value_span("2026-01-05 11:59:59.999999", "timestamp").expired(cutoff)  # type: ignore[union-attr]
    assert not times.value_span("2026-01-05 12:00:00", "timestamp").expired(cutoff)  # type: ignore[union-attr]
    assert times.value_span("not a time", "timestamp") is None


def test_a_timestamp_statistic_stands_for_its_millisecond() -> None:
    """Delta Spark truncates timestamp bounds to milliseconds: a maximum of 11:59:59.999 may
    be a value of 11:59:59.999999, so it is older than a cutoff at noon, not than one a
    microsecond before."""
    high = times.stat_span("2026-01-05T11:59:59.999Z", "timestamp")
    assert high == Span(us(2026, 1, 5, 11, 59, 59, 999_000), us(2026, 1, 5, 12))
    assert high.expired(us(2026, 1, 5, 12))
    assert not high.expired(us(2026, 1, 5, 11, 59, 59, 999_999))
    ntz = times.stat_span("2026-01-05T11:59:59.999", "timestamp_ntz")
    assert ntz == high
    assert times.stat_span("2026-01-05", "date") == Span(us(2026, 1, 5), us(2026, 1, 6))
    assert times.stat_span(None, "date") is None
    assert times.stat_span(17, "timestamp") is None


@pytest.mark.parametrize(
    ("period", "sample", "expected"),
    [
        (Period.DAY, "2026-01-01", "2026-01-05"),
        (Period.HOUR, "2026-01-01T03", "2026-01-05T07"),
        (Period.HOUR, "2026-01-01 03", "2026-01-05 07"),
        (Period.SECOND, "2026-01-01 03:00:00", "2026-01-05 07:30:15"),
        (Period.MONTH, "2026-01", "2026-01"),
    ],
)
def test_the_cutoff_is_written_as_the_partition_values_are(
    period: Period, sample: str, expected: str
) -> None:
    iso = times.parse_iso(sample)
    assert iso is not None and iso.period is period
    assert times.format_like(us(2026, 1, 5, 7, 30, 15, 123), iso) == expected


TYPES = {"ts": "timestamp", "ntz": "timestamp_ntz", "d": "date", "n": "integer"}


@pytest.mark.parametrize(
    ("expression", "partition_type", "source", "value", "span"),
    [
        ("CAST(ntz AS DATE)", "date", "ntz", "2026-01-05", ((2026, 1, 5), (2026, 1, 6))),
        ("to_date(`ntz`)", "date", "ntz", "2026-01-05", ((2026, 1, 5), (2026, 1, 6))),
        (
            "date_format(ntz, 'yyyy-MM-dd HH')",
            "string",
            "ntz",
            "2026-01-05 07",
            ((2026, 1, 5, 7), (2026, 1, 5, 8)),
        ),
        (
            "date_trunc('HOUR', ntz)",
            "timestamp_ntz",
            "ntz",
            "2026-01-05 07:00:00",
            ((2026, 1, 5, 7), (2026, 1, 5, 8)),
        ),
        ("year(d)", "integer", "d", "2025", ((2025, 1, 1), (2026, 1, 1))),
    ],
)
def test_generated_partition_columns_name_the_period_of_their_source(
    expression: str,
    partition_type: str,
    source: str,
    value: str,
    span: tuple[tuple[int, ...], tuple[int, ...]],
) -> None:
    g = times.generated("p", expression, partition_type, TYPES)
    assert g is not None and g.source == source
    assert g.read(value) == Span(us(*span[0]), us(*span[1]))


def test_a_timestamp_sources_partitions_are_widened_by_any_zone_offset() -> None:
    """CAST(ts AS DATE) is the day in the writer's session time zone, which the log does not
    say: a row of partition 2026-01-05 may be from 10:00 the day before (UTC+14) to 12:00 the
    day after (UTC-12) in UTC."""
    g = times.generated("day", "CAST(ts AS DATE)", "date", TYPES)
    assert g is not None
    assert g.read("2026-01-05") == Span(us(2026, 1, 4, 10), us(2026, 1, 6, 14))


@pytest.mark.parametrize(
    ("expression", "partition_type"),
    [
        ("CAST(ts AS DATE)", "string"),  # not what the partition column's type says
        ("date_format(ts, 'yyyyMMdd')", "string"),  # not ISO-8601
        ("CAST(n AS DATE)", "date"),  # not from a time column
        ("hash(ts) % 10", "integer"),
        ("CAST(missing AS DATE)", "date"),
    ],
)
def test_other_expressions_prune_nothing(expression: str, partition_type: str) -> None:
    assert times.generated("p", expression, partition_type, TYPES) is None
