"""A table's health: a score from 0 to 100 (100 healthy) made of named components, each from
what a poll already read (the snapshot, the log listing, the policy); nothing is read for it.

Each component scores 0-100; the table's score is their weighted mean, rounded. The weakest
component is `worst` (none when all are 100). Formulas (docs/health.md says the same):

- smallFiles (weight 30): 100 x (1 - removable / files). Removable: in each partition, its
  files under the small-file size less the files their bytes fill at that size (at least one),
  what compacting them would remove. The shares of files and of bytes under the size are
  reported with it.
- vacuumDebt (weight 20): 100 x live bytes / (live bytes + B), B = bytes of tombstones past
  the deleted-file retention (what a vacuum frees of the files the log names).
- deletedRows (weight 15): 100 x (1 - deleted / records): rows the deletion vectors hide, over
  the records of the files whose statistics count them.
- checkpointLag (weight 15): 100 x min(1, interval / commits since the newest checkpoint).
- logDebt (weight 10): 100 x (1 - D / log files), D = log files a metadata cleanup would delete
  now (the cleanup's own rules, with file times as commit times: no in-commit timestamp read).
- missingStats (weight 10): 100 x (1 - files without a record count / files).

The two from statistics need each file's record count; a snapshot read without them scores
the other four (the weights of those that are there make the mean).

Bands: healthy >= 80, fair >= 50, poor below.
"""

from __future__ import annotations

import enum
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from deltakeeper.delta.cleanup import expired_log
from deltakeeper.delta.held import HeldSnapshot
from deltakeeper.delta.snapshot import Snapshot
from deltakeeper.delta.storage import FileInfo
from deltakeeper.maintenance.operations import Operation
from deltakeeper.maintenance.policy import Policy
from deltakeeper.resources.status_fields import StatusField


class Component(enum.StrEnum):
    SMALL_FILES = "smallFiles"
    VACUUM_DEBT = "vacuumDebt"
    DELETED_ROWS = "deletedRows"
    CHECKPOINT_LAG = "checkpointLag"
    LOG_DEBT = "logDebt"
    MISSING_STATS = "missingStats"


WEIGHTS = {
    Component.SMALL_FILES: 30,
    Component.VACUUM_DEBT: 20,
    Component.DELETED_ROWS: 15,
    Component.CHECKPOINT_LAG: 15,
    Component.LOG_DEBT: 10,
    Component.MISSING_STATS: 10,
}


class Band(enum.StrEnum):
    HEALTHY = "healthy"
    FAIR = "fair"
    POOR = "poor"
    UNKNOWN = "unknown"  # a lake's table not scored yet (unread, or never polled here)


BAND_FLOORS = ((Band.HEALTHY, 80), (Band.FAIR, 50), (Band.POOR, 0))
LAKE_WORST = 10  # the worst tables a DeltaLake's status names


def band(score: int) -> Band:
    return next(b for b, floor in BAND_FLOORS if score >= floor)


@dataclass(frozen=True)
class Facts:
    """What a poll knows of the table, as health needs it."""

    files: int
    bytes: int
    small_files: int
    small_bytes: int
    removable_small_files: int  # what compacting each partition's small files removes
    commits_since_checkpoint: int
    checkpoint_interval: int
    log_files: int
    expired_log_files: int
    expired_log_bytes: int
    expired_tombstones: int
    expired_tombstone_bytes: int
    records: int | None = None  # in files with a record count; None: counts not read
    deleted_rows: int | None = None  # hidden by deletion vectors, in those files
    files_without_stats: int | None = None


@dataclass(frozen=True, slots=True)  # slots: one of these per component per table
class Score:
    component: Component
    score: int
    detail: dict[str, Any]


