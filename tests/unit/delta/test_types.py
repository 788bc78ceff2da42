"""delta/types.py: Delta types as Arrow, partitionValues_parsed and stats_parsed, as delta-rs."""

import datetime as dt
import json
from decimal import Decimal
from pathlib import Path

import pyarrow as pa
import pyarrow.compute as pc
import pytest

from deltakeeper.delta import native_stats
from deltakeeper.delta.types import (
    VARIANT,
    arrow_type,
    coerce_rows,
    map_values,
    partition_values_parsed,
    physical_schema,
    stats_parsed,
    stats_type,
)

UTC = dt.UTC


@pytest.fixture(autouse=True, params=["native", "arrow"])
def stats_parser(request, monkeypatch):
    """Each test with the native stats parser and with the Arrow JSON path it replaces."""
    if request.param == "arrow":
        monkeypatch.setattr(native_stats, "_NATIVE", None)
    elif not native_stats.available():
        pytest.skip("deltakeeper_native is not built (make setup)")
    return request.param


def field(name, type_, physical=None, nullable=True):
    meta = {"delta.columnMapping.physicalName": physical} if physical else {}
    return {"name": name, "type": type_, "nullable": nullable, "metadata": meta}


def schema(*fields):
    return json.dumps({"type": "struct", "fields": list(fields)})


def pv(rows):
    return pa.array(rows, pa.map_(pa.string(), pa.string()))


@pytest.mark.parametrize(
    ("name", "expected"),
    [
        ("string", pa.string()),
        ("long", pa.int64()),
        ("integer", pa.int32()),
        ("short", pa.int16()),
        ("byte", pa.int8()),
        ("float", pa.float32()),
        ("double", pa.float64()),
        ("boolean", pa.bool_()),
        ("binary", pa.binary()),
        ("date", pa.date32()),
        ("timestamp", pa.timestamp("us", tz="UTC")),
        ("timestamp_ntz", pa.timestamp("us")),
        ("decimal(10,2)", pa.decimal128(10, 2)),
        ("decimal(38, 0)", pa.decimal128(38, 0)),
        ("variant", VARIANT),
        ("void", pa.null()),
    ],
)
def test_primitive_types_map_to_arrow(name, expected):
    assert arrow_type(name) == expected


def test_nested_types_map_to_arrow():
    t = {
        "type": "struct",
        "fields": [
            field("a", {"type": "array", "elementType": "long", "containsNull": False}),
            field(
                "m",
                {
                    "type": "map",
                    "keyType": "string",
                    "valueType": {"type": "variant"},
                    "valueContainsNull": True,
                },
            ),
        ],
    }
    got = arrow_type(t)
    assert got == pa.struct(
        [
            ("a", pa.list_(pa.field("element", pa.int64(), nullable=False))),
            ("m", pa.map_(pa.string(), VARIANT)),
        ]
    )


def test_an_unknown_type_is_refused():
    with pytest.raises(Exception, match="unknown Delta type"):
        arrow_type("geometry")


MAPPED = schema(
    field("id", "long", "col-1"),
    field(
        "s",
        {"type": "struct", "fields": [field("x", "integer", "col-3"), field("b", "boolean")]},
        "col-2",
    ),
    field(
        "e",
        {
            "type": "array",
            "elementType": {"type": "struct", "fields": [field("d", "integer", "col-5")]},
            "containsNull": True,
        },
        "col-4",
    ),
    field("p", "date", "col-6"),
)


def test_physical_schema_renames_nested_fields_by_mapping_mode():
    phys = physical_schema(MAPPED, "name")
    assert phys.names == ["col-1", "col-2", "col-4", "col-6"]
    assert phys.field("col-2").type == pa.struct([("col-3", pa.int32()), ("b", pa.bool_())])
    assert phys.field("col-4").type.value_type == pa.struct([("col-5", pa.int32())])
    assert physical_schema(MAPPED, "id").names == phys.names
    assert physical_schema(MAPPED, "none").names == ["id", "s", "e", "p"]
    assert physical_schema(MAPPED, None).names == ["id", "s", "e", "p"]


ALL_PARTS = schema(
    field("s", "string"),
    field("i", "integer"),
    field("l", "long"),
    field("b", "byte"),
    field("f", "double"),
    field("ok", "boolean"),
    field("d", "date"),
    field("ts", "timestamp"),
    field("ntz", "timestamp_ntz"),
    field("dec", "decimal(5,2)"),
    field("bin", "binary"),
)
COLS = ["s", "i", "l", "b", "f", "ok", "d", "ts", "ntz", "dec", "bin"]


