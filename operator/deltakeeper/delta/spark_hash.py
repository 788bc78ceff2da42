"""Spark's `hash()` (Murmur3 x86_32, seed 42) of strings and `pmod`, vectorised with Arrow.

Multi-part checkpoints and V2 sidecars are clustered the way Delta Spark clusters them:
`repartition(n, coalesce(add.path, remove.path))`, i.e. part = pmod(hash(path), n). Spark's
string hash differs from textbook Murmur3 in its tail: each of the last `len % 4` bytes is
mixed on its own, as a sign-extended int. A null key hashes to the seed itself.

Everything runs on uint32 Arrow arrays (Arrow's integer multiply wraps, as Java's does). Rows
are ordered by length once so that each 4-byte round touches only the rows still that long.
"""

from __future__ import annotations

import pyarrow as pa
import pyarrow.compute as pc

SEED = 42
_U32 = pa.uint32()
_C1 = pa.scalar(0xCC9E2D51, _U32)
_C2 = pa.scalar(0x1B873593, _U32)


def _u32(v: int) -> pa.Scalar:
    return pa.scalar(v & 0xFFFFFFFF, _U32)


def _rotl(x: pa.Array, r: int) -> pa.Array:
    return pc.bit_wise_or(pc.shift_left(x, _u32(r)), pc.shift_right(x, _u32(32 - r)))


def _mix_k1(k1: pa.Array) -> pa.Array:
    return pc.multiply(_rotl(pc.multiply(k1, _C1), 15), _C2)


def _mix_h1(h1: pa.Array, k1: pa.Array) -> pa.Array:
    h1 = _rotl(pc.bit_wise_xor(h1, k1), 13)
    return pc.add(pc.multiply(h1, _u32(5)), _u32(0xE6546B64))


def _fmix(h1: pa.Array, length: pa.Array) -> pa.Array:
    h1 = pc.bit_wise_xor(h1, length)
    h1 = pc.bit_wise_xor(h1, pc.shift_right(h1, _u32(16)))
    h1 = pc.multiply(h1, _u32(0x85EBCA6B))
    h1 = pc.bit_wise_xor(h1, pc.shift_right(h1, _u32(13)))
    h1 = pc.multiply(h1, _u32(0xC2B2AE35))
    return pc.bit_wise_xor(h1, pc.shift_right(h1, _u32(16)))


def _bytes_at(data: pa.Array, index: pa.Array) -> pa.Array:
    return pc.cast(pc.take(data, index), _U32)


def _word_at(data: pa.Array, start: pa.Array) -> pa.Array:
    """The little-endian uint32 at byte offsets `start`."""
    word = _bytes_at(data, start)
    for j in (1, 2, 3):
        byte = _bytes_at(data, pc.add(start, pa.scalar(j, pa.int64())))
        word = pc.bit_wise_or(word, pc.shift_left(byte, _u32(8 * j)))
    return word


def hash_strings(values: pa.Array | pa.ChunkedArray) -> pa.Array:
    """Spark's `hash(value)` (an int32) for each string; nulls hash to the seed."""
    arr = _large_strings(values)
    n = len(arr)
    if n == 0:
        return pa.array([], pa.int32())
    data = pa.Array.from_buffers(pa.uint8(), _data_len(arr), [None, arr.buffers()[2]])
    offsets = pa.Array.from_buffers(pa.int64(), n + 1, [None, arr.buffers()[1]], offset=arr.offset)
    starts = offsets.slice(0, n)
    lengths = pc.fill_null(pc.binary_length(arr), 0)
    if len(data):
        h = _tail(data, starts, lengths, _blocks(data, starts, lengths))
    else:
        h = pa.repeat(_u32(SEED), n)
    h = _fmix(h, pc.cast(lengths, _U32))
    h = pc.if_else(pc.is_null(arr), _u32(SEED), h)
    return pc.cast(h, pa.int32(), safe=False)


def _large_strings(values: pa.Array | pa.ChunkedArray) -> pa.Array:
    if isinstance(values, pa.ChunkedArray):
        values = values.combine_chunks() if values.num_chunks else pa.array([], values.type)
    return pc.cast(values, pa.large_binary())


def _data_len(arr: pa.Array) -> int:
    buf = arr.buffers()[2]
    return buf.size if buf is not None else 0


def _blocks(data: pa.Array, starts: pa.Array, lengths: pa.Array) -> pa.Array:
    """h1 after all whole 4-byte blocks, rows visited longest first."""
    n = len(starts)
    nblocks = pc.divide(lengths, pa.scalar(4, pa.int64()))
    order = pc.sort_indices(nblocks, sort_keys=[("x", "descending")]) if n > 1 else None
    if order is not None:
        nblocks, starts = pc.take(nblocks, order), pc.take(starts, order)
    counts = nblocks.to_pylist()  # descending: rows still active in round i are a prefix
    active = pa.repeat(_u32(SEED), n) if n else pa.array([], _U32)
    done: list[pa.Array] = []
    i = 0
    while len(active):
        k = _still_active(counts, i, len(active))
        if k < len(active):
            done.append(active.slice(k))
            active = active.slice(0, k)
        if k == 0:
            break
        word = _word_at(data, pc.add(starts.slice(0, k), pa.scalar(4 * i, pa.int64())))
        active = _mix_h1(active, _mix_k1(word))
        i += 1
    sorted_h = pa.concat_arrays([active, *reversed(done)])
    if order is None:
        return sorted_h
    return pc.take(sorted_h, pc.sort_indices(order))


def _still_active(counts: list[int], i: int, hi: int) -> int:
    """How many leading entries of the descending `counts[:hi]` exceed i."""
    lo = 0
    while lo < hi:
        mid = (lo + hi) // 2
        if counts[mid] > i:
            lo = mid + 1
        else:
            hi = mid
    return lo


def _tail(data: pa.Array, starts: pa.Array, lengths: pa.Array, h: pa.Array) -> pa.Array:
    """Spark mixes each trailing byte alone, sign-extended to 32 bits."""
    rem = pc.bit_wise_and(lengths, pa.scalar(3, pa.int64()))
    aligned = pc.add(starts, pc.subtract(lengths, rem))
    last = pa.scalar(len(data) - 1, pa.int64())
    for j in range(3):
        has = pc.greater(rem, pa.scalar(j, pa.int64()))
        if not pc.any(has).as_py():
            break
        index = pc.min_element_wise(pc.add(aligned, pa.scalar(j, pa.int64())), last)
        byte = _bytes_at(data, index)
        signed = pc.if_else(
            pc.greater_equal(byte, _u32(128)), pc.bit_wise_or(byte, _u32(0xFFFFFF00)), byte
        )
        h = pc.if_else(has, _mix_h1(h, _mix_k1(signed)), h)
    return h


def pmod(hashes: pa.Array, n: int) -> pa.Array:
    """Spark's pmod(hash, n): a part index in [0, n)."""
    wide = pc.cast(hashes, pa.int64())
    m = pa.scalar(n, pa.int64())
    return pc.cast(_mod(pc.add(_mod(wide, m), m), m), pa.int32())


def _mod(a: pa.Array, m: pa.Scalar) -> pa.Array:
    # Arrow has no modulo kernel; a - trunc(a / m) * m is the Java remainder.
    return pc.subtract(a, pc.multiply(pc.divide(a, m), m))


def hash_string(value: str | None) -> int:
    """Spark's hash of one string (for tests and single keys)."""
    return int(hash_strings(pa.array([value], pa.string()))[0].as_py())
