"""deltakeeper's answer for a table version, and its comparison with the oracles; what must read
the same wherever a table is stored."""

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


# What must match between a local copy and an uploaded one (times differ by design).
SAME = (
    "version",
    "protocol",
    "unsupportedFeatures",
    "tableId",
    "partitionColumns",
    "configuration",
    "numFiles",
    "sizeBytes",
    "numTombstones",
    "numTxns",
    "numDomains",
    "lastCheckpointVersion",
    "lastCheckpointFile",
    "commitsSinceCheckpoint",
    "logFiles",
    "logBytes",
    "smallFiles",
    "unpublishedCommits",
)
EVERY_VERSION = ("checkpoints", "table-with-dv-small", "delta-0.8.0-special-partition")


def state(uri: str, options: dict, version: int | None = None) -> dict | str:
    """What a table at `version` reads as on any store (the error's name if it cannot be)."""
    try:
        table = open_table(uri, options)
        snap = table.snapshot(version=version)
    except DeltaError as e:
        return f"{type(e).__name__}"
    report = summarize(table, snap, 1024)
    report["files"] = dict(
        zip(snap.files["path"].to_pylist(), snap.files["size"].to_pylist(), strict=True)
    )
    report["tombstones"] = sorted(snap.tombstones["path"].to_pylist())
    return {k: report[k] for k in (*SAME, "files", "tombstones")}


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
