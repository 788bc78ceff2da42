"""delta/stats/file.py: which columns a table indexes, string prefixes as Delta cuts them, and
the stats document built from footers (and from data where a footer cannot say)."""

from __future__ import annotations

import datetime as dt
import io
import json
from decimal import Decimal
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from deltakeeper.delta.errors import InvalidInputError
from deltakeeper.delta.stats import file
from deltakeeper.delta.stats.file import spec_for, truncate_max, truncate_min

SMILE = "\U0001f600"  # two UTF-16 units


def schema(**fields: Any) -> str:
    return json.dumps(
        {
            "type": "struct",
            "fields": [{"name": k, "type": v, "nullable": True} for k, v in fields.items()],
        }
    )


def struct(**fields: Any) -> dict[str, Any]:
    return json.loads(schema(**fields))


def paths(spec: file.StatsSpec) -> list[str]:
    return [leaf.dotted for leaf in spec.leaves]


NESTED = schema(a="long", st=struct(x="long", y=struct(z="string")), m="string", p="string")


def test_the_first_n_leaves_count_struct_fields_and_skip_partitions() -> None:
    conf = {"delta.dataSkippingNumIndexedCols": "3"}
    assert paths(spec_for(NESTED, conf, ["p"], None)) == ["a", "st.x", "st.y.z"]
    assert paths(spec_for(NESTED, {}, ["P"], None)) == ["a", "st.x", "st.y.z", "m"]
    all_of_them = {"delta.dataSkippingNumIndexedCols": "-1"}
    assert paths(spec_for(NESTED, all_of_them, [], None))[-1] == "p"
    none = {"delta.dataSkippingNumIndexedCols": "0"}
    assert paths(spec_for(NESTED, none, [], None)) == []


def test_named_columns_win_and_match_case_blind() -> None:
    conf = {
        "delta.dataSkippingStatsColumns": "ST.y, m",
        "delta.dataSkippingNumIndexedCols": "1",
    }
    assert paths(spec_for(NESTED, conf, [], None)) == ["st.y.z", "m"]
    assert paths(spec_for(NESTED, {}, [], None, columns="st")) == ["st.x", "st.y.z"]


def test_column_lists_parse_as_spark_parses_them() -> None:
    parsed = file.parse_column_list("a, b.c ,`d.e`,`x``y`.z")
    assert parsed == [["a"], ["b", "c"], ["d.e"], ["x`y", "z"]]
    with pytest.raises(InvalidInputError, match="backtick"):
        file.parse_column_list("`a")


def test_physical_names_under_column_mapping() -> None:
    fields = {
        "type": "struct",
        "fields": [
            {"name": "a", "type": "long", "metadata": {"delta.columnMapping.physicalName": "c1"}}
        ],
    }
    assert paths(spec_for(json.dumps(fields), {}, [], "name")) == ["c1"]
    assert paths(spec_for(json.dumps(fields), {}, [], None)) == ["a"]


def test_a_bad_property_is_named() -> None:
    with pytest.raises(InvalidInputError, match="dataSkippingNumIndexedCols"):
        spec_for(NESTED, {"delta.dataSkippingNumIndexedCols": "many"}, [], None)


@pytest.mark.parametrize(
    ("value", "minimum", "maximum"),
    [
        ("short", "short", "short"),
        ("a" * 40, "a" * 32, "a" * 32 + "\u007f"),  # the next character is ASCII
        ("a" * 32 + "é" * 8, "a" * 32, "a" * 32 + "\U0010ffff"),
        # a surrogate pair at the cut stays whole: 33 UTF-16 units
        ("a" * 31 + SMILE + "b" * 8, "a" * 31 + SMILE, "a" * 31 + SMILE + "\u007f"),
        # the minimum counts code points (Spark's substring), the maximum UTF-16 units
        (SMILE * 20, SMILE * 20, SMILE * 16 + "\U0010ffff"),
        # a tie-breaker already there is skipped over
        ("a" * 32 + "\U0010ffff" + "b", "a" * 32, "a" * 32 + "\U0010ffff\u007f"),
    ],
)
def test_string_prefixes_as_delta_cuts_them(value: str, minimum: str, maximum: str) -> None:
    assert truncate_min(value, 32) == minimum
    assert truncate_max(value, 32) == maximum


def test_a_maximum_that_cannot_be_closed_is_dropped() -> None:
    assert truncate_max("a" * 2 + "\U0010ffff" * 3, 2) is None
    assert truncate_max("abc", 0) is None and truncate_min("abc", 0) is None


def footer_file(table: pa.Table, **options: Any) -> pq.ParquetFile:
    sink = io.BytesIO()
    pq.write_table(table, sink, **options)
    return pq.ParquetFile(io.BytesIO(sink.getvalue()))


