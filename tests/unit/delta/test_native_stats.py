"""delta/native_stats.py: the Rust stats parser (native/) gives what `coerce_rows` gives.

Generated stats strings cover well-formed rows, wrong types, integer overflow, decimals at the
scale and precision edge, unicode and escapes, duplicate keys, truncation and noise; the
native result (with the rows it leaves to Python) must equal the reference exactly."""

from __future__ import annotations

import json
import random
from typing import Any

import pyarrow as pa
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from deltakeeper.delta import native_stats
from deltakeeper.delta.types import coerce_rows, stats_parsed, stats_type
from tests.support.native import REQUIRED as NATIVE_REQUIRED

pytestmark = pytest.mark.skipif(
    not native_stats.available() and not NATIVE_REQUIRED,
    reason="deltakeeper_native is not built (make setup builds it where Rust is installed)",
)


def test_the_extension_is_installed() -> None:
    assert native_stats.available(), "deltakeeper_native does not import: run make setup"


SCHEMA = json.dumps(
    {
        "type": "struct",
        "fields": [
            {"name": name, "type": t, "nullable": True, "metadata": {}}
            for name, t in [
                ("l", "long"),
                ("i", "integer"),
                ("sh", "short"),
                ("b", "byte"),
                ("f", "float"),
                ("d", "double"),
                ("s", "string"),
                ("dt", "date"),
                ("ts", "timestamp"),
                ("ntz", "timestamp_ntz"),
                ("dec", "decimal(10,2)"),
                ("big", "decimal(38,0)"),
                ("tiny", "decimal(5,5)"),
                ("ok", "boolean"),
                ('ünï "q"', "long"),
                ("a_name_longer_than_sixteen_bytes", "double"),
                (
                    "st",
                    {
                        "type": "struct",
                        "fields": [
                            {"name": "a", "type": "long", "nullable": True, "metadata": {}},
                            {"name": "z", "type": "string", "nullable": True, "metadata": {}},
                            {
                                "name": "in",
                                "type": {
                                    "type": "struct",
                                    "fields": [
                                        {"name": "x", "type": "double", "nullable": True},
                                        {"name": "t", "type": "timestamp", "nullable": True},
                                    ],
                                },
                                "nullable": True,
                                "metadata": {},
                            },
                        ],
                    },
                ),
            ]
        ],
    }
)
OUT = stats_type(SCHEMA, None)

EDGE_NUMBERS = [
    "0", "-0", "0.0", "-0.0", "1e400", "-1e400", "1E-400", "1.5", "1.50", "1.10", "1.1e1",
    "1.234", "0.005", "0.00001", "0.000001", "-0.99999", "99999999.99", "99999999.995",
    "-99999999.99", "100000000.00", "100000000", "127", "128", "-128", "-129", "32767",
    "32768", "-32769", "2147483647", "2147483648", "-2147483649", "9223372036854775807",
    "9223372036854775808", "-9223372036854775808", "-9223372036854775809", "3.4028235e38",
    "3.5e38", "1e-50", "12345678901234567890123456789012345678",
    "123456789012345678901234567890123456789", "1" + "0" * 305, "2e2", "2E+2", "200e-2",
    "0e99", "5e-1", "NaN", "Infinity", "-Infinity", "1.7976931348623157e308", "4.9e-324",
    "1e2345678901234567890123456789012345678", "-0e99999999999999999999", "1e-99999999999999999999",
]  # fmt: skip
EDGE_STRINGS = [
    "", " ", "NaN", "Infinity", "-Infinity", "nan", "1.5", " 1.5", "1_000", "1e3", "+1.5",
    ".5", "5.", "-.5", "١٢", "inf", "2024-02-29", "2023-02-29", "2024-1-5", "0000-01-01",
    "2024-13-01", "2024-01-01 ", "\t2024-01-01", "2024-01-01T00:00:00.000Z",
    "2024-01-01 01:02:03.456", "2024-01-01T10:00:00+05:30", "2024-01-01T10:00:00-0800",
    "2024-01-01T10", "2024-01-01T24:00:00", "2024-01-01T10:00:60", "0001-01-01T00:00:00+01:00",
    "9999-12-31T23:59:59.999999-01:00", "20240101", "2024-01-01T10:00:00,5",
    "2024-01-01T00:00:00.123456789Z", "2024-01-01x10:00:00", "2024-01-01T10:00:00.1",
    "2024-01-01T10:00", "2024-01-01T10:00:00Z", "é", "\u2028", "\x00", "a\"b\\c",
]  # fmt: skip
RAW_STRINGS = ['"\\ud800"', '"\\udc00x"', '"\\ud83d\\ude00"', '"\\u00e9"', '"\\/"', '"\\x"']
OTHER = ["true", "false", "null", "[]", "[1, [2, {}]]", "{}", '{"a": 1}', '"x"']


