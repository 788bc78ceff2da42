"""What the object stores share, on obstore (Rust's object_store, the engine of delta-rs): one
store per bucket and options, key mapping, counted and retried requests, listings, ranged reads
(RangedFile) and streamed uploads.

obstore's own retries are off (`NO_RETRIES`): `with_retries` is the one retry point, so a count
is a request sent. What each call costs, and so what is counted:

- get, get_range, head, put (single, never multipart), delete of one key: one request each;
- a listing from a key: obstore's stream read one page (PAGE keys) at a time, one request each;
  a delimited listing (obstore collects every page): one request per PAGE entries it returned;
- a streamed upload: see StreamedUpload;
- a batch delete: one request per batch the store's API takes (S3 1000, Azure 256), else one
  per key, up to DELETE_THREADS at once (GCS).
"""

from __future__ import annotations

import contextlib
import io
import threading
from collections import OrderedDict, deque
from collections.abc import Callable, Iterable, Iterator, Mapping
from concurrent.futures import Executor, Future, ThreadPoolExecutor
from datetime import datetime
from typing import Any, TypeVar

import obstore as obs
import pyarrow as pa
from obstore.exceptions import UnknownConfigurationKeyError

from deltakeeper.delta import storage_options as opts
from deltakeeper.delta.errors import InvalidCredentialsError, InvalidInputError
from deltakeeper.delta.storage.base import FileInfo, Storage, Upload
from deltakeeper.delta.storage.retries import (
    Failure,
    classify,
    safe_uri,
    translate,
    with_retries,
)

T = TypeVar("T")

NO_RETRIES = {"max_retries": 0}

# Stores by (store, bucket, options): every table on one account and bucket shares one HTTP
# client and connection pool. Bounded, oldest dropped first (rotated keys).
_STORES: OrderedDict[tuple[str, str, str], Any] = OrderedDict()
_STORES_MAX = 256
_STORES_LOCK = threading.Lock()


def _store(kind: str, bucket: str, config: Mapping[str, Any], client: Mapping[str, Any]) -> Any:
    key = (kind, bucket, repr(sorted({**config, **client}.items())))
    with _STORES_LOCK:
        store = _STORES.get(key)
        if store is not None:
            _STORES.move_to_end(key)
            return store
    store = opts.build(kind, bucket, config, client_options=dict(client), retry_config=NO_RETRIES)
    with _STORES_LOCK:
        _STORES[key] = store
        if len(_STORES) > _STORES_MAX:
            _STORES.popitem(last=False)
    return store


def open_error(uri: str, e: Exception, given: Iterable[str] = ()) -> InvalidInputError:
    """A store obstore would not build from these options (`given` their keys, to name one as
    it was typed); never quotes a value."""
    where = safe_uri(uri)
    if isinstance(e, UnknownConfigurationKeyError):
        key = str(e).split("'")[1] if str(e).count("'") >= 2 else "?"
        key = next((k for k in given if k.lower() == key), key)
        return InvalidCredentialsError(
            f"deltakeeper does not know the storage option '{key}' for {where}; check its "
            "spelling against docs/storage.md (fsspec's or object_store's names)"
        )
    text = str(e).split("\n", 1)[0]
    if "Invalid Access Key" in text or "base64" in text.lower():
        return InvalidCredentialsError(
            f"cannot sign requests to {where}: the account key is not valid base64; "
            "check account_key (AZURE_STORAGE_ACCOUNT_KEY in a Secret)"
        )
    if "Duplicate key" in text:
        return InvalidInputError(
            f"cannot open {where}: {text.split(': ', 1)[-1]} (two spellings of one option); "
            "give each option once"
        )
    return InvalidCredentialsError(
        f"cannot open {where} with these storage options ({type(e).__name__}); check the "
        "option names and values against docs/storage.md"
    )


