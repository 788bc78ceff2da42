"""Defaults and effective policy. Every default deltakeeper uses is defined here and only here.

Precedence (DESIGN.md): the DeltaTable spec (or CLI flag), then a DeltaMaintenancePolicy that
selects the table, then Delta Lake's defaults. The table's own retention properties are a
floor: deltakeeper never keeps less than the table asks for.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from deltakeeper.delta import vacuum
from deltakeeper.units import parse_duration_ms

DAY_MS = 86_400_000

# Files below this size count as "small" in status, metrics and `inspect`.
SMALL_FILE_BYTES = 32 * 2**20
# Delta Lake's own defaults.
LOG_RETENTION_MS = 30 * DAY_MS
DELETED_FILE_RETENTION_MS = 7 * DAY_MS
CHECKPOINT_INTERVAL = 10
# Vacuum below this needs an explicit allowShortRetention (Delta's rule, kept in delta/vacuum).
MIN_VACUUM_RETENTION_MS = vacuum.MIN_VACUUM_RETENTION_MS
# On v2Checkpoint tables, a classic-named V2 checkpoint (every action inline, readable by
# readers that do not know sidecars) when none was written in this many checkpoint intervals.
CLASSIC_V2_EVERY_INTERVALS = 10
# The watch loop (operator and standalone mode): how often a table is polled, how often metadata
# cleanup is looked at even without a new checkpoint (log files expire as time passes), and how
# often vacuum runs when vacuum.schedule is not set (vacuum lists the whole table, so rarely).
POLL_INTERVAL_MS = 30_000
CLEANUP_EVERY_MS = 3_600_000
VACUUM_EVERY_MS = DAY_MS

_UNIT_MS = {
    "microsecond": 0.001,
    "millisecond": 1,
    "second": 1000,
    "minute": 60_000,
    "hour": 3_600_000,
    "day": DAY_MS,
    "week": 7 * DAY_MS,
}
_PAIR = re.compile(r"(-?\d+)\s+([a-z]+?)s?\b")


class PolicyError(ValueError):
    pass


def parse_interval_ms(text: str) -> int:
    """A Delta table-property interval ("interval 30 days", "1 week", "2 days 12 hours")."""
    s = text.strip().lower()
    s = s[len("interval ") :] if s.startswith("interval ") else s
    pairs = _PAIR.findall(s)
    if not pairs or _PAIR.sub("", s).strip():
        raise PolicyError(f"{text!r} is not an interval Delta accepts, e.g. 'interval 7 days'")
    total = 0.0
    for number, unit in pairs:
        if unit not in _UNIT_MS:
            raise PolicyError(f"{text!r}: unit {unit!r} is not allowed (months and years are not)")
        total += int(number) * _UNIT_MS[unit]
    return int(total)


@dataclass(frozen=True)
class Policy:
    log_retention_ms: int
    deleted_file_retention_ms: int
    checkpoint_interval: int
    expired_log_cleanup: bool
    txn_retention_ms: int | None
    vacuum_enabled: bool = True
    allow_short_retention: bool = False
    write_checksum: bool = False  # N.crc next to each checkpoint deltakeeper writes
    checkpoint_part_size: int | None = None  # actions per part; None: one file (Delta's default)


# The explicit settings a DeltaTable spec, a DeltaMaintenancePolicy spec or CLI flags can carry,
# as keyword arguments of `effective`; a missing key means "not set here".
SETTINGS = (
    "log_retention_ms",
    "deleted_file_retention_ms",
    "checkpoint_interval",
    "vacuum_enabled",
    "allow_short_retention",
    "write_checksum",
    "checkpoint_part_size",
)


def from_spec(spec: Mapping[str, Any]) -> dict[str, Any]:
    """The settings a DeltaTable or DeltaMaintenancePolicy spec sets, parsed and checked."""
    out: dict[str, Any] = {}
    for field, key in (
        ("log_retention_ms", "logRetention"),
        ("deleted_file_retention_ms", "deletedFileRetention"),
    ):
        if spec.get(key) is not None:
            out[field] = _duration(key, spec[key])
    checkpoint = spec.get("checkpoint") or {}
    if checkpoint.get("interval") is not None:
        out["checkpoint_interval"] = _positive("checkpoint.interval", checkpoint["interval"])
    if checkpoint.get("partSize") is not None:
        out["checkpoint_part_size"] = _positive("checkpoint.partSize", checkpoint["partSize"])
    if checkpoint.get("writeChecksum") is not None:
        out["write_checksum"] = _bool("checkpoint.writeChecksum", checkpoint["writeChecksum"])
    vacuum = spec.get("vacuum") or {}
    if vacuum.get("enabled") is not None:
        out["vacuum_enabled"] = _bool("vacuum.enabled", vacuum["enabled"])
    short = vacuum.get("allowShortRetention", spec.get("allowShortRetention"))
    if short is not None:
        out["allow_short_retention"] = _bool("allowShortRetention", short)
    return out


def layered(*layers: Mapping[str, Any]) -> dict[str, Any]:
    """Settings from the most specific layer first (flags, table spec, policy): first set wins."""
    out: dict[str, Any] = {}
    for layer in layers:
        for key, value in layer.items():
            if value is not None:
                out.setdefault(key, value)
    return out


def _table_interval(configuration: dict[str, str]) -> int:
    key = "table property delta.checkpointInterval"
    value = configuration.get("delta.checkpointInterval", str(CHECKPOINT_INTERVAL))
    if not value.strip().isdigit():
        raise PolicyError(f"{key}: {value!r} is not a whole number")
    return _positive(key, int(value))


def _duration(key: str, value: Any) -> int:
    try:
        return parse_duration_ms(str(value))
    except ValueError as e:
        raise PolicyError(f"{key}: {e}") from e


def _positive(key: str, value: Any) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value <= 0:
        raise PolicyError(f"{key}: expected a whole number above 0, got {value!r}")
    return value


def _bool(key: str, value: Any) -> bool:
    if not isinstance(value, bool):
        raise PolicyError(f"{key}: expected true or false, got {value!r}")
    return value


def effective(
    configuration: dict[str, str],
    log_retention_ms: int | None = None,
    deleted_file_retention_ms: int | None = None,
    checkpoint_interval: int | None = None,
    vacuum_enabled: bool | None = None,
    allow_short_retention: bool | None = None,
    write_checksum: bool | None = None,
    checkpoint_part_size: int | None = None,
) -> Policy:
    """The policy for one table: explicit values (spec, policy or flags) over Delta's defaults,
    never below what the table's own properties ask for."""

    def floor(prop: str) -> int:
        value = configuration.get(prop)
        try:
            return parse_interval_ms(value) if value else 0
        except PolicyError as e:
            raise PolicyError(f"table property {prop}: {e}") from e

    txn = configuration.get("delta.setTransactionRetentionDuration")
    return Policy(
        log_retention_ms=max(
            log_retention_ms if log_retention_ms is not None else LOG_RETENTION_MS,
            floor("delta.logRetentionDuration"),
        ),
        deleted_file_retention_ms=max(
            deleted_file_retention_ms
            if deleted_file_retention_ms is not None
            else DELETED_FILE_RETENTION_MS,
            floor("delta.deletedFileRetentionDuration"),
        ),
        checkpoint_interval=checkpoint_interval or _table_interval(configuration),
        expired_log_cleanup=configuration.get("delta.enableExpiredLogCleanup", "true").lower()
        != "false",
        txn_retention_ms=parse_interval_ms(txn) if txn else None,
        vacuum_enabled=True if vacuum_enabled is None else vacuum_enabled,
        allow_short_retention=bool(allow_short_retention),
        write_checksum=bool(write_checksum),
        checkpoint_part_size=checkpoint_part_size,
    )
