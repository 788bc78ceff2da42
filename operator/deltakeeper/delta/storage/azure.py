"""Azure Blob Storage and ADLS Gen2 (through its blob endpoint)."""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from typing import Any

from deltakeeper.delta.storage.base import FileInfo
from deltakeeper.delta.storage.objects import ObjectStorage
from deltakeeper.delta.storage.retries import http_status


class AzureStorage(ObjectStorage):
    """Azure through obstore: List Blobs with startFrom (inclusive; obstore drops the key
    itself), Put Blob with If-None-Match: * for a create, staged blocks and a block list for a
    streamed upload, Blob Batch deletes of 256.

    startFrom is recent in the Blob API; a service that rejects it (HTTP 400) is listed from
    the start from then on, and list_from filters, at the cost of the whole folder."""

    KIND = "azure"
    PAGE = 5000
    DELETE_BATCH = 256  # Blob Batch limit
    MULTIPART_CREATE = 0  # blocks need no upload to be started

    def __init__(self, uri: str, container: str, root: str, options: Mapping[str, Any]) -> None:
        super().__init__(uri, container, root, options)
        self._start_from = True  # until the service says it does not know the parameter

    def _offset(self, start_after: str) -> str | None:
        return self._key(start_after) if self._start_from else None

    def _pages(self, folder: str, offset: str | None) -> Iterator[list[FileInfo]]:
        try:
            yield from super()._pages(folder, offset)
        except Exception as e:
            if offset is None or http_status(e) != 400:
                raise
            self._start_from = False  # a service without startFrom: list all, filter here
            yield from super()._pages(folder, None)

    def _delete_batch(self, keys: list[str]) -> int:
        """A missing blob fails its part of the batch; the others are deleted. obstore names
        only the first missing one, so the count leaves out that one."""
        try:
            return super()._delete_batch(keys)
        except FileNotFoundError:
            return len(keys) - 1
