"""A table held without its file actions reports what one held with them reports.

Each corpus table is replayed into a fresh folder one version at a time, as its writers made it
(commits, then the checkpoints and checksums they wrote): one watcher holds every snapshot
without its file actions (delta/held.py), one with them, and after every step (a quiet poll, new
commits, a checkpoint another writer wrote, the table deleted and written again in place) both
report the same counts, conditions and version: the status and metrics come from these.
"""

from __future__ import annotations

import shutil
import time
from collections.abc import Iterator
from pathlib import Path

import pyarrow as pa
import pytest

from deltakeeper.delta import held, paths
from deltakeeper.delta.errors import DeltaError
from deltakeeper.delta.held import (
    HELD_ADD,
    HELD_REMOVE,
    HeldSnapshot,
    read_header,
    read_held,
    read_streamed,
)
from deltakeeper.delta.snapshot import Snapshot
from deltakeeper.delta.table import Table, open_table
from deltakeeper.runtime.model import Observation, Target
from deltakeeper.runtime.watcher import TableWatcher
from tests.conftest import CORPUS


def _tables() -> list[str]:
    return sorted(p.name for p in CORPUS.iterdir() if (p / "_delta_log").is_dir())


def _steps(log: Path) -> Iterator[tuple[int, list[Path]]]:
    """The log's files by the version they belong to, oldest first; files of no version (the
    hint, sidecars, staged commits) come with the first step."""
    by_version: dict[int, list[Path]] = {}
    for f in sorted(p for p in log.rglob("*") if p.is_file()):
        name = paths.parse(str(f.relative_to(log)))
        version = name.version if name is not None and name.version is not None else -1
        if name is not None and name.kind is paths.Kind.LAST_CHECKPOINT:
            continue  # written for the newest checkpoint: readers list without it
        by_version.setdefault(version, []).append(f)
    first = by_version.pop(-1, [])
    for n, version in enumerate(sorted(by_version)):
        yield version, (first if n == 0 else []) + by_version[version]


def _copy(files: list[Path], src: Path, dst: Path) -> None:
    for f in files:
        to = dst / f.relative_to(src)
        to.parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(f, to)


class Pair:
    """Two watchers of one table: one holds file actions, one never does."""

    def __init__(self, uri: str) -> None:
        now = int(time.time() * 1000)
        self.target = Target("ns", "t", uri)
        self.full = TableWatcher(now, hold_file_actions=10**12)
        self.held = TableWatcher(now, hold_file_actions=-1)  # even an empty table

    def poll(self, step: str) -> Observation:
        now = int(time.time() * 1000)
        a, b = self.full.observe(self.target, now), self.held.observe(self.target, now)
        assert b.counts == a.counts, step
        assert b.health == a.health, (step, a.health, b.health)  # by partition; tombstones
        assert [(c.type, c.status, c.reason) for c in b.conditions] == [
            (c.type, c.status, c.reason) for c in a.conditions
        ], step
        assert isinstance(self.held._snap, HeldSnapshot | None), step
        assert isinstance(self.full._snap, Snapshot | None), step
        if a.counts:
            assert self.held._snap is not None and self.full._snap is not None
            assert self.held._snap.version == self.full._snap.version, step
        return a


@pytest.mark.parametrize("name", _tables())
def test_counts_equal_at_every_step(name: str, tmp_path: Path, tally) -> None:
    src = CORPUS / name
    dst = tmp_path / name
    (dst / "_delta_log").mkdir(parents=True)
    pair = Pair(f"file://{dst}")
    compared = 0
    for version, files in _steps(src / "_delta_log"):
        _copy(files, src, dst)
        obs = pair.poll(f"{name} at {version}")
        pair.poll(f"{name} at {version}, quiet")
        compared += bool(obs.counts)
    tally["held snapshots equal to full ones (table-steps)"] += compared


def test_a_table_written_again_in_place(tmp_path: Path, tally) -> None:
    """Deleted and written again at the same URI, with another history: both start over."""
    dst = tmp_path / "t"
    pair = Pair(f"file://{dst}")
    big, other = CORPUS / "checkpoints", CORPUS / "simple_table"
    shutil.copytree(big / "_delta_log", dst / "_delta_log")
    first = pair.poll("first table")
    shutil.rmtree(dst)
    shutil.copytree(other / "_delta_log", dst / "_delta_log")
    again = pair.poll("written again")
    assert first.counts and again.counts and again.counts != first.counts
    fresh = TableWatcher(int(time.time() * 1000)).observe(pair.target, int(time.time() * 1000))
    assert again.counts == fresh.counts
    tally["held snapshots equal to full ones (table-steps)"] += 2


def _sorted(table: pa.Table) -> list[dict[str, object]]:
    return sorted(table.to_pylist(), key=lambda r: tuple(str(v) for v in r.values()))


