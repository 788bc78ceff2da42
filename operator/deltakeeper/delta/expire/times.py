"""Time values as expiry reads them: every value stands for a span of time, [start, end) in
microseconds since the epoch, UTC, and the span is what is compared with the cutoff.

- A `date` is its day; a `timestamp` or `timestamp_ntz` (read as UTC) its microsecond.
- A string partition value in ISO-8601 (`2026-01-05`, `2026-01-05T07`, `2026-01-05 07:00:00`)
  is the period its precision names: the day, the hour, the second.
- A timestamp statistic is its millisecond: Delta Spark truncates timestamp bounds to
  milliseconds, so the true value lies within the millisecond the statistic names.
- A generated partition column (`CAST(ts AS DATE)`, `date_format(ts, 'yyyy-MM-dd')`,
  `date_trunc('HOUR', ts)`, `year(ts)`, ...) names the period of its source column's values.
  Spark computes it in the writer's session time zone, which the log does not record, so for
  a `timestamp` source the span is widened by the largest zone offset (14 hours either side).

A row expires when its value is older than the cutoff: its span ends at or before it
(`Span.expired`). For a `date` that is "its day is before the cutoff's day"; for a timestamp,
"value < cutoff"."""

from __future__ import annotations

import datetime as dt
import enum
import re
from collections.abc import Callable
from dataclasses import dataclass

from deltakeeper.delta.types import parse_date, parse_timestamp

US_PER_MS = 1000
EPOCH = dt.datetime(1970, 1, 1)
ZONE_MARGIN_US = 14 * 3600 * 1_000_000  # the widest UTC offset a session time zone can have
# The column types expiry reads, by their names in a Delta schema.
TIME_TYPES = ("date", "timestamp", "timestamp_ntz")


class Period(enum.Enum):
    YEAR = "year"
    MONTH = "month"
    DAY = "day"
    HOUR = "hour"
    MINUTE = "minute"
    SECOND = "second"
    MILLI = "millisecond"
    MICRO = "microsecond"


_FIXED_US = {
    Period.DAY: 86_400_000_000,
    Period.HOUR: 3_600_000_000,
    Period.MINUTE: 60_000_000,
    Period.SECOND: 1_000_000,
    Period.MILLI: 1000,
    Period.MICRO: 1,
}


@dataclass(frozen=True)
class Span:
    """The time a value may stand for: [start, end) in microseconds since the epoch, UTC."""

    start: int
    end: int

    def expired(self, cutoff_us: int) -> bool:
        """Wholly older than the cutoff: every time in it is before the cutoff."""
        return self.end <= cutoff_us

    def older(self, cutoff_us: int) -> bool:
        """Some time in it may be before the cutoff."""
        return self.start < cutoff_us

    def widened(self, margin_us: int) -> Span:
        return Span(self.start - margin_us, self.end + margin_us)


def micros(value: dt.datetime) -> int:
    """A naive UTC datetime as microseconds since the epoch."""
    return (value - EPOCH) // dt.timedelta(microseconds=1)


def at(us: int) -> dt.datetime:
    """Microseconds since the epoch as a naive UTC datetime."""
    return EPOCH + dt.timedelta(microseconds=us)


def cutoff_us(now_ms: int, keep_ms: int) -> int:
    """The cutoff: now minus `keep`, in microseconds since the epoch, UTC."""
    return (now_ms - keep_ms) * US_PER_MS


def span_of(start: dt.datetime, period: Period) -> Span:
    """The period that begins at `start` (naive UTC)."""
    first = micros(start)
    if period is Period.YEAR:
        return Span(first, micros(start.replace(year=start.year + 1)))
    if period is Period.MONTH:
        year, month = divmod(start.month, 12)
        return Span(first, micros(start.replace(year=start.year + year, month=month + 1)))
    return Span(first, first + _FIXED_US[period])


def truncated(us: int, period: Period) -> dt.datetime:
    """The start of the `period` that holds the time `us` (naive UTC)."""
    t = at(us)
    if period is Period.YEAR:
        return dt.datetime(t.year, 1, 1)
    if period is Period.MONTH:
        return dt.datetime(t.year, t.month, 1)
    return at(us - us % _FIXED_US[period])


