"""Google Cloud Storage."""

from __future__ import annotations

import functools
import re
import uuid
from collections.abc import Iterator
from typing import Any
from urllib.parse import quote

from deltakeeper.delta.storage.base import FileInfo
from deltakeeper.delta.storage.objects import ObjectStorage, mtime_ms
from deltakeeper.delta.storage.retries import BatchError


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
        return FileInfo(key, int(d.get("size", 0)), mtime_ms(d.get("updated")))

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
                raise BatchError(max(bad, default=500), f"batch delete: {len(bad)} parts failed")
            return codes.count(200) + codes.count(204)

        return self._call("delete", send)
