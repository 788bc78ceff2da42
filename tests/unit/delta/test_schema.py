"""The record count read from each add's statistics: exact whatever the JSON looks like."""

from __future__ import annotations

from pathlib import Path

import pyarrow as pa

from deltakeeper.delta import schema
from deltakeeper.delta.table import open_table
from tests.support.logbuilder import LogBuilder, add, metadata, protocol

COLUMNS = (*schema.LEAN_ADD, schema.NUM_RECORDS.name)


def test_the_top_level_count_whatever_the_key_order_spacing_or_nesting() -> None:
    stats = [
        '{"numRecords":5,"minValues":{"a":1}}',  # where writers put it
        '{"minValues":{"numRecords":3},"numRecords":7}',  # a column named numRecords first
        '{\n  "numRecords": 9\n}',  # pretty-printed
        ' { "numRecords" : 11 , "x": 1}',
        '{"numRecords":12}',
        None,
        '{"minValues":{}}',  # no count
        '{"numRecords":1.5}',  # not an integer
        '{"numRecords":true}',
        '{"numRecords":null}',
        "{not json",
    ]
    got = schema.records_from_stats(pa.array(stats, pa.string())).to_pylist()
    assert got == [5, 7, 9, 11, 12, None, None, None, None, None, None]
    assert schema.records_from_stats(pa.array([], pa.string())).to_pylist() == []
    sliced = pa.array(['{"numRecords":2}', '{"numRecords":3}']).slice(1)
    assert schema.records_from_stats(sliced).to_pylist() == [3]


def test_commits_give_counts_and_a_file_without_stats_has_none(tmp_path: Path) -> None:
    b = LogBuilder(tmp_path)
    with_stats = add("a")
    with_stats["add"]["stats"] = '{"numRecords":42,"nullCount":{"id":0}}'
    b.commit(protocol(), metadata(), with_stats, add("b"))
    files = open_table(str(tmp_path)).snapshot(add_cols=COLUMNS).files
    assert dict(zip(files["path"].to_pylist(), files["numRecords"].to_pylist(), strict=True)) == {
        "a": 42,
        "b": None,
    }
    # Asked for with the stats themselves, both come back.
    both = open_table(str(tmp_path)).snapshot(add_cols=(*COLUMNS, "stats")).files
    assert sorted(both["numRecords"].to_pylist(), key=str) == [42, None]
    assert "stats" in both.column_names
