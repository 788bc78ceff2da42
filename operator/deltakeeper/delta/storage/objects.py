"""What the object stores share: one client per account, key mapping, counted and retried
requests, and ranged reads (RangedFile)."""

from __future__ import annotations

import contextlib
import importlib
import io
import threading
from abc import abstractmethod
from collections import OrderedDict
from collections.abc import Callable, Iterable, Iterator
from datetime import datetime
from typing import Any, TypeVar

import pyarrow as pa

from deltakeeper.delta.storage.base import FileInfo, Storage, Upload
from deltakeeper.delta.storage.retries import open_error, safe_uri, with_retries

T = TypeVar("T")


# Filesystems by (class, options): every table on one account shares a client. A botocore
# client alone holds ~15 MiB of service model, so an operator watching 100 tables on one
# bucket would otherwise hold 100 of them. Bounded, oldest dropped first (rotated keys).
_FILESYSTEMS: OrderedDict[tuple[str, str], Any] = OrderedDict()
_FILESYSTEMS_MAX = 64
_FILESYSTEMS_LOCK = threading.Lock()


def _filesystem(fs_class: str, options: dict[str, Any]) -> Any:
    key = (fs_class, repr(sorted(options.items())))
    with _FILESYSTEMS_LOCK:
        fs = _FILESYSTEMS.get(key)
        if fs is not None:
            _FILESYSTEMS.move_to_end(key)
            return fs
        module, _, name = fs_class.partition(":")
        cls = getattr(importlib.import_module(module), name)
        # Our own cache, not fsspec's: its instances are shared with any other caller.
        fs = cls(skip_instance_cache=True, **options)
        _FILESYSTEMS[key] = fs
        if len(_FILESYSTEMS) > _FILESYSTEMS_MAX:
            _FILESYSTEMS.popitem(last=False)
        return fs


class ObjectStorage(Storage):
    """What the object stores share: bucket + root key mapping, counting and retries.

    Subclasses list through `_pages`, one request per page, with or without a '/' delimiter.
    """

    def __init__(
        self, uri: str, fs_class: str, bucket: str, root: str, options: dict[str, Any]
    ) -> None:
        super().__init__(uri)
        self.bucket = bucket
        self.root = root.strip("/")
        try:
            self.fs = _filesystem(fs_class, options)
        except Exception as e:  # the message may quote a credential: only its type is shown
            raise open_error(uri, e) from e

    def _key(self, key: str) -> str:
        """The object name in the bucket for a table-relative key ('' gives the root folder)."""
        return f"{self.root}/{key}" if self.root else key

    def _rel(self, name: str) -> str:
        return name[len(self.root) + 1 :] if self.root else name

    def _call(self, op: str, fn: Callable[[], T], key: str = "") -> T:
        """Run one request through `with_retries`, counting every attempt; errors name `key`."""

        def attempt() -> T:
            self.requests[op] += 1
            return fn()

        return with_retries(f"{self.uri.rstrip('/')}/{key}" if key else self.uri, op, attempt)

    @abstractmethod
    def _pages(self, folder: str, start_after: str, recursive: bool) -> Iterator[list[FileInfo]]:
        """Listing pages of `folder` (files, and sub-folders unless recursive), one request each."""

    def _list_from(self, folder: str, start_after: str) -> Iterable[FileInfo]:
        for page in self._pages(folder, start_after, recursive=False):
            yield from page

    def _walk(self, folder: str) -> Iterator[FileInfo]:
        for page in self._pages(folder, "", recursive=True):
            yield from (f for f in page if not f.is_dir)

    def _open_input(self, key: str, size: int | None) -> pa.NativeFile:
        if size is None:
            info = self._head(key)
            if info is None:
                raise FileNotFoundError(f"{safe_uri(self.uri)}/{key}: not found (head)")
            size = info.size
        if size <= WHOLE_READ_BYTES:  # one request for the whole of a small file
            return pa.BufferReader(self._read(key))
        raw = RangedFile(lambda start, end: self._read_range(key, start, end), size)
        return pa.PythonFile(io.BufferedReader(raw, RANGE_BUFFER_BYTES), mode="r")

    @abstractmethod
    def _read_range(self, key: str, start: int, end: int) -> bytes:
        """Bytes `start` (inclusive) to `end` (exclusive) of `key`: one request."""

    def _put_if_absent(self, key: str, data: bytes) -> None:
        sent = self.requests["put"]
        try:
            self._create(key, data)
        except FileExistsError:
            # A retried create can meet its own first attempt, done but not heard (a timeout,
            # a 5xx after the write). If what is there is what we sent, the create succeeded.
            if self.requests["put"] - sent > 1 and self._read(key) == data:
                return
            raise

    @abstractmethod
    def _create(self, key: str, data: bytes) -> None:
        """One create-only write; FileExistsError when the key exists."""

    def _entry(self, name: str, size: int, mtime: Any) -> FileInfo:
        """A listed object as a FileInfo; zero-byte folder markers ('a/b/') become folders."""
        key = self._rel(name)
        if key.endswith("/"):
            return FileInfo(key, 0, 0, is_dir=True)
        return FileInfo(key, int(size or 0), mtime_ms(mtime))

    def _folders(self, names: Iterable[str]) -> list[FileInfo]:
        return [FileInfo(self._rel(n), 0, 0, is_dir=True) for n in names]


