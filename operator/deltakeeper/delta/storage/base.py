"""The Storage interface every store implements, and FileInfo, what a listing gives."""

from __future__ import annotations

import copy
import io
import itertools
from abc import ABC, abstractmethod
from collections import Counter
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from typing import Any

import pyarrow as pa


class IsAFolder(FileNotFoundError):
    """A read of a key where the store has a folder (only the local disk has folders): no
    file, as a listing sees it, and no file can be written there either."""


@dataclass(frozen=True, slots=True)
class FileInfo:
    key: str  # relative to the table root; folders end with '/'
    size: int
    mtime_ms: int
    is_dir: bool = False

    @property
    def name(self) -> str:
        return self.key.rstrip("/").rsplit("/", 1)[-1]


class Deletes:
    """What a plan that deletes the files in `delete` counts (cleanup's and vacuum's)."""

    delete: list[FileInfo]

    @property
    def files(self) -> int:
        return len(self.delete)

    @property
    def bytes(self) -> int:
        return sum(f.size for f in self.delete)


class Upload(io.RawIOBase):
    """A file written front to back whose bytes replace one key only at `commit()`: until
    then readers see the old object, if any; after it, the whole new one. `abort()` drops
    what was written. A parquet writer can write into it directly."""

    def __init__(self) -> None:
        super().__init__()
        self.size = 0  # bytes written so far

    def writable(self) -> bool:
        return True

    def tell(self) -> int:
        return self.size

    def write(self, data: Any) -> int:
        n = memoryview(data).nbytes
        self._write(data)
        self.size += n
        return n

    @abstractmethod
    def _write(self, data: Any) -> None: ...

    @abstractmethod
    def commit(self) -> None:
        """Make the bytes written the object's content, replacing what was there."""

    @abstractmethod
    def abort(self) -> None:
        """Drop what was written; the old object stays. Safe to call more than once."""


class BufferedUpload(Upload):
    """An upload held in memory and sent whole by `send(data)` at commit: for stores with no
    streamed write, and for writes that must be create-only."""

    def __init__(self, send: Callable[[bytes], None]) -> None:
        super().__init__()
        self.send = send
        self.buffer = io.BytesIO()

    def _write(self, data: Any) -> None:
        self.buffer.write(data)

    def commit(self) -> None:
        self.send(self.buffer.getvalue())
        self.buffer = io.BytesIO()

    def abort(self) -> None:
        self.buffer = io.BytesIO()


def _folder(prefix: str) -> str:
    prefix = prefix.strip("/")
    return prefix + "/" if prefix else ""