def quoted(s: str, ascii_only: bool) -> str:
    return json.dumps(s, ensure_ascii=ascii_only)


@st.composite
def leaf(draw: st.DrawFn, t: pa.DataType) -> str:
    ascii_only = draw(st.booleans())
    typed: st.SearchStrategy[str]
    if pa.types.is_integer(t):
        typed = st.integers(-(2**70), 2**70).map(str)
    elif pa.types.is_floating(t):
        typed = st.one_of(
            st.floats(allow_nan=False, allow_infinity=False).map(repr),
            st.integers(-(2**80), 2**80).map(str),
        )
    elif pa.types.is_decimal(t):
        typed = st.decimals(allow_nan=False, allow_infinity=False, places=draw(st.integers(0, 6)))
        typed = typed.map(str)
        typed = st.one_of(typed, typed.map(lambda s: quoted(s, True)))
    elif pa.types.is_date32(t):
        typed = st.dates().map(lambda d: quoted(d.isoformat(), True))
    elif pa.types.is_timestamp(t):
        typed = st.builds(
            lambda d, sep, digits, off: quoted(
                d.isoformat(sep=sep, timespec="microseconds")[: 19 + (digits and digits + 1)] + off,
                True,
            ),
            st.datetimes(),
            st.sampled_from(["T", " "]),
            st.sampled_from([0, 1, 3, 6]),
            st.sampled_from(["", "Z", "+05:30", "-08:00", "+00:00", "+0100"]),
        )
    elif pa.types.is_boolean(t):
        typed = st.sampled_from(["true", "false"])
    else:
        typed = st.text().map(lambda s: quoted(s, ascii_only))
    anything = st.one_of(
        st.sampled_from(EDGE_NUMBERS),
        st.sampled_from(EDGE_STRINGS).map(lambda s: quoted(s, ascii_only)),
        st.sampled_from(RAW_STRINGS + OTHER),
        st.text(max_size=8).map(lambda s: quoted(s, ascii_only)),
    )
    return draw(st.one_of(typed, typed, anything))


@st.composite
def value(draw: st.DrawFn, t: pa.DataType) -> str:
    if not pa.types.is_struct(t) or draw(st.integers(0, 9)) == 0:
        return draw(leaf(t)) if not pa.types.is_struct(t) else draw(leaf(pa.int64()))
    names = [f.name for f in t] + ["unknown", "zz", "é"]
    keys = draw(st.lists(st.sampled_from(names), max_size=len(names) + 2))
    ws = draw(st.sampled_from(["", " ", "\n  ", "\t"]))
    parts = []
    for key in keys:
        field_type = t.field(key).type if key in t.names else pa.string()
        k = quoted(key, draw(st.booleans()))
        parts.append(f"{k}{ws}:{ws}{draw(value(field_type))}")
    return "{" + ws + ("," + ws).join(parts) + ws + "}"


@st.composite
def row(draw: st.DrawFn) -> str | None:
    text = draw(value(OUT))
    damage = draw(st.integers(0, 11))
    if damage == 0 and text:
        return text[: draw(st.integers(0, len(text) - 1))]
    if damage == 1 and text:
        at = draw(st.integers(0, len(text)))
        return text[:at] + draw(st.sampled_from(list(',:{}[]"\\ x0-.e\n\x01é'))) + text[at:]
    if damage == 2:
        return draw(st.one_of(st.none(), st.text(max_size=20)))
    if damage == 3:
        return " \r\n" + text + "\n "
    return text


def normal(v: Any) -> Any:
    """Python values with NaN and the sign of zero made comparable."""
    if isinstance(v, float):
        return ("float", repr(v))
    if isinstance(v, dict):
        return {k: normal(x) for k, x in v.items()}
    if isinstance(v, list):
        return [normal(x) for x in v]
    return v


def reference(lines: list[str | None]) -> list[Any]:
    return normal(coerce_rows(lines, OUT).to_pylist())


def native(lines: list[str | None]) -> list[Any]:
    got = stats_parsed(pa.array(lines, pa.string()), SCHEMA, None)
    assert got.type == OUT
    return normal(got.to_pylist())


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(row(), min_size=1, max_size=12))
def test_native_matches_coerce_row(lines):
    assert native(lines) == reference(lines)


