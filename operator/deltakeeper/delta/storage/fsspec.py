"""Any other store fsspec knows (hdfs://, webhdfs://, oss://, memory://, ...), through its
filesystem for the URI's scheme and the storage options as that filesystem's arguments.

Its limits, since a filesystem says nothing of how it writes:
- no create-only write: `put_if_absent` is refused (UnsupportedOperationError), so what needs one
  (a checksum file, a V2 checkpoint and its sidecars) is refused with it, before anything of it
  is written; classic and multi-part checkpoints, `_last_checkpoint`, cleanup and vacuum work;
- an overwrite is a temporary file renamed into place: a reader never sees half a file, but where
  a rename does not replace (HDFS), the old file is deleted first and a reader may briefly miss it;
- requests are counted by call: a listing, a read, a file opened for ranged reads each count one,
  whatever the filesystem sends underneath.
"""

from __future__ import annotations

import socket
import uuid
from collections.abc import Iterable, Iterator, Mapping
from datetime import datetime
from typing import Any

import pyarrow as pa

from deltakeeper.delta import paths
from deltakeeper.delta.errors import (
    InvalidInputError,
    StorageUnreachableError,
    UnsupportedOperationError,
)
from deltakeeper.delta.storage.base import FileInfo, Storage, Upload
from deltakeeper.delta.storage.retries import safe_uri, with_retries


def open_fsspec(uri: str, options: Mapping[str, Any]) -> FsspecStorage:
    """The table at `uri` on fsspec's filesystem for its scheme; InvalidInputError when fsspec
    has none or the options do not fit it (only the error's type is shown: its text may quote
    a value)."""
    from fsspec.core import url_to_fs

    scheme = uri.split("://", 1)[0].lower()
    try:
        fs, root = url_to_fs(uri, **options)
    except (ValueError, ImportError) as e:
        raise InvalidInputError(
            f"unsupported URI scheme {scheme!r} in {safe_uri(uri)}: fsspec does not know it, or "
            f"the package it needs for it is not installed ({type(e).__name__}); deltakeeper "
            "opens file://, s3://, gs://, abfss:// and az:// itself, other schemes through fsspec"
        ) from None
    except (ConnectionError, TimeoutError, socket.gaierror) as e:
        raise StorageUnreachableError(
            f"cannot reach {safe_uri(uri)} ({type(e).__name__}); check the host and the network"
        ) from None
    except Exception as e:
        raise InvalidInputError(
            f"cannot open {safe_uri(uri)} with these storage options ({type(e).__name__}); for "
            f"the {scheme} scheme they are the arguments of fsspec's filesystem"
        ) from None
    return FsspecStorage(uri, fs, root)


