"""One object-store interface over the local disk and fsspec (s3://, gs://, abfss://, az://).

Keys are '/'-separated paths relative to the table root, e.g. `_delta_log/00000000000000000000.json`.
Every backend counts its requests by operation in `requests`, so metrics and tests can see cost.
"""

from __future__ import annotations

import contextlib
import os
import time
import uuid
from abc import ABC, abstractmethod
from collections import Counter
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from typing import Any, TypeVar
from urllib.parse import unquote, urlparse

from deltakeeper.delta.errors import InvalidInputError, StorageUnreachableError

T = TypeVar("T")

SCHEMES = ("file", "s3", "s3a", "gs", "gcs", "abfss", "abfs", "az")


@dataclass(frozen=True)
class FileInfo:
    key: str  # relative to the table root
    size: int
    mtime_ms: int
    is_dir: bool = False

    @property
    def name(self) -> str:
        return self.key.rstrip("/").rsplit("/", 1)[-1]


class Storage(ABC):
    """A table root on some store. Subclasses implement the `_` methods; the public ones count."""

    def __init__(self, uri: str) -> None:
        self.uri = uri
        self.requests: Counter[str] = Counter()

    # -- public API ---------------------------------------------------------------------------
    def list_from(self, prefix: str, start_after: str = "") -> list[FileInfo]:
        """Direct children of folder `prefix` whose key sorts after `start_after`, sorted by key.

        Sub-folders come back once each with `is_dir=True`. Cost is proportional to what sorts
        after `start_after` on stores that can start a listing there.
        """
        prefix = prefix.rstrip("/") + "/"
        return sorted(self._list_from(prefix, start_after), key=lambda f: f.key)

    def walk(self, prefix: str = "") -> Iterator[FileInfo]:
        """Every file below `prefix` (recursively), in no promised order."""
        yield from self._walk(prefix.strip("/"))

    def read(self, key: str) -> bytes:
        """The whole object; FileNotFoundError when it is missing."""
        self.requests["read"] += 1
        return self._read(key)

    def head(self, key: str) -> FileInfo | None:
        self.requests["head"] += 1
        return self._head(key)

    def put_if_absent(self, key: str, data: bytes) -> None:
        """Create `key` atomically; FileExistsError if anything is already there."""
        self.requests["put"] += 1
        self._put_if_absent(key, data)

    def overwrite(self, key: str, data: bytes) -> None:
        self.requests["put"] += 1
        self._overwrite(key, data)

    def delete_many(self, keys: Iterable[str]) -> int:
        """Delete keys in batches; returns how many were deleted. Missing keys are not errors."""
        return self._delete_many(list(keys))

    def local_path(self, key: str) -> str | None:
        """A path the OS can open directly, when the store is the local disk."""
        return None

    # -- backend hooks ------------------------------------------------------------------------
    @abstractmethod
    def _list_from(self, prefix: str, start_after: str) -> Iterable[FileInfo]: ...

    @abstractmethod
    def _walk(self, prefix: str) -> Iterator[FileInfo]: ...

    @abstractmethod
    def _read(self, key: str) -> bytes: ...

    @abstractmethod
    def _head(self, key: str) -> FileInfo | None: ...

    @abstractmethod
    def _put_if_absent(self, key: str, data: bytes) -> None: ...

    @abstractmethod
    def _overwrite(self, key: str, data: bytes) -> None: ...

    @abstractmethod
    def _delete_many(self, keys: list[str]) -> int: ...