@pytest.mark.parametrize(
    "line",
    [
        '{"minValues": {"l": 1}, "minValues": 5}',
        '{"minValues": {"l": 1}, "minValues": {"i": 2}}',
        '{"min\\u0056alues": {"l": 3}}',
        '{"minValues": {"s": "\\ud800"}, "numRecords": 4}',
        '{"minValues": {"s": "\\ud83d\\ude00"}}',
        '{"minValues": {"f": 3.5e38, "d": 1e400, "l": 1e2}}',
        '{"minValues": {"d": 1' + "0" * 400 + '}, "numRecords": 1}',
        '{"minValues": {"d": -0, "f": -0.0}}',
        '{"minValues": {"dec": "1_000", "big": 1' + "0" * 37 + "}}",
        '{"minValues": {"ts": "0001-01-01T00:00:00+01:00"}}',
        '{"a": ' + "[" * 100 + "]" * 100 + ', "numRecords": 1}',
        '{"numRecords": 1}\n',
        '\ufeff{"numRecords": 1}',
        '{"numRecords": 1,}',
        '{"numRecords": 01}',
        '{"numRecords": 1.}',
        '{"numRecords": -}',
        '{"s": "tab\there"}',
        # exponents beyond what Decimal holds: infinity or zero in a float, null elsewhere
        '{"numRecords": 1e2345678901234567890123456789012345678}',
        '{"minValues": {"d": -1e99999999999999999999, "f": 0e99999999999999999999, "l": 1e-99999'
        '999999999999999, "dec": 1e99999999999999999999, "st": {"in": {"x": 1e9999999999999999'
        "9999}}}}",
    ],
)
def test_native_matches_coerce_row_on_edges(line):
    assert native([line]) == reference([line])


def test_native_handles_common_rows_itself():
    lines = [
        json.dumps(
            {
                "numRecords": i,
                "minValues": {
                    "l": -i,
                    "f": 1.5,
                    "d": i / 7,
                    "s": f"v{i}é",
                    "dt": "2024-02-29",
                    "ts": "2024-01-01T00:00:00.000Z",
                    "ntz": "2024-01-01 01:02:03.456",
                    "dec": "12.50",
                    "big": 10**30,
                    "st": {"a": 1, "in": {"x": 0.5, "t": "2024-01-01T10:00:00.000+02:00"}},
                },
                "nullCount": {"l": 0, "st": {"a": 0, "z": 1, "in": {"x": 0, "t": 0}}},
                "tightBounds": True,
            }
        )
        for i in range(100)
    ]
    text = pa.array(lines, pa.large_string())
    parsed = native_stats.parse(text, OUT)
    assert parsed is not None
    rows, unhandled = parsed
    assert unhandled == []
    assert normal(rows.to_pylist()) == reference(lines)


def test_native_parses_no_rows():
    parsed = native_stats.parse(pa.array([], pa.large_string()), OUT)
    assert parsed is not None
    rows, unhandled = parsed
    assert (len(rows), rows.type, unhandled) == (0, OUT, [])


def test_native_reads_short_decimals_as_python_does():
    # Up to 15 digits without an exponent take the parser's own float path; more digits, an
    # exponent or a long fraction take Rust's float parser. Both must round as Python does.
    rng = random.Random(11)

    def token() -> str:
        whole = str(rng.randrange(10 ** rng.randint(0, 17)))
        frac = "".join(rng.choice("0123456789") for _ in range(rng.randint(0, 17)))
        sign = rng.choice(["", "-"])
        return sign + whole + ("." + frac if frac else "")

    lines = [f'{{"minValues": {{"d": {t}, "f": {t}}}}}' for t in (token() for _ in range(3000))]
    assert native(lines) == reference(lines)


def test_native_joins_its_parts_in_order_on_a_slice_of_many_rows():
    # More rows than one thread's part, null strings, and a slice of a bigger array (offsets
    # that do not start at zero): the parts are joined in order.
    rng = random.Random(7)
    pool = [
        '{"numRecords": 1, "minValues": {"s": "a", "ok": true}}',
        '{"numRecords": 2, "minValues": {"s": "\\ud800"}}',
        '{"numRecords": 3, "maxValues": {"dec": 1.005}}',
        '{"numRecords": 4',
        None,
        '{"numRecords": 5, "minValues": {"ts": "2024-01-01T10"}}',
        '{"numRecords": 6, "nullCount": {"st": {"a": 2}}}',
    ]
    lines = [rng.choice(pool) for _ in range(12_000)]
    whole = pa.array(["{}"] * 5 + lines + ["{}"] * 3, pa.string())
    got = stats_parsed(whole.slice(5, len(lines)), SCHEMA, None)
    assert normal(got.to_pylist()) == reference(lines)
    assert got.null_count == sum(1 for s in lines if s in (None, pool[3]))
