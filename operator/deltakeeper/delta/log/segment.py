"""Which checkpoint and which commits make up a version: the LogSegment.

Pure functions over a listing of `_delta_log` (no I/O here), so every rule is unit-testable.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field, replace

from deltakeeper.delta import paths
from deltakeeper.delta.errors import CorruptLogError, InvalidInputError, NotADeltaTableError
from deltakeeper.delta.paths import Kind, LogName
from deltakeeper.delta.storage import FileInfo


@dataclass(frozen=True)
class LogEntry:
    """A file in `_delta_log` with its parsed name."""

    name: LogName
    info: FileInfo

    @property
    def key(self) -> str:
        return self.info.key


@dataclass(frozen=True)
class Checkpoint:
    """A complete checkpoint: one classic or UUID file, or every part of a multi-part one."""

    version: int
    files: tuple[LogEntry, ...]

    @property
    def kind(self) -> Kind:
        return self.files[0].name.kind

    @property
    def size_bytes(self) -> int:
        return sum(f.info.size for f in self.files)


@dataclass
class Listing:
    """What a listing of `_delta_log` found, grouped by meaning."""

    commits: dict[int, LogEntry] = field(default_factory=dict)
    checkpoints: dict[int, list[Checkpoint]] = field(default_factory=dict)
    others: list[LogEntry] = field(default_factory=list)  # crc, compacted, _last_checkpoint
    has_staged_dir: bool = False
    files: int = 0
    bytes: int = 0

    @property
    def latest_commit(self) -> int | None:
        return max(self.commits) if self.commits else None

    def newest_checkpoint(self, at_most: int) -> Checkpoint | None:
        versions = [v for v in self.checkpoints if v <= at_most]
        return _preferred(self.checkpoints[max(versions)]) if versions else None


_PREFERENCE = {Kind.CHECKPOINT: 0, Kind.UUID_CHECKPOINT: 1, Kind.MULTIPART_CHECKPOINT: 2}


def _preferred(candidates: list[Checkpoint]) -> Checkpoint:
    # Any complete checkpoint is correct; a single file is cheapest to read.
    return min(candidates, key=lambda c: (_PREFERENCE[c.kind], c.files[0].key))


def group(infos: Iterable[FileInfo]) -> Listing:
    """Group a flat listing of `_delta_log/` (keys relative to the table root)."""
    listing = Listing()
    multipart: dict[tuple[int, int], dict[int, LogEntry]] = defaultdict(dict)
    log_prefix = paths.LOG_DIR + "/"
    for info in infos:
        rel = info.key[len(log_prefix) :] if info.key.startswith(log_prefix) else info.key
        if info.is_dir:
            if rel.rstrip("/") in paths.STAGED_DIRS:
                listing.has_staged_dir = True
            continue
        listing.files += 1
        listing.bytes += info.size
        name = paths.parse(rel)
        if name is None:
            continue
        entry = LogEntry(name, info)
        if name.kind is Kind.COMMIT:
            listing.commits[name.version] = entry
        elif name.kind is Kind.MULTIPART_CHECKPOINT:
            multipart[(name.version, name.parts)][name.part] = entry
        elif name.kind in (Kind.CHECKPOINT, Kind.UUID_CHECKPOINT):
            listing.checkpoints.setdefault(name.version, []).append(
                Checkpoint(name.version, (entry,))
            )
        else:
            listing.others.append(entry)
    for (version, parts), found in multipart.items():
        if len(found) == parts:  # incomplete multi-part checkpoints must be ignored
            files = tuple(found[p] for p in range(1, parts + 1))
            listing.checkpoints.setdefault(version, []).append(Checkpoint(version, files))
    return listing


def without(listing: Listing, checkpoint: Checkpoint) -> Listing:
    """The listing less one checkpoint (a damaged one a reader must read past)."""
    gone = {f.key for f in checkpoint.files}
    kept = {
        v: [c for c in found if not gone & {f.key for f in c.files}]
        for v, found in listing.checkpoints.items()
    }
    return replace(listing, checkpoints={v: found for v, found in kept.items() if found})


@dataclass(frozen=True)
class LogSegment:
    """The files that reconstruct `version`: a checkpoint (or none) plus the commits after it."""

    version: int
    checkpoint: Checkpoint | None
    commits: tuple[LogEntry, ...]  # ascending, contiguous, all > checkpoint version
    commit_at_version: LogEntry | None  # holds commitInfo for the snapshot version, if still there


def segment_for(listing: Listing, uri: str, version: int | None = None) -> LogSegment:
    """The segment for `version` (latest when None), or a clear error saying why there is none."""
    latest = _latest_version(listing)
    if latest is None:
        raise NotADeltaTableError(
            f"{uri} is not a Delta table: expected commit files like "
            f"{paths.LOG_DIR}/{paths.commit(0)} or a checkpoint in {paths.LOG_DIR}/"
        )
    target = latest if version is None else version
    if target < 0 or target > latest:
        raise InvalidInputError(
            f"{uri} has versions up to {latest}; version {target} does not exist"
        )
    checkpoint = listing.newest_checkpoint(target)
    start = checkpoint.version + 1 if checkpoint else 0
    commits = []
    for v in range(start, target + 1):
        entry = listing.commits.get(v)
        if entry is None:
            earliest = earliest_version(listing)
            if earliest is not None and target < earliest:
                raise InvalidInputError(
                    f"{uri}: version {target} cannot be reconstructed because older log files "
                    f"were cleaned up; the earliest version available is {earliest}"
                )
            raise CorruptLogError(
                f"{uri}: {paths.LOG_DIR}/{paths.commit(v)} is missing, so version {target} "
                "cannot be reconstructed; the log has a gap"
            )
        commits.append(entry)
    return LogSegment(target, checkpoint, tuple(commits), listing.commits.get(target))


def _latest_version(listing: Listing) -> int | None:
    candidates = list(listing.commits) + list(listing.checkpoints)
    return max(candidates) if candidates else None


def earliest_version(listing: Listing) -> int | None:
    """The oldest version that can be reconstructed from what is in the log."""
    latest = _latest_version(listing)
    if latest is None:
        return None
    starts = sorted(listing.checkpoints)
    if 0 in listing.commits:
        starts.insert(0, 0)
    for start in starts:
        if all(v in listing.commits for v in range(start + 1, latest + 1)):
            return start
    return None


def monotonic(times: Mapping[int, int]) -> dict[int, int]:
    """Commit times made strictly increasing in version order, as Delta Spark does."""
    out: dict[int, int] = {}
    previous: int | None = None
    for version in sorted(times):
        ts = times[version] if previous is None else max(times[version], previous + 1)
        out[version] = previous = ts
    return out
