"""Find the Delta tables under a prefix, listing level by level.

A table is a folder holding `_delta_log/` with at least one commit or checkpoint in it. The
scan lists one folder at a time with a delimiter (never a recursive listing, which would page
through every data file), stops at a table's root (a table inside a table is that table's
data), and at `max_depth` levels below the prefix. A folder that is itself a table costs two
listings (itself and its log); every other folder above the tables costs one, plus a page per
1,000 files lying directly in it.

Paths are relative to the prefix, without a trailing '/'; a prefix that is itself a table is
reported as "." (and nothing below it is looked at).

`include` and `exclude` are glob patterns on those paths with `fnmatch` semantics, case
sensitive: `*` matches any characters, '/' included, so `**` is the same as `*` and `raw/*`
matches every table below `raw/`. A table is reported when it matches some include pattern (or
there are none) and no exclude pattern. Folders that no pattern lets through are not listed.

Folders whose names start with '_' or '.' (`_spark_metadata`, `_temporary`, `.hive-staging`)
are not entered: writers keep their own bookkeeping there, as Spark's file index assumes.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from fnmatch import fnmatchcase

from deltakeeper.delta import paths
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
    folders_listed: int  # delimited listings of folders (the log checks not included)
    logs_checked: int  # `_delta_log/` folders looked into
    empty_logs: tuple[str, ...] = ()  # folders with a `_delta_log/` holding no commit yet
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
            level = [c for v in found for c in v.children if patterns.may_hold(c)]
            if not level:
                break
    requests = 0
    for fork in forks:
        storage.requests.update(fork.requests)
        requests += sum(fork.requests.values())
    roots = sorted(_rel(v.path) for v in visits if v.is_table)
    tables = tuple(p for p in roots if patterns.wanted(p))
    return Scan(
        tables=tables,
        requests=requests,
        seconds=clock() - started,
        folders_listed=sum(v.listed for v in visits),
        logs_checked=sum(v.log_checked for v in visits),
        empty_logs=tuple(sorted(_rel(v.path) for v in visits if v.empty_log)),
        excluded=len(roots) - len(tables),
    )


def is_table(storage: Storage, path: str = "") -> bool:
    """Whether folder `path` holds a `_delta_log/` with a commit or checkpoint in it."""
    return _has_log_entry(storage, _join(path, paths.LOG_DIR))


def _visit(storage: Storage, path: str, last: bool) -> _Visit:
    if last:  # deepest level: only whether it is a table, its sub-folders are not wanted
        table = is_table(storage, path)
        return _Visit(path, is_table=table, log_checked=True)
    names = storage.list_folders(path)
    if paths.LOG_DIR in names:
        if is_table(storage, path):
            return _Visit(path, is_table=True, listed=True, log_checked=True)
        children = _children(path, names)
        return _Visit(path, empty_log=True, children=children, listed=True, log_checked=True)
    return _Visit(path, children=_children(path, names), listed=True)


def _children(path: str, names: Iterable[str]) -> tuple[str, ...]:
    return tuple(_join(path, n) for n in names if not n.startswith(("_", ".")))


def _has_log_entry(storage: Storage, log: str) -> bool:
    for info in storage.list_lazily(log):
        name = paths.parse(info.name) if not info.is_dir else None
        if name is not None and (name.kind is paths.Kind.COMMIT or name.is_checkpoint):
            return True
    return False


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
