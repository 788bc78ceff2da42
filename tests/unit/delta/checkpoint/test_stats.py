"""delta/checkpoint/stats.py: stats as JSON and as typed structs, as the table's properties ask."""

from __future__ import annotations

import json

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from tests.support.checkpoints import GOOD_STATS, add_rows, checkpoint, stats_table
from tests.support.logbuilder import LogBuilder, add, metadata, protocol


def test_stats_as_structs_have_real_types_and_bad_json_is_carried_as_is(tmp_path):
    path = stats_table(
        tmp_path, [GOOD_STATS, "{not json", None], **{"delta.checkpoint.writeStatsAsStruct": "true"}
    )
    result = checkpoint(path)
    adds = {a["path"]: a for a in add_rows(path, result.key)}
    good = adds["day=2024-01-01/f0"]
    assert good["stats"] == GOOD_STATS
    assert good["stats_parsed"]["numRecords"] == 3 and good["stats_parsed"]["maxValues"]["id"] == 9
    assert str(good["partitionValues_parsed"]["day"]) == "2024-01-01"
    bad = adds["day=2024-01-02/f1"]
    assert bad["stats"] == "{not json" and bad["stats_parsed"] is None  # carried as-is
    add_type = pq.read_schema(path / result.key).field("add").type
    assert add_type.field("partitionValues_parsed").type.field("day").type == pa.date32()


def test_without_json_stats_only_unparsable_strings_are_kept(tmp_path):
    path = stats_table(
        tmp_path,
        [GOOD_STATS, "[1, 2]"],
        **{
            "delta.checkpoint.writeStatsAsStruct": "true",
            "delta.checkpoint.writeStatsAsJson": "false",
        },
    )
    adds = {a["path"]: a for a in add_rows(path, checkpoint(path).key)}
    assert adds["day=2024-01-01/f0"]["stats"] is None
    assert adds["day=2024-01-01/f0"]["stats_parsed"]["minValues"]["id"] == 1
    assert adds["day=2024-01-02/f1"]["stats"] == "[1, 2]"


def test_struct_columns_by_default_as_delta_spark_writes_them(tmp_path):
    # Delta Spark's writeStatsAsStruct defaults to true: a table that does not set it gets both.
    path = stats_table(tmp_path, [GOOD_STATS])
    adds = add_rows(path, checkpoint(path).key)
    assert adds[0]["stats"] == GOOD_STATS and adds[0]["stats_parsed"]["maxValues"]["id"] == 9
    assert str(adds[0]["partitionValues_parsed"]["day"]) == "2024-01-01"


@pytest.mark.parametrize("flag", ["false", " FALSE "])
def test_no_struct_columns_when_the_table_turns_them_off(tmp_path, flag):
    path = stats_table(tmp_path, [GOOD_STATS], **{"delta.checkpoint.writeStatsAsStruct": flag})
    names = pq.read_schema(path / checkpoint(path).key).field("add").type.names
    assert (
        "stats" in names and "stats_parsed" not in names and "partitionValues_parsed" not in names
    )


def test_column_mapping_uses_physical_names(tmp_path):
    b = LogBuilder(tmp_path)
    fields = [
        {
            "name": "id",
            "type": "long",
            "nullable": True,
            "metadata": {"delta.columnMapping.id": 1, "delta.columnMapping.physicalName": "col-1"},
        },
        {
            "name": "day",
            "type": "string",
            "nullable": True,
            "metadata": {"delta.columnMapping.id": 2, "delta.columnMapping.physicalName": "col-2"},
        },
    ]
    meta = metadata(
        ("day",),
        **{"delta.checkpoint.writeStatsAsStruct": "true", "delta.columnMapping.mode": "name"},
    )
    meta["metaData"]["schemaString"] = json.dumps({"type": "struct", "fields": fields})
    a = add("x/f0")
    a["add"]["partitionValues"] = {"col-2": "d1"}
    a["add"]["stats"] = json.dumps({"numRecords": 1, "minValues": {"col-1": 5}})
    b.commit(protocol(2, 5), meta, a)
    (row,) = add_rows(tmp_path, checkpoint(tmp_path).key)
    assert row["partitionValues_parsed"] == {"col-2": "d1"}
    assert row["stats_parsed"]["minValues"] == {"col-1": 5}
