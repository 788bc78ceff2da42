"""S3 and S3-compatible stores (MinIO)."""

from __future__ import annotations

import functools
from collections.abc import Iterator
from typing import Any

from deltakeeper.delta.storage.base import FileInfo, Upload
from deltakeeper.delta.storage.objects import ObjectStorage, PiecewiseUpload, mtime_ms
from deltakeeper.delta.storage.retries import BatchError, transient_codes


class S3Storage(ObjectStorage):
    """S3 and S3-compatible stores (MinIO) through s3fs's botocore client."""

    DELETE_BATCH = 1000  # DeleteObjects limit
    PART_BYTES = 8 << 20  # a multipart upload's parts; S3 takes none below 5 MiB but the last

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
        return FileInfo(key, int(d["ContentLength"]), mtime_ms(d["LastModified"]))

    def _open_upload(self, key: str) -> Upload:
        return _MultipartUpload(self, key)

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
                    status = 503 if transient_codes(codes) else 403
                    raise BatchError(status, f"batch delete: {len(errors)} keys failed")
                return len(objects)  # S3 reports a missing key as deleted

            deleted += self._call("delete", send)
        return deleted


class _MultipartUpload(PiecewiseUpload):
    """A multipart upload: parts of PART_BYTES, then the completion."""

    def __init__(self, storage: S3Storage, key: str) -> None:
        super().__init__(storage, key, storage.PART_BYTES)
        self.s3 = storage
        self.upload_id = ""
        self.parts: list[dict[str, Any]] = []

    def _send_piece(self, number: int, body: bytes) -> None:
        if number == 1:
            self.upload_id = self.s3._s3("put", "create_multipart_upload", self.key)["UploadId"]
            self.parts = []
        kw = {"UploadId": self.upload_id, "PartNumber": number, "Body": body}
        out = self.s3._s3("put", "upload_part", self.key, **kw)
        self.parts.append({"PartNumber": number, "ETag": out["ETag"]})

    def _join(self) -> None:
        sent = self.s3.requests["put"]
        parts = {"Parts": self.parts}
        try:
            kw = {"UploadId": self.upload_id, "MultipartUpload": parts}
            self.s3._s3("put", "complete_multipart_upload", self.key, **kw)
        except FileNotFoundError:
            # A retried completion can meet its own first attempt, done but not heard: the
            # upload is gone (NoSuchUpload) and the object has the size we sent.
            info = self.s3.head(self.key)
            if self.s3.requests["put"] - sent < 2 or info is None or info.size != self.size:
                raise

    def _drop(self) -> None:
        self.s3._s3("delete", "abort_multipart_upload", self.key, UploadId=self.upload_id)
