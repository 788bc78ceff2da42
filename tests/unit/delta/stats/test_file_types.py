"""delta/stats/file.py: a column stored as another type than the table's (issue 49, 2.6) is
UnreadableFileError, naming the column and both types; the types Delta's type widening may
leave in older files are read."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from deltakeeper.delta.stats.file import UnreadableFileError, from_footer, spec_for


def schema(**types: str) -> str:
    fields = [{"name": n, "type": t, "nullable": True, "metadata": {}} for n, t in types.items()]
    return json.dumps({"type": "struct", "fields": fields})


def footer_of(tmp_path: Path, data: pa.Table) -> pq.ParquetFile:
    pq.write_table(data, tmp_path / "f.parquet")
    return pq.ParquetFile(tmp_path / "f.parquet")


@pytest.mark.parametrize(
    ("delta_type", "column", "held"),
    [
        ("long", pa.array(["zz", "aa"]), "BYTE_ARRAY (string)"),
        ("timestamp", pa.array([1, 2], pa.int64()), "INT64"),
        ("string", pa.array([1, 2], pa.int32()), "INT32"),
        ("date", pa.array([1.0, 2.0]), "DOUBLE"),
    ],
)
def test_a_column_of_another_type_is_an_unreadable_file(
    tmp_path: Path, delta_type: str, column: pa.Array, held: str
) -> None:
    spec = spec_for(schema(c=delta_type), {}, (), None)
    pf = footer_of(tmp_path, pa.table({"c": column}))
    with pytest.raises(
        UnreadableFileError,
        match=re.escape(f"column c: the file holds {held}, the table's type is {delta_type}"),
    ):
        from_footer(spec, pf)


@pytest.mark.parametrize("delta_type", ["long", "boolean"])
def test_a_group_where_the_table_has_a_value_is_an_unreadable_file(
    tmp_path: Path, delta_type: str
) -> None:
    spec = spec_for(schema(c=delta_type), {}, (), None)
    pf = footer_of(tmp_path, pa.table({"c": pa.array([{"x": 1}, None])}))
    with pytest.raises(UnreadableFileError, match="column c: the file holds a group"):
        from_footer(spec, pf)


def test_widened_integers_and_doubles_are_read(tmp_path: Path) -> None:
    spec = spec_for(schema(a="long", b="double"), {}, (), None)
    data = pa.table({"a": pa.array([3, 1], pa.int32()), "b": pa.array([5, 2], pa.int32())})
    got = from_footer(spec, footer_of(tmp_path, data))
    assert got.stats == {
        "numRecords": 2,
        "minValues": {"a": 1, "b": 2},
        "maxValues": {"a": 3, "b": 5},
        "nullCount": {"a": 0, "b": 0},
    }
