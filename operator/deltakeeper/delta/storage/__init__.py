"""One object-store interface over the local disk, S3, GCS and Azure Blob (s3://, gs://, az://).

Keys are "/"-separated paths relative to the table root, as `_delta_log/00000000000000000001.json`.
Every backend counts its requests by operation in `requests` ("list", "read", "head", "put",
"delete"): one per HTTP request sent, retries included, so metrics and tests can see cost.

The object stores are opened through fsspec (s3fs, gcsfs, adlfs), which turns user options and
ambient credentials into a client; the operations use that client's native calls, so each costs
a known number of requests:

- list_from:     S3 ListObjectsV2 StartAfter; GCS objects.list startOffset; Azure startFrom (1)
- put_if_absent: S3 If-None-Match: *; GCS ifGenerationMatch=0; Azure If-None-Match: *
- delete_many:   S3 DeleteObjects of 1000; GCS JSON batch of 100; Azure Blob Batch of 256

(1) startFrom is new in the Blob API (2026); Azurite 3.37 honours it. A service that ignores it
still gives correct answers, because results are filtered here too, at the cost of a full
listing; one that rejects it (HTTP 400) is listed in full from then on.
The libraries' own retries are switched off: `with_retries` is the one place that retries, so a
count is the number of requests really sent and backoff is not multiplied.
"""

from __future__ import annotations

import json
import os
from typing import Any
from urllib.parse import unquote, urlparse

from deltakeeper.delta.errors import InvalidInputError, NotADeltaTableError
from deltakeeper.delta.storage.azure import AzureStorage
from deltakeeper.delta.storage.base import Deletes, FileInfo, Storage
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

__all__ = [
    "RANGE_BUFFER_BYTES",
    "SCHEMES",
    "WHOLE_READ_BYTES",
    "AzureStorage",
    "Deletes",
    "FileInfo",
    "GcsStorage",
    "LocalStorage",
    "ObjectStorage",
    "RangedFile",
    "S3Storage",
    "Storage",
    "normalize_options",
    "open_storage",
    "with_retries",
]

SCHEMES = ("file", "s3", "s3a", "gs", "gcs", "abfss", "abfs", "az")


def _local(uri: str, path: str) -> LocalStorage:
    if os.path.isfile(path):
        raise NotADeltaTableError(
            f"{uri} is a file, not a table: give the table's root folder (the one that holds "
            "_delta_log/)"
        )
    return LocalStorage(uri, path)


# Options fsspec wants as mappings; a string (the command line, a manifest) is read as JSON.
MAPPING_OPTIONS = ("client_kwargs", "config_kwargs", "s3_additional_kwargs", "token")


def normalize_options(options: dict[str, Any]) -> dict[str, Any]:
    """`options` with the mapping options as dicts; a clear error where one is not a JSON
    object (fsspec would fail deep inside with an AttributeError). A gcs `token` may also be
    a plain string (a file, 'anon', 'google_default')."""
    out = dict(options)
    for key in MAPPING_OPTIONS:
        value = out.get(key)
        if value is None or isinstance(value, dict):
            continue
        if key == "token" and not (isinstance(value, str) and value.lstrip().startswith("{")):
            continue
        try:
            parsed = json.loads(value) if isinstance(value, str) else None
        except ValueError:
            parsed = None
        if not isinstance(parsed, dict):
            raise InvalidInputError(
                f"storage option {key} takes a JSON object, e.g. "
                f'{key}=\'{{"region_name": "eu-west-1"}}\''
            )
        out[key] = parsed
    return out


def open_storage(uri: str, options: dict[str, Any] | None = None) -> Storage:
    """Storage for a table URI: a plain path, file://, s3://, gs://, abfss:// or az://."""
    options = normalize_options(dict(options or {}))
    if "://" not in uri and not uri.lower().startswith("file:"):
        return _local(uri, uri)
    parsed = urlparse(uri)  # file:/path (one slash, as Spark writes them) included
    scheme = parsed.scheme.lower()
    if scheme not in SCHEMES:
        raise InvalidInputError(
            f"unsupported URI scheme {scheme!r} in {safe_uri(uri)}; use one of file://, s3://, "
            "gs://, abfss://, az://"
        )
    if scheme == "file":
        return _local(uri, unquote(parsed.path))
    if has_password(parsed):
        raise InvalidInputError(
            f"{safe_uri(uri)}: credentials inside the URI are not used (nor shown); pass them as "
            "storage options (key=..., secret=...) or the cloud's environment variables"
        )
    if not parsed.netloc:
        raise InvalidInputError(f"{safe_uri(uri)} names no bucket or container")
    root = unquote(parsed.path)
    if scheme in ("s3", "s3a"):
        return S3Storage(uri, parsed.netloc, root, options)
    if scheme in ("gs", "gcs"):
        return GcsStorage(uri, parsed.netloc, root, options)
    # abfss://container@account.dfs.core.windows.net/path  or  az://container/path
    container, _, host = parsed.netloc.partition("@")
    if host and "account_name" not in options and "connection_string" not in options:
        options["account_name"] = host.split(".", 1)[0]
    return AzureStorage(uri, container, root, options)
