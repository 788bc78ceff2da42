"""delta/spark_hash.py: Spark's hash() of strings and pmod, as Delta Spark computes them."""

from __future__ import annotations

import pyarrow as pa
from hypothesis import given, settings
from hypothesis import strategies as st

from deltakeeper.delta.spark_hash import SEED, hash_strings, pmod

# Values Delta Spark 4.4 / Spark 4.2 returned for `SELECT hash(s)` on this machine.
SPARK_HASHES = {
    "": 142593372,
    "a": 1485273170,
    "ab": -97053317,
    "abc": 1322437556,
    "abcd": -396302900,
    "abcde": 814637928,
    "é": 2119106806,
    "x" * 1001: -1536256584,
    "date=2020-01-01/part-0001%20x.parquet": 1793442308,
}


def _reference(s: str) -> int:
    """Spark's Murmur3_x86_32.hashUnsafeBytes written out plainly, one string at a time."""

    def rotl(x: int, r: int) -> int:
        return ((x << r) | (x >> (32 - r))) & 0xFFFFFFFF

    def mix(h: int, k: int) -> int:
        k = rotl((k * 0xCC9E2D51) & 0xFFFFFFFF, 15) * 0x1B873593 & 0xFFFFFFFF
        return (rotl(h ^ k, 13) * 5 + 0xE6546B64) & 0xFFFFFFFF

    b = s.encode()
    h, whole = SEED, len(b) - len(b) % 4
    for i in range(0, whole, 4):
        h = mix(h, int.from_bytes(b[i : i + 4], "little"))
    for byte in b[whole:]:
        h = mix(h, (byte - 256 if byte >= 128 else byte) & 0xFFFFFFFF)
    h ^= len(b)
    for shift, mult in ((16, 0x85EBCA6B), (13, 0xC2B2AE35)):
        h = ((h ^ (h >> shift)) * mult) & 0xFFFFFFFF
    h ^= h >> 16
    return h - (1 << 32) if h >= 1 << 31 else h


def test_hash_matches_the_values_spark_returned():
    got = hash_strings(pa.array([*SPARK_HASHES, None])).to_pylist()
    assert got == [*SPARK_HASHES.values(), SEED]


@settings(max_examples=50, deadline=None)
@given(st.lists(st.text(max_size=80), min_size=1, max_size=60))
def test_vectorised_hash_equals_the_plain_one(values):
    assert hash_strings(pa.array(values, pa.string())).to_pylist() == [
        _reference(v) for v in values
    ]


def test_pmod_is_never_negative():
    assert pmod(pa.array([-7, 7, 0, -1, 42, -(2**31)], pa.int32()), 5).to_pylist() == [
        3,
        2,
        0,
        4,
        2,
        2,
    ]
