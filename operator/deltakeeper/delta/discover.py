"""Find the Delta tables under a prefix, listing level by level.

A table is a folder holding `_delta_log/` with at least one commit or checkpoint in it. The
scan lists one folder at a time with a delimiter (never a recursive listing, which would page
through every data file), stops at a table's root (a table inside a table is that table's
data), and at `max_depth` levels below the prefix. Each folder's `_delta_log/` is looked into
first: a table costs that one request, whatever its data files (its own folder is never
listed); a folder that is not a table costs two (its log, then its sub-folders, plus a page
per 1,000 files lying directly in it).

Paths are relative to the prefix, without a trailing '/'; a prefix that is itself a table is
reported as "." (and nothing below it is looked at).

`include` and `exclude` are glob patterns on those paths with `fnmatch` semantics, case
sensitive: `*` matches any characters, '/' included, so `**` is the same as `*` and `raw/*`
matches every table below `raw/`. A table is reported when it matches some include pattern (or
there are none) and no exclude pattern. Folders that no pattern lets through are not listed.

Folders whose names start with '_' or '.' (`_spark_metadata`, `_temporary`, `.hive-staging`)
are not entered: writers keep their own bookkeeping there, as Spark's file index assumes.

On the local disk a folder is visited once, under its real path (symbolic links resolved,
`Storage.real_folder`): a link back up the tree (a loop) or a second name for a folder is
skipped, and so is a link out of the prefix; a table is reported under its real path only.
"""

from __future__ import annotations

import enum
import time
from collections.abc import Callable, Iterable, Iterator, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from fnmatch import fnmatchcase
from typing import TYPE_CHECKING

from deltakeeper.delta import paths

if TYPE_CHECKING:  # a storage is passed in: only its type, so DEFAULT_MAX_DEPTH loads light
    from deltakeeper.delta.storage import Storage

ROOT = "."  # the path of a table at the prefix itself
DEFAULT_MAX_DEPTH = 3
WORKERS = 8  # listings in flight at once: they wait on the network, not the CPU
_WILDCARDS = "*?["


@dataclass(frozen=True)
class Scan:
    """What one discovery found and what it cost."""

    tables: tuple[str, ...]  # sorted relative paths; "." for the prefix itself
    requests: int  # storage requests sent (listing pages, retries included)
    seconds: float
    folders_listed: int  # folders whose sub-folders were listed (the non-tables above max_depth)
    logs_checked: int  # `_delta_log/` folders looked into (every folder visited)
    empty_logs: tuple[str, ...] = ()  # folders whose `_delta_log/` has files but no commit
    excluded: int = 0  # tables found but filtered out by include/exclude


@dataclass(frozen=True)
class _Visit:
    """One folder's verdict: a table (or an empty log), and the sub-folders to look into."""

    path: str
    is_table: bool = False
    empty_log: bool = False
    children: tuple[str, ...] = ()
    listed: bool = False
    log_checked: bool = False


def discover(
    storage: Storage,
    *,
    include: Sequence[str] = (),
    exclude: Sequence[str] = (),
    max_depth: int = DEFAULT_MAX_DEPTH,
    clock: Callable[[], float] = time.monotonic,
    workers: int = WORKERS,
) -> Scan:
    """The tables under `storage`'s root (see the module's docstring for the rules)."""
    if max_depth < 0:
        raise ValueError(f"max_depth must be 0 or more, got {max_depth}")
    started = clock()
    patterns = _Patterns(tuple(include), tuple(exclude))
    forks: list[Storage] = []
    visits: list[_Visit] = []
    seen = {""}  # real folders visited or queued: each is visited once
    roots: set[str] = set()  # the tables found so far
    level = [""]
    with ThreadPoolExecutor(max(1, workers), thread_name_prefix="discover") as pool:
        for depth in range(max_depth + 1):
            last = depth == max_depth

            def visit(path: str, last: bool = last) -> _Visit:
                fork = storage.fork()
                forks.append(fork)  # list.append is atomic
                return _visit(fork, path, last)

            found = list(pool.map(visit, level))
            visits.extend(found)
            roots.update(v.path for v in found if v.is_table)
            children = (c for v in found for c in v.children)
            level = [
                c for c in _real(storage, children, seen, roots, max_depth) if patterns.may_hold(c)
            ]
            if not level:
                break
    requests = 0
    for fork in forks:
        storage.requests.update(fork.requests)
        requests += sum(fork.requests.values())
    # a link may have led into a table before its root was known: that is the table's data
    paths_found = sorted(_rel(p) for p in roots if not _inside(p, roots))
    tables = tuple(p for p in paths_found if patterns.wanted(p))
    return Scan(
        tables=tables,
        requests=requests,
        seconds=clock() - started,
        folders_listed=sum(v.listed for v in visits),
        logs_checked=sum(v.log_checked for v in visits),
        empty_logs=tuple(sorted(_rel(v.path) for v in visits if v.empty_log)),
        excluded=len(paths_found) - len(tables),
    )


