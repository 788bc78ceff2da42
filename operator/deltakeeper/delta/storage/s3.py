"""S3 and S3-compatible stores (MinIO, Ceph, R2)."""

from __future__ import annotations

from deltakeeper.delta.storage.objects import ObjectStorage


class S3Storage(ObjectStorage):
    """S3 through obstore: ListObjectsV2 with StartAfter, PUT with If-None-Match: * for a
    create, multipart uploads, DeleteObjects of 1000 keys (a missing key counts as deleted)."""

    KIND = "s3"
    PAGE = 1000
    DELETE_BATCH = 1000  # DeleteObjects limit