@dataclass(frozen=True, slots=True)
class Health:
    score: int
    components: tuple[Score, ...]
    reclaimable: dict[str, int]  # kind (data, log) -> bytes maintenance would free

    @property
    def band(self) -> Band:
        return band(self.score)

    @property
    def worst(self) -> Component | None:
        """The lowest-scoring component (the heavier one on a tie); None when all are 100."""
        low = min(self.components, key=lambda s: (s.score, -WEIGHTS[s.component]))
        return low.component if low.score < 100 else None

    def status(self) -> dict[str, Any]:
        """The status's `health`: compact, one write per change of a score."""
        return {
            "score": self.score,
            "band": str(self.band),
            "worst": self.worst and str(self.worst),
            "components": {str(s.component): s.score for s in self.components},
        }

    def to_json(self) -> dict[str, Any]:
        """`inspect --json`'s `health`: the status's fields and what each score came from."""
        return {
            **self.status(),
            "components": {
                str(s.component): {"score": s.score, "weight": WEIGHTS[s.component], **s.detail}
                for s in self.components
            },
            "reclaimableBytes": dict(self.reclaimable),
        }


def assess(f: Facts) -> Health:
    """The score of the components `f` can measure (the stats ones need record counts)."""
    scores: tuple[Score, ...] = (_small_files(f), _vacuum_debt(f))
    if f.records is not None and f.deleted_rows is not None:
        scores += (_deleted_rows(f.records, f.deleted_rows),)
    scores += (_checkpoint_lag(f), _log_debt(f))
    if f.files_without_stats is not None:
        scores += (_missing_stats(f.files_without_stats, f.files),)
    total = sum(WEIGHTS[s.component] * s.score for s in scores)
    score = round(total / sum(WEIGHTS[s.component] for s in scores))
    reclaimable = {"data": f.expired_tombstone_bytes, "log": f.expired_log_bytes}
    return Health(score, scores, reclaimable)


def _percent(healthy_share: float) -> int:
    return round(100 * min(1.0, max(0.0, healthy_share)))


def _small_files(f: Facts) -> Score:
    excess = f.removable_small_files
    return Score(
        Component.SMALL_FILES,
        _percent(1 - excess / f.files) if f.files else 100,
        {
            "smallFiles": f.small_files,
            "filesShare": _share(f.small_files, f.files),
            "bytesShare": _share(f.small_bytes, f.bytes),
            "removable": excess,
        },
    )


def _vacuum_debt(f: Facts) -> Score:
    b = f.expired_tombstone_bytes
    return Score(
        Component.VACUUM_DEBT,
        _percent(f.bytes / (f.bytes + b)) if b else 100,
        {"expiredTombstones": f.expired_tombstones, "reclaimableBytes": b},
    )


def _deleted_rows(records: int, deleted: int) -> Score:
    return Score(
        Component.DELETED_ROWS,
        _percent(1 - deleted / records) if records else 100,
        {"deletedRows": deleted, "records": records, "share": _share(deleted, records)},
    )


def _missing_stats(without: int, files: int) -> Score:
    return Score(
        Component.MISSING_STATS,
        _percent(1 - without / files) if files else 100,
        {"filesWithoutStats": without, "share": _share(without, files)},
    )


def _checkpoint_lag(f: Facts) -> Score:
    c, interval = f.commits_since_checkpoint, f.checkpoint_interval
    return Score(
        Component.CHECKPOINT_LAG,
        _percent(interval / c) if c > interval else 100,
        {"commitsSinceCheckpoint": c, "interval": interval},
    )


def _log_debt(f: Facts) -> Score:
    d = f.expired_log_files
    return Score(
        Component.LOG_DEBT,
        _percent(1 - d / f.log_files) if f.log_files else 100,
        {"expiredLogFiles": d, "reclaimableBytes": f.expired_log_bytes},
    )


def _share(part: int, whole: int) -> float:
    return round(part / whole, 4) if whole else 0.0


@dataclass(frozen=True)
class LogDebt:
    """The log files a metadata cleanup would delete now, and until when that holds."""

    files: int
    bytes: int
    until_ms: int  # a cleanup of this listing may find more then (its cut-off moves): count again


def log_debt(infos: Iterable[FileInfo], retention_ms: int, now_ms: int) -> LogDebt:
    plan = expired_log(infos, retention_ms, now_ms)
    return LogDebt(plan.files, plan.bytes, plan.until_ms)


# What `of_table` reads of `delta.summary.summarize`'s numbers.
SUMMARY_KEYS = (
    "numFiles",
    "sizeBytes",
    "smallFiles",
    "smallBytes",
    "removableSmallFiles",
    "commitsSinceCheckpoint",
    "logFiles",
    "numRecords",
    "deletedRows",
    "filesWithoutStats",
)