def _real(
    storage: Storage, folders: Iterable[str], seen: set[str], tables: set[str], max_depth: int
) -> Iterator[str]:
    """Each folder under its real path, when that is new, within `max_depth`, not hidden and
    not inside a table (a link can lead anywhere in the prefix); `seen` gains it."""
    for folder in folders:
        real = storage.real_folder(folder)
        if real is None or real in seen:
            continue  # out of the prefix, or a loop, or a second name for a folder
        seen.add(real)
        parts = real.split("/")
        if len(parts) > max_depth or any(p.startswith(("_", ".")) for p in parts):
            continue
        if _inside(real, tables):
            continue
        yield real


def _inside(path: str, tables: set[str]) -> bool:
    """Whether `path` lies below one of `tables` (a table's root is not below itself)."""
    parts = path.split("/")
    return any("/".join(parts[:i]) in tables for i in range(1, len(parts)))


def reportable(
    path: str,
    *,
    include: Sequence[str] = (),
    exclude: Sequence[str] = (),
    max_depth: int = DEFAULT_MAX_DEPTH,
) -> bool:
    """Whether a scan would report a table at `path` (relative, "." for the prefix), were it
    one and no table above it: within `max_depth`, through no folder a scan does not enter
    ('_' or '.' names), and let through by include/exclude. What a storage event naming a new
    table's log is checked against before the table is listed."""
    if path == ROOT:
        return _Patterns(tuple(include), tuple(exclude)).wanted(ROOT)
    parts = path.split("/")
    if len(parts) > max_depth or any(not p or p.startswith(("_", ".")) for p in parts):
        return False
    patterns = _Patterns(tuple(include), tuple(exclude))
    folders = ("/".join(parts[: i + 1]) for i in range(len(parts)))
    return all(patterns.may_hold(f) for f in folders) and patterns.wanted(path)


def is_table(storage: Storage, path: str = "") -> bool:
    """Whether folder `path` holds a `_delta_log/` with a commit or checkpoint in it."""
    return _log_state(storage, path) is _Log.TABLE


class _Log(enum.Enum):
    NONE = "none"  # no `_delta_log/`, or nothing in it
    EMPTY = "empty"  # something in it, but no commit or checkpoint yet
    TABLE = "table"


def _visit(storage: Storage, path: str, last: bool) -> _Visit:
    # The log first: a table then costs one request whatever its data files, since its own
    # folder (where unpartitioned data files lie) is never listed.
    log = _log_state(storage, path)
    if log is _Log.TABLE:
        return _Visit(path, is_table=True, log_checked=True)
    empty = log is _Log.EMPTY
    if last:  # deepest level: its sub-folders are not wanted
        return _Visit(path, empty_log=empty, log_checked=True)
    children = _children(path, storage.list_folders(path))
    return _Visit(path, empty_log=empty, children=children, listed=True, log_checked=True)


def _children(path: str, names: Iterable[str]) -> tuple[str, ...]:
    return tuple(_join(path, n) for n in names if not n.startswith(("_", ".")))


def _log_state(storage: Storage, path: str) -> _Log:
    """One listing page of `_delta_log/` answers it: commits and checkpoints sort first."""
    state = _Log.NONE
    for info in storage.list_lazily(_join(path, paths.LOG_DIR)):
        name = paths.parse(info.name) if not info.is_dir else None
        if name is not None and (name.kind is paths.Kind.COMMIT or name.is_checkpoint):
            return _Log.TABLE
        state = _Log.EMPTY
    return state


def _join(path: str, name: str) -> str:
    return f"{path}/{name}" if path else name


def _rel(path: str) -> str:
    return path or ROOT


class _Patterns:
    """include/exclude on relative paths, and which folders can still lead to a wanted table."""

    def __init__(self, include: tuple[str, ...], exclude: tuple[str, ...]) -> None:
        self.include, self.exclude = include, exclude

    def wanted(self, path: str) -> bool:
        if self.include and not any(fnmatchcase(path, p) for p in self.include):
            return False
        return not any(fnmatchcase(path, p) for p in self.exclude)

    def may_hold(self, folder: str) -> bool:
        """False only when no table at or below `folder` can be wanted. Sound, not complete:
        it reads the literal part of each pattern before its first wildcard."""
        if self.include and not any(_compatible(folder, p) for p in self.include):
            return False
        return not any(_excludes_all_below(folder, p) for p in self.exclude)


def _literal(pattern: str) -> str:
    cut = min((i for i, c in enumerate(pattern) if c in _WILDCARDS), default=len(pattern))
    return pattern[:cut]


def _compatible(folder: str, pattern: str) -> bool:
    """Whether a path at or below `folder` could match `pattern`, judged by its literal head."""
    head = _literal(pattern)
    if head == pattern:  # no wildcard: exactly one path matches
        return pattern == folder or pattern.startswith(folder + "/")
    return folder.startswith(head) or head.startswith(folder + "/")


def _excludes_all_below(folder: str, pattern: str) -> bool:
    """Whether `pattern` (as `literal*`) matches `folder` and everything below it."""
    head = _literal(pattern)
    return pattern == head + "*" and folder.startswith(head)
