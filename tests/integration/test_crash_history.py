"""The operation history survives a crash at any instant of its append (ARCHITECTURE.md,
promise 5): `deltakeeper run --once --history-uri` is SIGKILLed at every storage mutation of the
history (creating it at start, its data file, its commit; tests/support/faults.py), before and
after each, and mid-write on the local disk. Then

- the history, if it exists, reads the same for deltakeeper, delta-rs and DuckDB, and holds
  either none of the run's rows or all of them (a commit is one object);
- the next run succeeds and leaves a history that all three read, with its own rows added and
  no row twice.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from deltakeeper.delta.table import open_table
from tests.support import faults
from tests.support.logbuilder import LogBuilder, add, commit_info, metadata, protocol
from tests.support.manifests import table_doc
from tests.support.rows import deltars_digest, duckdb_digest

pytestmark = pytest.mark.integration


def lake(root: Path) -> tuple[list[str], Path]:
    """A folder with one table due for a checkpoint; the `run` argv, and the history path."""
    table = root / "events"
    b = LogBuilder(table)
    b.commit(protocol(), metadata(), add("a.parquet"), commit_info())
    b.commit(add("b.parquet"), commit_info())
    folder = root / "manifests"
    folder.mkdir()
    manifest = table_doc("events", str(table), checkpoint={"interval": 1})
    (folder / "events.json").write_text(json.dumps(manifest))
    history = root / "history"
    return ["run", "--manifests", str(folder), "--once", "--history-uri", str(history)], history


def read(history: Path) -> tuple[int, str] | None:
    """The history's rows as every reader reads them (None: no history yet)."""
    if not any((history / "_delta_log").glob("*.json")):
        return None
    snap = open_table(str(history)).snapshot()  # deltakeeper reads it too
    ours = deltars_digest(str(history))
    assert ours == duckdb_digest(str(history)), history
    assert isinstance(ours, tuple)
    assert snap.num_files <= ours[0]  # no empty file committed
    return ours


def rows(history: Path) -> list[dict[str, Any]]:
    from deltalake import DeltaTable

    return list(DeltaTable(str(history)).to_pyarrow_table().to_pylist())


def test_a_crash_anywhere_in_the_append_leaves_a_readable_history(tmp_path: Path) -> None:
    argv, history = lake(tmp_path / "count")
    steps = faults.count_steps(argv)
    mine = [i + 1 for i, s in enumerate(steps) if _in(history, s)]
    assert len(mine) >= 3, steps  # version 0, the data file, the commit
    assert mine[0] == 1, steps  # version 0 when the daemon starts, before any maintenance
    assert mine[1:] == list(range(mine[1], len(steps) + 1)), steps  # flushed on the way out
    complete = len(rows(history))
    assert complete >= 2  # checkpoint and checksum, at least
    kills = [(k, when) for k in mine for when in ("before", "after")]
    kills += [(k, "torn") for k in mine if steps[k - 1].is_write]
    for k, when in kills:
        argv, history = lake(tmp_path / f"k{k}-{when}")
        faults.crash(argv, k, when)
        found = read(history)
        assert found is None or found[0] in (0, complete), (k, when, found)
        assert faults.count_steps(argv)  # the next run (a plain run: no kill) succeeds
        after = read(history)
        assert after is not None, (k, when)
        seen = rows(history)
        keys = [(r["operation"], r["table_version"], r["start_time"]) for r in seen]
        assert len(keys) == len(set(keys)), (k, when, keys)  # no row twice
        assert after[0] >= (found[0] if found else 0) + 1, (k, when)  # the rerun added rows


def _in(history: Path, step: faults.Step) -> bool:
    """Whether a journalled step wrote to the history (its keys are relative to its root)."""
    return (history / step.key).exists() or step.key.startswith("part-")
