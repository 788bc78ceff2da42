"""One object-store interface over the local disk, S3, GCS and Azure Blob (s3://, gs://, az://).

Keys are "/"-separated paths relative to the table root, as `_delta_log/00000000000000000001.json`.
Every backend counts its requests by operation in `requests` ("list", "read", "head", "put",
"delete"): one per HTTP request sent, retries included, so metrics and tests can see cost.

The object stores are opened through fsspec (s3fs, gcsfs, adlfs), which turns user options and
ambient credentials into a client; the operations use that client's native calls, so each costs
a known number of requests:

- list_from:     S3 ListObjectsV2 StartAfter; GCS objects.list startOffset; Azure startFrom (1)
- put_if_absent: S3 If-None-Match: *; GCS ifGenerationMatch=0; Azure If-None-Match: *
- delete_many:   S3 DeleteObjects of 1000; GCS JSON batch of 100; Azure Blob Batch of 256

(1) startFrom is new in the Blob API (2026); Azurite 3.37 honours it. A service that ignores it
still gives correct answers, because results are filtered here too, at the cost of a full
listing; one that rejects it (HTTP 400) is listed in full from then on.
The libraries' own retries are switched off: `with_retries` is the one place that retries, so a
count is the number of requests really sent and backoff is not multiplied.
"""

from __future__ import annotations

import contextlib
import errno
import functools
import importlib
import io
import os
import re
import threading
import time
import uuid
from abc import ABC, abstractmethod
from collections import Counter, OrderedDict
from collections.abc import Awaitable, Callable, Iterable, Iterator
from dataclasses import dataclass
from datetime import datetime
from typing import Any, TypeVar
from urllib.parse import quote, unquote, urlparse

import pyarrow as pa

from deltakeeper.delta import paths
from deltakeeper.delta.errors import (
    InvalidCredentialsError,
    InvalidInputError,
    NotADeltaTableError,
    StorageUnreachableError,
)

T = TypeVar("T")

SCHEMES = ("file", "s3", "s3a", "gs", "gcs", "abfss", "abfs", "az")


@dataclass(frozen=True)
class FileInfo:
    key: str  # relative to the table root; folders end with '/'
    size: int
    mtime_ms: int
    is_dir: bool = False

    @property
    def name(self) -> str:
        return self.key.rstrip("/").rsplit("/", 1)[-1]


def _folder(prefix: str) -> str:
    prefix = prefix.strip("/")
    return prefix + "/" if prefix else ""


class Storage(ABC):
    """A table root on some store. Subclasses implement the `_` methods and count requests."""

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
        found = {f.key: f for f in self._list_from(folder, start_after)}
        return sorted(
            (f for k, f in found.items() if k > start_after and k != folder),
            key=lambda f: f.key,
        )

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


