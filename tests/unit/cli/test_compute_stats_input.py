"""`compute-stats` under hostile input (issue 49, 2.6): a file whose column has another type
than the table's is listed as unreadable, by path, and the other files are committed; a long
column stored as strings never gets string bounds; `--columns` naming no column of the table
is bad input, not a commit of `numRecords` alone."""

from __future__ import annotations

import datetime as dt
import json
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from tests.support.cli import run
from tests.support.logbuilder import LogBuilder, add, commit_info, metadata, protocol
from tests.support.oracles import Unreadable, deltars_rows, duckdb_rows

SCHEMA = {
    "type": "struct",
    "fields": [
        {"name": "id", "type": "long", "nullable": True, "metadata": {}},
        {"name": "ts", "type": "timestamp", "nullable": True, "metadata": {}},
    ],
}
AT = dt.datetime(2026, 1, 2, 3, 4, 5, tzinfo=dt.UTC)
GOOD = pa.table(
    {"id": pa.array([1, 2], pa.int64()), "ts": pa.array([AT, AT], pa.timestamp("us", "UTC"))}
)


def table_with(root: Path, files: dict[str, pa.Table]) -> None:
    root.mkdir(parents=True, exist_ok=True)
    adds = []
    for name, data in files.items():
        pq.write_table(data, root / name)
        adds.append(add(name, size=(root / name).stat().st_size))
    meta = metadata()
    meta["metaData"]["schemaString"] = json.dumps(SCHEMA)
    LogBuilder(root).commit(commit_info(), protocol(), meta, *adds)


def live_stats(root: Path) -> dict[str, dict[str, Any] | None]:
    live: dict[str, dict[str, Any] | None] = {}
    for f in sorted((root / "_delta_log").glob("*.json")):
        for line in f.read_text().splitlines():
            a = json.loads(line).get("add")
            if a:
                live[a["path"]] = json.loads(a["stats"]) if "stats" in a else None
    return live


def test_a_file_with_another_column_type_is_named_and_the_others_committed(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    ts_as_long = pa.table({"id": pa.array([3], pa.int64()), "ts": pa.array([7], pa.int64())})
    table_with(tmp_path, {"good.parquet": GOOD, "odd.parquet": ts_as_long})
    code, out, err = run(capsys, "compute-stats", str(tmp_path), "--json")
    assert code == 1, (out, err)  # docs/cli.md: an unreadable file is exit 1, the others done
    report = json.loads(out)
    assert report["commits"] == [1] and report["givenStats"] == 1
    (bad,) = report["unreadable"]
    assert bad["path"] == "odd.parquet" and "column ts" in bad["error"], bad
    assert "timestamp" in bad["error"] and "Traceback" not in err
    stats = live_stats(tmp_path)
    assert stats["good.parquet"] == {
        "numRecords": 2,
        "minValues": {"id": 1, "ts": "2026-01-02T03:04:05.000Z"},
        "maxValues": {"id": 2, "ts": "2026-01-02T03:04:05.000Z"},
        "nullCount": {"id": 0, "ts": 0},
    }
    assert stats["odd.parquet"] is None


def test_a_long_column_stored_as_strings_gets_no_string_bounds(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    id_as_text = pa.table({"id": ["zz", "aa"], "ts": pa.array([AT, AT], pa.timestamp("us", "UTC"))})
    table_with(tmp_path, {"good.parquet": GOOD, "text.parquet": id_as_text})
    code, out, err = run(capsys, "compute-stats", str(tmp_path), "--json")
    assert code == 1, (out, err)
    (bad,) = json.loads(out)["unreadable"]
    assert bad["path"] == "text.parquet" and "column id" in bad["error"], bad
    stats = live_stats(tmp_path)
    assert stats["text.parquet"] is None
    assert stats["good.parquet"] is not None and stats["good.parquet"]["minValues"]["id"] == 1


@pytest.mark.parametrize(("columns", "named"), [("nope", "nope"), ("id, nope, ts.x", "nope, ts.x")])
def test_columns_the_table_does_not_have_are_exit_2(
    capsys: pytest.CaptureFixture[str], tmp_path: Path, columns: str, named: str
) -> None:
    table_with(tmp_path, {"good.parquet": GOOD})
    before = sorted(p.name for p in (tmp_path / "_delta_log").iterdir())
    code, out, err = run(capsys, "compute-stats", str(tmp_path), "--columns", columns)
    assert code == 2, (out, err)
    assert f"no column {named} in" in err, err
    assert sorted(p.name for p in (tmp_path / "_delta_log").iterdir()) == before
    for reader in (deltars_rows, duckdb_rows):
        got = reader(str(tmp_path))
        assert not isinstance(got, Unreadable) and got == 2, (reader.__name__, got)


def test_columns_the_table_has_are_computed(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    table_with(tmp_path, {"good.parquet": GOOD})
    code, out, err = run(capsys, "compute-stats", str(tmp_path), "--columns", "ID")
    assert code == 0, (out, err)
    assert live_stats(tmp_path)["good.parquet"] == {
        "numRecords": 2,
        "minValues": {"id": 1},
        "maxValues": {"id": 2},
        "nullCount": {"id": 0},
    }