# ISO-8601 as partition values write it: a date, then optionally a time to any precision, then
# optionally an offset. A month alone (`2026-01`) is a period too.
_ISO = re.compile(
    r"(?P<y>\d{4})-(?P<mo>\d{2})(?:-(?P<d>\d{2})"
    r"(?:[T ](?P<h>\d{2})(?::(?P<mi>\d{2})(?::(?P<s>\d{2})(?:\.(?P<f>\d{1,9}))?)?)?"
    r"(?P<z>Z|[+-]\d{2}(?::?\d{2})?)?)?)?"
)


@dataclass(frozen=True)
class Iso:
    """A string partition value read as ISO-8601: its span and how it is written (to write
    the cutoff the same way: `style`)."""

    span: Span
    period: Period
    separator: str  # between date and time: "T" or " " ("" for a date or a month)


def parse_iso(text: str) -> Iso | None:
    """An ISO-8601 date, month or date-time as the period its precision names; None if the
    text is not one."""
    m = _ISO.fullmatch(text.strip())
    if m is None:
        return None
    g = m.groupdict()
    parts = ("mo", "d", "h", "mi", "s")
    periods = (Period.MONTH, Period.DAY, Period.HOUR, Period.MINUTE, Period.SECOND)
    period = [p for part, p in zip(parts, periods, strict=True) if g[part] is not None][-1]
    fraction = g["f"] or ""
    if fraction:
        period = Period.MILLI if len(fraction) <= 3 else Period.MICRO
    try:
        start = dt.datetime(
            int(g["y"]),
            int(g["mo"]),
            int(g["d"] or 1),
            int(g["h"] or 0),
            int(g["mi"] or 0),
            int(g["s"] or 0),
            int((fraction + "000000")[:6]),
        )
    except ValueError:
        return None
    span = span_of(start, period)
    if g["z"] and g["z"] != "Z":
        offset = _offset_us(g["z"])
        span = Span(span.start - offset, span.end - offset)
    separator = text.strip()[10] if g["h"] is not None else ""
    return Iso(span, period, separator)


def _offset_us(text: str) -> int:
    digits = text[1:].replace(":", "")
    minutes = int(digits[:2]) * 60 + int(digits[2:4] or 0)
    return (-1 if text[0] == "-" else 1) * minutes * 60_000_000


def format_like(us: int, iso: Iso) -> str:
    """The start of the period of `iso`'s precision that holds `us`, written as `iso` is: what
    a string comparison with the partition values needs (`day < '2026-01-05'`)."""
    t = truncated(us, iso.period)
    if iso.period is Period.MONTH:
        return f"{t:%Y-%m}"
    if iso.period is Period.DAY:
        return f"{t:%Y-%m-%d}"
    text = {
        Period.HOUR: f"{t:%Y-%m-%d}{iso.separator}{t:%H}",
        Period.MINUTE: f"{t:%Y-%m-%d}{iso.separator}{t:%H:%M}",
        Period.SECOND: f"{t:%Y-%m-%d}{iso.separator}{t:%H:%M:%S}",
    }.get(iso.period)
    return text or f"{t:%Y-%m-%d}{iso.separator}{t:%H:%M:%S.%f}"


def value_span(text: str, delta_type: str) -> Span | None:
    """A partition value of a time column (`date`, `timestamp`, `timestamp_ntz`) as its span;
    None when it does not parse."""
    if delta_type == "date":
        day = parse_date(text)
        return (
            None if day is None else span_of(dt.datetime(day.year, day.month, day.day), Period.DAY)
        )
    value = parse_timestamp(text)
    return None if value is None else span_of(value, Period.MICRO)


def stat_span(value: object, delta_type: str) -> Span | None:
    """A minimum or maximum statistic of a time column as its span; None when absent or not
    readable. Timestamp statistics name their millisecond (Delta truncates them to it)."""
    if not isinstance(value, str):
        return None
    if delta_type == "date":
        return value_span(value, "date")
    parsed = parse_timestamp(value)
    if parsed is None:
        return None
    return span_of(parsed - dt.timedelta(microseconds=parsed.microsecond % 1000), Period.MILLI)


