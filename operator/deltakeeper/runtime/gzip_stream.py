"""One gzip stream from pieces compressed apart, so a piece can be kept and sent again.

Each piece is raw deflate blocks from a compressor of its own, ended by a full flush: it is
byte-aligned, refers to nothing before it, and does not end the stream, so pieces back to back
are one deflate stream. `HEADER`, the pieces, then `trailer` make a single gzip member, which
every gzip reader reads whole (curl reads only the first of several members).

The trailer's CRC-32 is that of the whole text, which is not kept: it is combined from the
pieces' own CRCs. Appending n bytes to a text multiplies its CRC by x^(8n) modulo the CRC's
polynomial (in GF(2)), so each piece keeps that factor (`Piece.shift`) and appending it costs
one multiplication (`_times`). This is the arithmetic of zlib's crc32_combine, which Python's
zlib does not expose.
"""

from __future__ import annotations

import functools
import struct
import zlib
from typing import NamedTuple

HEADER = b"\x1f\x8b\x08\x00\x00\x00\x00\x00\x00\xff"  # deflate, no name, no time, OS unknown
_END = zlib.compressobj(1, zlib.DEFLATED, -15).flush()  # an empty final block
_POLY = 0xEDB88320  # CRC-32's polynomial, bit-reversed as zlib computes it
_ONE = 1 << 31  # the polynomial 1 in that order


class Piece(NamedTuple):
    data: bytes  # raw deflate blocks, not final
    crc: int  # CRC-32 of the text
    size: int  # bytes of text
    shift: int  # x^(8 * size) mod the polynomial


def piece(text: bytes) -> Piece:
    packer = zlib.compressobj(1, zlib.DEFLATED, -15)
    data = packer.compress(text) + packer.flush(zlib.Z_FULL_FLUSH)
    return Piece(data, zlib.crc32(text), len(text), _x8n(len(text)))


class Sum(NamedTuple):
    """The CRC-32 and length of the text of pieces in a row."""

    crc: int = 0
    size: int = 0

    def plus(self, p: Piece) -> Sum:
        return Sum(_times(p.shift, self.crc) ^ p.crc, self.size + p.size)

    def then(self, other: Sum) -> Sum:
        """The text of `self` then that of `other`."""
        return Sum(_times(_x8n(other.size), self.crc) ^ other.crc, self.size + other.size)


def trailer(total: Sum) -> bytes:
    return _END + struct.pack("<II", total.crc, total.size & 0xFFFFFFFF)


def _times(a: int, b: int) -> int:
    """a * b modulo the polynomial; `a` must not be 0 (the powers of x never are)."""
    m, p = _ONE, 0
    while True:
        if a & m:
            p ^= b
            if not a & (m - 1):
                return p
        m >>= 1
        b = (b >> 1) ^ _POLY if b & 1 else b >> 1


def _squares() -> tuple[int, ...]:
    """x^(2^k) for k in 0..31."""
    out, p = [], _ONE >> 1  # x
    for _ in range(32):
        out.append(p)
        p = _times(p, p)
    return tuple(out)


_X2K = _squares()


@functools.lru_cache(maxsize=8192)  # a family's pieces are often the same size
def _x8n(n: int) -> int:
    """x^(8n): the factor n bytes appended multiply a CRC by."""
    p, k = _ONE, 3  # 8n = n * 2^3
    while n:
        if n & 1:
            p = _times(_X2K[k & 31], p)
        n >>= 1
        k += 1
    return p
