"""`_delta_log/_last_vacuum_info`: where the last vacuum left off, shared with Delta Spark.

Delta Spark's VACUUM (LastVacuumInfo in VacuumCommand.scala) overwrites it after every run that
deletes (never after a dry run) with `{"latestCommitVersionOutsideOfRetentionWindow":N}`: N is
the newest commit at or before that run's cut-off, so every remove and cdc file of the commits
up to N has been looked at. A LITE vacuum reads only the commits after it. Spark's FULL vacuum
writes `{}`, which records no N. Spark reads a file it cannot parse as no file at all, and so
does this module: the worst a bad file does is make LITE start from commit 0, or refuse. A
folder of that name (a local disk's) records nothing either, but no vacuum could record its N
there: vacuum/plan.py refuses before deleting anything.
"""

from __future__ import annotations

import enum
import json
from dataclasses import dataclass

from deltakeeper.delta import paths
from deltakeeper.delta.storage import IsAFolder, Storage

KEY = "latestCommitVersionOutsideOfRetentionWindow"
LOCATION = f"{paths.LOG_DIR}/{paths.LAST_VACUUM_INFO}"


class InfoStatus(enum.StrEnum):
    MISSING = "missing"
    RECORDED = "recorded"  # holds an N
    EMPTY = "empty"  # `{}`: Spark's FULL vacuum, or a run with no commit past its cut-off
    CORRUPT = "corrupt"
    FOLDER = "folder"  # a folder of that name: nothing can be written there


@dataclass(frozen=True)
class LastVacuumInfo:
    status: InfoStatus
    version: int | None = None  # N, when RECORDED

    def describe(self) -> str:
        if self.status is InfoStatus.RECORDED:
            return f"{paths.LAST_VACUUM_INFO} records N = {self.version}"
        found = "a folder" if self.status is InfoStatus.FOLDER else self.status
        return f"{paths.LAST_VACUUM_INFO} is {found} (no N recorded)"


def parse(data: bytes) -> LastVacuumInfo:
    """What a file's bytes say; CORRUPT for anything Spark's reader would not take."""
    try:
        raw = json.loads(data.decode("utf-8"))
    except (UnicodeDecodeError, ValueError, RecursionError):  # RecursionError: deep nesting
        return LastVacuumInfo(InfoStatus.CORRUPT)
    if not isinstance(raw, dict):
        return LastVacuumInfo(InfoStatus.CORRUPT)
    value = raw.get(KEY)
    if value is None:
        return LastVacuumInfo(InfoStatus.EMPTY)
    if isinstance(value, bool) or not isinstance(value, int) or value < 0:
        return LastVacuumInfo(InfoStatus.CORRUPT)
    return LastVacuumInfo(InfoStatus.RECORDED, value)


def render(version: int) -> bytes:
    """The file as Delta Spark writes it (Jackson: no spaces, no newline)."""
    return json.dumps({KEY: version}, separators=(",", ":")).encode()


def read(storage: Storage) -> LastVacuumInfo:
    try:
        return parse(storage.read(LOCATION))
    except IsAFolder:
        return LastVacuumInfo(InfoStatus.FOLDER)
    except FileNotFoundError:
        return LastVacuumInfo(InfoStatus.MISSING)


def write(storage: Storage, version: int) -> None:
    """Replace the file whole (one atomic overwrite: a reader sees the old N or the new one)."""
    storage.overwrite(LOCATION, render(version))