class LocalStorage(Storage):
    """The local file system, used directly (no fsspec) because it is the hot path in tests."""

    def __init__(self, uri: str, root: str) -> None:
        super().__init__(uri)
        self.root = os.path.abspath(root)

    def local_path(self, key: str) -> str:
        return os.path.join(self.root, *key.split("/")) if key else self.root

    def _list_from(self, prefix: str, start_after: str) -> Iterable[FileInfo]:
        self.requests["list"] += 1
        folder = self.local_path(prefix.rstrip("/"))
        try:
            entries = list(os.scandir(folder))
        except FileNotFoundError:
            return []
        except NotADirectoryError:
            return []
        except PermissionError as e:
            raise StorageUnreachableError(f"cannot list {self.uri}/{prefix}: permission denied") from e
        out = []
        for entry in entries:
            key = prefix + entry.name
            if key <= start_after:
                continue
            if entry.is_dir():
                out.append(FileInfo(key + "/", 0, 0, is_dir=True))
            else:
                st = entry.stat()
                out.append(FileInfo(key, st.st_size, st.st_mtime_ns // 1_000_000))
        return out

    def _walk(self, prefix: str) -> Iterator[FileInfo]:
        base = self.local_path(prefix)
        for dirpath, _dirs, files in os.walk(base):
            self.requests["list"] += 1
            rel = os.path.relpath(dirpath, self.root).replace(os.sep, "/")
            rel = "" if rel == "." else rel + "/"
            for name in files:
                st = os.stat(os.path.join(dirpath, name))
                yield FileInfo(rel + name, st.st_size, st.st_mtime_ns // 1_000_000)

    def _read(self, key: str) -> bytes:
        try:
            with open(self.local_path(key), "rb") as f:
                return f.read()
        except IsADirectoryError as e:
            raise FileNotFoundError(key) from e
        except PermissionError as e:
            raise StorageUnreachableError(f"cannot read {self.uri}/{key}: permission denied") from e

    def _head(self, key: str) -> FileInfo | None:
        try:
            st = os.stat(self.local_path(key))
        except FileNotFoundError:
            return None
        return FileInfo(key, st.st_size, st.st_mtime_ns // 1_000_000)

    def _write_temp(self, key: str, data: bytes) -> str:
        final = self.local_path(key)
        os.makedirs(os.path.dirname(final), exist_ok=True)
        tmp = os.path.join(os.path.dirname(final), f".{os.path.basename(final)}.{uuid.uuid4().hex}.tmp")
        with open(tmp, "wb") as f:
            f.write(data)
            f.flush()
            os.fsync(f.fileno())
        return tmp

    def _put_if_absent(self, key: str, data: bytes) -> None:
        # Write aside, then hard-link into place: link(2) refuses an existing name atomically,
        # and readers never see a partial file.
        tmp = self._write_temp(key, data)
        try:
            os.link(tmp, self.local_path(key))
        finally:
            os.unlink(tmp)

    def _overwrite(self, key: str, data: bytes) -> None:
        tmp = self._write_temp(key, data)
        os.replace(tmp, self.local_path(key))

    def _delete_many(self, keys: list[str]) -> int:
        deleted = 0
        for key in keys:
            self.requests["delete"] += 1
            with contextlib.suppress(FileNotFoundError):
                os.unlink(self.local_path(key))
                deleted += 1
        return deleted


class FsspecStorage(Storage):
    """Object stores through fsspec. Scheme-specific listing lives in `_list_from`."""

    DELETE_BATCH = 1000

    def __init__(self, uri: str, protocol: str, path: str, options: dict[str, Any]) -> None:
        super().__init__(uri)
        import fsspec

        self.protocol = protocol
        self.base = path.strip("/")
        try:
            self.fs = fsspec.filesystem(protocol, **options)
        except (ImportError, ValueError, TypeError) as e:
            raise InvalidInputError(f"cannot open {uri}: {type(e).__name__}: {e}") from e

    def _full(self, key: str) -> str:
        return f"{self.base}/{key}" if key else self.base

    def _rel(self, full: str) -> str:
        full = full.strip("/")
        return full[len(self.base) + 1 :] if full.startswith(self.base + "/") else full

    def _call(self, op: str, fn: Callable[[], T]) -> T:
        return with_retries(self.uri, op, fn)

    def _info(self, d: dict[str, Any]) -> FileInfo:
        is_dir = d.get("type") == "directory"
        key = self._rel(d["name"]) + ("/" if is_dir else "")
        return FileInfo(key, int(d.get("size") or 0), _mtime_ms(d), is_dir=is_dir)

    def _list_from(self, prefix: str, start_after: str) -> Iterable[FileInfo]:
        self.requests["list"] += 1
        full = self._full(prefix.rstrip("/"))
        try:
            entries = self._call("list", lambda: self.fs.ls(full, detail=True, refresh=True))
        except FileNotFoundError:
            return []
        infos = (self._info(e) for e in entries)
        return [i for i in infos if i.key.rstrip("/") > start_after and i.key != prefix]

    def _walk(self, prefix: str) -> Iterator[FileInfo]:
        self.requests["list"] += 1
        found = self._call("list", lambda: self.fs.find(self._full(prefix), detail=True))
        for d in found.values():
            if d.get("type") != "directory":
                yield self._info(d)

    def _read(self, key: str) -> bytes:
        data = self._call("read", lambda: self.fs.cat_file(self._full(key)))
        return bytes(data)

    def _head(self, key: str) -> FileInfo | None:
        try:
            d = self._call("head", lambda: self.fs.info(self._full(key)))
        except FileNotFoundError:
            return None
        return self._info(d)

    def _put_if_absent(self, key: str, data: bytes) -> None:
        self._call("put", lambda: self.fs.pipe_file(self._full(key), data, mode="create"))

    def _overwrite(self, key: str, data: bytes) -> None:
        self._call("put", lambda: self.fs.pipe_file(self._full(key), data))

    def _delete_many(self, keys: list[str]) -> int:
        deleted = 0
        for i in range(0, len(keys), self.DELETE_BATCH):
            batch = [self._full(k) for k in keys[i : i + self.DELETE_BATCH]]
            self.requests["delete"] += 1
            self._call("delete", lambda b=batch: self.fs.rm(b))  # type: ignore[misc]
            deleted += len(batch)
        return deleted


def _mtime_ms(d: dict[str, Any]) -> int:
    for field in ("LastModified", "mtime", "updated", "last_modified", "created"):
        v = d.get(field)
        if v is None:
            continue
        if hasattr(v, "timestamp"):
            return int(v.timestamp() * 1000)
        if isinstance(v, int | float):
            return int(v * 1000)
        if isinstance(v, str):
            from datetime import datetime

            with contextlib.suppress(ValueError):
                return int(datetime.fromisoformat(v.replace("Z", "+00:00")).timestamp() * 1000)
    return 0


_TRANSIENT_MARKERS = ("SlowDown", "Throttl", "TooManyRequests", "ServiceUnavailable", "InternalError")


def with_retries(uri: str, op: str, fn: Callable[[], T], attempts: int = 5) -> T:
    """Run `fn`, retrying throttling and 5xx with exponential backoff.

    Connection failures become StorageUnreachableError naming the URI (never the credentials).
    """
    delay = 0.2
    for attempt in range(attempts):
        try:
            return fn()
        except (FileNotFoundError, FileExistsError):
            raise
        except PermissionError as e:
            raise StorageUnreachableError(f"{op} on {uri} was refused: access denied") from e
        except Exception as e:
            transient = _is_transient(e)
            if transient and attempt + 1 < attempts:
                time.sleep(delay)
                delay *= 2
                continue
            if transient or _is_connection_error(e):
                raise StorageUnreachableError(
                    f"{op} on {uri} failed: {type(e).__name__}; check the endpoint and credentials"
                ) from e
            raise
    raise AssertionError("unreachable")


def _status(e: BaseException) -> int | None:
    for attr in ("status", "status_code", "code"):
        v = getattr(e, attr, None)
        if isinstance(v, int):
            return v
    resp = getattr(e, "response", None)
    if isinstance(resp, dict):
        code = resp.get("ResponseMetadata", {}).get("HTTPStatusCode")
        if isinstance(code, int):
            return code
    return None


def _is_transient(e: BaseException) -> bool:
    status = _status(e)
    if status is not None and (status == 429 or status >= 500):
        return True
    text = f"{type(e).__name__} {e}"
    return any(m in text for m in _TRANSIENT_MARKERS)


def _is_connection_error(e: BaseException) -> bool:
    names = {type(x).__name__ for x in _chain(e)}
    markers = ("Connect", "Timeout", "EndpointConnection", "ServerDisconnected", "NoCredentials")
    return isinstance(e, ConnectionError | TimeoutError) or any(
        m in n for n in names for m in markers
    )


def _chain(e: BaseException) -> Iterator[BaseException]:
    seen: set[int] = set()
    cur: BaseException | None = e
    while cur is not None and id(cur) not in seen:
        seen.add(id(cur))
        yield cur
        cur = cur.__cause__ or cur.__context__


def open_storage(uri: str, options: dict[str, Any] | None = None) -> Storage:
    """Storage for a table URI: a plain path, file://, s3://, gs://, abfss:// or az://."""
    options = dict(options or {})
    if "://" not in uri:
        return LocalStorage(uri, uri)
    parsed = urlparse(uri)
    scheme = parsed.scheme.lower()
    if scheme not in SCHEMES:
        raise InvalidInputError(
            f"unsupported URI scheme {scheme!r} in {uri}; use one of file://, s3://, gs://, "
            "abfss://, az://"
        )
    if scheme == "file":
        return LocalStorage(uri, unquote(parsed.path))
    if not parsed.netloc:
        raise InvalidInputError(f"{uri} names no bucket or container")
    if scheme in ("s3", "s3a"):
        return FsspecStorage(uri, "s3", parsed.netloc + parsed.path, options)
    if scheme in ("gs", "gcs"):
        return FsspecStorage(uri, "gcs", parsed.netloc + parsed.path, options)
    # abfss://container@account.dfs.core.windows.net/path  or  az://container/path
    container = parsed.netloc.split("@", 1)[0]
    if "@" in parsed.netloc and "account_name" not in options:
        options["account_name"] = parsed.netloc.split("@", 1)[1].split(".", 1)[0]
    return FsspecStorage(uri, "abfs", container + parsed.path, options)
