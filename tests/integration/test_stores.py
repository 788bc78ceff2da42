"""deltakeeper's Storage against the real emulators (MinIO, Azurite, fake-gcs-server) and the
local disk: same answers everywhere, atomic create-only puts, and request counts as promised.
"""

from __future__ import annotations

import http.client
import random
import shutil
import threading
import time
import uuid
from collections import Counter
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from deltakeeper.delta.errors import StorageUnreachableError
from deltakeeper.delta.storage import (
    RANGE_BUFFER_BYTES,
    WHOLE_READ_BYTES,
    LocalStorage,
    ObjectStorage,
    Storage,
    open_storage,
)
from tests.support import stores

# store_binaries: the emulators are installed before the first test (see conftest.py).
pytestmark = [pytest.mark.integration, pytest.mark.usefixtures("store_binaries")]

STORES = ["local", "minio", "azurite", "fake_gcs"]
REMOTE = ["minio", "azurite", "fake_gcs"]


@dataclass
class Target:
    name: str
    root: str  # table-root URI, unique to the test
    options: dict[str, Any]
    upload: Callable[[Path, str], object]

    def open(self) -> Storage:
        return open_storage(self.root, self.options)


def _copy_folder(local: Path, dest: str) -> None:
    shutil.copytree(local, dest, dirs_exist_ok=True)


@pytest.fixture(params=STORES)
def target(request: pytest.FixtureRequest, tmp_path: Path) -> Target:
    name = request.param
    if name == "local":
        return Target(name, str(tmp_path / "table"), {}, _copy_folder)
    emu: stores.Emulator = request.getfixturevalue(name)
    root = emu.uri(f"t-{uuid.uuid4().hex[:12]}/table")
    return Target(name, root, dict(emu.storage_options), emu.upload_folder)


def v(n: int) -> str:
    return f"_delta_log/{n:020d}"


def write_files(root: Path, files: dict[str, bytes]) -> Path:
    for key, data in files.items():
        path = root / key
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(data)
    return root


def table_folder(root: Path) -> Path:
    """A table-shaped folder: commits, checkpoints, sub-folders in and around `_delta_log`."""
    files = {f"{v(n)}.json": b"{}\n" * (n + 1) for n in range(13)}
    files[f"{v(10)}.checkpoint.parquet"] = b"PAR1" * 10
    files["_delta_log/_last_checkpoint"] = b'{"version":10,"size":3}'
    files[f"_delta_log/_staged_commits/{v(13)[11:]}.3a0d65cd.json"] = b"{}"
    files["_delta_log/_sidecars/016ae953.parquet"] = b"PAR1"
    files[f"{v(3)}.crc"] = b"{}"
    for day in ("2024-01-01", "2024-01-02"):
        for i in range(3):
            files[f"day={day}/part-{i:05d}.parquet"] = b"x" * (100 + i)
    files["part-00000.parquet"] = b"y" * 7
    return write_files(root, files)


def entries(listing: list[Any]) -> list[tuple[str, int, bool]]:
    return [(f.key, f.size, f.is_dir) for f in listing]


# -- put_if_absent ----------------------------------------------------------------------------


def test_put_if_absent_refuses_a_second_writer(target: Target) -> None:
    s = target.open()
    key = f"{v(0)}.json"
    s.put_if_absent(key, b"first")
    with pytest.raises(FileExistsError):
        s.put_if_absent(key, b"second")
    assert s.read(key) == b"first"
    assert s.requests["put"] == 2  # no retries hidden behind a refusal


def test_put_if_absent_race_has_exactly_one_winner(target: Target) -> None:
    writers, rounds = 4, 8
    clients = [target.open() for _ in range(writers)]  # separate clients, like separate writers
    for n in range(rounds):
        key = f"{v(n)}.json"
        barrier = threading.Barrier(writers)

        def attempt(i: int, key: str = key, barrier: threading.Barrier = barrier) -> int | None:
            barrier.wait()
            try:
                clients[i].put_if_absent(key, f"writer {i}".encode())
            except FileExistsError:
                return None
            return i

        with ThreadPoolExecutor(writers) as pool:
            winners = [w for w in pool.map(attempt, range(writers)) if w is not None]
        assert len(winners) == 1, f"round {n}: winners {winners}"
        assert clients[0].read(key) == f"writer {winners[0]}".encode()