class FsspecStorage(Storage):
    """A table root on an fsspec filesystem."""

    def __init__(self, uri: str, fs: Any, root: str) -> None:
        super().__init__(uri)
        self.fs = fs
        self.root = root.rstrip("/")

    def _path(self, key: str) -> str:
        key = key.strip("/")
        return f"{self.root}/{key}" if key else self.root

    def _rel(self, name: str) -> str:
        name = name.rstrip("/")
        return name[len(self.root) + 1 :] if self.root else name.lstrip("/")

    def _call(self, op: str, key: str, fn: Any) -> Any:
        def attempt() -> Any:
            self.requests[op] += 1
            return fn()

        return with_retries(f"{self.uri.rstrip('/')}/{key}", op, attempt)

    def _info(self, d: Mapping[str, Any]) -> FileInfo:
        key = self._rel(str(d["name"]))
        if d.get("type") == "directory":
            return FileInfo(key + "/", 0, 0, is_dir=True)
        return FileInfo(key, int(d.get("size") or 0), _mtime_ms(d))

    def _list_from(self, folder: str, start_after: str) -> Iterable[FileInfo]:
        def ls() -> list[Any]:
            try:
                return list(self.fs.ls(self._path(folder), detail=True))
            except FileNotFoundError:
                return []

        return [self._info(d) for d in self._call("list", folder, ls)]

    def _walk(self, folder: str) -> Iterator[FileInfo]:
        def find() -> dict[str, Any]:
            try:
                return dict(self.fs.find(self._path(folder), withdirs=True, detail=True))
            except FileNotFoundError:
                return {}

        for d in self._call("list", folder, find).values():
            info = self._info(d)
            if info.key.rstrip("/") != folder.rstrip("/"):
                yield info

    def _remove_empty_folders(self, keys: list[str]) -> int:
        removed = 0
        for key in keys:
            path = self._path(key)
            if self._call("list", key, lambda p=path: self.fs.ls(p)):
                continue  # not empty: a writer put a file there
            self._call("delete", key, lambda p=path: self.fs.rmdir(p))
            removed += 1
        return removed

    def _read(self, key: str) -> bytes:
        return bytes(self._call("read", key, lambda: self.fs.cat_file(self._path(key))))

    def _open_input(self, key: str, size: int | None) -> pa.NativeFile:
        f = self._call("read", key, lambda: self.fs.open(self._path(key), "rb"))
        return pa.PythonFile(f, mode="r")

    def _head(self, key: str) -> FileInfo | None:
        try:
            d = self._call("head", key, lambda: self.fs.info(self._path(key)))
        except FileNotFoundError:
            return None
        info = self._info(d)
        return None if info.is_dir else FileInfo(key, info.size, info.mtime_ms)

    def _put_if_absent(self, key: str, data: bytes) -> None:
        raise UnsupportedOperationError(
            f"cannot create {safe_uri(self.uri)}/{key}: {type(self.fs).__name__} (fsspec) has "
            "no create-only write, and without one another writer's file could be replaced; "
            "deltakeeper writes checksum files and V2 checkpoints only where the store has "
            "one (local disk, S3, GCS, Azure)"
        )

    def _overwrite(self, key: str, data: bytes) -> None:
        upload = self._open_upload(key)
        upload.write(data)
        upload.commit()

    def _open_upload(self, key: str) -> Upload:
        return _RenamedUpload(self, key)

    def _delete_many(self, keys: list[str]) -> int:
        deleted = 0
        for key in keys:
            try:
                self._call("delete", key, lambda k=key: self.fs.rm_file(self._path(k)))
            except FileNotFoundError:
                continue
            deleted += 1
        return deleted

    def _replace(self, tmp: str, key: str) -> None:
        """Rename `tmp` onto `key`; where a rename does not replace, delete first."""
        final = self._path(key)
        try:
            self._call("put", key, lambda: self.fs.mv(tmp, final))
        except (FileExistsError, OSError):
            if not self.fs.exists(final):
                raise
            self._call("delete", key, lambda: self.fs.rm_file(final))
            self._call("put", key, lambda: self.fs.mv(tmp, final))


class _RenamedUpload(Upload):
    """Written to a temporary file beside the key, renamed into place at commit."""

    def __init__(self, storage: FsspecStorage, key: str) -> None:
        super().__init__()
        self.storage, self.key = storage, key
        folder, _, name = key.rpartition("/")
        tmp_name = paths.temp_name(name, uuid.uuid4().hex)
        self.tmp = storage._path(f"{folder}/{tmp_name}" if folder else tmp_name)
        self.file: Any = None

    def _write(self, data: Any) -> None:
        if self.file is None:
            parent = self.tmp.rsplit("/", 1)[0]
            self.storage.fs.makedirs(parent, exist_ok=True)
            self.file = self.storage.fs.open(self.tmp, "wb")
        self.file.write(data)

    def commit(self) -> None:
        if self.file is None:
            self._write(b"")
        self.file.close()
        self.file = None
        self.storage._replace(self.tmp, self.key)

    def abort(self) -> None:
        if self.file is not None:
            self.file.close()
            self.file = None
        if self.storage.fs.exists(self.tmp):
            self.storage.fs.rm_file(self.tmp)


def _mtime_ms(d: Mapping[str, Any]) -> int:
    for field in ("mtime", "modified", "LastModified", "last_modified", "created"):
        v = d.get(field)
        if isinstance(v, datetime):
            return int(v.timestamp() * 1000)
        if isinstance(v, int | float) and v > 0:
            return int(v * 1000) if v < 1e11 else int(v)
    return 0