def stats_of(schema_string: str, table: pa.Table, **options: Any) -> tuple[dict[str, Any], Any]:
    spec = spec_for(schema_string, {}, [], None)
    pf = footer_file(table, **options)
    got = file.from_footer(spec, pf)
    doc = got.stats if got.stats is not None else file.from_data(spec, pf, got)
    return json.loads(file.dumps(doc), parse_float=Decimal), got


def test_the_document_from_a_footer() -> None:
    table = pa.table(
        {
            "i": pa.array([3, None, -1], pa.int32()),
            "dec": pa.array([Decimal("1.50"), None, Decimal("0.00")], pa.decimal128(5, 2)),
            "d": pa.array([dt.date(2020, 1, 2), None, dt.date(1999, 12, 31)]),
            "ts": pa.array(
                [dt.datetime(2021, 1, 1, 0, 0, 0, 1999, tzinfo=dt.UTC), None, None],
                pa.timestamp("us", tz="UTC"),
            ),
            "b": pa.array([True, None, False]),
            "st": pa.array([{"x": None}, None, {"x": None}], pa.struct([("x", pa.int64())])),
        }
    )
    s = schema(
        i="integer",
        dec="decimal(5,2)",
        d="date",
        ts="timestamp",
        b="boolean",
        st=struct(x="long"),
        gone="string",
    )
    doc, got = stats_of(s, table)
    assert got.needs_data == ()  # the footer said it all
    assert doc == {
        "numRecords": 3,
        "minValues": {
            "i": -1,
            "dec": Decimal("0.00"),
            "d": "1999-12-31",
            "ts": "2021-01-01T00:00:00.001Z",
            "st": {},
        },
        "maxValues": {
            "i": 3,
            "dec": Decimal("1.50"),
            "d": "2020-01-02",
            "ts": "2021-01-01T00:00:00.001Z",
            "st": {},
        },
        "nullCount": {"i": 1, "dec": 1, "d": 1, "ts": 2, "b": 1, "st": {"x": 3}, "gone": 3},
    }


def test_floats_from_arrow_footers_lose_their_bounds_and_data_reads_see_nan() -> None:
    table = pa.table(
        {"f": pa.array([1.5, float("nan"), None]), "g": pa.array([0.1, 2.0, None], pa.float32())}
    )
    s = schema(f="double", g="float")
    doc, _ = stats_of(s, table)
    assert doc == {"numRecords": 3, "minValues": {}, "maxValues": {}, "nullCount": {"f": 1, "g": 1}}
    doc, got = stats_of(s, table, write_statistics=False)  # no footer statistics: read
    assert got.needs_data == ("f", "g") and got.data_bytes > 0
    assert doc["minValues"] == {"f": Decimal("1.5"), "g": Decimal("0.1")}
    assert doc["maxValues"] == {"g": Decimal("2")}  # f holds a NaN: Spark's max would be NaN


def test_lists_and_maps_are_read_for_their_null_count() -> None:
    table = pa.table(
        {
            "l": pa.array([[1, None], None, []], pa.list_(pa.int64())),
            "n": pa.array([1, 2, 3]),
        }
    )
    s = schema(l={"type": "array", "elementType": "long", "containsNull": True}, n="long")
    doc, got = stats_of(s, table)
    assert got.needs_data == ("l",)
    assert doc["nullCount"] == {"l": 1, "n": 0}
    assert doc["minValues"] == {"n": 1}


def test_row_groups_merge_and_nanosecond_timestamps_are_cut_to_the_millisecond() -> None:
    ns = pa.array([1_999_999, -1, 5_000_000_000], pa.timestamp("ns"))
    doc, _ = stats_of(schema(t="timestamp_ntz"), pa.table({"t": ns}), row_group_size=1)
    assert doc["minValues"] == {"t": "1969-12-31T23:59:59.999"}
    assert doc["maxValues"] == {"t": "1970-01-01T00:00:05.000"}


def test_a_complete_statistics_document_needs_every_null_count() -> None:
    spec = spec_for(NESTED, {}, [], None)
    full = {"numRecords": 1, "nullCount": {"a": 0, "st": {"x": 0, "y": {"z": 0}}, "m": 0, "p": 0}}
    assert spec.complete(json.dumps(full))
    del full["nullCount"]["st"]["y"]  # type: ignore[attr-defined]
    assert not spec.complete(json.dumps(full))
    assert not spec.complete(None) and not spec.complete("{not json")
    assert not spec.complete(json.dumps({"nullCount": {}}))


def test_tight_bounds_where_deletion_vectors_are_supported() -> None:
    spec = spec_for(schema(n="long"), {}, [], None, tight_bounds=True)
    pf = footer_file(pa.table({"n": [1]}))
    doc = file.from_footer(spec, pf).stats
    assert doc is not None and list(doc) == [
        "numRecords",
        "minValues",
        "maxValues",
        "nullCount",
        "tightBounds",
    ]
    assert doc["tightBounds"] is True