@pytest.mark.parametrize("name", _tables())
def test_counts_streamed_from_a_checkpoint_equal_the_loaded_ones(
    name: str, tmp_path: Path, tally
) -> None:
    """delta/held.py's streamed read (a big table's first poll, and every read afresh of a held
    one) counts what loading the snapshot counts, at the newest version and at each version
    with a checkpoint, on every corpus table."""
    src, dst = CORPUS / name, tmp_path / name
    (dst / "_delta_log").mkdir(parents=True)
    compared = 0
    for version, files in _steps(src / "_delta_log"):
        _copy(files, src, dst)
        table = open_table(f"file://{dst}")
        try:
            loaded = read_held(table)  # streamed where it can be
            full = HeldSnapshot.counted(table.snapshot(add_cols=HELD_ADD, remove_cols=HELD_REMOVE))
        except DeltaError:
            continue  # a version the corpus cannot read alone (the test above covers it)
        listing, _ = table.listing_for(None)
        streamed = read_streamed(table, listing)
        if streamed is None:
            continue  # no checkpoint that streams yet: read_held loaded it
        assert streamed.version == full.version == loaded.version, (name, version)
        assert streamed.metadata == full.metadata and streamed.protocol == full.protocol
        assert streamed.txns == full.txns, (name, version)
        for part in ("files", "dv_files", "tombstones"):
            got, want = getattr(streamed.counts, part), getattr(full.counts, part)
            assert got.num_rows == want.num_rows, (name, version, part)
            if part == "files":  # partition numbers depend on reading order: compare names
                got = got.drop_columns(["partition"])
                want = want.drop_columns(["partition"])
            assert _sorted(got) == _sorted(want), (name, version, part)
        assert streamed.small_files(1 << 20) == full.small_files(1 << 20), (name, version)
        assert streamed.record_counts() == full.record_counts(), (name, version)
        compared += 1
    tally["held snapshots streamed from a checkpoint equal to loaded ones"] += compared


def _loaded_steps(name: str, tmp_path: Path) -> Iterator[tuple[int, Table, Snapshot]]:
    """Corpus table `name` copied a version at a time: each version, the table, and its
    snapshot loaded with the held columns (a version that does not load is passed over)."""
    src, dst = CORPUS / name, tmp_path / name
    (dst / "_delta_log").mkdir(parents=True)
    for version, files in _steps(src / "_delta_log"):
        _copy(files, src, dst)
        table = open_table(f"file://{dst}")
        try:
            loaded = table.snapshot(add_cols=HELD_ADD, remove_cols=HELD_REMOVE)
        except DeltaError:
            continue
        yield version, table, loaded


@pytest.mark.parametrize("name", _tables())
def test_counts_from_runs_of_commits_equal_the_loaded_ones(
    name: str, tmp_path: Path, tally, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A log without a checkpoint counted a commit at a time (a long log's first read:
    delta/held.py's read_commits_streamed) counts what loading the snapshot counts, at every
    version before the table's first checkpoint."""
    monkeypatch.setattr(held, "_COUNT_BYTES", 1)  # a commit a run
    compared = 0
    for version, table, loaded in _loaded_steps(name, tmp_path):
        full = HeldSnapshot.counted(loaded)
        listing, _ = table.listing_for(None)
        runs = held.read_commits_streamed(table, listing)
        if runs is None:
            if full.segment.checkpoint is not None:
                break  # from here on the checkpoint streams (the test above)
            continue  # one commit: loaded whole
        assert runs.version == full.version and runs.segment == full.segment, (name, version)
        assert runs.metadata == full.metadata and runs.protocol == full.protocol
        assert runs.txns == full.txns and runs.timestamp_ms == full.timestamp_ms
        for part in ("files", "dv_files", "tombstones"):
            got, want = getattr(runs.counts, part), getattr(full.counts, part)
            if part == "files":
                got, want = got.drop_columns(["partition"]), want.drop_columns(["partition"])
            assert _sorted(got) == _sorted(want), (name, version, part)
        assert runs.small_files(1 << 20) == full.small_files(1 << 20), (name, version)
        assert runs.record_counts() == full.record_counts(), (name, version)
        compared += 1
    tally["held snapshots counted from runs of commits equal to loaded ones"] += compared


@pytest.mark.parametrize("name", _tables())
def test_the_header_for_spark_equals_the_loaded_one(name: str, tmp_path: Path, tally) -> None:
    """read_header (what `maintain --engine spark` plans from, its commits' file actions left
    unparsed) has the loaded snapshot's header at every version of the table."""
    compared = 0
    for version, table, full in _loaded_steps(name, tmp_path):
        header = read_header(table)
        assert header.header_fields() == full.header_fields(), (name, version)
        compared += 1
    tally["headers read for Spark equal to loaded ones"] += compared
