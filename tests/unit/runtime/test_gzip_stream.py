"""runtime/gzip_stream.py: pieces compressed apart make one gzip member, CRC combined."""

from __future__ import annotations

import gzip
import random
import zlib

from deltakeeper.runtime import gzip_stream
from deltakeeper.runtime.gzip_stream import Sum


def _texts(seed: int) -> list[bytes]:
    rng = random.Random(seed)
    sizes = [0, 1, 7, 65_536, 70_001, *(rng.randrange(0, 9_000) for _ in range(60))]
    rng.shuffle(sizes)
    return [bytes(rng.choice(b'metric{a="b"} 1.0\n') for _ in range(n)) for n in sizes]


def test_pieces_back_to_back_are_one_gzip_member_of_the_whole_text() -> None:
    texts = _texts(1)
    pieces = [gzip_stream.piece(t) for t in texts]
    total = Sum()
    for p in pieces:
        total = total.plus(p)
    whole = b"".join(texts)
    assert total == Sum(zlib.crc32(whole), len(whole))
    body = gzip_stream.HEADER + b"".join(p.data for p in pieces) + gzip_stream.trailer(total)
    reader = zlib.decompressobj(31)  # one member, its CRC and length checked
    assert reader.decompress(body) == whole
    assert reader.eof and not reader.unused_data
    assert gzip.decompress(body) == whole


def test_sums_of_runs_join_as_the_run_of_both() -> None:
    texts = _texts(2)
    pieces = [gzip_stream.piece(t) for t in texts]
    whole = b"".join(texts)
    for cut in (0, 1, 30, len(pieces)):
        first, second = Sum(), Sum()
        for p in pieces[:cut]:
            first = first.plus(p)
        for p in pieces[cut:]:
            second = second.plus(p)
        assert first.then(second) == Sum(zlib.crc32(whole), len(whole)), cut


def test_a_wrong_crc_is_caught_by_a_reader() -> None:
    """The trailer is checked: a CRC combined wrongly would fail every scrape."""
    piece = gzip_stream.piece(b"deltakeeper_table_version 1.0\n")
    body = gzip_stream.HEADER + piece.data + gzip_stream.trailer(Sum(piece.crc ^ 1, piece.size))
    try:
        gzip.decompress(body)
    except gzip.BadGzipFile as e:
        assert "CRC" in str(e)
    else:
        raise AssertionError("a wrong CRC was read without complaint")