# -- list_from and walk -----------------------------------------------------------------------

LISTINGS = [
    ("_delta_log", ""),
    ("_delta_log", f"{v(5)}.json"),
    ("_delta_log", v(10)),  # a version prefix: inclusive of version 10's files
    ("_delta_log", f"{v(10)}.json"),
    ("_delta_log", f"{v(12)}.json"),
    ("_delta_log", "_delta_log/_sidecars"),
    ("_delta_log", "_delta_log/_staged_commits/x"),  # inside a sub-folder
    ("_delta_log", "_delta_log/~"),  # after everything
    ("_delta_log", "_delta"),  # before the folder
    ("_delta_log", "zzz"),  # after the folder
    ("", ""),
    ("/day=2024-01-01/", ""),
    ("missing", ""),
]


def test_list_from_gives_the_same_entries_as_local(target: Target, tmp_path: Path) -> None:
    folder = table_folder(tmp_path / "src")
    target.upload(folder, target.root)
    local, remote = LocalStorage(str(folder), str(folder)), target.open()
    for prefix, start_after in LISTINGS:
        expected = entries(local.list_from(prefix, start_after))
        assert entries(remote.list_from(prefix, start_after)) == expected, (prefix, start_after)
    assert sorted(entries(remote.walk())) == sorted(entries(local.walk()))
    assert sorted(entries(remote.walk("_delta_log"))) == sorted(entries(local.walk("_delta_log")))


def test_start_after(target: Target, tmp_path: Path) -> None:
    target.upload(table_folder(tmp_path / "src"), target.root)
    s = target.open()
    keys = [f.key for f in s.list_from("_delta_log", f"{v(10)}.json")]
    assert keys == [
        f"{v(11)}.json",
        f"{v(12)}.json",
        "_delta_log/_last_checkpoint",
        "_delta_log/_sidecars/",
        "_delta_log/_staged_commits/",
    ]
    keys = [f.key for f in s.list_from("_delta_log", v(10))]
    assert keys[:3] == [f"{v(10)}.checkpoint.parquet", f"{v(10)}.json", f"{v(11)}.json"]
    assert [f.key for f in s.list_from("_delta_log", "_delta_log/_sidecars/")] == [
        "_delta_log/_staged_commits/"
    ]
    dirs = [f for f in s.list_from("") if f.is_dir]
    assert [d.key for d in dirs] == ["_delta_log/", "day=2024-01-01/", "day=2024-01-02/"]
    assert all(d.size == 0 for d in dirs)


# -- delete_many ------------------------------------------------------------------------------

# S3 DeleteObjects takes 1000 keys, Azure's Blob Batch 256; obstore has no batch for GCS (its
# JSON batch API is not object_store's), so one DELETE a key there, ten at once.
# 1,001 keys: one more than an S3 DeleteObjects takes, four of Azure's batches of 256; GCS
# (fake-gcs-server) deletes one key a request.
DELETED = 1001
DELETE_COST = {"local": DELETED, "minio": 2, "fake_gcs": DELETED, "azurite": 4}


def served(target: Target, request: pytest.FixtureRequest) -> Callable[[], Counter[str]]:
    """The store's own count of the requests it served so far (nothing on the local disk)."""
    if target.name == "local":
        return Counter
    emu: stores.Emulator = request.getfixturevalue(target.name)
    return emu.requests


def test_delete_many_batches(
    target: Target, tmp_path: Path, request: pytest.FixtureRequest
) -> None:
    files = {f"part-{i:05d}.parquet": b"d" for i in range(DELETED)}
    files["keep.parquet"] = b"k"
    target.upload(write_files(tmp_path / "src", files), target.root)
    s = target.open()
    doomed = sorted(k for k in files if k != "keep.parquet")
    before = served(target, request)()
    assert s.delete_many(doomed) == DELETED
    assert s.requests["delete"] == DELETE_COST[target.name]
    if target.name != "local":  # what the store counted agrees
        assert (served(target, request)() - before)["delete"] == DELETE_COST[target.name]
    assert [f.key for f in s.list_from("")] == ["keep.parquet"]
    s.delete_many(doomed[:10])  # already gone: not an error
    assert s.delete_many([]) == 0