def test_partition_values_parse_to_their_columns_types():
    rows = [
        [
            ("s", "a b/c=d%20é"),
            ("i", "-7"),
            ("l", "9223372036854775807"),
            ("b", "-128"),
            ("f", "-1.5e3"),
            ("ok", "true"),
            ("d", "2024-02-29"),
            ("ts", "2024-01-01 01:02:03.456789"),
            ("ntz", "2024-01-01 01:02:03"),
            ("dec", "-4.50"),
            ("bin", "\u0001\u0002\u0003"),
        ],
        [
            ("ts", "1970-01-01T00:00:00.123456Z"),
            ("ntz", "2024-01-01 01:02:03.5"),
            ("dec", "12"),
            ("ok", "false"),
            ("f", "NaN"),
        ],
    ]
    got = partition_values_parsed(pv(rows), ALL_PARTS, COLS, "none")
    assert got.type == pa.struct(
        [
            ("s", pa.string()),
            ("i", pa.int32()),
            ("l", pa.int64()),
            ("b", pa.int8()),
            ("f", pa.float64()),
            ("ok", pa.bool_()),
            ("d", pa.date32()),
            ("ts", pa.timestamp("us", tz="UTC")),
            ("ntz", pa.timestamp("us")),
            ("dec", pa.decimal128(5, 2)),
            ("bin", pa.binary()),
        ]
    )
    first, second = got.to_pylist()
    assert first == {
        "s": "a b/c=d%20é",
        "i": -7,
        "l": 9223372036854775807,
        "b": -128,
        "f": -1500.0,
        "ok": True,
        "d": dt.date(2024, 2, 29),
        "ts": dt.datetime(2024, 1, 1, 1, 2, 3, 456789, tzinfo=UTC),
        "ntz": dt.datetime(2024, 1, 1, 1, 2, 3),
        "dec": Decimal("-4.50"),
        "bin": b"\x01\x02\x03",
    }
    assert second["ts"] == dt.datetime(1970, 1, 1, 0, 0, 0, 123456, tzinfo=UTC)
    assert second["ntz"] == dt.datetime(2024, 1, 1, 1, 2, 3, 500000)
    assert second["dec"] == Decimal("12.00")
    assert second["ok"] is False
    assert second["f"] != second["f"]  # NaN
    assert second["s"] is None and second["i"] is None  # missing keys


def test_partition_values_null_empty_and_unparsable_become_null():
    rows = [
        [("s", ""), ("i", ""), ("d", ""), ("ts", ""), ("dec", ""), ("bin", "")],
        [("s", None), ("i", None), ("d", None)],
        None,
        [
            ("i", "2147483648"),  # overflows int32
            ("b", "1.5"),
            ("l", "0x10"),
            ("f", "abc"),
            ("ok", "yes"),
            ("d", "2023-02-29"),
            ("ts", "yesterday"),
            ("dec", "1.234"),  # would round
            ("s", " "),  # a space is a value, not empty
        ],
        [("dec", "1000.00")],  # needs precision 6
    ]
    got = partition_values_parsed(pv(rows), ALL_PARTS, COLS, None).to_pylist()
    assert got[0] == dict.fromkeys(COLS)
    assert got[1] == dict.fromkeys(COLS)
    assert got[2] == dict.fromkeys(COLS)
    assert got[3] == {**dict.fromkeys(COLS), "s": " "}
    assert got[4]["dec"] is None


def test_partition_values_timestamp_offsets_become_utc():
    rows = [[("ts", "2024-01-01T05:00:00+05:00")], [("ts", "2024-01-01T00:00:00.000Z")]]
    got = partition_values_parsed(pv(rows), ALL_PARTS, ["ts"], None).to_pylist()
    assert [r["ts"] for r in got] == [dt.datetime(2024, 1, 1, tzinfo=UTC)] * 2


def test_partition_values_are_read_by_physical_names():
    rows = [[("col-6", "2024-01-01"), ("p", "1999-01-01")]]
    got = partition_values_parsed(pv(rows), MAPPED, ["p"], "name")
    assert got.type == pa.struct([("col-6", pa.date32())])
    assert got.to_pylist() == [{"col-6": dt.date(2024, 1, 1)}]


