"""One object-store interface over the local disk, S3, GCS, Azure Blob and any fsspec filesystem.

Keys are "/"-separated paths relative to the table root, as `_delta_log/00000000000000000001.json`.
Every backend counts its requests by operation in `requests` ("list", "read", "head", "put",
"delete"): one per HTTP request sent, retries included, so metrics and tests can see cost.

- file:// and plain paths: the local disk, directly (local.py);
- s3://, s3a://, gs://, gcs://, az://, abfs://, abfss://: obstore, the Python binding of Rust's
  object_store, the engine delta-rs uses (objects.py; s3.py, gcs.py, azure.py);
- any other scheme fsspec knows (hdfs://, webhdfs://, oss://, memory://, ...): fsspec's
  filesystem (fsspec.py), with the limits it states (no create-only write).

On the object stores each operation costs a known number of requests:

- list_from:     S3 ListObjectsV2 start-after; GCS (XML API) start-after; Azure startFrom (1)
- put_if_absent: S3 If-None-Match: *; GCS x-goog-if-generation-match: 0; Azure If-None-Match: *
- open_upload:   S3 and GCS multipart uploads; Azure staged blocks and a block list
- delete_many:   S3 DeleteObjects of 1000; Azure Blob Batch of 256; GCS one DELETE a key

(1) startFrom is new in the Blob API; Azurite 3.37 honours it. A service that rejects it (HTTP
400) is listed in full from then on; results are filtered here too.
obstore's own retries are switched off: `with_retries` is the one place that retries, so a count
is the number of requests really sent and backoff is not multiplied.

Storage options take fsspec's names (as before) and object_store's / delta-rs's
(delta/storage_options.py).
"""

from __future__ import annotations

import os
from typing import Any
from urllib.parse import unquote, urlparse

from deltakeeper.delta.errors import InvalidInputError, NotADeltaTableError
from deltakeeper.delta.storage.azure import AzureStorage
from deltakeeper.delta.storage.base import Deletes, FileInfo, IsAFolder, Storage
from deltakeeper.delta.storage.fsspec import FsspecStorage, open_fsspec
from deltakeeper.delta.storage.gcs import GcsStorage
from deltakeeper.delta.storage.local import LocalStorage
from deltakeeper.delta.storage.objects import (
    RANGE_BUFFER_BYTES,
    WHOLE_READ_BYTES,
    ObjectStorage,
    RangedFile,
)
from deltakeeper.delta.storage.retries import has_password, safe_uri, with_retries
from deltakeeper.delta.storage.s3 import S3Storage
from deltakeeper.delta.storage_options import ACCOUNT_KEYS, STORES, normalize_options

__all__ = [
    "RANGE_BUFFER_BYTES",
    "WHOLE_READ_BYTES",
    "AzureStorage",
    "Deletes",
    "FileInfo",
    "FsspecStorage",
    "GcsStorage",
    "IsAFolder",
    "LocalStorage",
    "ObjectStorage",
    "RangedFile",
    "S3Storage",
    "Storage",
    "is_local",
    "normalize_options",
    "open_storage",
    "with_retries",
]


def _local(uri: str, path: str) -> LocalStorage:
    if os.path.isfile(path):
        raise NotADeltaTableError(
            f"{uri} is a file, not a table: give the table's root folder (the one that holds "
            "_delta_log/)"
        )
    return LocalStorage(uri, path)


def is_local(uri: str) -> bool:
    """Whether `uri` is on the local disk (a plain path or file:), where reading a table costs
    CPU, not waits on requests."""
    return "://" not in uri or uri.lower().startswith("file:")


def open_storage(uri: str, options: dict[str, Any] | None = None) -> Storage:
    """Storage for a table URI: a plain path, file://, an object store's URI (s3://, gs://,
    abfss://, az://, ...), or any other scheme fsspec knows."""
    if not uri.strip():  # not the current folder: a URI left empty by mistake
        raise InvalidInputError(
            "no URI given (an empty string); give the table's or the prefix's URI: "
            "s3://bucket/path, gs://, abfss://, az://, file:// or a local path"
        )
    options = normalize_options(dict(options or {}))
    if "://" not in uri and not uri.lower().startswith("file:"):
        return _local(uri, uri)
    parsed = urlparse(uri)  # file:/path (one slash, as Spark writes them) included
    scheme = parsed.scheme.lower()
    if scheme == "file":
        return _local(uri, unquote(parsed.path))
    if has_password(parsed):
        raise InvalidInputError(
            f"{safe_uri(uri)}: credentials inside the URI are not used (nor shown); pass them as "
            "storage options (key=..., secret=...) or the cloud's environment variables"
        )
    store = STORES.get(scheme)
    if store is None:
        return open_fsspec(uri, options)
    if not parsed.netloc:
        raise InvalidInputError(f"{safe_uri(uri)} names no bucket or container")
    root = unquote(parsed.path)
    if store == "s3":
        return S3Storage(uri, parsed.netloc, root, options)
    if store == "gcs":
        return GcsStorage(uri, parsed.netloc, root, options)
    # abfss://container@account.dfs.core.windows.net/path  or  az://container/path
    container, _, host = parsed.netloc.partition("@")
    if host and not _names_account(options):
        options["account_name"] = host.split(".", 1)[0]
    return AzureStorage(uri, container, root, options)


def _names_account(options: dict[str, Any]) -> bool:
    return any(k.lower() in ACCOUNT_KEYS for k in options)