# What a listing of a 5,001-object folder costs, in list requests: after its last key, and
# from the start. S3 pages hold 1000 keys, GCS pages (as asked) 1000, Azure pages 5000: one key
# over a page for each. Azure starts at a key with the Blob API's new startFrom, which Azurite
# 3.37 honours.
LISTED = 5001
LIST_COST = {
    "local": (1, 1),
    "minio": (1, 6),
    "fake_gcs": (1, 6),
    "azurite": (1, 2),
}


def test_listing_cost_follows_what_is_new(target: Target, tmp_path: Path) -> None:
    n = LISTED
    files = {f"{v(i)}.json": b"{}" for i in range(n)}
    target.upload(write_files(tmp_path / "src", files), target.root)
    s = target.open()
    tail_cost, full_cost = LIST_COST[target.name]

    assert s.list_from("_delta_log", f"{v(n - 1)}.json") == []
    assert s.requests["list"] == tail_cost

    s.requests.clear()
    new = s.list_from("_delta_log", f"{v(n - 3)}.json")
    assert [f.key for f in new] == [f"{v(n - 2)}.json", f"{v(n - 1)}.json"]
    assert s.requests["list"] == tail_cost

    s.requests.clear()
    everything = s.list_from("_delta_log")
    assert len(everything) == n and everything[0].key == f"{v(0)}.json"
    assert s.requests["list"] == full_cost

    if target.name == "azurite":  # a service without startFrom: same answer, full listing
        s = target.open()
        s._start_from = False  # type: ignore[attr-defined]
        assert [f.key for f in s.list_from("_delta_log", f"{v(n - 3)}.json")] == [
            f.key for f in new
        ]
        assert s.requests["list"] == 2


# -- the other operations and their counts ----------------------------------------------------


def test_read_head_overwrite_count_one_request_each(target: Target) -> None:
    s = target.open()
    key = "_delta_log/_last_checkpoint"
    assert s.head(key) is None
    with pytest.raises(FileNotFoundError):
        s.read(key)
    s.overwrite(key, b"one")
    s.overwrite(key, b"three")
    info = s.head(key)
    assert info is not None and info.size == 5 and info.key == key and info.mtime_ms > 0
    assert s.read(key) == b"three"
    assert dict(s.requests) == {"head": 2, "read": 2, "put": 2}


def _big_parquet(rows: int) -> bytes:
    """An uncompressed parquet file of several MiB, row groups of 10,000 rows."""
    rng = random.Random(7)
    ids = [uuid.UUID(int=rng.getrandbits(128)).hex for _ in range(rows)]
    buf = pa.BufferOutputStream()
    table = pa.table({"a": pa.array(range(rows), pa.int64()), "b": ids})
    pq.write_table(table, buf, row_group_size=10_000, compression="none")
    return bytes(buf.getvalue().to_pybytes())