WHOLE_READ_BYTES = 1 << 20  # a file this small is read in one request
RANGE_BUFFER_BYTES = 1 << 20  # reads ahead this far, so near column chunks share a request
# One request fetches at most this much: a 14 MiB column chunk in one response is held two or
# three times over by the HTTP client while it is read (+25% peak RSS on a 1M-file checkpoint).
RANGE_REQUEST_BYTES = 4 << 20


class RangedFile(io.RawIOBase):
    """A seekable, read-only file whose reads are ranged requests (`fetch(start, end)`)."""

    def __init__(self, fetch: Callable[[int, int], bytes], size: int) -> None:
        self.fetch, self.size, self.pos = fetch, size, 0

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
        data = self.fetch(self.pos, self.pos + n)
        buffer[: len(data)] = data
        self.pos += len(data)
        return len(data)


class PiecewiseUpload(Upload):
    """An upload sent in pieces of `piece_bytes` as they fill, then joined by one request:
    memory holds a piece, not the file. A file smaller than one piece is one plain overwrite
    at commit. Subclasses send, join and drop the pieces."""

    def __init__(self, storage: Storage, key: str, piece_bytes: int) -> None:
        super().__init__()
        self.storage, self.key, self.piece_bytes = storage, key, piece_bytes
        self.pending = bytearray()
        self.pieces = 0  # sent so far

    def _write(self, data: Any) -> None:
        self.pending += data
        if len(self.pending) >= self.piece_bytes:
            self._flush()

    def _flush(self) -> None:
        body, self.pending = bytes(self.pending), bytearray()
        self._send_piece(self.pieces + 1, body)
        self.pieces += 1

    def commit(self) -> None:
        if not self.pieces:
            body, self.pending = bytes(self.pending), bytearray()
            self.storage.overwrite(self.key, body)
            return
        if self.pending:
            self._flush()
        self._join()
        self.pieces = 0

    def abort(self) -> None:
        self.pending = bytearray()
        if self.pieces:
            self.pieces = 0
            self._drop()

    @abstractmethod
    def _send_piece(self, number: int, body: bytes) -> None:
        """Send piece `number` (from 1): one counted, retried request."""

    @abstractmethod
    def _join(self) -> None:
        """Make the pieces sent the object, replacing what was there."""

    def _drop(self) -> None:
        """Drop the pieces sent (best effort; they are invisible to readers)."""


def mtime_ms(v: Any) -> int:
    if isinstance(v, datetime):
        return int(v.timestamp() * 1000)
    if isinstance(v, str) and v:
        with contextlib.suppress(ValueError):
            return int(datetime.fromisoformat(v.replace("Z", "+00:00")).timestamp() * 1000)
    return 0