# ---------------------------------------------------------------------------- generated columns


@dataclass(frozen=True)
class Generated:
    """A partition column generated from a time column: what its values say of that column's
    values (`read`: a partition value -> the span its rows' source values lie in)."""

    partition: str  # the partition column's name
    source: str  # the time column it is generated from
    expression: str
    read: Callable[[str], Span | None]


_NAME = r"`?(?P<c>[A-Za-z_][A-Za-z0-9_]*)`?"
_CAST = re.compile(rf"cast\s*\(\s*{_NAME}\s+as\s+date\s*\)", re.I)
_TO_DATE = re.compile(rf"(?:to_date|date)\s*\(\s*{_NAME}\s*\)", re.I)
_FORMAT = re.compile(
    rf"date_format\s*\(\s*{_NAME}\s*,\s*(?P<q>['\"])(?P<f>[^'\"]+)(?P=q)\s*\)", re.I
)
_TRUNC = re.compile(rf"date_trunc\s*\(\s*(?P<q>['\"])(?P<u>\w+)(?P=q)\s*,\s*{_NAME}\s*\)", re.I)
_YEAR = re.compile(rf"year\s*\(\s*{_NAME}\s*\)", re.I)
# date_format patterns whose output is ISO-8601 (parse_iso reads them back).
ISO_FORMATS = frozenset(
    {
        "yyyy-MM",
        "yyyy-MM-dd",
        "yyyy-MM-dd HH",
        "yyyy-MM-dd'T'HH",
        "yyyy-MM-dd HH:mm",
        "yyyy-MM-dd HH:mm:ss",
    }
)
_TRUNC_UNITS = {
    "year": Period.YEAR,
    "yyyy": Period.YEAR,
    "yy": Period.YEAR,
    "month": Period.MONTH,
    "mon": Period.MONTH,
    "mm": Period.MONTH,
    "day": Period.DAY,
    "dd": Period.DAY,
    "hour": Period.HOUR,
    "minute": Period.MINUTE,
    "second": Period.SECOND,
}


def generated(
    partition: str, expression: str, partition_type: str, source_types: dict[str, str]
) -> Generated | None:
    """What the partition column generated by `expression` says of its source column, or None
    for an expression expiry does not read (it then prunes nothing)."""
    text = expression.strip()
    read: Callable[[str], Span | None] | None = None
    source = None
    if (m := _CAST.fullmatch(text) or _TO_DATE.fullmatch(text)) and partition_type == "date":
        source, read = m["c"], lambda v: value_span(v, "date")
    elif (m := _FORMAT.fullmatch(text)) and m["f"] in ISO_FORMATS and partition_type == "string":
        source, read = m["c"], _iso_span
    elif (m := _TRUNC.fullmatch(text)) and m["u"].lower() in _TRUNC_UNITS:
        period = _TRUNC_UNITS[m["u"].lower()]
        if partition_type in ("timestamp", "timestamp_ntz"):
            source, read = m["c"], _truncated_reader(period)
    elif (m := _YEAR.fullmatch(text)) and partition_type in ("integer", "long", "short"):
        source, read = m["c"], _year_span
    if source is None or read is None or source_types.get(source) not in TIME_TYPES:
        return None
    if source_types[source] == "timestamp":  # the writer's session time zone is unknown
        inner = read

        def read(v: str) -> Span | None:
            s = inner(v)
            return None if s is None else s.widened(ZONE_MARGIN_US)

    return Generated(partition, source, text, read)


def _iso_span(text: str) -> Span | None:
    iso = parse_iso(text)
    return None if iso is None else iso.span


def _truncated_reader(period: Period) -> Callable[[str], Span | None]:
    def read(text: str) -> Span | None:
        value = parse_timestamp(text)
        return None if value is None else span_of(value, period)

    return read


def _year_span(text: str) -> Span | None:
    try:
        return span_of(dt.datetime(int(text.strip()), 1, 1), Period.YEAR)
    except ValueError:
        return None