def test_open_input_reads_ranges_of_a_large_file(target: Target) -> None:
    """Above WHOLE_READ_BYTES a file is read by ranged requests (the footer, then the chunks
    of the columns read), and right; with the size given, no head request."""
    data = _big_parquet(200_000)
    assert len(data) > 3 * WHOLE_READ_BYTES
    s = target.open()
    key = "_delta_log/00000000000000000010.checkpoint.parquet"
    s.overwrite(key, data)
    s.requests.clear()
    column = pq.ParquetFile(s.open_input(key)).read(columns=["a"])["a"]
    assert column.to_pylist() == list(range(200_000))
    remote = target.name != "local"
    assert s.requests["head"] == (1 if remote else 0)
    # Object stores: ranged requests, one per read-ahead buffer at most (never the whole
    # object in one); local disk: one open.
    reads = s.requests["read"]
    most = -(-len(data) // RANGE_BUFFER_BYTES)
    assert (2 <= reads <= most) if remote else reads == 1, reads
    s.requests.clear()
    pf = pq.ParquetFile(s.open_input(key, len(data)))
    assert pf.metadata.num_rows == 200_000 and "head" not in s.requests
    whole = pq.read_table(pa.BufferReader(data), columns=["b"])["b"]
    assert pf.read_row_group(3, columns=["b"])["b"].to_pylist() == whole[30_000:40_000].to_pylist()
    with pytest.raises(FileNotFoundError):
        s.open_input("_delta_log/missing.parquet")


def test_an_upload_replaces_the_key_only_when_committed(
    target: Target, request: pytest.FixtureRequest
) -> None:
    """open_upload: written in pieces (S3 and GCS: a multipart upload, Azure: staged blocks,
    once a piece fills), invisible until commit, then the whole object; an aborted one leaves
    the old object as it was."""
    s = target.open()
    key = "_delta_log/00000000000000000010.checkpoint.parquet"
    s.overwrite(key, b"old")
    rng = random.Random(3)
    data = rng.randbytes(2 * ObjectStorage.PART_BYTES + 12345)  # two whole pieces and a bit
    for commit in (False, True):
        s.requests.clear()
        before = served(target, request)()
        upload = s.open_upload(key)
        for i in range(0, len(data), 1 << 20):
            upload.write(data[i : i + (1 << 20)])
        assert upload.size == len(data) and s.read(key) == b"old"
        if commit:
            upload.commit()
        else:
            upload.abort()
        expected = data if commit else b"old"
        info = s.head(key)
        assert s.read(key) == expected and info is not None and info.size == len(expected)
        if target.name in ("minio", "fake_gcs"):  # create, three parts, complete; or create,
            assert s.requests["put"] == (5 if commit else 3), dict(s.requests)  # two, abort
        if target.name == "azurite":  # three blocks, the block list; or two blocks staged
            assert s.requests["put"] == (4 if commit else 2), dict(s.requests)
        if target.name != "local":  # what the store counted agrees
            assert (served(target, request)() - before)["put"] == s.requests["put"]
        if target.name == "local":  # written aside and renamed over it: no temp file stays
            assert [f.key for f in s.list_from("_delta_log/", "")] == [key]
            assert s.requests["put"] == (1 if commit else 0), dict(s.requests)
    if target.name == "minio":
        minio: stores.Emulator = request.getfixturevalue("minio")
        assert not minio.fs.call_s3("list_multipart_uploads", Bucket=minio.bucket).get("Uploads")


# -- failures ---------------------------------------------------------------------------------


def _with_dead_endpoint(emu: stores.Emulator) -> dict[str, Any]:
    dead = f"127.0.0.1:{stores.free_port()}"  # nothing listens there
    live = emu.endpoint.split("://", 1)[1].split("/", 1)[0]
    return {
        k: v.replace(live, dead) if isinstance(v, str) else v
        for k, v in emu.storage_options.items()
    }


def _chain_text(e: BaseException) -> str:
    out, cur, seen = [], e, set()
    while cur is not None and id(cur) not in seen:
        seen.add(id(cur))
        out += [str(cur), repr(cur)]
        cur = cur.__cause__ or cur.__context__
    return "\n".join(out)


@pytest.mark.parametrize("name", REMOTE)
def test_unreachable_endpoint_names_the_uri_not_the_secret(
    name: str, request: pytest.FixtureRequest
) -> None:
    emu: stores.Emulator = request.getfixturevalue(name)
    uri = emu.uri("events")
    s = open_storage(uri, _with_dead_endpoint(emu))
    started = time.monotonic()
    for op in (lambda: s.list_from("_delta_log"), lambda: s.read("_delta_log/_last_checkpoint")):
        with pytest.raises(StorageUnreachableError) as caught:
            op()
        assert uri in str(caught.value)
        if emu.secret:
            assert emu.secret not in _chain_text(caught.value)
    assert time.monotonic() - started < 30  # backoff is bounded, libraries do not add theirs
    assert s.requests["list"] == 5  # every attempt counted


@pytest.mark.parametrize("name", ["minio", "azurite"])
def test_wrong_credentials_are_refused_without_echoing_them(
    name: str, request: pytest.FixtureRequest
) -> None:
    emu: stores.Emulator = request.getfixturevalue(name)
    wrong = "V3JvbmdLZXlXcm9uZ0tleVdyb25nS2V5V3JvbmdLZXk="
    options = {
        k: v.replace(emu.secret, wrong) if isinstance(v, str) else v
        for k, v in emu.storage_options.items()
    }
    s = open_storage(emu.uri("events"), options)
    with pytest.raises(StorageUnreachableError) as caught:
        s.list_from("_delta_log")
    assert wrong not in _chain_text(caught.value) and emu.secret not in str(caught.value)
    assert s.requests["list"] == 1  # a refusal is not retried


@pytest.mark.parametrize("name", REMOTE)
def test_missing_bucket_is_a_storage_error(name: str, request: pytest.FixtureRequest) -> None:
    emu: stores.Emulator = request.getfixturevalue(name)
    s = open_storage(emu.uri("events", bucket="no-such-bucket"), emu.storage_options)
    with pytest.raises(StorageUnreachableError, match="not found"):
        s.list_from("_delta_log")


# An endpoint that throttles: answers 503 to the first `failures` requests, then an empty
# listing in the store's own format. The clients are the real ones; nothing is patched.
EMPTY_LISTING = {
    "s3": (
        "application/xml",
        "<ListBucketResult><IsTruncated>false</IsTruncated></ListBucketResult>",
    ),
    "gs": (  # obstore speaks GCS's XML API
        "application/xml",
        "<ListBucketResult><IsTruncated>false</IsTruncated></ListBucketResult>",
    ),
    "az": (
        "application/xml",
        '<?xml version="1.0" encoding="utf-8"?><EnumerationResults><Blobs /><NextMarker />'
        "</EnumerationResults>",
    ),
}
SECRET = "c2VjcmV0LXNlY3JldC1zZWNyZXQtc2VjcmV0LXNlY3JldA=="


def _throttling_server(scheme: str, failures: int) -> tuple[ThreadingHTTPServer, list[int]]:
    seen: list[int] = []
    content_type, body = EMPTY_LISTING[scheme]

    class Handler(BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            seen.append(1)
            if len(seen) <= failures:
                self.send_response(503)
                self.send_header("Content-Length", "0")
                self.end_headers()
                return
            data = body.encode()
            self.send_response(200)
            self.send_header("Content-Type", content_type)
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        def log_message(self, *args: object) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    return server, seen


def _options(scheme: str, endpoint: str) -> dict[str, Any]:
    if scheme == "s3":
        return {"endpoint_url": endpoint, "key": "deltakeeper", "secret": SECRET}
    if scheme == "gs":
        return {"endpoint_url": endpoint, "token": "anon"}
    return {
        "connection_string": f"DefaultEndpointsProtocol=http;AccountName=acct;"
        f"AccountKey={SECRET};BlobEndpoint={endpoint}/acct;"
    }


@pytest.mark.parametrize("scheme", ["s3", "gs", "az"])
@pytest.mark.parametrize("failures", [2, 99])
def test_throttling_is_retried_with_backoff_and_counted(scheme: str, failures: int) -> None:
    server, seen = _throttling_server(scheme, failures)
    try:
        endpoint = f"http://127.0.0.1:{server.server_address[1]}"
        s = open_storage(f"{scheme}://lake/events", _options(scheme, endpoint))
        if failures < 5:
            assert s.list_from("_delta_log", f"{v(3)}.json") == []
        else:
            with pytest.raises(StorageUnreachableError, match="HTTP 503") as caught:
                s.list_from("_delta_log")
            assert SECRET not in _chain_text(caught.value)
        assert s.requests["list"] == len(seen) == min(failures + 1, 5)
    finally:
        server.shutdown()
        server.server_close()


def _lossy_proxy(
    target: str,
    lose: Callable[[str, str], bool],
    keep_host: bool = False,
    hold: Callable[[str, str, Any], None] | None = None,
) -> ThreadingHTTPServer:
    """Forwards every request to `target`; when `lose(method, path)`, the request is done but
    its answer is replaced by a 503, as when a response is lost after the write happened.
    `keep_host`: forward the Host header as sent (S3 signs it). `hold(method, path, headers)`
    runs before a request is forwarded (it may wait)."""
    host, port = target.split("://", 1)[1].split("/", 1)[0].split(":")

    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def forward(self) -> None:
            if hold is not None:
                hold(self.command, self.path, self.headers)
            body = self.rfile.read(int(self.headers.get("Content-Length") or 0))
            skip = (
                ("connection", "content-length")
                if keep_host
                else ("host", "connection", "content-length")
            )
            headers = {k: v for k, v in self.headers.items() if k.lower() not in skip}
            conn = http.client.HTTPConnection(host, int(port), timeout=30)
            conn.request(self.command, self.path, body=body, headers=headers)
            resp = conn.getresponse()
            data, status = resp.read(), resp.status
            conn.close()
            if lose(self.command, self.path):
                data, status = b"", 503
            self.send_response(status)
            for k, val in resp.getheaders():
                if k.lower() not in ("transfer-encoding", "connection", "content-length"):
                    self.send_header(k, val)
            head = self.command == "HEAD"  # no body, but the object's length
            self.send_header(
                "Content-Length", resp.getheader("Content-Length", "0") if head else str(len(data))
            )
            self.end_headers()
            self.wfile.write(data)

        do_GET = do_HEAD = do_POST = do_PUT = do_DELETE = forward

        def log_message(self, *args: object) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    return server


def test_put_if_absent_retry_recognises_its_own_lost_write(fake_gcs: stores.Emulator) -> None:
    lost: list[str] = []

    def lose_first_upload_of_each_key(method: str, path: str) -> bool:
        if method == "PUT" and path not in lost:  # the XML API's upload
            lost.append(path)
            return True
        return False

    proxy = _lossy_proxy(fake_gcs.endpoint, lose_first_upload_of_each_key)
    try:
        endpoint = f"http://127.0.0.1:{proxy.server_address[1]}"
        options = {**fake_gcs.storage_options, "endpoint_url": endpoint}
        s = open_storage(fake_gcs.uri(f"t-{uuid.uuid4().hex[:12]}/table"), options)
        key = f"{v(0)}.json"
        s.put_if_absent(key, b"mine")  # written, answer lost, retried: 412, and it is ours
        assert dict(s.requests) == {"put": 2, "read": 1}
        assert s.read(key) == b"mine"
        lost.clear()
        with pytest.raises(FileExistsError):  # someone else's commit stays a conflict
            s.put_if_absent(key, b"theirs")
    finally:
        proxy.shutdown()
        proxy.server_close()


def test_minio_takes_unsigned_payloads(minio: stores.Emulator) -> None:
    """What an https endpoint gets by default (UNSIGNED-PAYLOAD), asked for over HTTP: a
    create, a multipart upload and its read back all work, and no body was hashed."""
    signed: list[str] = []

    def note(method: str, path: str, headers: Any) -> None:
        if method in ("PUT", "POST"):
            signed.append(headers.get("x-amz-content-sha256", ""))

    proxy = _lossy_proxy(minio.endpoint, lambda m, p: False, keep_host=True, hold=note)
    try:
        endpoint = f"http://127.0.0.1:{proxy.server_address[1]}"
        options = {
            **minio.storage_options,
            "endpoint_url": endpoint,
            "aws_unsigned_payload": "true",
        }
        s = open_storage(minio.uri(f"t-{uuid.uuid4().hex[:12]}/table"), options)
        s.put_if_absent(f"{v(0)}.json", b"first")
        with pytest.raises(FileExistsError):
            s.put_if_absent(f"{v(0)}.json", b"second")
        data = random.Random(7).randbytes(ObjectStorage.PART_BYTES + 99)
        upload = s.open_upload(f"{v(0)}.checkpoint.parquet")
        upload.write(data)
        upload.commit()
        assert s.read(f"{v(0)}.json") == b"first"
        assert s.read(f"{v(0)}.checkpoint.parquet") == data
    finally:
        proxy.shutdown()
        proxy.server_close()
    # two creates, the multipart's start, two parts, the completion
    assert signed == ["UNSIGNED-PAYLOAD"] * 6, signed


def test_the_next_part_fills_while_a_part_is_in_flight(minio: stores.Emulator) -> None:
    """A part on its way does not stop the writer: the bytes of the next part are taken
    while the store has not answered the first (the checkpoint writer keeps going), and an
    abort then waits for the part in flight, so the store counts what was counted here."""
    landed = threading.Event()

    def hold_first_part(method: str, path: str, _headers: Any) -> None:
        if method == "PUT" and "partNumber=1&" in path + "&":
            landed.wait(30)

    proxy = _lossy_proxy(minio.endpoint, lambda m, p: False, keep_host=True, hold=hold_first_part)
    try:
        endpoint = f"http://127.0.0.1:{proxy.server_address[1]}"
        options = {**minio.storage_options, "endpoint_url": endpoint}
        s = open_storage(minio.uri(f"t-{uuid.uuid4().hex[:12]}/table"), options)
        key = f"{v(10)}.checkpoint.parquet"
        data = random.Random(6).randbytes(ObjectStorage.PART_BYTES + (1 << 20))
        for commit in (False, True):
            s.requests.clear()
            landed.clear()
            before = minio.requests()
            upload = s.open_upload(key)
            upload.write(data[: ObjectStorage.PART_BYTES])  # the first part goes, and is held
            rest = threading.Thread(target=upload.write, args=(data[ObjectStorage.PART_BYTES :],))
            rest.start()
            rest.join(10)
            assert not rest.is_alive(), "the writer waited for the part in flight"
            landed.set()
            if commit:
                upload.commit()
            else:
                upload.abort()
            served = minio.requests() - before
            # create, the first part, then the last part and the completion, or the abort
            assert dict(s.requests) == ({"put": 4} if commit else {"put": 2, "delete": 1})
            assert served == s.requests, served
            assert (s.head(key) is not None) == commit
        assert s.read(key) == data
    finally:
        landed.set()
        proxy.shutdown()
        proxy.server_close()


def test_a_failed_part_fails_the_commit_and_the_abort_drops_the_upload(
    minio: stores.Emulator,
) -> None:
    """A part whose answer is lost fails the write after it, here the commit's; the upload is
    still there to abort, and the abort leaves nothing behind."""
    proxy = _lossy_proxy(
        minio.endpoint, lambda m, p: m == "PUT" and "partNumber=1&" in p + "&", keep_host=True
    )
    try:
        endpoint = f"http://127.0.0.1:{proxy.server_address[1]}"
        options = {**minio.storage_options, "endpoint_url": endpoint}
        root = f"t-{uuid.uuid4().hex[:12]}/table"
        s = open_storage(minio.uri(root), options)
        key = f"{v(10)}.checkpoint.parquet"
        upload = s.open_upload(key)
        upload.write(random.Random(8).randbytes(ObjectStorage.PART_BYTES + 1000))
        with pytest.raises(StorageUnreachableError, match="503"):
            upload.commit()
        upload.abort()
        assert s.head(key) is None
        # (MinIO takes a prefix here only when it is a whole key)
        uploads = minio.fs.call_s3("list_multipart_uploads", Bucket=minio.bucket)
        left = [u["Key"] for u in uploads.get("Uploads", []) if u["Key"].startswith(root + "/")]
        assert not left, left
    finally:
        proxy.shutdown()
        proxy.server_close()


def test_multipart_completion_whose_answer_is_lost_is_recognised(minio: stores.Emulator) -> None:
    """The completion is done but its answer lost: the retry finds no upload (404), and the
    object there has the size sent, so the overwrite succeeded."""
    lost: list[str] = []

    def lose_first_completion(method: str, path: str) -> bool:
        if method == "POST" and "uploadId=" in path and not lost:
            lost.append(path)
            return True
        return False

    proxy = _lossy_proxy(minio.endpoint, lose_first_completion, keep_host=True)
    try:
        endpoint = f"http://127.0.0.1:{proxy.server_address[1]}"
        options = {**minio.storage_options, "endpoint_url": endpoint}
        s = open_storage(minio.uri(f"t-{uuid.uuid4().hex[:12]}/table"), options)
        key = f"{v(10)}.checkpoint.parquet"
        data = random.Random(5).randbytes(ObjectStorage.PART_BYTES + 1)
        upload = s.open_upload(key)
        upload.write(data)
        upload.commit()
        assert lost, "the completion went through the proxy"
        # create, two parts (obstore cuts them at PART_BYTES), the completion (its answer lost:
        # obstore's writer cannot send it again), the head that recognises it
        assert dict(s.requests) == {"put": 4, "head": 1}, dict(s.requests)
        assert s.read(key) == data
    finally:
        proxy.shutdown()
        proxy.server_close()