class Storage(ABC):
    """A table root on some store. Subclasses implement the `_` methods and count requests."""

    # Whether reads of several small files are worth overlapping (a read waits on the network).
    overlap_reads = True

    def __init__(self, uri: str) -> None:
        self.uri = uri
        self.requests: Counter[str] = Counter()

    # -- public API ---------------------------------------------------------------------------
    def list_from(self, prefix: str, start_after: str = "") -> list[FileInfo]:
        """Direct children of folder `prefix` whose key sorts after `start_after`, sorted by key.

        Sub-folders come back once each with `is_dir=True` and a key ending in '/'. Cost is
        proportional to what sorts after `start_after` on stores that can start a listing there.
        """
        folder = _folder(prefix)
        if start_after and not start_after.startswith(folder):
            if start_after > folder:
                return []  # every key in the folder sorts before it
            start_after = ""
        found = [
            f
            for f in self._list_from(folder, start_after)
            if f.key > start_after and f.key != folder
        ]
        if all(a.key < b.key for a, b in itertools.pairwise(found)):
            return found  # an object store's listing: in key order, each key once
        return sorted({f.key: f for f in found}.values(), key=lambda f: f.key)  # the last wins

    def list_lazily(self, prefix: str) -> Iterator[FileInfo]:
        """Direct children of folder `prefix` (files and sub-folders, as `list_from` gives
        them), page by page in the store's order: stop iterating and no further page is
        requested. For a question the first page usually answers (does a log hold a commit?)."""
        folder = _folder(prefix)
        for info in self._list_from(folder, ""):
            if info.key != folder:
                yield info

    def list_folders(self, prefix: str) -> list[str]:
        """Names (no '/') of the direct sub-folders of folder `prefix`, sorted: one delimited
        listing, never a recursive one. Files in the folder cost pages, not results."""
        return sorted({f.name for f in self._list_from(_folder(prefix), "") if f.is_dir})

    def real_folder(self, path: str) -> str | None:
        """Folder `path` under its one real name, relative to the root, or None when that lies
        outside the root. Object stores have no links: the path as given. The local disk
        resolves symbolic links, so a link back up the tree (a loop) or a second name for a
        folder comes back as a path already seen."""
        return path

    def fork(self) -> Storage:
        """The same store with its own request counter, for one thread: `requests` is a plain
        Counter, and `+=` from several threads can lose counts. Add the fork's counts back."""
        twin = copy.copy(self)
        twin.requests = Counter()
        return twin

    def walk(self, prefix: str = "", folders: bool = False) -> Iterator[FileInfo]:
        """Every file below `prefix` (recursively), in no promised order. With `folders`, also
        the folders the store really has (`is_dir`, key ending in '/'): those of the local disk;
        object stores have none."""
        for info in self._walk(_folder(prefix)):
            if folders or not info.is_dir:
                yield info

    def remove_empty_folders(self, keys: Iterable[str]) -> int:
        """Remove folders (keys ending in '/'), deepest first, each only if it is empty at that
        moment: a folder a writer has just put a file in stays. Returns how many went."""
        ordered = sorted(set(keys), key=lambda k: (-k.count("/"), k))
        return self._remove_empty_folders(ordered)

    def _remove_empty_folders(self, keys: list[str]) -> int:
        return 0  # object stores have no folders to remove

    def read(self, key: str) -> bytes:
        """The whole object; FileNotFoundError when it is missing."""
        return self._read(key)

    def head(self, key: str) -> FileInfo | None:
        return self._head(key)

    def put_if_absent(self, key: str, data: bytes) -> None:
        """Create `key` atomically; FileExistsError if anything is already there."""
        self._put_if_absent(key, data)

    def overwrite(self, key: str, data: bytes) -> None:
        self._overwrite(key, data)

    def open_upload(self, key: str) -> Upload:
        """An overwrite of `key` written as a stream (see Upload), so a large file is never
        held whole in memory where the store can take it in pieces."""
        return self._open_upload(key)

    def delete_many(self, keys: Iterable[str]) -> int:
        """Delete keys in batches; returns how many were deleted. Missing keys are not errors."""
        return self._delete_many(list(keys))

    def open_input(self, key: str, size: int | None = None) -> pa.NativeFile:
        """A seekable reader of `key` that fetches only the byte ranges read from it (a
        parquet footer, the projected columns), each counted as a "read" request. `size`, when
        the caller knows it from a listing, saves a "head". FileNotFoundError when missing."""
        return self._open_input(key, size)

    # -- backend hooks ------------------------------------------------------------------------
    @abstractmethod
    def _list_from(self, folder: str, start_after: str) -> Iterable[FileInfo]:
        """Children of `folder` ('' or ending in '/'); may include some not after start_after."""

    @abstractmethod
    def _walk(self, folder: str) -> Iterator[FileInfo]: ...

    @abstractmethod
    def _read(self, key: str) -> bytes: ...

    @abstractmethod
    def _open_input(self, key: str, size: int | None) -> pa.NativeFile: ...

    @abstractmethod
    def _head(self, key: str) -> FileInfo | None: ...

    @abstractmethod
    def _put_if_absent(self, key: str, data: bytes) -> None: ...

    @abstractmethod
    def _overwrite(self, key: str, data: bytes) -> None: ...

    @abstractmethod
    def _delete_many(self, keys: list[str]) -> int: ...

    def _open_upload(self, key: str) -> Upload:
        return BufferedUpload(lambda data: self.overwrite(key, data))
