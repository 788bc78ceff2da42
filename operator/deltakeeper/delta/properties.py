"""Typed `delta.*` table properties: every one deltakeeper reads, its parsing and Delta's default.

`TableProperties` parses a property when it is read, so a malformed value fails only the work
that needs it (a bad retention does not stop a checkpoint). Policy decides what a missing
value means where Delta leaves that to the writer (retention, checkpoint interval).
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import UTC, datetime

HOUR_MS = 3_600_000
DAY_MS = 24 * HOUR_MS

LOG_RETENTION = "delta.logRetentionDuration"
DELETED_FILE_RETENTION = "delta.deletedFileRetentionDuration"
TXN_RETENTION = "delta.setTransactionRetentionDuration"
CHECKPOINT_INTERVAL = "delta.checkpointInterval"
EXPIRED_LOG_CLEANUP = "delta.enableExpiredLogCleanup"
CHECKPOINT_POLICY = "delta.checkpointPolicy"
STATS_AS_JSON = "delta.checkpoint.writeStatsAsJson"
STATS_AS_STRUCT = "delta.checkpoint.writeStatsAsStruct"
NUM_INDEXED_COLS = "delta.dataSkippingNumIndexedCols"
STATS_COLUMNS = "delta.dataSkippingStatsColumns"
STRING_PREFIX = "delta.dataSkippingStringPrefixLength"
COLUMN_MAPPING_MODE = "delta.columnMapping.mode"
IN_COMMIT_TIMESTAMPS = "delta.enableInCommitTimestamps"
ICT_ENABLEMENT_VERSION = "delta.inCommitTimestampEnablementVersion"
ICT_ENABLEMENT_TIMESTAMP = "delta.inCommitTimestampEnablementTimestamp"
CHECKPOINT_PROTECTION = "delta.requireCheckpointProtectionBeforeVersion"
UNIVERSAL_FORMATS = "delta.universalFormat.enabledFormats"
TARGET_FILE_SIZE = "delta.targetFileSize"
SYMLINK_MANIFEST = "delta.compatibility.symlinkFormatManifest.enabled"

# Vacuum with a retention below this needs an explicit allowShortRetention (Delta's
# retentionDurationCheck: 168 hours). Here, not in vacuum/plan.py, so that maintenance.policy can
# name it without loading vacuum (and pyarrow).
MIN_VACUUM_RETENTION_MS = 7 * DAY_MS
# Delta's default for dataSkippingNumIndexedCols.
NUM_INDEXED_COLS_DEFAULT = 32
# Delta's default for dataSkippingStringPrefixLength: characters a string bound keeps.
STRING_PREFIX_DEFAULT = 32

_UNIT_MS = {
    "microsecond": 0.001,
    "millisecond": 1,
    "second": 1000,
    "minute": 60_000,
    "hour": HOUR_MS,
    "day": DAY_MS,
    "week": 7 * DAY_MS,
}
_PAIR = re.compile(r"(-?\d+)\s+([a-z]+?)s?\b")
# Spark's size strings for delta.targetFileSize: bytes, or a number and k, m or g (b optional).
_SIZE_UNITS = {"b": 1, "k": 2**10, "kb": 2**10, "m": 2**20, "mb": 2**20, "g": 2**30, "gb": 2**30}


class PropertyError(ValueError):
    """A table property holds a value deltakeeper cannot read."""


def parse_calendar_interval_ms(text: str) -> int:
    """A Delta table-property interval, as Spark reads a CalendarInterval ("interval 30 days",
    "1 week", "2 days 12 hours"); flags and manifests use units.parse_interval_ms ("30d")."""
    s = text.strip().lower()
    s = s[len("interval ") :] if s.startswith("interval ") else s
    pairs = _PAIR.findall(s)
    if not pairs or _PAIR.sub("", s).strip():
        raise PropertyError(f"{text!r} is not an interval Delta accepts, e.g. 'interval 7 days'")
    total = 0.0
    for number, unit in pairs:
        if unit not in _UNIT_MS:
            raise PropertyError(
                f"{text!r}: unit {unit!r} is not allowed (months and years are not)"
            )
        total += int(number) * _UNIT_MS[unit]
    return int(total)


@dataclass(frozen=True)
class TableProperties:
    configuration: Mapping[str, str]

    @property
    def log_retention_ms(self) -> int | None:
        return self._interval(LOG_RETENTION)

    @property
    def deleted_file_retention_ms(self) -> int | None:
        return self._interval(DELETED_FILE_RETENTION)

    @property
    def txn_retention_ms(self) -> int | None:
        return self._interval(TXN_RETENTION)

    @property
    def has_txn_retention(self) -> bool:
        """Set at all (even empty): live transactions then depend on the clock."""
        return TXN_RETENTION in self.configuration

    @property
    def checkpoint_interval(self) -> int | None:
        value = self.configuration.get(CHECKPOINT_INTERVAL)
        if value is None:
            return None
        if not value.strip().isdigit():
            raise self._error(CHECKPOINT_INTERVAL, f"{value!r} is not a whole number")
        if int(value) <= 0:
            raise self._error(
                CHECKPOINT_INTERVAL, f"expected a whole number above 0, got {int(value)!r}"
            )
        return int(value)

    @property
    def expired_log_cleanup(self) -> bool:
        return self.configuration.get(EXPIRED_LOG_CLEANUP, "true").lower() != "false"

    @property
    def checkpoint_policy(self) -> str:
        """`v2` or `classic` (Delta Spark sets `classic` while v2Checkpoint is being dropped)."""
        return self._word(CHECKPOINT_POLICY, "v2")

    @property
    def write_stats_as_json(self) -> bool:
        return self._word(STATS_AS_JSON, "true") != "false"

    @property
    def write_stats_as_struct(self) -> bool:
        """Delta Spark writes stats_parsed unless this is `false`."""
        return self._word(STATS_AS_STRUCT, "true") != "false"

    @property
    def num_indexed_cols(self) -> int | None:
        """How many columns carry statistics; None when the value is not a number."""
        try:
            return int(self.configuration.get(NUM_INDEXED_COLS, NUM_INDEXED_COLS_DEFAULT))
        except ValueError:
            return None

    @property
    def symlink_manifest(self) -> bool:
        """Whether Delta keeps symlink format manifests for this table."""
        return self._word(SYMLINK_MANIFEST, "false") == "true"

    @property
    def column_mapping_mode(self) -> str | None:
        return self.configuration.get(COLUMN_MAPPING_MODE)

    @property
    def in_commit_timestamps(self) -> bool:
        return self._word(IN_COMMIT_TIMESTAMPS, "") == "true"

    @property
    def ict_enablement_version(self) -> int:
        return self._int(ICT_ENABLEMENT_VERSION) or 0

    @property
    def ict_enablement_timestamp(self) -> int | None:
        return self._int(ICT_ENABLEMENT_TIMESTAMP)

    @property
    def checkpoint_protection_version(self) -> int:
        """Log files before this version go only with checkpointProtection's rules."""
        return self._int(CHECKPOINT_PROTECTION) or 0

    @property
    def universal_formats(self) -> frozenset[str]:
        formats = self.configuration.get(UNIVERSAL_FORMATS, "")
        return frozenset(f.strip().lower() for f in formats.split(","))

    @property
    def target_file_size(self) -> int | None:
        """Bytes, or Spark's `128mb` form; None when unset or not a size."""
        raw = self._word(TARGET_FILE_SIZE, "")
        digits = raw.rstrip("kmgb")
        unit = raw[len(digits) :]
        if digits.isdigit() and unit in {"", *_SIZE_UNITS}:
            return int(digits) * _SIZE_UNITS.get(unit, 1)
        return None

    def _word(self, key: str, default: str) -> str:
        return self.configuration.get(key, default).strip().lower()

    def _interval(self, key: str) -> int | None:
        text = self.configuration.get(key)
        if not text:
            return None
        try:
            return parse_calendar_interval_ms(text)
        except PropertyError as e:
            raise self._error(key, str(e)) from e

    def _int(self, key: str) -> int | None:
        text = self.configuration.get(key)
        if text is None:
            return None
        try:
            return int(text)
        except ValueError as e:
            raise self._error(key, f"{text!r} is not a whole number") from e

    @staticmethod
    def _error(key: str, problem: str) -> PropertyError:
        return PropertyError(f"table property {key}: {problem}")


# -- text for plans and refusals ------------------------------------------------------------
def when_text(ms: int) -> str:
    """An instant as plans print it: ISO-8601 UTC with milliseconds."""
    return datetime.fromtimestamp(ms / 1000, UTC).strftime("%Y-%m-%dT%H:%M:%S.%f")[:-3] + "Z"


def duration_text(ms: int) -> str:
    """A retention as plans print it: whole days or hours, else milliseconds."""
    days, rest = divmod(ms, DAY_MS)
    if rest == 0:
        return f"{days} days"
    hours, rest = divmod(ms, HOUR_MS)
    return f"{hours} hours" if rest == 0 else f"{ms} ms"