def test_partition_values_of_chunked_and_unpartitioned_input():
    chunked = pa.chunked_array([pv([[("i", "1")]]), pv([[("i", "2")]])])
    got = partition_values_parsed(chunked, ALL_PARTS, ["i"], None)
    assert got.to_pylist() == [{"i": 1}, {"i": 2}]
    empty = partition_values_parsed(pv([[], []]), ALL_PARTS, [], None)
    assert len(empty) == 2 and empty.type == pa.struct([])


STATS_SCHEMA = schema(
    field("id", "long"),
    field("name", "string"),
    field("ts", "timestamp"),
    field("ntz", "timestamp_ntz"),
    field("d", "date"),
    field("dec", "decimal(10,2)"),
    field("f", "float"),
    field("x", "double"),
    field("b", "byte"),
    field("sh", "short"),
    field("i", "integer"),
    field("ok", "boolean"),
    field("bin", "binary"),
    field("arr", {"type": "array", "elementType": "long", "containsNull": True}),
    field("m", {"type": "map", "keyType": "string", "valueType": "long"}),
    field("v", "variant"),
    field("nothing", "void"),
    field("s", {"type": "struct", "fields": [field("a", "integer"), field("flag", "boolean")]}),
    field("part", "string"),
)


def test_stats_type_has_the_checkpoint_stats_shape():
    t = stats_type(STATS_SCHEMA, None, ["part"])
    assert [f.name for f in t] == [
        "numRecords",
        "minValues",
        "maxValues",
        "nullCount",
        "tightBounds",
    ]
    bounds = t.field("minValues").type
    assert [f.name for f in bounds] == [
        "id", "name", "ts", "ntz", "d", "dec", "f", "x", "b", "sh", "i", "s"
    ]  # fmt: skip
    assert bounds.field("s").type == pa.struct([("a", pa.int32())])
    assert bounds.field("ts").type == pa.timestamp("us", tz="UTC")
    counts = t.field("nullCount").type
    assert "nothing" not in counts.names and "part" not in counts.names
    assert counts.field("arr").type == pa.int64() and counts.field("v").type == pa.int64()
    assert counts.field("s").type == pa.struct([("a", pa.int64()), ("flag", pa.int64())])


def one(stats, schema_string=STATS_SCHEMA, mode=None):
    return stats_parsed(pa.array([stats], pa.string()), schema_string, mode, ["part"])[0].as_py()


def test_stats_of_every_type_parse():
    stats = {
        "numRecords": 10,
        "tightBounds": False,
        "minValues": {
            "id": -5,
            "name": 'a\nb"c',
            "ts": "2024-01-01T00:00:00.000Z",
            "ntz": "2024-01-01 01:02:03.456",
            "d": "2024-02-29",
            "dec": -4.5,
            "f": 1.5,
            "x": -0.0,
            "b": -128,
            "sh": 300,
            "i": 7,
            "ok": True,
            "s": {"a": 1},
        },
        "maxValues": {"ts": "2024-01-02T03:04:05.123Z", "dec": "12345678.91"},
        "nullCount": {"id": 0, "arr": 2, "m": 1, "v": 3, "s": {"a": 1, "flag": 0}, "ok": 4},
    }
    got = one(json.dumps(stats))
    assert got["numRecords"] == 10 and got["tightBounds"] is False
    mins = got["minValues"]
    assert mins["id"] == -5 and mins["name"] == 'a\nb"c'
    assert mins["ts"] == dt.datetime(2024, 1, 1, tzinfo=UTC)
    assert mins["ntz"] == dt.datetime(2024, 1, 1, 1, 2, 3, 456000)
    assert mins["d"] == dt.date(2024, 2, 29)
    assert mins["dec"] == Decimal("-4.50")
    assert (mins["f"], mins["x"], mins["b"], mins["sh"], mins["i"]) == (1.5, -0.0, -128, 300, 7)
    assert mins["s"] == {"a": 1}
    assert got["maxValues"]["ts"] == dt.datetime(2024, 1, 2, 3, 4, 5, 123000, tzinfo=UTC)
    assert got["maxValues"]["dec"] == Decimal("12345678.91")
    assert got["maxValues"]["id"] is None
    counts = got["nullCount"]
    assert (counts["id"], counts["arr"], counts["m"], counts["v"], counts["ok"]) == (0, 2, 1, 3, 4)
    assert counts["s"] == {"a": 1, "flag": 0}