class LocalStorage(Storage):
    """The local file system, used directly (no fsspec) because it is the hot path in tests.

    Counts one request per system call that stands in for one: a directory scan is a "list".
    """

    def __init__(self, uri: str, root: str) -> None:
        super().__init__(uri)
        self.root = os.path.abspath(root)

    def _path(self, key: str) -> str:
        return os.path.join(self.root, *key.strip("/").split("/")) if key.strip("/") else self.root

    def _list_from(self, folder: str, start_after: str) -> Iterable[FileInfo]:
        self.requests["list"] += 1
        try:
            entries = list(os.scandir(self._path(folder)))
        except (FileNotFoundError, NotADirectoryError):
            return []
        except PermissionError as e:
            raise StorageUnreachableError(
                f"cannot list {self.uri}/{folder}: permission denied"
            ) from e
        out = []
        for entry in entries:
            key = folder + entry.name
            if entry.is_dir():
                out.append(FileInfo(key + "/", 0, 0, is_dir=True))
            elif key > start_after and (st := _stat(entry)) is not None:
                out.append(FileInfo(key, st.st_size, st.st_mtime_ns // 1_000_000))
        return out

    def _walk(self, folder: str) -> Iterator[FileInfo]:
        for dirpath, _dirs, files in os.walk(self._path(folder)):
            self.requests["list"] += 1
            rel = os.path.relpath(dirpath, self.root).replace(os.sep, "/")
            rel = "" if rel == "." else rel + "/"
            for name in files:
                if (st := _stat(os.path.join(dirpath, name))) is not None:
                    yield FileInfo(rel + name, st.st_size, st.st_mtime_ns // 1_000_000)
            for name in _dirs:
                if (st := _stat(os.path.join(dirpath, name))) is not None:
                    yield FileInfo(rel + name + "/", 0, st.st_mtime_ns // 1_000_000, is_dir=True)

    def _remove_empty_folders(self, keys: list[str]) -> int:
        removed = 0
        for key in keys:
            self.requests["delete"] += 1
            with self._writable(key):
                try:
                    os.rmdir(self._path(key))  # refuses a folder that is not empty
                except FileNotFoundError:
                    continue
                except OSError as e:
                    if e.errno not in (errno.ENOTEMPTY, errno.EEXIST, errno.ENOTDIR):
                        raise
                    continue
                removed += 1
        return removed

    def _read(self, key: str) -> bytes:
        self.requests["read"] += 1
        try:
            with open(self._path(key), "rb") as f:
                return f.read()
        except (IsADirectoryError, NotADirectoryError) as e:
            raise FileNotFoundError(key) from e
        except PermissionError as e:
            raise StorageUnreachableError(f"cannot read {self.uri}/{key}: permission denied") from e

    def _open_input(self, key: str, size: int | None) -> pa.NativeFile:
        self.requests["read"] += 1
        if os.path.isdir(self._path(key)):
            raise FileNotFoundError(key)
        try:
            return pa.OSFile(self._path(key))
        except PermissionError as e:
            raise StorageUnreachableError(f"cannot read {self.uri}/{key}: permission denied") from e

    def _head(self, key: str) -> FileInfo | None:
        self.requests["head"] += 1
        try:
            st = os.stat(self._path(key))
        except (FileNotFoundError, NotADirectoryError):
            return None
        return FileInfo(key, st.st_size, st.st_mtime_ns // 1_000_000)

    def _write_temp(self, key: str, data: bytes) -> str:
        final = self._path(key)
        os.makedirs(os.path.dirname(final), exist_ok=True)
        name = paths.temp_name(os.path.basename(final), uuid.uuid4().hex)
        tmp = os.path.join(os.path.dirname(final), name)
        with open(tmp, "wb") as f:
            f.write(data)
            f.flush()
            os.fsync(f.fileno())
        return tmp

    def _put_if_absent(self, key: str, data: bytes) -> None:
        # Write aside, then hard-link into place: link(2) refuses an existing name atomically,
        # and readers never see a partial file.
        self.requests["put"] += 1
        with self._writable(key):
            tmp = self._write_temp(key, data)
            try:
                os.link(tmp, self._path(key))
            finally:
                os.unlink(tmp)

    def _overwrite(self, key: str, data: bytes) -> None:
        self.requests["put"] += 1
        with self._writable(key):
            tmp = self._write_temp(key, data)
            self._drop_hadoop_checksum(key)
            os.replace(tmp, self._path(key))

    def _drop_hadoop_checksum(self, key: str) -> None:
        # Spark on a local disk keeps `.<name>.crc` beside each file it wrote and refuses to
        # read a file that no longer matches it; with no `.crc` it reads the file as it is.
        # Dropped before the replace, so a crash in between leaves the old file, unchecked.
        final = self._path(key)
        crc = os.path.join(os.path.dirname(final), f".{os.path.basename(final)}.crc")
        with contextlib.suppress(FileNotFoundError):
            os.unlink(crc)

    def _delete_many(self, keys: list[str]) -> int:
        deleted = 0
        for key in keys:
            self.requests["delete"] += 1
            with self._writable(key), contextlib.suppress(FileNotFoundError):
                os.unlink(self._path(key))
                deleted += 1
        return deleted

    @contextlib.contextmanager
    def _writable(self, key: str) -> Iterator[None]:
        """A write or delete the file system refuses is the store refusing, not a bug."""
        try:
            yield
        except OSError as e:
            if not isinstance(e, PermissionError) and e.errno != errno.EROFS:
                raise
            raise StorageUnreachableError(
                f"cannot write {self.uri}/{key}: {e.strerror or 'permission denied'}; "
                "deltakeeper needs write access to the table (read-only mount or permissions?)"
            ) from e


def _stat(entry: os.DirEntry[str] | str) -> os.stat_result | None:
    """Stat a listed file; None when it is gone since the scan. Writers rename their temp files
    into place (delta-rs's `N.json#1`) and cleanup deletes: a listing must not fail on either."""
    try:
        return entry.stat() if isinstance(entry, os.DirEntry) else os.stat(entry)
    except FileNotFoundError:
        return None


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
            raise _open_error(uri, e) from e

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
                raise FileNotFoundError(f"{_safe(self.uri)}/{key}: not found (head)")
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
        return FileInfo(key, int(size or 0), _mtime_ms(mtime))

    def _folders(self, names: Iterable[str]) -> list[FileInfo]:
        return [FileInfo(self._rel(n), 0, 0, is_dir=True) for n in names]


class S3Storage(ObjectStorage):
    """S3 and S3-compatible stores (MinIO) through s3fs's botocore client."""

    DELETE_BATCH = 1000  # DeleteObjects limit

    def __init__(self, uri: str, bucket: str, root: str, options: dict[str, Any]) -> None:
        config = dict(options.get("config_kwargs") or {})
        config.setdefault("retries", {"total_max_attempts": 1})  # botocore: no own retries
        super().__init__(
            uri, "s3fs:S3FileSystem", bucket, root, {**options, "config_kwargs": config}
        )
        self.fs.retries = 1  # s3fs: no own retries either

    def _s3(self, op: str, method: str, key: str = "", **kwargs: Any) -> Any:
        if key:
            kwargs["Key"] = self._key(key)
        call = functools.partial(self.fs.call_s3, method, Bucket=self.bucket, **kwargs)
        return self._call(op, call, key)

    def _pages(self, folder: str, start_after: str, recursive: bool) -> Iterator[list[FileInfo]]:
        kw: dict[str, Any] = {"Prefix": self._key(folder)}
        if start_after:
            kw["StartAfter"] = self._key(start_after)
        if not recursive:
            kw["Delimiter"] = "/"
        while True:
            page = self._s3("list", "list_objects_v2", **kw)
            files = (
                self._entry(o["Key"], o["Size"], o["LastModified"])
                for o in page.get("Contents", [])
            )
            yield [*files, *self._folders(p["Prefix"] for p in page.get("CommonPrefixes", []))]
            if not page.get("IsTruncated"):
                return
            kw["ContinuationToken"] = page["NextContinuationToken"]

    def _read(self, key: str) -> bytes:
        def get() -> bytes:
            return bytes(self.fs.cat_file(f"{self.bucket}/{self._key(key)}"))

        return self._call("read", get, key)

    def _read_range(self, key: str, start: int, end: int) -> bytes:
        def get() -> bytes:
            path = f"{self.bucket}/{self._key(key)}"
            return bytes(self.fs.cat_file(path, start=start, end=end))

        return self._call("read", get, key)

    def _head(self, key: str) -> FileInfo | None:
        try:
            d = self._s3("head", "head_object", key)
        except FileNotFoundError:
            return None
        return FileInfo(key, int(d["ContentLength"]), _mtime_ms(d["LastModified"]))

    def _create(self, key: str, data: bytes) -> None:
        self._s3("put", "put_object", key, Body=data, IfNoneMatch="*")

    def _overwrite(self, key: str, data: bytes) -> None:
        self._s3("put", "put_object", key, Body=data)

    def _delete_many(self, keys: list[str]) -> int:
        deleted = 0
        for i in range(0, len(keys), self.DELETE_BATCH):
            objects = [{"Key": self._key(k)} for k in keys[i : i + self.DELETE_BATCH]]

            def send(objects: list[dict[str, str]] = objects) -> int:
                delete = {"Objects": objects, "Quiet": True}  # answers with failures only
                out = self.fs.call_s3("delete_objects", Bucket=self.bucket, Delete=delete)
                if errors := out.get("Errors"):
                    codes = " ".join(str(e.get("Code")) for e in errors)
                    status = 503 if _has(codes, _TRANSIENT_MARKERS) else 403
                    raise _BatchError(status, f"batch delete: {len(errors)} keys failed")
                return len(objects)  # S3 reports a missing key as deleted

            deleted += self._call("delete", send)
        return deleted


class GcsStorage(ObjectStorage):
    """Google Cloud Storage through gcsfs's JSON-API session."""

    DELETE_BATCH = 100  # JSON batch limit

    def __init__(self, uri: str, bucket: str, root: str, options: dict[str, Any]) -> None:
        # The plain GCSFileSystem: gcsfs's default "extended" one asks a gRPC control API for
        # the bucket type before many calls, and waits 60 s for it on non-Google endpoints.
        super().__init__(uri, "gcsfs.core:GCSFileSystem", bucket, root, options)
        # gcsfs retries inside `_request` (up to 6 times, 30 s of sleeps); use the bare method.
        raw = getattr(type(self.fs)._request, "__wrapped__", None)
        if raw is not None:
            self.fs._request = functools.partial(raw, self.fs)

    def _gcs(self, op: str, method: str, path: str, *args: str, key: str = "", **kw: Any) -> Any:
        return self._call(op, functools.partial(self.fs.call, method, path, *args, **kw), key)

    def _pages(self, folder: str, start_after: str, recursive: bool) -> Iterator[list[FileInfo]]:
        params: dict[str, Any] = {"prefix": self._key(folder), "maxResults": 1000}
        if start_after:
            params["startOffset"] = self._key(start_after)  # inclusive; filtered by list_from
        if not recursive:
            params["delimiter"] = "/"
        while True:
            page = self._gcs("list", "GET", "b/{}/o", self.bucket, json_out=True, **params)
            files = (
                self._entry(o["name"], o.get("size", 0), o.get("updated"))
                for o in page.get("items", [])
            )
            yield [*files, *self._folders(page.get("prefixes", []))]
            if not page.get("nextPageToken"):
                return
            params["pageToken"] = page["nextPageToken"]

    def _read(self, key: str) -> bytes:
        _headers, data = self._gcs(
            "read", "GET", "b/{}/o/{}", self.bucket, self._key(key), key=key, alt="media"
        )
        return bytes(data)

    def _read_range(self, key: str, start: int, end: int) -> bytes:
        ranged = {"Range": f"bytes={start}-{end - 1}"}
        _headers, data = self._gcs(
            "read",
            "GET",
            "b/{}/o/{}",
            self.bucket,
            self._key(key),
            key=key,
            alt="media",
            headers=ranged,
        )
        return bytes(data)

    def _head(self, key: str) -> FileInfo | None:
        try:
            d = self._gcs(
                "head", "GET", "b/{}/o/{}", self.bucket, self._key(key), key=key, json_out=True
            )
        except FileNotFoundError:
            return None
        return FileInfo(key, int(d.get("size", 0)), _mtime_ms(d.get("updated")))

    def _upload(self, key: str, data: bytes, **conditions: str) -> None:
        url = f"{self.fs._location}/upload/storage/v1/b/{quote(self.bucket, safe='')}/o"
        headers = {"Content-Type": "application/octet-stream"}
        params = {"uploadType": "media", "name": self._key(key), **conditions}
        self._gcs("put", "POST", url, key=key, data=data, headers=headers, **params)

    def _create(self, key: str, data: bytes) -> None:
        self._upload(key, data, ifGenerationMatch="0")  # 412 -> FileExistsError

    def _overwrite(self, key: str, data: bytes) -> None:
        self._upload(key, data)

    def _delete_many(self, keys: list[str]) -> int:
        deleted = 0
        for i in range(0, len(keys), self.DELETE_BATCH):
            deleted += self._delete_batch(keys[i : i + self.DELETE_BATCH])
        return deleted

    def _delete_batch(self, keys: list[str]) -> int:
        """One multipart/mixed request of DELETEs; any 429/5xx part fails (and retries) it all."""
        boundary = f"deltakeeper-{uuid.uuid4().hex}"
        bucket = quote(self.bucket, safe="")
        # Each part is a whole HTTP request, blank line included (fake-gcs-server parses it
        # strictly), then the CRLF that belongs to the next boundary.
        parts = [
            f"--{boundary}\r\nContent-Type: application/http\r\nContent-ID: <{n}>\r\n\r\n"
            f"DELETE /storage/v1/b/{bucket}/o/{quote(self._key(k), safe='')} HTTP/1.1\r\n"
            "Content-Length: 0\r\n\r\n\r\n"
            for n, k in enumerate(keys)
        ]
        body = "".join(parts) + f"--{boundary}--\r\n"

        def send() -> int:
            headers = {"Content-Type": f"multipart/mixed; boundary={boundary}"}
            _h, out = self.fs.call("POST", self.fs.batch_url_base, headers=headers, data=body)
            codes = [int(c) for c in re.findall(r"^HTTP/1\.[01] (\d{3})", out.decode(), re.M)]
            bad = [c for c in codes if c not in (200, 204, 404)]
            if len(codes) != len(keys) or bad:
                raise _BatchError(max(bad, default=500), f"batch delete: {len(bad)} parts failed")
            return codes.count(200) + codes.count(204)

        return self._call("delete", send)


class AzureStorage(ObjectStorage):
    """Azure Blob Storage (and ADLS Gen2 through its blob endpoint) with adlfs's async client."""

    DELETE_BATCH = 256  # Blob Batch limit
    NO_RETRY = {"retry_total": 0}  # azure-core retries 10 times by default

    def __init__(self, uri: str, container: str, root: str, options: dict[str, Any]) -> None:
        super().__init__(uri, "adlfs:AzureBlobFileSystem", container, root, options)
        self.container = self.fs.service_client.get_container_client(container)
        self._start_from = True  # until the service says it does not know the parameter

    def _az(self, op: str, fn: Callable[[], Awaitable[T]], key: str = "") -> T:
        from fsspec.asyn import sync

        return self._call(op, lambda: sync(self.fs.loop, fn), key)

    def _pages(self, folder: str, start_after: str, recursive: bool) -> Iterator[list[FileInfo]]:
        kw: dict[str, Any] = {"name_starts_with": self._key(folder), "include": ["metadata"]}
        if not recursive:
            kw["delimiter"] = "/"
        if start_after and self._start_from:
            # Inclusive; a delimited listing may only start one level below its prefix.
            level = start_after if recursive else folder + start_after[len(folder) :].split("/")[0]
            kw["start_from"] = self._key(level)
        list_fn = self.container.list_blobs if recursive else self.container.walk_blobs
        token: str | None = None
        while True:

            async def page(kw: dict[str, Any] = kw, token: str | None = token) -> tuple[list, Any]:
                pages = list_fn(**kw, **self.NO_RETRY).by_page(continuation_token=token)
                return [x async for x in await pages.__anext__()], pages.continuation_token

            try:
                items, token = self._az("list", page)
            except Exception as e:
                if "start_from" not in kw or _status(e) != 400:
                    raise
                self._start_from = False  # a service without startFrom: list all, filter here
                del kw["start_from"]
                continue
            yield [self._blob(x) for x in items]
            if not token:
                return

    def _blob(self, item: Any) -> FileInfo:
        from azure.storage.blob import BlobProperties

        if not isinstance(item, BlobProperties):  # a BlobPrefix: a sub-folder
            return FileInfo(self._rel(item.name), 0, 0, is_dir=True)
        if (item.metadata or {}).get("hdi_isfolder") == "true":  # an ADLS Gen2 folder
            return FileInfo(self._rel(item.name).rstrip("/") + "/", 0, 0, is_dir=True)
        return self._entry(item.name, item.size, item.last_modified)

    def _read(self, key: str) -> bytes:
        async def get() -> bytes:
            stream = await self.container.download_blob(self._key(key), **self.NO_RETRY)
            return bytes(await stream.readall())

        return self._az("read", get, key)

    def _read_range(self, key: str, start: int, end: int) -> bytes:
        async def get() -> bytes:
            stream = await self.container.download_blob(
                self._key(key), offset=start, length=end - start, **self.NO_RETRY
            )
            return bytes(await stream.readall())

        return self._az("read", get, key)

    def _head(self, key: str) -> FileInfo | None:
        async def props() -> Any:
            return await self.container.get_blob_client(self._key(key)).get_blob_properties(
                **self.NO_RETRY
            )

        try:
            p = self._az("head", props, key)
        except FileNotFoundError:
            return None
        return FileInfo(key, int(p.size), _mtime_ms(p.last_modified))

    def _upload(self, key: str, data: bytes, overwrite: bool) -> None:
        # overwrite=False sends If-None-Match: *; the service answers 409 BlobAlreadyExists.
        async def put() -> None:
            blob = self.container.get_blob_client(self._key(key))
            await blob.upload_blob(data, overwrite=overwrite, **self.NO_RETRY)

        self._az("put", put, key)

    def _create(self, key: str, data: bytes) -> None:
        self._upload(key, data, overwrite=False)

    def _overwrite(self, key: str, data: bytes) -> None:
        self._upload(key, data, overwrite=True)

    def _delete_many(self, keys: list[str]) -> int:
        deleted = 0
        for i in range(0, len(keys), self.DELETE_BATCH):
            names = [self._key(k) for k in keys[i : i + self.DELETE_BATCH]]

            async def batch(names: list[str] = names) -> int:
                results = await self.container.delete_blobs(
                    *names, raise_on_any_failure=False, **self.NO_RETRY
                )
                codes = [r.status_code async for r in results]
                bad = [c for c in codes if c not in (200, 202, 404)]
                if bad:
                    raise _BatchError(max(bad), f"batch delete: {len(bad)} parts failed")
                return len(codes) - codes.count(404)

            deleted += self._az("delete", batch)
        return deleted


WHOLE_READ_BYTES = 1 << 20  # a file this small is read in one request
RANGE_BUFFER_BYTES = 1 << 20  # reads ahead this far, so near column chunks share a request


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
        n = min(len(buffer), self.size - self.pos)
        if n <= 0:
            return 0
        data = self.fetch(self.pos, self.pos + n)
        buffer[: len(data)] = data
        self.pos += len(data)
        return len(data)


class _BatchError(OSError):
    def __init__(self, status: int, message: str) -> None:
        super().__init__(message)
        self.status = status


def _open_error(uri: str, e: Exception) -> Exception:
    """A client that could not be made: the network (gcsfs checks a token when it starts) or
    the options."""
    if isinstance(e, ConnectionError | TimeoutError) or _has(_names(e), _CONNECTION_MARKERS):
        return StorageUnreachableError(
            f"cannot open {_safe(uri)}: {type(e).__name__} while checking the credentials; "
            "check the network and the endpoint"
        )
    return InvalidInputError(
        f"cannot open {_safe(uri)} with these storage options ({type(e).__name__}); check the "
        "option names and values (e.g. endpoint_url, key, secret, account_name, token)"
    )


def _unusable_options(uri: str, e: Exception, names: str) -> InvalidInputError | None:
    """Options the client rejects when it first sends: a bad key, an unknown option name."""
    if "AzureSigningError" in names:
        return InvalidCredentialsError(
            f"cannot sign requests to {_safe(uri)}: the account key is not valid base64; "
            "check account_key (AZURE_STORAGE_ACCOUNT_KEY in a Secret)"
        )
    if isinstance(e, TypeError) and "unexpected keyword argument" in str(e):
        option = str(e).rsplit(" ", 1)[-1]
        return InvalidCredentialsError(
            f"the client for {_safe(uri)} does not know the storage option {option}; check its "
            "spelling against the fsspec backend's options (s3fs, gcsfs, adlfs)"
        )
    return None


def _mtime_ms(v: Any) -> int:
    if isinstance(v, datetime):
        return int(v.timestamp() * 1000)
    if isinstance(v, str) and v:
        with contextlib.suppress(ValueError):
            return int(datetime.fromisoformat(v.replace("Z", "+00:00")).timestamp() * 1000)
    return 0


def _safe(uri: str) -> str:
    """The URI without a password, query or fragment: where keys and SAS tokens could hide."""
    p = urlparse(uri)
    if not p.scheme or not p.netloc:
        return uri
    netloc = p.netloc.rsplit("@", 1)[-1] if _has_password(p) else p.netloc
    return f"{p.scheme}://{netloc}{p.path}"


_TRANSIENT_MARKERS = (
    "SlowDown",
    "Throttl",
    "TooManyRequests",
    "ServiceUnavailable",
    "InternalError",
    "RequestTimeout",
    "ConditionalRequestConflict",  # S3: a concurrent conditional write; retry to learn who won
)
_CONNECTION_MARKERS = ("Connect", "Timeout", "ServerDisconnected", "ServiceRequest")
_REFUSED_MARKERS = ("NoCredentials", "Forbidden", "AccessDenied", "ClientAuthentication")


def with_retries(uri: str, op: str, fn: Callable[[], T], attempts: int = 5) -> T:
    """Run `fn`, retrying throttling, 5xx and connection failures with exponential backoff.

    A missing object becomes FileNotFoundError, a failed create-only condition FileExistsError;
    a refusal, a missing bucket or a failure that outlasts the retries StorageUnreachableError.
    Messages name the URI (without secrets), never credentials.
    """
    delay = 0.2
    for attempt in range(attempts):
        try:
            return fn()
        except FileExistsError:
            raise
        except Exception as e:
            status, names = _status(e), _names(e)
            if status == 404 or isinstance(e, FileNotFoundError):
                if op == "list":  # listing a missing prefix is not an error; a missing bucket is
                    raise StorageUnreachableError(
                        f"list on {_safe(uri)} failed: bucket or container not found"
                    ) from e
                raise FileNotFoundError(f"{_safe(uri)}: not found ({op})") from e
            if status == 412 or (status == 409 and "Exist" in names):
                raise FileExistsError(f"{_safe(uri)}: already exists ({op})") from e
            if (
                status in (401, 403)
                or isinstance(e, PermissionError)
                or _has(names, _REFUSED_MARKERS)
            ):
                raise StorageUnreachableError(
                    f"{op} on {_safe(uri)} was refused ({status or type(e).__name__}): "
                    "check the credentials and permissions"
                ) from e
            transient = (status is not None and (status in (408, 429) or status >= 500)) or _has(
                names, _TRANSIENT_MARKERS
            )
            connection = isinstance(e, ConnectionError | TimeoutError) or _has(
                names, _CONNECTION_MARKERS
            )
            if (unusable := _unusable_options(uri, e, names)) is not None:
                raise unusable from e
            if not (transient or connection):
                raise
            if attempt + 1 < attempts:
                time.sleep(delay)
                delay *= 2
                continue
            what = f"HTTP {status}" if status else type(e).__name__
            raise StorageUnreachableError(
                f"{op} on {_safe(uri)} failed after {attempts} attempts ({what}): "
                "check the endpoint and the network"
            ) from e
    raise AssertionError("unreachable")


def _has(text: str, markers: Iterable[str]) -> bool:
    return any(m in text for m in markers)


def _chain(e: BaseException) -> Iterator[BaseException]:
    seen: set[int] = set()
    cur: BaseException | None = e
    while cur is not None and id(cur) not in seen:
        seen.add(id(cur))
        yield cur
        cur = cur.__cause__ or cur.__context__


def _names(e: BaseException) -> str:
    """Exception class names and error codes along the chain, for matching."""
    out = []
    for x in _chain(e):
        out.append(type(x).__name__)
        resp = getattr(x, "response", None)
        if isinstance(resp, dict):
            out.append(str(resp.get("Error", {}).get("Code", "")))
        out.append(str(getattr(x, "error_code", "") or ""))
    return " ".join(out)


def _status(e: BaseException) -> int | None:
    """The HTTP status of the first exception in the chain that carries one."""
    for x in _chain(e):
        resp = getattr(x, "response", None)
        if isinstance(resp, dict):
            code = resp.get("ResponseMetadata", {}).get("HTTPStatusCode")
            if isinstance(code, int):
                return code
        for attr in ("status", "status_code", "code"):
            v = getattr(x, attr, None)
            if isinstance(v, int) and 100 <= v < 600:
                return v
    return None


def _has_password(parsed: Any) -> bool:
    try:
        return parsed.password is not None
    except ValueError:  # a malformed port after the password; still a password
        return "@" in parsed.netloc and ":" in parsed.netloc.split("@", 1)[0]


def _local(uri: str, path: str) -> LocalStorage:
    if os.path.isfile(path):
        raise NotADeltaTableError(
            f"{uri} is a file, not a table: give the table's root folder (the one that holds "
            "_delta_log/)"
        )
    return LocalStorage(uri, path)


def open_storage(uri: str, options: dict[str, Any] | None = None) -> Storage:
    """Storage for a table URI: a plain path, file://, s3://, gs://, abfss:// or az://."""
    options = dict(options or {})
    if "://" not in uri and not uri.lower().startswith("file:"):
        return _local(uri, uri)
    parsed = urlparse(uri)  # file:/path (one slash, as Spark writes them) included
    scheme = parsed.scheme.lower()
    if scheme not in SCHEMES:
        raise InvalidInputError(
            f"unsupported URI scheme {scheme!r} in {_safe(uri)}; use one of file://, s3://, "
            "gs://, abfss://, az://"
        )
    if scheme == "file":
        return _local(uri, unquote(parsed.path))
    if _has_password(parsed):
        raise InvalidInputError(
            f"{_safe(uri)}: credentials inside the URI are not used (nor shown); pass them as "
            "storage options (key=..., secret=...) or the cloud's environment variables"
        )
    if not parsed.netloc:
        raise InvalidInputError(f"{_safe(uri)} names no bucket or container")
    root = unquote(parsed.path)
    if scheme in ("s3", "s3a"):
        return S3Storage(uri, parsed.netloc, root, options)
    if scheme in ("gs", "gcs"):
        return GcsStorage(uri, parsed.netloc, root, options)
    # abfss://container@account.dfs.core.windows.net/path  or  az://container/path
    container, _, host = parsed.netloc.partition("@")
    if host and "account_name" not in options and "connection_string" not in options:
        options["account_name"] = host.split(".", 1)[0]
    return AzureStorage(uri, container, root, options)
