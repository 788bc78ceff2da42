"""Metadata cleanup (log retention) as a plan: which `_delta_log` files may go, and why.

`plan_cleanup` is pure (no I/O, no clock): it is given the log's listing, commit timestamps,
the time now and what was read from checkpoints. `plan_table_cleanup` does that reading for a
table (it lists the log and reads in-commit timestamps and sidecar references, deleting
nothing), and `execute_cleanup`, which the executor calls, deletes `CleanupPlan.delete`. The
steps are those of "Metadata Cleanup" in the Delta protocol:

1. cutOffTimestamp is midnight UTC of the day of `now - retention`; the cutoffCommit is the
   newest published commit whose timestamp is not newer than it (exactly midnight qualifies).
2. The cutOffCheckpoint is the newest complete checkpoint not newer than the cutoffCommit. If
   there is none, nothing is deleted. It (every file of it, and any other complete or partial
   checkpoint at its version), the commit JSON at its version and everything after stay.
3. Commits, checkpoints (classic, multi-part, complete or not, UUID) and `.crc` files before
   the cutOffCheckpoint go, as do compacted files with startVersion <= its version and staged
   commits (`_staged_commits/` or `_commits/`) with version <= its version.
4. Sidecars in `_sidecars/` go when no remaining checkpoint references them and they are older
   than the sidecar cut-off (see `sidecar_cutoff_ms`).

Beyond the protocol: writers' temp files (`paths.is_temp`) in `_delta_log` older than a day go
too, whatever the steps above decide; a killed write leaves them and no one else removes them.

Timestamps. `commit_time(version)` is whatever the table uses for time travel: the file
modification time, or the in-commit timestamp for versions that have one. Like Delta Spark
(DeltaHistoryManager's monotonization), the planner first makes the times strictly increasing in
version order: a time not later than the previous one becomes previous + 1 ms; in-commit
timestamps already are, so they are unchanged. The adjusted times choose the cutoffCommit, so a
table copied with equal file times (every commit adjusted) is cleaned like any other. As in
Delta Spark, whose BufferingLogDeletionIterator ends a run of adjusted files at each checkpoint,
a checkpoint is a valid cut whether or not its commit's time was adjusted; the kept commits'
adjusted times may then move back by at most the adjustment they had.

Checkpoint protection (`delta.requireCheckpointProtectionBeforeVersion` = P, passed only when
the `checkpointProtection` writer feature is in the protocol) follows Delta Spark's
`MetadataCleanup.metadataCleanupAllowed`: let E be the newest deleted commit below P. The
cleanup is allowed when no commit below P is deleted, when E >= P - 1 (all history before P
goes in one cleanup), or when a complete checkpoint exists at E + 1 (the cleanup stops at a
checkpoint and creates none). Here that checkpoint must be the cutOffCheckpoint, which stays;
Delta only asks that one exists at E + 1, which differs when commits just before the
cutOffCheckpoint are already missing. Otherwise Delta would have to check it supports every
protocol in the range; this planner does not, and deletes nothing.

LITE vacuum (`keep_from`): Delta refuses a LITE vacuum once the commit `_last_vacuum_info`
records is gone (vacuum/lite.py), so a caller that wants the next one possible passes that
version, and no checkpoint newer than it is the cutOffCheckpoint: it and every later commit stay.

Catalog-managed tables: metadata cleanup is the managing catalog's (Delta's "Maintenance
Operations on Catalog-managed Tables"), so `plan_table_cleanup` refuses unless the caller says
the catalog permits it. Then only published commits (`_delta_log/<v>.json`) count, and with
`published_up_to` nothing newer than that version is a cutoff candidate or deleted.
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Iterable, Mapping
from dataclasses import dataclass, field

from deltakeeper.delta import features, paths
from deltakeeper.delta.log import checkpoint_files
from deltakeeper.delta.log.segment import Checkpoint, Listing, LogEntry, group, monotonic
from deltakeeper.delta.paths import Kind, LogName
from deltakeeper.delta.properties import DAY_MS, duration_text, when_text
from deltakeeper.delta.snapshot import SnapshotHeader
from deltakeeper.delta.storage import Deletes, FileInfo
from deltakeeper.delta.table import Table

# A writer's temp file this old belongs to a write that died: no write takes a day.
TEMP_FILE_AGE_MS = DAY_MS


@dataclass
class KindTotal:
    files: int = 0
    bytes: int = 0


@dataclass
class CleanupPlan(Deletes):
    """What a metadata cleanup would delete, and why. Plain data; nothing deletes here."""

    now_ms: int
    retention_ms: int
    cutoff_ms: int  # cutOffTimestamp: midnight UTC of the day of now - retention
    sidecar_cutoff_ms: int
    cutoff_commit: int | None = None
    cutoff_checkpoint: int | None = None
    kept_for_lite: int | None = None  # `keep_from`, when it moved the cut-off checkpoint back
    # Until then a plan from the same listing decides the same (`stable_until`); 0: unknown.
    until_ms: int = 0
    delete: list[FileInfo] = field(default_factory=list)  # sorted by key
    by_kind: dict[Kind, KindTotal] = field(default_factory=dict)
    notes: list[str] = field(default_factory=list)

    def reasons(self) -> list[str]:
        lines = [
            f"now {when_text(self.now_ms)}, retention {duration_text(self.retention_ms)}: "
            f"cutOffTimestamp {when_text(self.cutoff_ms)}",
            _commit_line(self.cutoff_commit),
            _checkpoint_line(self.cutoff_checkpoint),
            *self.notes,
        ]
        if not self.delete:
            return [*lines, "nothing to delete"]
        lines.append(f"delete {self.files} files, {self.bytes} bytes:")
        lines += [f"  {k}: {t.files} files, {t.bytes} bytes" for k, t in self.by_kind.items()]
        return lines

    def __str__(self) -> str:
        return "\n".join(self.reasons())


def plan_cleanup(
    files: Iterable[FileInfo],
    commit_time: Callable[[int], int],
    retention_ms: int,
    now_ms: int,
    *,
    sidecar_refs: Mapping[str, Collection[str]] | None = None,
    protect_before_version: int | None = None,
    published_up_to: int | None = None,
    newest_cut: int | None = None,
    keep_from: int | None = None,
) -> CleanupPlan:
    """Plan a metadata cleanup, and the removal of writers' temp files in `_delta_log` older
    than `TEMP_FILE_AGE_MS` (a killed write leaves them, and nothing else removes them).

    `files`: everything listed under `_delta_log/`, including `_staged_commits/`, `_commits/`
    and `_sidecars/` (keys relative to the table root). `commit_time(v)`: the timestamp of
    published commit v in ms; asked only for commits in `files`. `sidecar_refs`: for each
    single-file checkpoint the caller read, its key and the sidecar paths it references; a
    sidecar is deleted only when every single-file checkpoint that stays is in it.
    `protect_before_version`: `delta.requireCheckpointProtectionBeforeVersion` when the
    `checkpointProtection` feature is supported. `published_up_to`: for catalog-managed
    tables, the newest published version the catalog reports. `newest_cut`: no checkpoint
    newer than this is the cutOffCheckpoint (-1: none is); a reader that read past a damaged
    checkpoint passes the one it used, so this run never deletes it. `keep_from`: commits from
    this version on stay, for the next LITE vacuum.
    """
    if retention_ms < 0:
        raise ValueError(f"retention must not be negative, got {retention_ms} ms")
    infos = [f for f in files if not f.is_dir]
    cutoff_ms = midnight_utc(now_ms - retention_ms)
    plan = CleanupPlan(now_ms, retention_ms, cutoff_ms, sidecar_cutoff(now_ms, cutoff_ms))
    listing = group(infos)
    _plan_cut_off(plan, listing, commit_time, published_up_to, newest_cut)
    if keep_from is not None and plan.cutoff_commit is not None:
        _keep_for_lite(plan, listing, keep_from)
    if plan.cutoff_checkpoint is not None:
        entries = log_entries(listing, infos)
        checkpoint = plan.cutoff_checkpoint
        _plan_deletions(plan, entries, checkpoint, protect_before_version, sidecar_refs or {})
    plan.until_ms = stable_until(infos, retention_ms, now_ms)
    leftovers = temp_leftovers(infos, now_ms)
    if leftovers:
        fill(plan, leftovers)
        plan.notes.append(
            f"{len(leftovers)} temp files of killed writes older than "
            f"{duration_text(TEMP_FILE_AGE_MS)} go"
        )
    return plan


def expired_log(infos: Iterable[FileInfo], retention_ms: int, now_ms: int) -> CleanupPlan:
    """What a metadata cleanup now would delete of this listing of `_delta_log`, read from
    nothing else: file modification times stand in for in-commit timestamps, and sidecars stay
    (no checkpoint is read for its references). For health, not for deleting."""
    files = [f for f in infos if not f.is_dir]
    return plan_cleanup(files, commit_mtimes(files).__getitem__, retention_ms, now_ms)


def stable_until(infos: Iterable[FileInfo], retention_ms: int, now_ms: int) -> int:
    """The first time after `now_ms` at which a plan from this same listing can differ. Only
    three inputs follow the clock: the cut-off day (it moves at midnight UTC + retention), the
    sidecar cut-off (at midnight UTC while it is younger than the log's), and a temp file's
    age. A caller that saw no new log file may skip planning until then."""
    cutoff_ms = midnight_utc(now_ms - retention_ms)
    moves = [cutoff_ms + DAY_MS + retention_ms]
    if midnight_utc(now_ms) - DAY_MS < cutoff_ms:
        moves.append(midnight_utc(now_ms) + DAY_MS)
    prefix = paths.LOG_DIR + "/"
    moves += [
        f.mtime_ms + TEMP_FILE_AGE_MS + 1
        for f in infos
        if f.key.startswith(prefix)
        and paths.is_temp(f.name)
        and f.mtime_ms >= now_ms - TEMP_FILE_AGE_MS
    ]
    return min(moves)


def temp_leftovers(infos: Iterable[FileInfo], now_ms: int) -> list[LogEntry]:
    """Temp files older than a day, except those for the newest commit's version or a later one:
    a write of those may still be under way, whatever the clock says (time is injected)."""
    prefix = paths.LOG_DIR + "/"
    logs = [f for f in infos if f.key.startswith(prefix)]
    versions = [n.version for f in logs if (n := paths.parse(f.name)) and n.kind is Kind.COMMIT]
    newest = max(versions, default=-1)
    return [
        LogEntry(LogName(f.key.removeprefix(prefix), Kind.TEMP), f)
        for f in logs
        if paths.is_temp(f.name)
        and f.mtime_ms < now_ms - TEMP_FILE_AGE_MS
        and not _maybe_in_flight(f.name, newest)
    ]


def _maybe_in_flight(name: str, newest_commit: int) -> bool:
    target = paths.temp_target(name)
    return target is not None and target.version >= newest_commit


def _plan_cut_off(
    plan: CleanupPlan,
    listing: Listing,
    commit_time: Callable[[int], int],
    published_up_to: int | None,
    newest_cut: int | None,
) -> None:
    """The cutoffCommit and the cut-off checkpoint (Delta's rules; see `plan_cleanup`)."""
    versions = published(listing, published_up_to)
    adjusted = monotonic({v: commit_time(v) for v in versions})
    plan.cutoff_commit = cutoff_commit(adjusted, plan.cutoff_ms)
    if plan.cutoff_commit is None:
        return
    newest = plan.cutoff_commit if newest_cut is None else min(newest_cut, plan.cutoff_commit)
    checkpoint, skipped = cutoff_checkpoint(listing, newest)
    if newest_cut is not None and newest_cut < plan.cutoff_commit:
        skipped.append(
            f"no checkpoint newer than {newest_cut} is a cut-off: a damaged checkpoint was read "
            "past, and the one used instead stays until it is rewritten"
            if newest_cut >= 0
            else "no checkpoint is a cut-off: a damaged checkpoint was read past to the commits"
        )
    plan.notes += skipped
    if checkpoint is not None:
        plan.cutoff_checkpoint = checkpoint.version


def _keep_for_lite(plan: CleanupPlan, listing: Listing, keep_from: int) -> None:
    """Move the cut-off checkpoint back to `keep_from` or before, when it lies after it."""
    if plan.cutoff_checkpoint is None or plan.cutoff_checkpoint <= keep_from:
        return
    checkpoint, _ = cutoff_checkpoint(listing, keep_from)
    plan.cutoff_checkpoint = checkpoint.version if checkpoint is not None else None
    plan.kept_for_lite = keep_from
    plan.notes.append(
        f"commits from {keep_from} stay: {paths.LAST_VACUUM_INFO} records N = {keep_from}, "
        "and the next LITE vacuum reads the commits after it (Delta refuses LITE without them)"
    )


def _plan_deletions(
    plan: CleanupPlan,
    entries: list[LogEntry],
    checkpoint_version: int,
    protect_before_version: int | None,
    sidecar_refs: Mapping[str, Collection[str]],
) -> None:
    """The log files and sidecars the cut-off checkpoint makes deletable, unless protected."""
    doomed = log_deletions(entries, checkpoint_version)
    blocked = protection_blocks(doomed, checkpoint_version, protect_before_version)
    if blocked:
        plan.notes.append(blocked)
        return
    gone = {e.key for e in doomed}
    kept_checkpoints = [e for e in entries if e.name.is_checkpoint and e.key not in gone]
    sidecars = [e for e in entries if e.name.kind is Kind.SIDECAR]
    doomed_sidecars, note = sidecar_deletions(
        sidecars, kept_checkpoints, sidecar_refs, plan.sidecar_cutoff_ms
    )
    if note:
        plan.notes.append(note)
    fill(plan, doomed + doomed_sidecars)


# -- time -------------------------------------------------------------------------------------
def midnight_utc(ms: int) -> int:
    """The start (00:00 UTC) of the day that `ms` falls in."""
    return ms // DAY_MS * DAY_MS


def sidecar_cutoff(now_ms: int, cutoff_ms: int) -> int:
    """Sidecars modified at or after this stay: a day old as of midnight UTC, and never younger
    than the log cut-off (Delta Spark uses the log cut-off; the protocol asks for one day)."""
    return min(midnight_utc(now_ms) - DAY_MS, cutoff_ms)


# -- cut-off ----------------------------------------------------------------------------------
def published(listing: Listing, up_to: int | None) -> list[int]:
    return sorted(v for v in listing.commits if up_to is None or v <= up_to)


def cutoff_commit(adjusted: Mapping[int, int], cutoff_ms: int) -> int | None:
    """The newest commit whose (adjusted) timestamp is not newer than `cutoff_ms`."""
    old = [v for v, ts in adjusted.items() if ts <= cutoff_ms]
    return max(old) if old else None


def cutoff_checkpoint(listing: Listing, commit: int) -> tuple[Checkpoint | None, list[str]]:
    """The newest usable complete checkpoint at or before `commit`, and why newer ones were
    passed over."""
    skipped: list[str] = []
    for version in sorted((v for v in listing.checkpoints if v <= commit), reverse=True):
        found = [c for c in listing.checkpoints[version] if usable(c)]
        if not found:
            skipped.append(f"checkpoint {version} skipped: a file of it is empty")
            continue
        return found[0], skipped
    return None, skipped


def usable(checkpoint: Checkpoint) -> bool:
    # An empty file is a checkpoint still being written (or a broken one); Delta skips it too.
    return all(f.info.size > 0 for f in checkpoint.files)


# -- what goes --------------------------------------------------------------------------------
def log_entries(listing: Listing, infos: Iterable[FileInfo]) -> list[LogEntry]:
    """Every file whose name the protocol defines, incomplete multi-part checkpoints included
    (`group` leaves those out; only what it left out is parsed again)."""
    grouped = [
        *listing.commits.values(),
        *(f for found in listing.checkpoints.values() for c in found for f in c.files),
        *listing.others,
    ]
    seen = {e.key for e in grouped}
    prefix = paths.LOG_DIR + "/"
    for info in infos:
        if info.key in seen:
            continue
        name = paths.parse(info.key.removeprefix(prefix))
        if name is not None:
            grouped.append(LogEntry(name, info))
    return grouped


def log_deletions(entries: Iterable[LogEntry], version: int) -> list[LogEntry]:
    """Step 3 of the protocol's metadata cleanup for a cutOffCheckpoint at `version`."""
    return [e for e in entries if expired(e, version)]


def expired(entry: LogEntry, version: int) -> bool:
    name = entry.name
    if name.kind in (Kind.COMMIT, Kind.CRC) or name.is_checkpoint:
        return name.version < version
    if name.kind in (Kind.COMPACTED, Kind.STAGED_COMMIT):
        return name.version <= version  # a compacted file's version is its startVersion
    return False  # _last_checkpoint, sidecars (step 4)


def protection_blocks(
    doomed: Iterable[LogEntry], checkpoint: int, protect_before: int | None
) -> str | None:
    """Why checkpoint protection forbids this cleanup, or None when it allows it."""
    if protect_before is None or protect_before <= 0:
        return None
    below = [e.name.version for e in doomed if e.name.kind is Kind.COMMIT]
    below = [v for v in below if v < protect_before]
    if not below:
        return None
    end = max(below)
    if end >= protect_before - 1:
        return None  # all history before the protected version goes at once
    if end + 1 == checkpoint:
        return None  # the cleanup stops at a checkpoint that stays (and creates none)
    return (
        f"checkpoint protection: delta.requireCheckpointProtectionBeforeVersion is "
        f"{protect_before}; deleting commits up to {end} would neither remove all history "
        f"before it nor stop at a checkpoint (none at version {end + 1}), so nothing is deleted"
    )


def sidecar_deletions(
    sidecars: Iterable[LogEntry],
    kept_checkpoints: Iterable[LogEntry],
    refs: Mapping[str, Collection[str]],
    cutoff_ms: int,
) -> tuple[list[LogEntry], str]:
    """Steps 4 and 5: unreferenced sidecars older than `cutoff_ms`, and a note when sidecars
    are kept because a checkpoint's references are unknown."""
    old = [s for s in sidecars if s.info.mtime_ms < cutoff_ms]
    if not old:
        return [], ""
    unread = sorted(
        c.key
        for c in kept_checkpoints
        if c.name.kind in (Kind.CHECKPOINT, Kind.UUID_CHECKPOINT) and c.key not in refs
    )
    if unread:
        return [], (
            f"sidecars kept: the sidecar references of {len(unread)} remaining checkpoints "
            f"were not read (first {unread[0]})"
        )
    kept = {c.key for c in kept_checkpoints}
    referenced = {ref for key, names in refs.items() if key in kept for ref in bare(names)}
    return [s for s in old if s.info.name not in referenced], ""


def bare(refs: Iterable[str]) -> set[str]:
    """File names of sidecar paths (a sidecar action's path is a URI-encoded name or path)."""
    return {checkpoint_files.sidecar_name(ref) for ref in refs}


def fill(plan: CleanupPlan, doomed: Iterable[LogEntry]) -> None:
    """Add `doomed` to what the plan deletes."""
    entries = sorted(doomed, key=lambda e: e.key)
    plan.delete = sorted([*plan.delete, *(e.info for e in entries)], key=lambda f: f.key)
    for e in entries:
        total = plan.by_kind.setdefault(e.name.kind, KindTotal())
        total.files += 1
        total.bytes += e.info.size
    plan.by_kind = dict(sorted(plan.by_kind.items()))


# -- text -------------------------------------------------------------------------------------
def _commit_line(version: int | None) -> str:
    if version is None:
        return "cutoffCommit: none (no published commit is that old), nothing to clean"
    return f"cutoffCommit: version {version}, the newest commit not newer than the cut-off"


def _checkpoint_line(version: int | None) -> str:
    if version is None:
        return "cutOffCheckpoint: none at or before the cutoffCommit, nothing to clean"
    return (
        f"cutOffCheckpoint: version {version}; it, its commit and everything after it stay, "
        "older commits, checkpoints and checksums go"
    )


# -- reading what the planner needs, and carrying a plan out ------------------------------------


def plan_table_cleanup(
    table: Table,
    snap: SnapshotHeader,
    retention_ms: int,
    now_ms: int,
    pending_checkpoint: int | None = None,
    keep_from: int | None = None,
    catalog_allows: bool = False,
) -> CleanupPlan:
    """List the log and read what `plan_cleanup` needs for this table; nothing is deleted.
    `pending_checkpoint`: a version whose checkpoint is about to be written (a dry run of
    maintain), planned as if it were there; its sidecars are unknown, so none are deleted.
    `keep_from`: commits from this version on stay, for the next LITE vacuum.
    `catalog_allows`: the catalog of a catalog-managed table permits the cleanup (else
    CatalogOwnedError)."""
    features.require_writable(snap, "cleanup", catalog_allows)
    infos = [f for f in table.storage.walk(paths.LOG_DIR) if not f.is_dir]
    pending = None
    if pending_checkpoint is not None:
        pending = FileInfo(f"{paths.LOG_DIR}/{paths.checkpoint(pending_checkpoint)}", 1, now_ms)
        infos.append(pending)
    protect = None
    if snap.protocol.has("checkpointProtection"):
        protect = snap.metadata.properties.checkpoint_protection_version
    return plan_cleanup(
        infos,
        _commit_times(table, snap, infos),
        retention_ms,
        now_ms,
        sidecar_refs=_sidecar_refs(table, [f for f in infos if f is not pending]),
        protect_before_version=protect,
        published_up_to=snap.version if features.catalog_managed(snap.protocol) else None,
        newest_cut=_read_past(snap),
        keep_from=keep_from,
    )


def _read_past(snap: SnapshotHeader) -> int | None:
    """The newest checkpoint cleanup may cut at when the snapshot read past a damaged one."""
    if not snap.damaged_checkpoints:
        return None
    cp = snap.segment.checkpoint
    return cp.version if cp is not None else -1


def commit_mtimes(infos: Iterable[FileInfo]) -> dict[int, int]:
    """Each published commit's version -> its file's modification time, from a log listing."""
    mtimes = {}
    for info in infos:
        name = paths.parse(info.key[len(paths.LOG_DIR) + 1 :])
        if name is not None and name.kind is Kind.COMMIT:
            mtimes[name.version] = info.mtime_ms
    return mtimes


def _commit_times(
    table: Table, snap: SnapshotHeader, infos: list[FileInfo]
) -> Callable[[int], int]:
    mtimes = commit_mtimes(infos)
    ict_from = None
    if snap.in_commit_timestamps:
        ict_from = snap.metadata.properties.ict_enablement_version

    def commit_time(version: int) -> int:
        if ict_from is not None and version >= ict_from:
            return table.in_commit_timestamp(version)
        return mtimes[version]

    return commit_time


def _sidecar_refs(table: Table, infos: list[FileInfo]) -> dict[str, list[str]]:
    """Sidecars referenced by each single-file checkpoint; read only when sidecars exist."""
    prefix = f"{paths.LOG_DIR}/{paths.SIDECAR_DIR}/"
    if not any(f.key.startswith(prefix) for f in infos):
        return {}
    refs: dict[str, list[str]] = {}
    for info in infos:
        name = paths.parse(info.key[len(paths.LOG_DIR) + 1 :])
        if name is not None and name.kind in (Kind.CHECKPOINT, Kind.UUID_CHECKPOINT):
            refs[info.key] = checkpoint_files.sidecar_paths(table.storage, info.key)
    return refs


def execute_cleanup(table: Table, plan: CleanupPlan) -> int:
    """Delete what the plan says, oldest first (keys sort by version; sidecars come last)."""
    return table.storage.delete_many(f.key for f in sorted(plan.delete, key=lambda f: f.key))
