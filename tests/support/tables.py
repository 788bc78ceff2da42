"""Small Delta tables on the local disk, built by hand for the unit tests of several modules."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

from tests.support.logbuilder import LogBuilder, add, commit_info, metadata, protocol, remove


def make_table(root: Path, rel: str, *, checkpoint_only: bool = False) -> Path:
    """A table at `root/rel`: one commit, or (`checkpoint_only`) only a checkpoint, as a table
    whose commits were cleaned up looks to a scan."""
    log = root / rel / "_delta_log"
    log.mkdir(parents=True, exist_ok=True)
    if checkpoint_only:
        (log / "00000000000000000010.checkpoint.parquet").write_bytes(b"PAR1")
    else:
        lines = (json.dumps(a) for a in (protocol(), metadata()))
        (log / "00000000000000000000.json").write_text("\n".join(lines) + "\n")
    return root / rel


DAY = 86_400_000
START = 1_700_000_000_000  # commit 0 of daily_table; one commit a day after it


def touch(path: Path, mtime_ms: int, size: int = 100) -> None:
    """A file of `size` bytes at `path`, modified at `mtime_ms`."""
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(b"x" * size)
    os.utime(path, ns=(mtime_ms * 1_000_000,) * 2)


def daily_table(root: Path, commits: int = 12, **conf: str) -> LogBuilder:
    """`commits` commits a day apart from START; commit v adds f<v>.parquet (on disk, as old as
    its commit); commit 5 removes f1. `conf`: the table's properties."""
    b = LogBuilder(root)
    for v in range(commits):
        actions = [add(f"f{v}.parquet")]
        if v == 0:
            actions = [protocol(), metadata(**conf), *actions]
        if v == 5:
            actions.append(remove("f1.parquet", ts=START + 5 * DAY))
        b.commit(*actions, mtime_ms=START + v * DAY)
        touch(root / f"f{v}.parquet", START + v * DAY)
    return b


def log_names(root: Path) -> set[str]:
    """The names in the table's `_delta_log`."""
    return {p.name for p in (root / "_delta_log").iterdir()}


def small_file_table(root: Path, proto: dict[str, Any] | None = None) -> LogBuilder:
    """Partition day=a: four 1000-byte files, one a commit; day=b: one file of 200 MiB."""
    log = LogBuilder(root)
    log.commit(proto or protocol(), metadata(("day",)))
    for i in range(4):
        log.commit(add(f"day=a/{i}.parquet", size=1000, day="a"))
    log.commit(add("day=b/0.parquet", size=200 * 2**20, day="b"))
    return log


def small_table(root: Path, commits: int = 3, **features: list[str]) -> LogBuilder:
    """Version 0 adds a.parquet (100 bytes); each later version v adds f<v>.parquet (10*v bytes).
    `features`: the protocol's readerFeatures/writerFeatures, with reader 3 and writer 7."""
    b = LogBuilder(root)
    proto = protocol(3, 7, **features) if features else protocol()
    b.commit(proto, metadata(), add("a.parquet"), commit_info())
    for i in range(1, commits):
        b.commit(add(f"f{i}.parquet", size=10 * i), commit_info())
    return b
