"""The local file system, used directly (no fsspec)."""

from __future__ import annotations

import contextlib
import errno
import io
import os
import uuid
from collections.abc import Iterable, Iterator
from typing import Any

import pyarrow as pa

from deltakeeper.delta import paths
from deltakeeper.delta.errors import InvalidInputError, StorageUnreachableError
from deltakeeper.delta.storage.base import FileInfo, IsAFolder, Storage, Upload

# What a file system says when a folder is where a file goes, or a file where a folder goes
# (EEXIST: makedirs meeting a file); `_collision` tells which, or that it was neither.
COLLISIONS = (errno.EISDIR, errno.ENOTDIR, errno.EEXIST)


class LocalStorage(Storage):
    """The local file system, used directly (no fsspec) because it is the hot path in tests.

    Counts one request per system call that stands in for one: a directory scan is a "list".
    """

    overlap_reads = False  # the page cache answers at once

    def __init__(self, uri: str, root: str) -> None:
        super().__init__(uri)
        self.root = os.path.abspath(root)

    def _path(self, key: str) -> str:
        return os.path.join(self.root, *key.strip("/").split("/")) if key.strip("/") else self.root

    def real_folder(self, path: str) -> str | None:
        root = os.path.realpath(self.root)
        real = os.path.realpath(self._path(path))
        if real == root:
            return ""
        if os.path.commonpath([root, real]) != root:
            return None  # a link out of the root
        return os.path.relpath(real, root).replace(os.sep, "/")

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
            if "\0" in key:
                continue  # no folder has such a name
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
        if "\0" in key:
            raise FileNotFoundError(key)  # no file has such a name
        try:
            with open(self._path(key), "rb") as f:
                return f.read()
        except IsADirectoryError as e:
            raise IsAFolder(key) from e
        except NotADirectoryError as e:
            raise FileNotFoundError(key) from e
        except PermissionError as e:
            raise StorageUnreachableError(f"cannot read {self.uri}/{key}: permission denied") from e

    def _open_input(self, key: str, size: int | None) -> pa.NativeFile:
        self.requests["read"] += 1
        if "\0" in key:
            raise FileNotFoundError(key)
        if os.path.isdir(self._path(key)):
            raise IsAFolder(key)
        try:
            return pa.OSFile(self._path(key))
        except PermissionError as e:
            raise StorageUnreachableError(f"cannot read {self.uri}/{key}: permission denied") from e

    def _head(self, key: str) -> FileInfo | None:
        self.requests["head"] += 1
        try:
            st = os.stat(self._path(key))
        except (FileNotFoundError, NotADirectoryError, ValueError):  # ValueError: a NUL
            return None
        return FileInfo(key, st.st_size, st.st_mtime_ns // 1_000_000)

    def _temp_path(self, key: str) -> str:
        final = self._path(key)
        os.makedirs(os.path.dirname(final), exist_ok=True)
        name = paths.temp_name(os.path.basename(final), uuid.uuid4().hex)
        return os.path.join(os.path.dirname(final), name)

    def _write_temp(self, key: str, data: bytes) -> str:
        tmp = self._temp_path(key)
        with _dropped_on_failure(tmp), open(tmp, "wb") as f:
            f.write(data)
            f.flush()
            os.fsync(f.fileno())
        return tmp

    def _open_upload(self, key: str) -> Upload:
        with self._writable(key):
            return _LocalUpload(self, key)

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
            with _dropped_on_failure(tmp):
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
            if "\0" in key:
                continue  # no file has such a name
            with self._writable(key), contextlib.suppress(FileNotFoundError):
                os.unlink(self._path(key))
                deleted += 1
        return deleted

    @contextlib.contextmanager
    def _writable(self, key: str) -> Iterator[None]:
        """A write or delete the file system refuses is the store refusing, not a bug; one
        that meets a folder where a file goes (or a file where a folder goes), or a name no
        file can have, is bad input."""
        if "\0" in key:
            raise InvalidInputError(
                f"cannot write {self.uri}/{key!r}: it holds a NUL character, which no file "
                "name on a local disk can (a partition value of NUL?)"
            )
        try:
            yield
        except OSError as e:
            collision = self._collision(key) if e.errno in COLLISIONS else None
            if collision is not None:
                raise InvalidInputError(f"cannot write {self.uri}/{key}: {collision}") from e
            if not isinstance(e, PermissionError) and e.errno != errno.EROFS:
                raise
            raise StorageUnreachableError(
                f"cannot write {self.uri}/{key}: {e.strerror or 'permission denied'}; "
                "deltakeeper needs write access to the table (read-only mount or permissions?)"
            ) from e

    def _collision(self, key: str) -> str | None:
        """What stands in the way of writing `key`: a folder at its place, or a file at the
        place of one of its folders; None when neither does (the error was another)."""
        if os.path.isdir(self._path(key)):
            return f"{key} is a folder, where a file goes; nothing was written there"
        parts = key.strip("/").split("/")
        for i in range(1, len(parts)):
            folder = "/".join(parts[:i])
            if os.path.lexists(self._path(folder)) and not os.path.isdir(self._path(folder)):
                return f"{folder} is a file, where a folder goes; nothing was written there"
        return None


@contextlib.contextmanager
def _dropped_on_failure(tmp: str) -> Iterator[None]:
    """A temporary file is removed when what it was written for fails: none is left behind."""
    try:
        yield
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise


class _LocalUpload(Upload):
    """Written to a temporary file beside the key and renamed over it at commit, as an
    overwrite is: a checkpoint of hundreds of MiB is never held in memory (twice, as bytes)."""

    def __init__(self, storage: LocalStorage, key: str) -> None:
        super().__init__()
        self.storage, self.key = storage, key
        self.tmp = storage._temp_path(key)
        self.file: io.BufferedWriter | None = open(self.tmp, "wb")  # noqa: SIM115

    def _write(self, data: Any) -> None:
        assert self.file is not None, "the upload was committed or aborted"
        with self.storage._writable(self.key):
            self.file.write(data)

    def commit(self) -> None:
        assert self.file is not None, "the upload was committed or aborted"
        storage = self.storage
        storage.requests["put"] += 1
        with storage._writable(self.key), _dropped_on_failure(self.tmp):
            self.file.flush()
            os.fsync(self.file.fileno())
            self.file.close()
            self.file = None
            storage._drop_hadoop_checksum(self.key)
            os.replace(self.tmp, storage._path(self.key))

    def abort(self) -> None:
        if self.file is not None:
            self.file.close()
            self.file = None
        with contextlib.suppress(FileNotFoundError):
            os.unlink(self.tmp)


def _stat(entry: os.DirEntry[str] | str) -> os.stat_result | None:
    """Stat a listed file; None when it is gone since the scan. Writers rename their temp files
    into place (delta-rs's `N.json#1`) and cleanup deletes: a listing must not fail on either."""
    try:
        return entry.stat() if isinstance(entry, os.DirEntry) else os.stat(entry)
    except FileNotFoundError:
        return None