def test_stats_missing_fields_are_null_and_unknown_columns_ignored():
    got = one('{"numRecords": 3, "minValues": {"zzz": 1, "s": {"a": 2, "q": [1]}}, "extra": {}}')
    assert got["numRecords"] == 3 and got["tightBounds"] is None
    assert got["minValues"]["s"] == {"a": 2} and got["minValues"]["id"] is None
    assert got["maxValues"] is None and got["nullCount"] is None


@pytest.mark.parametrize(
    "bad", ["", "   ", None, "{", "not json", "[1, 2]", "5", '{"numRecords": 1} {"numRecords": 2}']
)
def test_stats_malformed_rows_are_null(bad):
    rows = ['{"numRecords": 1}', bad, '{"numRecords": 2}']
    got = stats_parsed(pa.array(rows, pa.string()), STATS_SCHEMA, None).to_pylist()
    assert got[0]["numRecords"] == 1 and got[2]["numRecords"] == 2
    assert got[1] is None


@pytest.mark.parametrize(
    ("stats", "path"),
    [
        ('{"numRecords": "10"}', ("numRecords",)),
        ('{"numRecords": 1.5}', ("numRecords",)),
        ('{"numRecords": true}', ("numRecords",)),
        ('{"minValues": {"b": 300}}', ("minValues", "b")),
        ('{"minValues": {"dec": 1.234}}', ("minValues", "dec")),
        ('{"minValues": {"ts": "2024-01-01T00:00:00.123456789Z"}}', None),
        ('{"minValues": {"ts": "soon"}}', ("minValues", "ts")),
        ('{"minValues": {"d": "2024-13-01"}}', ("minValues", "d")),
        ('{"minValues": {"s": 5}}', ("minValues", "s")),
        ('{"minValues": {"id": {"a": 1}}}', ("minValues", "id")),
        ('{"minValues": 7}', ("minValues",)),
        ('{"nullCount": {"s": 3}}', ("nullCount", "s")),
        ('{"tightBounds": "yes"}', ("tightBounds",)),
        ('{"minValues": {"id": 1, "id": 2}}', None),
    ],
)
def test_stats_unexpected_shapes_null_only_that_field(stats, path):
    body = json.loads(stats)
    body.setdefault("maxValues", {"name": "kept"})
    got = stats_parsed(
        pa.array(['{"numRecords": 9}', json.dumps(body)] * 3, pa.string()), STATS_SCHEMA, None
    ).to_pylist()
    assert got[0]["numRecords"] == 9 and got[2]["numRecords"] == 9
    row = got[1]
    assert row is not None and row["maxValues"]["name"] == "kept"
    if path:
        value = row
        for key in path:
            value = value[key] if value is not None else None
        assert value is None


def test_stats_duplicate_key_and_nanoseconds_are_kept_by_fallback():
    got = one('{"minValues": {"id": 1, "id": 2}}')
    assert got["minValues"]["id"] == 2  # json.loads: last one wins
    got = one('{"minValues": {"ts": "2024-01-01T00:00:00.123456789Z"}}')
    assert got["minValues"]["ts"] == dt.datetime(2024, 1, 1, 0, 0, 0, 123456, tzinfo=UTC)


def test_stats_in_pretty_printed_json_with_newlines_parse():
    got = one('{\n  "numRecords": 4,\r\n  "minValues": {"id": 1}\n}')
    assert got["numRecords"] == 4 and got["minValues"]["id"] == 1


@pytest.mark.parametrize("with_memchr", [True, False])
def test_newline_search_reads_only_the_slice(monkeypatch, with_memchr):
    from deltakeeper.delta import types

    if not with_memchr:
        monkeypatch.setattr(types, "_MEMCHR", None)
    else:
        assert types._MEMCHR is not None  # Linux: the libc path is the one in use
    rows = pa.array(['{"a":\n1}', '{"b":2}', '{"c":3}', '{"d":\r4}'], pa.large_string())
    assert types._may_contain(rows, "\n") and types._may_contain(rows, "\r")
    middle = rows.slice(1, 2)  # shares the buffer whose first and last rows hold the bytes
    assert not types._may_contain(middle, "\n") and not types._may_contain(middle, "\r")
    assert types._may_contain(rows.slice(0, 1), "\n")
    assert not types._may_contain(rows.slice(0, 0), "\n")
    assert types._may_contain(rows.slice(3, 1), "\r")