class ObjectStorage(Storage):
    """A table root in a bucket (an Azure container) of an object store, through obstore.

    Subclasses set the store's paging and batching, and may override the deletes."""

    KIND = ""
    PAGE = 1000  # keys in a listing page: what the store answers when not asked for another
    DELETE_BATCH = 1  # keys per delete request
    DELETE_THREADS = 4  # delete requests in flight (a batch each)
    PART_BYTES = 8 << 20  # a streamed upload's parts (S3 takes none below 5 MiB but the last)
    MULTIPART_CREATE = 1  # requests to start a multipart upload (Azure needs none)

    def __init__(self, uri: str, bucket: str, root: str, options: Mapping[str, Any]) -> None:
        super().__init__(uri)
        self._counting = threading.Lock()
        self.bucket = bucket
        self.root = root.strip("/")
        try:
            config, client = opts.obstore_config(self.KIND, opts.canonical(self.KIND, options))
            self.store = _store(self.KIND, bucket, config, client)
        except InvalidInputError:
            raise
        except Exception as e:  # the message may quote a value: only its type is shown
            raise open_error(uri, e, options) from None

    # -- keys ---------------------------------------------------------------------------------
    def _key(self, key: str) -> str:
        """The object name in the bucket for a table-relative key ('' gives the root folder)."""
        return f"{self.root}/{key}" if self.root else key

    def _rel(self, name: str) -> str:
        return name[len(self.root) + 1 :] if self.root else name

    def _prefix(self, folder: str) -> str | None:
        """obstore's prefix for a folder ('' or ending in '/'): it adds the '/' itself."""
        name = self._key(folder).rstrip("/")
        return name or None

    def _call(self, op: str, fn: Callable[[], T], key: str = "") -> T:
        """One request through `with_retries`, counting every attempt; errors name `key`."""

        def attempt() -> T:
            with self._counting:  # a read-ahead counts from its own thread
                self.requests[op] += 1
            return fn()

        return with_retries(self._where(key), op, attempt)

    def _where(self, key: str = "") -> str:
        return f"{self.uri.rstrip('/')}/{key}" if key else self.uri

    # -- listings -----------------------------------------------------------------------------
    def _list_from(self, folder: str, start_after: str) -> Iterable[FileInfo]:
        if not start_after:
            return self._delimited(folder)
        seen: set[str] = set()  # the quiet poll's path: lists, not generators
        out: list[FileInfo] = []
        for page in self._pages(folder, self._offset(start_after)):
            out += _children(folder, page, seen)
        return out

    def list_lazily(self, prefix: str) -> Iterator[FileInfo]:
        """As Storage's, page by page: from a listing of everything below the folder, its
        sub-folders given once each (object_store has no lazy delimited listing)."""
        folder = _folder(prefix)
        return self._collapsed(folder, self._pages(folder, None))

    def _offset(self, start_after: str) -> str | None:
        return self._key(start_after)

    def _walk(self, folder: str) -> Iterator[FileInfo]:
        for page in self._pages(folder, None):
            for info in _without_markers(page):
                if not info.key.endswith("/"):
                    yield info

    def _pages(self, folder: str, offset: str | None) -> Iterator[list[FileInfo]]:
        """Everything below `folder` after `offset` (a bucket key), a page per request. A page
        that fails is asked again from the last key seen."""
        pages = _Pages(self.store, self._prefix(folder), offset, self.PAGE)
        while True:
            chunk = self._call("list", pages.next, folder)
            if chunk is None:
                if pages.got:  # the end, known from the last page: no request was sent
                    self.requests["list"] -= 1
                return
            yield [self._meta(m) for m in chunk]
            if len(chunk) < self.PAGE:
                return

    def _delimited(self, folder: str) -> list[FileInfo]:
        """The direct children of `folder`: files, and sub-folders ending in '/'."""
        prefix = self._prefix(folder)
        found = self._call("list", lambda: obs.list_with_delimiter(self.store, prefix), folder)
        pages = -(-(len(found["objects"]) + len(found["common_prefixes"])) // self.PAGE)
        self.requests["list"] += max(pages, 1) - 1  # the call took one request a page
        files = [self._meta(m) for m in found["objects"]]
        dirs = [
            FileInfo(self._rel(p).rstrip("/") + "/", 0, 0, is_dir=True)
            for p in found["common_prefixes"]
        ]
        return files + dirs

    def _collapsed(self, folder: str, pages: Iterable[list[FileInfo]]) -> Iterator[FileInfo]:
        """Direct children of `folder` from a listing of everything below it, in its order."""
        seen: set[str] = set()
        for page in pages:
            yield from _children(folder, page, seen)

    def _meta(self, meta: Mapping[str, Any]) -> FileInfo:
        return FileInfo(self._rel(meta["path"]), int(meta["size"]), mtime_ms(meta["last_modified"]))

    # -- reads --------------------------------------------------------------------------------
    def _read(self, key: str) -> bytes:
        path = self._key(key)
        return self._call("read", lambda: bytes(obs.get(self.store, path).bytes()), key)

    def _read_range(self, key: str, start: int, end: int) -> Any:
        """Bytes `start` (inclusive) to `end` (exclusive) of `key`, one request, in obstore's
        buffer (not copied into a `bytes`)."""
        path = self._key(key)
        get = lambda: obs.get_range(self.store, path, start=start, end=end)  # noqa: E731
        return self._call("read", get, key)

    def _head(self, key: str) -> FileInfo | None:
        path = self._key(key)
        try:
            meta = self._call("head", lambda: obs.head(self.store, path), key)
        except FileNotFoundError:
            return None
        return FileInfo(key, int(meta["size"]), mtime_ms(meta["last_modified"]))

    def _open_input(self, key: str, size: int | None) -> pa.NativeFile:
        if size is None:
            info = self._head(key)
            if info is None:
                raise FileNotFoundError(f"{safe_uri(self.uri)}/{key}: not found (head)")
            size = info.size
        if size <= WHOLE_READ_BYTES:  # one request for the whole of a small file
            return pa.BufferReader(self._read(key))
        raw = RangedFile(lambda start, end: self._read_range(key, start, end), size, _ahead())
        return pa.PythonFile(io.BufferedReader(raw, RANGE_BUFFER_BYTES), mode="r")

    # -- writes -------------------------------------------------------------------------------
    def _put(self, key: str, data: bytes, mode: str) -> None:
        path = self._key(key)

        def put() -> None:
            obs.put(self.store, path, data, mode=mode, use_multipart=False)  # type: ignore[arg-type]

        self._call("put", put, key)

    def _put_if_absent(self, key: str, data: bytes) -> None:
        sent = self.requests["put"]
        try:
            self._put(key, data, "create")
        except FileExistsError:
            # A retried create can meet its own first attempt, done but not heard (a timeout,
            # a 5xx after the write). If what is there is what we sent, the create succeeded.
            if self.requests["put"] - sent > 1 and self._read(key) == data:
                return
            raise

    def _overwrite(self, key: str, data: bytes) -> None:
        self._put(key, data, "overwrite")

    def _open_upload(self, key: str) -> Upload:
        return StreamedUpload(self, key)

    def _delete_many(self, keys: list[str]) -> int:
        """Batches of DELETE_BATCH keys, DELETE_THREADS requests in flight, sent in key order:
        a failure stops what is not sent yet, so what is left is the newest keys and at most
        DELETE_THREADS batches partly deleted."""
        size = self.DELETE_BATCH
        batches = [keys[i : i + size] for i in range(0, len(keys), size)]
        threads = min(self.DELETE_THREADS, len(batches))
        if threads < 2:
            return sum(self._delete_batch(b) for b in batches)
        mine, failed = threading.local(), threading.Event()
        forks: list[ObjectStorage] = []

        def delete(batch: list[str]) -> int:
            if failed.is_set():
                return 0  # an earlier batch failed: its error is raised, nothing more is sent
            if not hasattr(mine, "fork"):
                mine.fork = self.fork()
                forks.append(mine.fork)  # list.append is atomic
            try:
                return int(mine.fork._delete_batch(batch))
            except BaseException:
                failed.set()
                raise

        pool = ThreadPoolExecutor(threads, thread_name_prefix="delete")
        try:
            return sum(pool.map(delete, batches))
        finally:
            pool.shutdown(wait=True, cancel_futures=True)
            for fork in forks:
                self.requests.update(fork.requests)

    def _delete_batch(self, keys: list[str]) -> int:
        """One batch request; a missing key is not an error (S3 reports it deleted)."""
        paths = [self._key(k) for k in keys]
        self._call("delete", lambda: obs.delete(self.store, paths))
        return len(keys)


def _folder(prefix: str) -> str:
    prefix = prefix.strip("/")
    return prefix + "/" if prefix else ""


def _children(folder: str, page: list[FileInfo], seen: set[str]) -> list[FileInfo]:
    """The direct children of `folder` in a page of everything below it: a file deeper down
    stands for its sub-folder, given once (`seen` holds those given so far)."""
    out = []
    start = len(folder)
    for info in page:
        slash = info.key.find("/", start)
        if slash < 0:
            out.append(info)
            continue
        sub = info.key[: slash + 1]
        if sub not in seen:
            seen.add(sub)
            out.append(FileInfo(sub, 0, 0, is_dir=True))
    return out


def _without_markers(page: list[FileInfo]) -> Iterator[FileInfo]:
    """Files of a recursive listing without empty "folder" objects ('a/b/', which obstore lists
    as a zero-byte 'a/b') that the next key shows to be folders."""
    for i, info in enumerate(page):
        after = page[i + 1].key if i + 1 < len(page) else ""
        if info.size == 0 and after.startswith(info.key + "/"):
            continue
        yield info


class _Pages:
    """obstore's listing stream read one page (`size` keys) per `next()`, None at its end. A
    failed page drops the stream; the next call starts a new one after the last key seen."""

    def __init__(self, store: Any, prefix: str | None, offset: str | None, size: int) -> None:
        self.store, self.prefix, self.last, self.size = store, prefix, offset, size
        self.stream: Any = None
        self.got = 0  # pages the current stream gave

    def next(self) -> list[Any] | None:
        if self.stream is None:
            self.stream = obs.list(self.store, self.prefix, offset=self.last, chunk_size=self.size)
            self.got = 0
        try:
            chunk = list(next(self.stream))
        except StopIteration:
            return None
        except Exception:
            self.stream = None
            raise
        self.got += 1
        self.last = chunk[-1]["path"]
        return chunk


WHOLE_READ_BYTES = 1 << 20  # a file this small is read in one request
RANGE_BUFFER_BYTES = 1 << 20  # reads ahead this far, so near column chunks share a request
# One request fetches at most this much: a 14 MiB column chunk in one response is held two or
# three times over by the HTTP client while it is read (+25% peak RSS on a 1M-file checkpoint).
RANGE_REQUEST_BYTES = 4 << 20
READ_AHEAD = 2  # ranges on their way ahead of a sequential reader


class RangedFile(io.RawIOBase):
    """A seekable, read-only file whose reads are ranged requests (`fetch(start, end)`, which
    returns bytes or any buffer).

    With `ahead` (an executor), a read that follows the one before keeps the next READ_AHEAD
    ranges on their way, so a sequential reader (a checkpoint's column chunks, a row group
    after another) decodes one range while the next ones arrive: one request at a time
    delivers less than the decoder takes."""

    def __init__(
        self, fetch: Callable[[int, int], Any], size: int, ahead: Executor | None = None
    ) -> None:
        self.fetch, self.size, self.pos = fetch, size, 0
        self.ahead = ahead
        self._end = -1  # where the last read ended
        self._coming: deque[tuple[int, int, Future[Any]]] = deque()  # (start, end, fetch)
        self._held: tuple[int, memoryview] = (0, memoryview(b""))  # fetched, not all read

    def readable(self) -> bool:
        return True

    def seekable(self) -> bool:
        return True

    def tell(self) -> int:
        return self.pos

    def seek(self, offset: int, whence: int = io.SEEK_SET) -> int:
        base = {io.SEEK_SET: 0, io.SEEK_CUR: self.pos, io.SEEK_END: self.size}[whence]
        self.pos = max(0, base + offset)
        return self.pos

    def readinto(self, buffer: Any) -> int:
        n = min(len(buffer), self.size - self.pos, RANGE_REQUEST_BYTES)
        if n <= 0:
            return 0
        sequential = self.pos == self._end
        data = self._from_ahead(self.pos, n)
        if data is None:
            data = memoryview(self.fetch(self.pos, self.pos + n))
        buffer[: len(data)] = data
        self.pos += len(data)
        self._end = self.pos
        if sequential:
            self._read_ahead()
        return len(data)

    def _from_ahead(self, start: int, n: int) -> memoryview | None:
        """Bytes from `start` out of what was fetched ahead, if it has them. Ranges that
        end before `start` are dropped; a read elsewhere drops them all."""
        while not self._holds(start) and self._coming:
            first, end, future = self._coming[0]
            if end <= start:  # passed by
                self._coming.popleft()
                continue
            if first > start:  # the reader went elsewhere
                self._coming.clear()
                break
            self._coming.popleft()
            try:
                self._held = (first, memoryview(future.result()))
            except Exception:  # asked again in the reader's thread, where errors are raised
                self._held = (first, memoryview(b""))
        if not self._holds(start):
            return None
        at, held = self._held
        return held[start - at : start - at + n]

    def _holds(self, start: int) -> bool:
        at, held = self._held
        return at <= start < at + len(held)

    def _read_ahead(self) -> None:
        if self.ahead is None:
            return
        at, held = self._held
        if self._coming:
            start = self._coming[-1][1]
        else:
            start = at + len(held) if self._holds(self.pos) else self.pos
        while len(self._coming) < READ_AHEAD and start < self.size:
            end = min(self.size, start + RANGE_REQUEST_BYTES)
            self._coming.append((start, end, self.ahead.submit(self.fetch, start, end)))
            start = end

    def close(self) -> None:
        self._coming.clear()
        self._held = (0, memoryview(b""))
        super().close()


_AHEAD: ThreadPoolExecutor | None = None
_AHEAD_LOCK = threading.Lock()


def _ahead() -> ThreadPoolExecutor:
    """The threads ranged reads fetch ahead in, shared by every open file."""
    global _AHEAD
    with _AHEAD_LOCK:
        if _AHEAD is None:
            _AHEAD = ThreadPoolExecutor(4, thread_name_prefix="read-ahead")
        return _AHEAD


class StreamedUpload(Upload):
    """obstore's writer, fed one whole part (PART_BYTES) at a time: bytes are held here until
    they fill a part; a file that never fills one is one `overwrite` at commit (a plain PUT,
    retried and counted there, and the write the crash tests stop around), a larger one a
    multipart upload (S3, GCS: start, a request per part, the completion; Azure: a block per
    part, the block list). One part is in flight while the next fills here, so memory holds
    two parts, not the file. Nothing is visible before the completion; `abort` drops the parts
    (Azure: they expire).

    obstore's writer takes one part in flight (CONCURRENCY): a write waits for the part
    before it to land. So each part goes in one write, and an empty write before an abort
    waits for the last one: every part sent has landed when the upload is dropped.

    Requests of a multipart upload are counted as the writer sends them (obstore does not
    say). Its parts are not retried one by one: a failed part fails the upload, which the next
    run writes again. A completion whose answer is lost is recognised by the object's size."""

    CONCURRENCY = 1

    def __init__(self, storage: ObjectStorage, key: str) -> None:
        super().__init__()
        self.storage, self.key = storage, key
        self.writer: Any = None
        self.part = bytearray()  # less than one part, not sent yet

    def _write(self, data: Any) -> None:
        view = memoryview(data).cast("B")
        size = self.storage.PART_BYTES
        while len(self.part) + len(view) >= size:
            n = size - len(self.part)
            self.part += view[:n]
            view = view[n:]
            self._send_part()
        self.part += view

    def _send_part(self) -> None:
        # The writer keeps a reference to the part until it lands: it gets this bytearray,
        # and a new one fills meanwhile.
        part, self.part = self.part, bytearray()
        if self.writer is None:
            self.writer = obs.open_writer(
                self.storage.store,
                self.storage._key(self.key),
                buffer_size=self.storage.PART_BYTES,
                max_concurrency=self.CONCURRENCY,
            )
            self.storage.requests["put"] += self.storage.MULTIPART_CREATE
        self._send(lambda: self.writer.write(part))
        self.storage.requests["put"] += 1

    def commit(self) -> None:
        last, self.part = self.part, bytearray()
        if self.writer is None:
            self.storage.overwrite(self.key, bytes(last))
            return
        if last:  # held by the writer, sent by the close; a failure leaves it to abort()
            self._send(lambda: self.writer.write(last))
        writer, self.writer = self.writer, None
        self.storage.requests["put"] += 1 + bool(last)
        failed = _attempt(writer.close)
        if failed is None:
            return
        if failed[0] is Failure.TRANSIENT and self._completed():
            return
        raise self._error(failed)

    def _completed(self) -> bool:
        """Whether the object now has the size sent: a completion done but not heard."""
        info = self.storage.head(self.key)
        return info is not None and info.size == self.size

    def abort(self) -> None:
        writer, self.writer = self.writer, None
        self.part = bytearray()
        if writer is None:
            return
        with contextlib.suppress(Exception):  # the abort below drops whatever landed
            writer.write(b"")  # the part in flight lands, so the abort drops them all
        if self.size >= self.storage.PART_BYTES:
            self.storage.requests["delete"] += self.storage.MULTIPART_CREATE
        with contextlib.suppress(Exception):  # an unfinished upload is invisible and expires
            writer.__exit__(RuntimeError, RuntimeError("aborted"), None)  # obstore's abort

    def _send(self, fn: Callable[[], Any]) -> None:
        failed = _attempt(fn)
        if failed is not None:
            raise self._error(failed)

    def _error(self, failed: tuple[Failure, Exception]) -> Exception:
        failure, error = failed
        if failure is Failure.OTHER:
            return error
        return translate(self.storage._where(self.key), "put", failure, error)


def _attempt(fn: Callable[[], Any]) -> tuple[Failure, Exception] | None:
    """Run `fn` once: None, or how it failed."""
    try:
        fn()
    except Exception as e:
        return classify(e), e
    return None


def mtime_ms(v: Any) -> int:
    return int(v.timestamp() * 1000) if isinstance(v, datetime) else 0
