"""The one grammar for file names inside `_delta_log`.

Every other module asks this one what a name means or how to spell one; none parses names itself.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from enum import StrEnum

LOG_DIR = "_delta_log"
SIDECAR_DIR = "_sidecars"
STAGED_DIRS = (
    "_staged_commits",
    "_commits",
)  # catalog-managed (current) and managed-commits (older)
LAST_CHECKPOINT = "_last_checkpoint"
# Where the last vacuum left off (Delta Spark's LastVacuumInfo; delta/vacuum/info.py reads it).
LAST_VACUUM_INFO = "_last_vacuum_info"


class Kind(StrEnum):
    COMMIT = "commit"
    CHECKPOINT = "checkpoint"  # classic single file, V1 or V2 content
    MULTIPART_CHECKPOINT = "multipart_checkpoint"
    UUID_CHECKPOINT = "uuid_checkpoint"  # V2 spec, json or parquet
    COMPACTED = "compacted"
    CRC = "crc"
    LAST_CHECKPOINT = "last_checkpoint"
    LAST_VACUUM_INFO = "last_vacuum_info"
    SIDECAR = "sidecar"
    STAGED_COMMIT = "staged_commit"
    TEMP = "temp"  # a writer's temp file (`is_temp`); never returned by `parse`


@dataclass(frozen=True)
class LogName:
    """What a name in `_delta_log` (relative to it) means."""

    name: str
    kind: Kind
    version: int = -1
    end_version: int = -1  # compacted files: last version covered
    part: int = 0  # multi-part checkpoints: 1-based part number
    parts: int = 1
    uuid: str = ""
    fmt: str = "json"  # json or parquet

    @property
    def is_checkpoint(self) -> bool:
        return self.kind in (Kind.CHECKPOINT, Kind.MULTIPART_CHECKPOINT, Kind.UUID_CHECKPOINT)


_V = r"(\d{20})"
_UUID = r"([0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12})"
_PATTERNS: list[tuple[re.Pattern[str], Kind]] = [
    (re.compile(rf"^{_V}\.json$"), Kind.COMMIT),
    (re.compile(rf"^{_V}\.checkpoint\.parquet$"), Kind.CHECKPOINT),
    (
        re.compile(rf"^{_V}\.checkpoint\.(\d{{10}})\.(\d{{10}})\.parquet$"),
        Kind.MULTIPART_CHECKPOINT,
    ),
    (re.compile(rf"^{_V}\.checkpoint\.{_UUID}\.(json|parquet)$"), Kind.UUID_CHECKPOINT),
    (re.compile(rf"^{_V}\.{_V}\.compacted\.json$"), Kind.COMPACTED),
    (re.compile(rf"^{_V}\.crc$"), Kind.CRC),
    (re.compile(rf"^(?:_staged_commits|_commits)/{_V}\.{_UUID}\.json$"), Kind.STAGED_COMMIT),
    (re.compile(r"^_sidecars/([^/]+\.parquet)$"), Kind.SIDECAR),
]


# Temp files a killed writer can leave in `_delta_log`: Delta Spark, Hadoop LogStores, the Delta
# kernel and deltakeeper write `.<name>.<uuid>.tmp` then rename it (uuid with or without dashes);
# Hadoop's local file system adds `..<name>.<uuid>.tmp.crc` beside it; delta-rs writes
# `_commit_<uuid>.json.tmp`.
_TOKEN = r"[0-9a-fA-F]{8}-?[0-9a-fA-F]{4}-?[0-9a-fA-F]{4}-?[0-9a-fA-F]{4}-?[0-9a-fA-F]{12}"
_TEMP = re.compile(
    rf"^(\.[^/]+\.{_TOKEN}\.tmp|\.\.[^/]+\.{_TOKEN}\.tmp\.crc|_commit_{_TOKEN}\.json\.tmp)$"
)


def is_temp(name: str) -> bool:
    """Whether a file name (no folder) is a writer's temp file (see _TEMP)."""
    return _TEMP.match(name) is not None


_TEMP_TARGET = re.compile(rf"^\.\.?([^/]+)\.{_TOKEN}\.tmp(?:\.crc)?$")


def temp_target(name: str) -> LogName | None:
    """What a temp file (`is_temp`) was going to become, when its name says (delta-rs's
    `_commit_<uuid>.json.tmp` does not)."""
    m = _TEMP_TARGET.match(name)
    return parse(m.group(1)) if m else None


def temp_name(name: str, token: str) -> str:
    """The temp file deltakeeper writes before renaming it to `name`: `.<name>.<token>.tmp`."""
    return f".{name}.{token}.tmp"


def parse(name: str) -> LogName | None:
    """Parse a name relative to `_delta_log`; None for anything the protocol does not define."""
    if name == LAST_CHECKPOINT:
        return LogName(name, Kind.LAST_CHECKPOINT)
    if name == LAST_VACUUM_INFO:
        return LogName(name, Kind.LAST_VACUUM_INFO)
    for pattern, kind in _PATTERNS:
        m = pattern.match(name)
        if not m:
            continue
        g = m.groups()
        if kind is Kind.COMMIT or kind is Kind.CRC:
            return LogName(name, kind, version=int(g[0]))
        if kind is Kind.CHECKPOINT:
            return LogName(name, kind, version=int(g[0]), fmt="parquet")
        if kind is Kind.MULTIPART_CHECKPOINT:
            part, parts = int(g[1]), int(g[2])
            if not 1 <= part <= parts:
                return None
            return LogName(name, kind, version=int(g[0]), part=part, parts=parts, fmt="parquet")
        if kind is Kind.UUID_CHECKPOINT:
            return LogName(name, kind, version=int(g[0]), uuid=g[1].lower(), fmt=g[2])
        if kind is Kind.COMPACTED:
            start, end = int(g[0]), int(g[1])
            if end <= start:
                return None
            return LogName(name, kind, version=start, end_version=end)
        if kind is Kind.STAGED_COMMIT:
            return LogName(name, kind, version=int(g[0]), uuid=g[1].lower())
        return LogName(name, kind)  # sidecar
    return None


def version_prefix(version: int) -> str:
    return f"{version:020d}"


def commit(version: int) -> str:
    return f"{version:020d}.json"


def checkpoint(version: int) -> str:
    return f"{version:020d}.checkpoint.parquet"


def multipart_checkpoint(version: int, part: int, parts: int) -> str:
    return f"{version:020d}.checkpoint.{part:010d}.{parts:010d}.parquet"


def uuid_checkpoint(version: int, uuid: str, fmt: str = "parquet") -> str:
    return f"{version:020d}.checkpoint.{uuid}.{fmt}"


def compacted(start: int, end: int) -> str:
    return f"{start:020d}.{end:020d}.compacted.json"


def crc(version: int) -> str:
    return f"{version:020d}.crc"


def sidecar(name: str) -> str:
    return f"{SIDECAR_DIR}/{name}"


def staged_commit(version: int, uuid: str) -> str:
    return f"{STAGED_DIRS[0]}/{version:020d}.{uuid}.json"