def test_stats_nan_and_infinity_parse():
    got = one('{"minValues": {"x": NaN, "f": "-Infinity"}}')
    assert got["minValues"]["x"] != got["minValues"]["x"]
    assert got["minValues"]["f"] == float("-inf")


def test_stats_are_read_by_physical_names():
    stats = '{"numRecords": 2, "minValues": {"col-1": 5, "id": 99, "col-2": {"col-3": 7}}}'
    got = stats_parsed(pa.array([stats]), MAPPED, "name", ["p"])
    t = got.type.field("minValues").type
    assert t.names == ["col-1", "col-2"]
    assert got[0].as_py()["minValues"] == {"col-1": 5, "col-2": {"col-3": 7}}
    assert "col-6" not in got.type.field("nullCount").type.names


def test_a_few_bad_stats_rows_among_many_spoil_only_themselves():
    good = '{"numRecords": %d, "minValues": {"id": %d, "ts": "2024-01-01T00:00:00.000Z"}}'
    rows = [good % (i, i) for i in range(20_000)]
    for i in (0, 4_097, 9_999, 19_999):
        rows[i] = f'{{"numRecords": {i}, "minValues": {{"id": "x"}}}}'
    rows[12_345] = "{broken"
    got = stats_parsed(
        pa.chunked_array([pa.array(rows[:7]), pa.array(rows[7:])]), STATS_SCHEMA, None
    )
    assert len(got) == 20_000
    nums = got.field("numRecords").to_pylist()
    assert nums[:3] == [0, 1, 2] and nums[12_345] is None and nums[19_999] == 19_999
    assert got.field("minValues").field("id").to_pylist()[4_097] is None
    assert got.field("minValues").field("id").to_pylist()[4_098] == 4_098
    assert got.null_count == 1


def test_stats_bad_everywhere_costs_a_bounded_number_of_bulk_reads(monkeypatch):
    # A writer that puts floats in a long column fails every row; Arrow names no row for
    # that failure. One read of the block, one per part, then Python: not a read per level.
    from deltakeeper.delta import types

    reads = []
    real = types._BlockReader.read

    def counted(self, lo, hi):
        reads.append((lo, hi))
        return real(self, lo, hi)

    monkeypatch.setattr(types._BlockReader, "read", counted)
    monkeypatch.setattr(native_stats, "_NATIVE", None)  # the Arrow path's cost
    rows = [f'{{"numRecords": {i}, "minValues": {{"id": {i}.0}}}}' for i in range(5_000)]
    got = stats_parsed(pa.array(rows, pa.string()), STATS_SCHEMA, None)
    assert got.field("numRecords").to_pylist() == list(range(5_000))
    assert got.field("minValues").field("id").null_count == 5_000
    assert len(reads) <= 1 + types.SPLIT


def test_no_stats_rows_give_no_rows():
    assert len(stats_parsed(pa.array([], pa.string()), STATS_SCHEMA, None)) == 0


# ---------------------------------------------------------------------------- delta-rs oracle


