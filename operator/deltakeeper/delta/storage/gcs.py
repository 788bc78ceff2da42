"""Google Cloud Storage."""

from __future__ import annotations

from deltakeeper.delta.storage.objects import ObjectStorage


class GcsStorage(ObjectStorage):
    """GCS through obstore, which speaks its XML API: list-type=2 listings with start-after,
    PUT with x-goog-if-generation-match: 0 for a create, XML multipart uploads. obstore has
    no batch delete for GCS: one DELETE a key, DELETE_THREADS at once."""

    KIND = "gcs"
    PAGE = 1000
    DELETE_THREADS = 10

    def _delete_batch(self, keys: list[str]) -> int:
        """One key: 1 when deleted, 0 when it was not there (not an error)."""
        try:
            return super()._delete_batch(keys)
        except FileNotFoundError:
            return 0
