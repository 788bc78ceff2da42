"""Google Cloud Storage."""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor

from deltakeeper.delta.storage.objects import ObjectStorage


class GcsStorage(ObjectStorage):
    """GCS through obstore, which speaks its XML API: list-type=2 listings with start-after,
    PUT with x-goog-if-generation-match: 0 for a create, XML multipart uploads. obstore has
    no batch delete for GCS: one DELETE a key, DELETE_THREADS at once."""

    KIND = "gcs"
    PAGE = 1000
    DELETE_THREADS = 10

    def _delete_many(self, keys: list[str]) -> int:
        if len(keys) < 2:
            return sum(self._delete_one(k) for k in keys)
        with ThreadPoolExecutor(min(self.DELETE_THREADS, len(keys))) as pool:
            forks = [self.fork() for _ in range(min(self.DELETE_THREADS, len(keys)))]
            chunks = [keys[i :: len(forks)] for i in range(len(forks))]
            done = sum(pool.map(lambda f, ks: sum(f._delete_one(k) for k in ks), forks, chunks))
        for fork in forks:
            self.requests.update(fork.requests)
        return done

    def _delete_one(self, key: str) -> int:
        """1 when deleted, 0 when it was not there (not an error)."""
        try:
            self._delete_batch([key])
        except FileNotFoundError:
            return 0
        return 1
