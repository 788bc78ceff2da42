"""Human units used in flags and manifests: sizes like `128Mi`, durations like `30d`."""

from __future__ import annotations

import functools
import re
from datetime import UTC, datetime

from deltakeeper.delta.properties import DAY_MS, HOUR_MS

_SIZE = re.compile(r"^\s*(\d+)\s*(Ki|Mi|Gi|Ti|K|M|G|T|B)?\s*$")
_SIZE_FACTORS = {
    None: 1,
    "B": 1,
    "K": 10**3,
    "M": 10**6,
    "G": 10**9,
    "T": 10**12,
    "Ki": 2**10,
    "Mi": 2**20,
    "Gi": 2**30,
    "Ti": 2**40,
}
_DURATION = re.compile(r"^\s*(\d+)\s*(d|h|m|s)\s*$")
_DURATION_MS = {"d": DAY_MS, "h": HOUR_MS, "m": 60_000, "s": 1000}
# Beyond these, dates leave what datetime (and Delta's readers) can represent.
MAX_DURATION_MS = 36_500 * DAY_MS  # 100 years
MAX_TIMESTAMP_MS = 253_402_300_799_999  # 9999-12-31T23:59:59.999Z


def parse_size(text: str) -> int:
    m = _SIZE.match(text)
    if not m:
        raise ValueError(f"{text!r} is not a size; use bytes or a suffix like 16Mi, 1Gi, 500M")
    return int(m.group(1)) * _SIZE_FACTORS[m.group(2)]


def parse_duration_ms(text: str) -> int:
    m = _DURATION.match(text)
    if not m:
        raise ValueError(f"{text!r} is not a duration; use a number and d, h, m or s (e.g. 30d)")
    ms = int(m.group(1)) * _DURATION_MS[m.group(2)]
    if ms > MAX_DURATION_MS:
        raise ValueError(f"{text!r} is too long; use at most 36500d (100 years)")
    return ms


def parse_interval_ms(text: str) -> int:
    """A duration above zero: how often something repeats."""
    ms = parse_duration_ms(text)
    if ms <= 0:
        raise ValueError(f"{text!r} must be more than 0s")
    return ms


def format_duration(ms: int) -> str:
    """A duration as a flag or manifest writes it, in the largest unit it is whole in: 30d,
    1h, 10m, 30s (the reverse of parse_duration_ms; help texts state defaults with it)."""
    for unit, factor in _DURATION_MS.items():
        if ms % factor == 0:
            return f"{ms // factor}{unit}"
    return f"{ms / 1000:g}s"


def format_size(n: int) -> str:
    """A size as a flag or manifest writes it, in the largest binary unit it is whole in:
    32Mi, 1Gi, 4000 (the reverse of parse_size)."""
    for unit in ("Ti", "Gi", "Mi", "Ki"):
        if n and n % _SIZE_FACTORS[unit] == 0:
            return f"{n // _SIZE_FACTORS[unit]}{unit}"
    return str(n)


def parse_timestamp_ms(text: str) -> int:
    """Milliseconds since the epoch, or an ISO-8601 time (UTC unless it says otherwise)."""
    if re.fullmatch(r"\d+", text.strip()):
        ms = int(text)
    else:
        try:
            dt = datetime.fromisoformat(text.strip().replace("Z", "+00:00"))
        except ValueError as e:
            raise ValueError(
                f"{text!r} is not a timestamp (or is past the year 9999); use epoch "
                "milliseconds or ISO-8601 like 2024-05-01T12:00:00Z"
            ) from e
        if dt.tzinfo is None:
            dt = dt.replace(tzinfo=UTC)
        ms = int(dt.timestamp() * 1000)
    if not 0 <= ms <= MAX_TIMESTAMP_MS:
        raise ValueError(f"{text!r} is outside 1970-01-01 to 9999-12-31")
    return ms


def format_ms(ms: int) -> str:
    return datetime.fromtimestamp(ms / 1000, tz=UTC).strftime("%Y-%m-%d %H:%M:%S.%f")[:-3] + "Z"


def format_bytes(n: int) -> str:
    for unit in ("B", "KiB", "MiB", "GiB", "TiB"):
        if abs(n) < 1024 or unit == "TiB":
            return f"{n} B" if unit == "B" else f"{n:.1f} {unit}"
        n /= 1024  # type: ignore[assignment]
    return str(n)


def rfc3339(ms: int) -> str:
    """Kubernetes' date-time: whole seconds, UTC."""
    return _rfc3339(ms // 1000)


@functools.lru_cache(maxsize=8)
def _rfc3339(seconds: int) -> str:
    # Every status a poll builds stamps the current second, a few times: strftime once.
    return datetime.fromtimestamp(seconds, tz=UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
