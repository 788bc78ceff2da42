"""What a LITE vacuum reads instead of listing the table: a window of commits, and the files
they name as removed or as change data.

The rules are Delta Spark's VACUUM LITE (VacuumCommand.getFilesFromDeltaLog):

- N is the newest commit at or before the cut-off (`Table.commit_at`: in-commit timestamps or
  file times). With none there is nothing to vacuum.
- LITE is impossible (DELTA_CANNOT_VACUUM_LITE) when the earliest commit file is not version 0
  and `_last_vacuum_info` records no N, or one older than that earliest commit: the commits
  after the last vacuum are gone, and files only they named would never be found.
- The window is the commits from the recorded N + 1 (with none recorded: the earliest commit)
  up to the new N; it is empty when the recorded N is the new one.
- Every `remove` in the window names its file, aged by its `deletionTimestamp` (0 without one),
  and its deletion vector's file when that is stored relative to the table ('u'); every `cdc`
  names its file, aged 0 (no snapshot ever references it).

Two differences from Delta Spark, both on the safe side:
- A commit missing inside the window (a gap in the log) also makes LITE impossible; Delta Spark
  would read past it and miss what it named. So does a recorded N beyond the table's version:
  it belongs to a table deleted and written again in place, whose commits LITE would skip.
- The window starts right after the recorded N. Delta Spark starts at the snapshot's version
  when that is older than N + 1, so on a table with no commit since the last vacuum it reads
  commit N again; every file that commit names was looked at by the vacuum that recorded N, and
  reading it again only deletes again what is gone (S3 confirms those deletes all the same).
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from typing import Any

from deltakeeper.delta.errors import LiteVacuumImpossible
from deltakeeper.delta.log.json_files import commit_lines
from deltakeeper.delta.log.segment import Listing, LogEntry
from deltakeeper.delta.snapshot import SnapshotHeader
from deltakeeper.delta.storage import Storage
from deltakeeper.delta.table import Table
from deltakeeper.delta.vacuum import info as vacuum_info
from deltakeeper.delta.vacuum.info import InfoStatus, LastVacuumInfo


@dataclass(frozen=True)
class Window:
    """The commits a LITE vacuum reads: `start` to `end` (= N), none when start > end."""

    start: int
    end: int
    commits: tuple[LogEntry, ...] = ()

    @property
    def empty(self) -> bool:
        return self.start > self.end


@dataclass(frozen=True)
class Named:
    """A file a commit names as removed or as change data, as the log spells it."""

    path: str
    size: int
    deleted_ms: int  # its age: a remove's deletionTimestamp, 0 for a cdc file
    deletion_vector: dict[str, Any] | None = None  # a remove's, whose file goes with it


def log_listing(table: Table, info: LastVacuumInfo, version: int) -> Listing:
    """The one listing of `_delta_log` a LITE vacuum needs: from the recorded N (or `version`,
    the snapshot's, when that is older) on when commit N is still there, else all of it (the
    earliest commit decides). It also brings the snapshot up to date (`Table.update`)."""
    if info.status is InfoStatus.RECORDED and info.version is not None:
        listing = table.list_log(min(info.version, version))
        if info.version in listing.commits:
            return listing
    return table.list_log()


def window(header: SnapshotHeader, listing: Listing, info: LastVacuumInfo, newest: int) -> Window:
    """The commits after the last vacuum's N up to `newest` (the new N); LiteVacuumImpossible
    when they are not all in `listing`."""
    earliest = min(listing.commits, default=None)
    recorded = info.version if info.status is InfoStatus.RECORDED else None
    if earliest is None:
        raise LiteVacuumImpossible("the log lists no commit file; a LITE vacuum reads commits")
    if recorded is not None and recorded > header.version:
        raise LiteVacuumImpossible(
            f"{info.describe()}, beyond the table's version {header.version}: it is not this "
            "table's (one deleted and written again in place?); a FULL vacuum lists the table"
        )
    if earliest != 0 and (recorded is None or recorded < earliest):
        raise LiteVacuumImpossible(
            f"the earliest commit left in the log is {earliest}, not 0, and "
            f"{info.describe()}{'' if recorded is None else f' (older than {earliest})'}: "
            "files named only by cleaned-up commits would never be found (Delta Spark: "
            "DELTA_CANNOT_VACUUM_LITE); a FULL vacuum lists the table instead"
        )
    start = earliest if recorded is None else recorded + 1
    missing = [v for v in range(start, newest + 1) if v not in listing.commits]
    if missing:
        raise LiteVacuumImpossible(
            f"commit {missing[0]} is missing from the log between the last vacuum and "
            f"version {newest}; what it named would never be found. A FULL vacuum lists the "
            "table instead"
        )
    commits = tuple(listing.commits[v] for v in range(start, newest + 1))
    return Window(start, newest, commits)


def named_files(storage: Storage, commits: Iterable[LogEntry]) -> Iterator[Named]:
    """Every remove and cdc file the commits name, in log order."""
    for entry in commits:
        for _, _, kind, body in commit_lines(storage, entry.key):
            if kind == "remove":
                yield Named(
                    body["path"],
                    _int(body.get("size")),
                    _int(body.get("deletionTimestamp")),
                    body.get("deletionVector") or None,
                )
            elif kind == "cdc" and isinstance(body, dict) and isinstance(body.get("path"), str):
                yield Named(body["path"], _int(body.get("size")), 0)


def _int(value: Any) -> int:
    return value if isinstance(value, int) and not isinstance(value, bool) else 0


def cleanup_floor(table: Table) -> int | None:
    """The oldest commit a log cleanup must keep for the next LITE vacuum to stay possible:
    the N `_last_vacuum_info` records (Delta refuses LITE once that commit is gone). None when
    it records none: a LITE vacuum would then read every commit from 0, which is no reason to
    keep the whole log; the next AUTO vacuum runs FULL once instead, and records an N."""
    info = vacuum_info.read(table.storage)
    return info.version if info.status is InfoStatus.RECORDED else None
