"""deltakeeper's answer for a table version, and its comparison with the oracles."""

from __future__ import annotations

from pathlib import Path

from deltakeeper.delta.errors import DeltaError
from deltakeeper.delta.summary import summarize
from deltakeeper.delta.table import open_table
from tests.support.oracles import Unreadable, decoded, deltars_state, duckdb_state


def ours(path: Path, version: int | None) -> dict | DeltaError:
    """deltakeeper's answer, through the same code as `inspect --json` and `files --json`."""
    try:
        table = open_table(str(path))
        snap = table.snapshot(version=version)
    except DeltaError as e:
        return e
    report = summarize(table, snap, 1)
    report["files"] = dict(
        zip(snap.files["path"].to_pylist(), snap.files["size"].to_pylist(), strict=True)
    )
    return report


def check_against_oracles(mine: dict, path: Path, version: int | None, tally) -> list[str]:
    """Compare; return the oracles that agreed (raises AssertionError on a disagreement)."""
    agreed = []
    rs = deltars_state(str(path), version)
    if not isinstance(rs, Unreadable):
        assert mine["version"] == rs["version"]
        assert mine["protocol"] == rs["protocol"]
        assert mine["tableId"] == rs["tableId"]
        assert mine["partitionColumns"] == rs["partitionColumns"]
        assert mine["configuration"] == rs["configuration"]
        assert mine["files"] == rs["files"], "live files or sizes differ from delta-rs"
        agreed.append("delta-rs")
    dd = duckdb_state(str(path), version)
    if not isinstance(dd, Unreadable):
        assert set(decoded(mine["files"])) == set(decoded(dd["files"])), (
            "live files differ from DuckDB"
        )
        agreed.append("duckdb")
    for name, answer in (("delta-rs", rs), ("duckdb", dd)):
        if isinstance(answer, Unreadable):
            tally[f"{name} unreadable"] += 1
    return agreed