def of_table(
    snap: Snapshot | HeldSnapshot,
    summary: Mapping[str, Any],
    debt: LogDebt,
    policy: Policy,
    now_ms: int,
) -> tuple[Health, int]:
    """The table's health now, from its snapshot, `summarize`'s numbers and its log debt; and
    the time it next changes if the log does not move (a tombstone passing the retention, or
    the log debt's `until_ms`)."""
    cutoff = now_ms - policy.deleted_file_retention_ms
    tombstones, tombstone_bytes = snap.expired_tombstones(cutoff)
    facts = Facts(
        files=summary["numFiles"],
        bytes=summary["sizeBytes"],
        small_files=summary["smallFiles"],
        small_bytes=summary["smallBytes"],
        removable_small_files=summary["removableSmallFiles"],
        commits_since_checkpoint=summary["commitsSinceCheckpoint"],
        checkpoint_interval=policy.checkpoint_interval,
        log_files=summary["logFiles"],
        expired_log_files=debt.files,
        expired_log_bytes=debt.bytes,
        expired_tombstones=tombstones,
        expired_tombstone_bytes=tombstone_bytes,
        records=summary["numRecords"],
        deleted_rows=summary["deletedRows"],
        files_without_stats=summary["filesWithoutStats"],
    )
    next_deletion = snap.next_deletion(cutoff)
    until = debt.until_ms
    if next_deletion is not None:
        until = min(until, next_deletion + policy.deleted_file_retention_ms + 1)
    return assess(facts), until


def lake(
    statuses: Mapping[str, Mapping[str, Any] | None], worst: int = LAKE_WORST
) -> dict[str, Any]:
    """A DeltaLake's `health` from its tables' statuses (name -> status, None when unknown):
    how many are in each band, and the `worst` lowest-scoring ones below 100."""
    bands = dict.fromkeys(map(str, Band), 0)
    scored = []
    for name, st in statuses.items():
        h = (st or {}).get(StatusField.HEALTH)
        h = h if isinstance(h, Mapping) else {}
        score = h.get("score")
        if not isinstance(score, int):
            bands[Band.UNKNOWN] += 1
            continue
        bands[band(score)] += 1
        if score < 100:
            scored.append((score, name, h.get("worst")))
    scored.sort()
    return {
        "bands": bands,
        "worst": [{"table": name, "score": s, "worst": w} for s, name, w in scored[:worst]],
    }


# A file a reader need not open is worth this many bytes not read: on an object store a GET
# costs about as long as transferring a MiB. Used to weigh files against bytes in `benefit`.
FILE_BYTES = 1 << 20
# A table's file list is read by a checkpoint or a vacuum: the expected cost grows with it.
COST_FILES = 100_000


def benefit(h: Health | None, due: Iterable[Operation], files: int) -> float:
    """What running `due` now is expected to bring, in bytes per unit of expected cost: the
    bytes a vacuum frees (data) and a cleanup frees (log; one follows every checkpoint), the
    small files a compaction removes and the commits past the checkpoint interval a checkpoint
    saves readers (each as FILE_BYTES), over 1 + files / COST_FILES. 0 when not scored yet."""
    if h is None:
        return 0.0
    ops = set(due)
    detail = {s.component: s.detail for s in h.components}
    gain = 0.0
    if Operation.VACUUM in ops:
        gain += h.reclaimable["data"]
    if Operation.CLEANUP in ops or Operation.CHECKPOINT in ops:
        gain += h.reclaimable["log"]
    if Operation.CHECKPOINT in ops:
        lag = detail[Component.CHECKPOINT_LAG]
        gain += max(0, lag["commitsSinceCheckpoint"] - lag["interval"]) * FILE_BYTES
    if Operation.COMPACTION in ops:
        gain += detail[Component.SMALL_FILES]["removable"] * FILE_BYTES
    return gain / (1 + files / COST_FILES)


def first_poll_benefit(commit_bytes: int) -> float:
    """Which tables a daemon polls first after it starts: those with the most commit bytes
    past their newest checkpoint (one listing says it, before any commit is read). A long log
    without a checkpoint is what sick tables have, and what their maintenance saves."""
    return float(commit_bytes)
