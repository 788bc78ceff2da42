"""delta/storage/objects.py: RangedFile, the object stores' open_input: seekable, ranged, bounded.

A parquet read fetches only the footer and the columns it reads."""

from __future__ import annotations

import io
import threading
import time
from concurrent.futures import ThreadPoolExecutor

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from deltakeeper.delta.storage import RangedFile
from deltakeeper.delta.storage.objects import RANGE_BUFFER_BYTES, RANGE_REQUEST_BYTES
from deltakeeper.delta.storage.s3 import S3Storage


def _parquet(rows: int) -> bytes:
    table = pa.table({"a": list(range(rows)), "b": [str(i) * 8 for i in range(rows)]})
    buf = io.BytesIO()
    pq.write_table(table, buf, row_group_size=rows // 4)
    return buf.getvalue()


def test_ranged_file_fetches_the_footer_and_one_column_not_the_whole_file():
    data = _parquet(400_000)
    fetched: list[tuple[int, int]] = []

    def fetch(start: int, end: int) -> bytes:
        fetched.append((start, end))
        return data[start:end]

    raw = RangedFile(fetch, len(data))
    pf = pq.ParquetFile(pa.PythonFile(io.BufferedReader(raw, 1 << 16), mode="r"))
    assert sum(b.num_rows for b in pf.iter_batches(columns=["a"])) == 400_000
    assert sum(end - start for start, end in fetched) < len(data) / 2


def test_a_long_read_is_split_into_bounded_requests():
    data = bytes(range(256)) * (40 * 1024)  # 10 MiB
    fetched: list[tuple[int, int]] = []

    def fetch(start: int, end: int) -> bytes:
        fetched.append((start, end))
        return data[start:end]

    reader = io.BufferedReader(RangedFile(fetch, len(data)), RANGE_BUFFER_BYTES)
    reader.seek(100)
    assert reader.read(9 << 20) == data[100 : 100 + (9 << 20)]
    assert max(end - start for start, end in fetched) <= RANGE_REQUEST_BYTES
    assert len(fetched) == 3


class _Batches(S3Storage):
    """S3Storage whose delete requests are recorded (and the fourth fails) instead of sent."""

    DELETE_BATCH = 10
    DELETE_THREADS = 2

    def __init__(self) -> None:
        # keys given: a store without any would be told "no credentials" (tests/conftest.py)
        options = {"endpoint_url": "http://127.0.0.1:9", "key": "test", "secret": "test-secret"}
        super().__init__("s3://b/t", "b", "t", options)
        self.sent: list[list[str]] = []
        self.lock = threading.Lock()

    def _delete_batch(self, keys: list[str]) -> int:
        self.requests["delete"] += 1  # on a fork: its own counter
        with self.lock:
            self.sent.append(keys)
        if keys[0] == "k030":
            raise OSError("refused")
        time.sleep(0.01)
        return len(keys)


def test_deletes_go_in_key_order_a_few_batches_at_once_and_stop_at_a_failure():
    s = _Batches()
    keys = [f"k{i:03d}" for i in range(100)]
    with pytest.raises(OSError, match="refused"):
        s.delete_many(keys)
    firsts = [batch[0] for batch in s.sent]
    assert sorted(firsts[:3]) == ["k000", "k010", "k020"]
    assert "k030" in firsts
    # Two at once: when k030 failed at most one more batch had been sent; none after it.
    assert len(s.sent) <= 5 and "k090" not in firsts
    assert s.requests["delete"] == len(s.sent)  # the forks' counts come back


def test_deletes_in_parallel_count_every_request():
    s = _Batches()
    keys = [f"x{i:03d}" for i in range(95)]
    assert s.delete_many(keys) == 95
    assert sorted(k for batch in s.sent for k in batch) == keys
    assert s.requests["delete"] == 10


def test_a_sequential_reader_gets_the_next_range_fetched_ahead_in_another_thread():
    data = bytes(range(256)) * (48 * 1024)  # 12 MiB
    fetched: list[tuple[int, int, str]] = []

    def fetch(start: int, end: int) -> bytes:
        fetched.append((start, end, threading.current_thread().name))
        return data[start:end]

    with ThreadPoolExecutor(1, thread_name_prefix="ahead") as pool:
        reader = io.BufferedReader(RangedFile(fetch, len(data), pool), RANGE_BUFFER_BYTES)
        got = b"".join(iter(lambda: reader.read(300_000), b""))
    assert got == data
    assert any(name.startswith("ahead") for _, _, name in fetched)
    assert max(end - start for start, end, _ in fetched) <= RANGE_REQUEST_BYTES
    # Every byte fetched once: nothing ahead was thrown away on a sequential read.
    assert sum(end - start for start, end, _ in fetched) == len(data)


def test_reading_ahead_stops_at_a_seek_and_a_failed_fetch_is_asked_again_in_the_reader():
    data = bytes(range(256)) * (32 * 1024)  # 8 MiB
    calls: list[tuple[int, int, str]] = []

    def fetch(start: int, end: int) -> bytes:
        ahead = threading.current_thread().name.startswith("ahead")
        calls.append((start, end, "ahead" if ahead else "reader"))
        if ahead:
            raise OSError("lost")
        return data[start:end]

    with ThreadPoolExecutor(1, thread_name_prefix="ahead") as pool:
        raw = RangedFile(fetch, len(data), pool)
        buf = bytearray(1 << 20)
        raw.seek(0)
        assert raw.readinto(buf) == 1 << 20  # first read: nothing ahead yet
        assert raw.readinto(buf) == 1 << 20 and bytes(buf) == data[1 << 20 : 2 << 20]
        assert raw.readinto(buf) == 1 << 20 and bytes(buf) == data[2 << 20 : 3 << 20]
        raw.seek(7 << 20)
        assert raw.readinto(buf) == 1 << 20 and bytes(buf) == data[7 << 20 :]
    # The range that failed ahead was fetched again by the reader; the read after the seek
    # was the reader's own and nothing was read ahead of it (it did not follow the one before).
    assert (2 << 20, 6 << 20, "ahead") in calls
    assert any(start == 2 << 20 and kind == "reader" for start, _, kind in calls)
    assert (7 << 20, 8 << 20, "reader") in calls
    assert not [c for c in calls if c[0] > 7 << 20]


def test_two_ranges_are_on_their_way_ahead_of_a_sequential_reader():
    data = bytes(range(256)) * (64 * 1024)  # 16 MiB
    on_the_way: list[int] = []
    both = threading.Barrier(2, timeout=10)  # breaks unless two fetches ahead run at once

    def fetch(start: int, end: int) -> bytes:
        if threading.current_thread().name.startswith("ahead"):
            on_the_way.append(start)
            if len(on_the_way) <= 2:
                both.wait()
        return data[start:end]

    with ThreadPoolExecutor(2, thread_name_prefix="ahead") as pool:
        reader = io.BufferedReader(RangedFile(fetch, len(data), pool), RANGE_BUFFER_BYTES)
        got = b"".join(iter(lambda: reader.read(300_000), b""))
    assert got == data
    assert on_the_way[:2] == [RANGE_BUFFER_BYTES * 2, RANGE_BUFFER_BYTES * 2 + RANGE_REQUEST_BYTES]


def test_after_going_back_reading_ahead_starts_at_the_reader_not_past_what_is_held():
    data = bytes(range(256)) * (64 * 1024)  # 16 MiB
    ahead: list[int] = []

    def fetch(start: int, end: int) -> bytes:
        if threading.current_thread().name.startswith("ahead"):
            ahead.append(start)
        return data[start:end]

    with ThreadPoolExecutor(2, thread_name_prefix="ahead") as pool:
        raw = RangedFile(fetch, len(data), pool)
        buf = bytearray(1 << 20)
        for _ in range(3):  # 0, 1 MiB (then ahead from 2 MiB), 2 MiB (from what came ahead)
            assert raw.readinto(buf) == 1 << 20
        assert ahead[0] == 2 << 20
        deadline = time.monotonic() + 10
        while len(ahead) < 3 and time.monotonic() < deadline:  # 2, 6 and 10 MiB have started
            time.sleep(0.01)
        raw.seek(0)
        half = bytearray(1 << 19)
        assert raw.readinto(half) == 1 << 19  # elsewhere: what was coming is dropped
        ahead.clear()
        assert raw.readinto(half) == 1 << 19 and bytes(half) == data[1 << 19 : 1 << 20]
        pool.shutdown(wait=True)
    assert ahead[0] == 1 << 20  # from the reader on, not from the end of the held range
