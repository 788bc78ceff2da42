"""Azure Blob Storage and ADLS Gen2."""

from __future__ import annotations

import base64
from collections.abc import Awaitable, Callable, Iterator
from typing import Any, TypeVar

from deltakeeper.delta.storage.base import FileInfo, Upload
from deltakeeper.delta.storage.objects import ObjectStorage, PiecewiseUpload, mtime_ms
from deltakeeper.delta.storage.retries import BatchError, http_status

T = TypeVar("T")


class AzureStorage(ObjectStorage):
    """Azure Blob Storage (and ADLS Gen2 through its blob endpoint) with adlfs's async client."""

    DELETE_BATCH = 256  # Blob Batch limit
    BLOCK_BYTES = 8 << 20  # a streamed upload's blocks (Put Block), committed by one Put Block List
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
                if "start_from" not in kw or http_status(e) != 400:
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
        return FileInfo(key, int(p.size), mtime_ms(p.last_modified))

    def _upload(self, key: str, data: bytes, overwrite: bool) -> None:
        # overwrite=False sends If-None-Match: *; the service answers 409 BlobAlreadyExists.
        async def put() -> None:
            blob = self.container.get_blob_client(self._key(key))
            await blob.upload_blob(data, overwrite=overwrite, **self.NO_RETRY)

        self._az("put", put, key)

    def _create(self, key: str, data: bytes) -> None:
        self._upload(key, data, overwrite=False)

    def _open_upload(self, key: str) -> Upload:
        return _BlockUpload(self, key)

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
                    raise BatchError(max(bad), f"batch delete: {len(bad)} parts failed")
                return len(codes) - codes.count(404)

            deleted += self._az("delete", batch)
        return deleted


class _BlockUpload(PiecewiseUpload):
    """Blocks of BLOCK_BYTES staged, then one block list (Put Block List). Blocks never
    committed are dropped by the service after a week."""

    def __init__(self, storage: AzureStorage, key: str) -> None:
        super().__init__(storage, key, storage.BLOCK_BYTES)
        self.az = storage
        self.blob = storage.container.get_blob_client(storage._key(key))
        self.blocks: list[str] = []

    def _send_piece(self, number: int, body: bytes) -> None:
        if number == 1:
            self.blocks = []
        block_id = base64.b64encode(f"{number:08d}".encode()).decode()

        async def put() -> None:
            await self.blob.stage_block(block_id, body, **self.az.NO_RETRY)

        self.az._az("put", put, self.key)
        self.blocks.append(block_id)

    def _join(self) -> None:
        async def put() -> None:  # the same list again on a retry: idempotent
            await self.blob.commit_block_list(self.blocks, **self.az.NO_RETRY)

        self.az._az("put", put, self.key)