def delta_rs_checkpoint(path: Path):
    deltalake = pytest.importorskip("deltalake")
    pq = pytest.importorskip("pyarrow.parquet")
    ts = pa.timestamp("us", tz="UTC")
    data = pa.table(
        {
            "p_int": pa.array([1, -2, None, 1], pa.int32()),
            "p_str": pa.array(["a b/c=%", "x", None, "a b/c=%"]),
            "p_date": pa.array([dt.date(2024, 1, 1), None, dt.date(1970, 1, 1), None]),
            "p_ts": pa.array([dt.datetime(2024, 1, 1, 1, 2, 3, 456789), None, None, None], ts),
            "p_dec": pa.array([Decimal("1.23"), Decimal("4.50"), None, None], pa.decimal128(5, 2)),
            "p_bool": pa.array([True, False, None, True]),
            "x_long": pa.array([1, 2, 3, -4], pa.int64()),
            "x_str": pa.array(["x", None, "zz", "é"]),
            "x_ts": pa.array([dt.datetime(2024, 1, 1, 1, 2, 3, 456789), None, None, None], ts),
            "x_ntz": pa.array(
                [dt.datetime(2024, 1, 1, 1, 2, 3), None, None, None], pa.timestamp("us")
            ),
            "x_date": pa.array([dt.date(2024, 1, 1), None, None, dt.date(1, 1, 1)]),
            "x_dec": pa.array([Decimal("1.23"), Decimal("-4.50"), None, None], pa.decimal128(5, 2)),
            "x_struct": pa.array(
                [{"a": 1, "b": "q"}, None, {"a": 3, "b": None}, None],
                pa.struct([("a", pa.int32()), ("b", pa.string())]),
            ),
            "x_list": pa.array([[1], None, [2, 3], []], pa.list_(pa.int64())),
            "x_bin": pa.array([b"a", None, b"\x00", None]),
            "x_f": pa.array([1.5, None, None, -2.0], pa.float32()),
            "x_d": pa.array([1.5, -0.0, None, 1e300], pa.float64()),
            "x_b": pa.array([True, None, False, None]),
            "x_byte": pa.array([1, None, -3, 127], pa.int8()),
            "x_short": pa.array([1, None, -3, 32767], pa.int16()),
        }
    )
    parts = ["p_int", "p_str", "p_date", "p_ts", "p_dec", "p_bool"]
    deltalake.write_deltalake(
        str(path),
        data,
        partition_by=parts,
        configuration={"delta.checkpoint.writeStatsAsStruct": "true"},
    )
    deltalake.DeltaTable(str(path)).create_checkpoint()
    (checkpoint,) = (path / "_delta_log").glob("*.checkpoint.parquet")
    adds = pq.read_table(checkpoint)["add"].combine_chunks()
    adds = adds.filter(adds.is_valid())
    log = (path / "_delta_log" / "00000000000000000000.json").read_text().splitlines()
    meta = next(json.loads(line)["metaData"] for line in log if '"metaData"' in line)
    return adds, meta["schemaString"], parts


def test_matches_delta_rs_partition_values_parsed(tmp_path):
    adds, schema_string, parts = delta_rs_checkpoint(tmp_path / "t")
    mine = partition_values_parsed(adds.field("partitionValues"), schema_string, parts, None)
    theirs = adds.field("partitionValues_parsed")
    assert mine.type == theirs.type
    assert mine.to_pylist() == theirs.to_pylist()


def test_matches_delta_rs_stats_parsed(tmp_path):
    adds, schema_string, parts = delta_rs_checkpoint(tmp_path / "t")
    mine = stats_parsed(adds.field("stats"), schema_string, None, parts)
    theirs = adds.field("stats_parsed")
    # Same fields and types; delta-rs orders nullCount before minValues, we follow the spec.
    assert sorted(mine.type, key=lambda f: f.name) == sorted(theirs.type, key=lambda f: f.name)
    for a, b in zip(mine.to_pylist(), theirs.to_pylist(), strict=True):
        assert a == b


MAPS = [
    [[("a", "1"), ("b", "2")], [("b", "3"), ("a", "4")], [("a", "")], [("a", None)]],
    [[("a", "1"), ("b", "2")], [("b", "3")], [("a", "x")]],  # a key missing in a row
    [[("a", "1"), ("a", "2")], [("b", "3")]],  # a key repeated in a row
    [[("a", "1")], None, [("a", "2")]],  # a null map
    [],
]


@pytest.mark.parametrize("rows", MAPS)
def test_map_values_is_map_lookup_on_every_slice(rows):
    maps = pa.array(rows, pa.map_(pa.string(), pa.string()))
    for lo in range(len(rows) + 1):
        for n in range(len(rows) - lo + 1):
            part = maps.slice(lo, n)
            for key in ("a", "b", "z"):
                want = pc.map_lookup(part, pa.scalar(key), "first")
                assert map_values(part, key).equals(want), (lo, n, key)


@pytest.mark.parametrize(
    ("stats", "path", "expected"),
    [
        ('{"minValues": {"x": 1' + "0" * 400 + "}}", ("minValues", "x"), float("inf")),
        ('{"minValues": {"x": -1' + "0" * 400 + "}}", ("minValues", "x"), float("-inf")),
        ('{"minValues": {"ts": "0001-01-01T00:00:00+01:00"}}', ("minValues", "ts"), None),
        ('{"minValues": ' + "[" * 5000 + "]" * 5000 + "}", (), None),
    ],
)
def test_coerce_row_never_raises_on_huge_numbers_times_or_nesting(stats, path, expected):
    # float(int) overflows, astimezone leaves year 1..9999, json.loads hits the recursion
    # limit: each is a value (or row) that does not fit, not an error.
    got = coerce_rows([stats], stats_type(STATS_SCHEMA, None, ["part"])).to_pylist()[0]
    for key in path:
        got = got[key]
    assert got == expected
