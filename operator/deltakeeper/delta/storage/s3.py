"""S3 and S3-compatible stores (MinIO, Ceph, R2)."""

from __future__ import annotations

import os
from collections.abc import Mapping
from typing import Any

from deltakeeper.delta import storage_options as opts
from deltakeeper.delta.errors import InvalidCredentialsError
from deltakeeper.delta.storage.objects import ObjectStorage
from deltakeeper.delta.storage.retries import safe_uri


class S3Storage(ObjectStorage):
    """S3 through obstore: ListObjectsV2 with StartAfter, PUT with If-None-Match: * for a
    create, multipart uploads, DeleteObjects of 1000 keys (a missing key counts as deleted).

    With no credentials in the options or the environment, object_store asks the instance
    metadata service; with that lookup turned off (AWS_EC2_METADATA_DISABLED=true) there is
    nowhere left to look, which is said here before any request."""

    KIND = "s3"
    PAGE = 1000
    DELETE_BATCH = 1000  # DeleteObjects limit

    def __init__(self, uri: str, bucket: str, root: str, options: Mapping[str, Any]) -> None:
        super().__init__(uri, bucket, root, options)
        env = os.environ
        given = opts.aws_credentials_given(opts.canonical(self.KIND, options), env)
        if not given and opts.metadata_lookup_off(env):
            raise InvalidCredentialsError(
                f"{opts.NO_AWS_CREDENTIALS}, for {safe_uri(uri)}; none is configured and the "
                "instance metadata lookup is off (AWS_EC2_METADATA_DISABLED)"
            )
