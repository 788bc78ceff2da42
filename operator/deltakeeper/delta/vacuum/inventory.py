"""Storage inventories: what a vacuum reads instead of listing the table.

Two kinds of source (`InventoryFormat`):

- An S3 Inventory report: its `manifest.json` (or a folder holding one, or the inventory
  configuration's folder, whose newest dated report is used) and the CSV (gzipped) or Parquet
  files the manifest names, in the destination bucket. Keys are URL-encoded in CSV reports
  only. Rows of versions that are not the latest, and delete markers, are no files.
- Delta Spark's inventory schema (`VACUUM ... USING INVENTORY`): `path` (a full URI),
  `length`, `isDir`, `modificationTime` (ms), as a Parquet file, a folder of them, or a Delta
  table.

Rows come back as they are (`Row`, the path not decoded); which of them lie in a table, and
what that table may delete, is vacuum/plan.py's business. A report that cannot be read (not
Parquet, a file it names gone, a time that is no time, a key that leaves its bucket) is an
InvalidInputError naming the inventory, raised as its rows are read: bad input that stops the
vacuum, and nothing else. The report is opened with the table's
storage options: inventories live on the table's store, often in another bucket.
"""

from __future__ import annotations

import csv
import gzip
import io
import json
import re
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from datetime import datetime
from typing import Any, NamedTuple
from urllib.parse import unquote, unquote_plus

import pyarrow as pa
import pyarrow.parquet as pq

from deltakeeper.delta import paths
from deltakeeper.delta.errors import DeltaError, InvalidInputError
from deltakeeper.delta.properties import when_text
from deltakeeper.delta.storage import FileInfo, Storage, open_storage
from deltakeeper.delta.table import open_table
from deltakeeper.delta.vacuum.modes import InventoryFormat

MANIFEST = "manifest.json"
# Delta Spark's INVENTORY_SCHEMA: the columns it reads, and their types.
DELTA_SCHEMA = {
    "path": pa.string(),
    "length": pa.int64(),
    "isDir": pa.bool_(),
    "modificationTime": pa.int64(),
}
# S3 Inventory's Parquet column names, and the CSV fileSchema names they stand for.
S3_COLUMNS = {
    "bucket": "Bucket",
    "key": "Key",
    "size": "Size",
    "last_modified_date": "LastModifiedDate",
    "is_latest": "IsLatest",
    "is_delete_marker": "IsDeleteMarker",
}
REPORT_FOLDER = re.compile(r"^\d{4}-\d{2}-\d{2}T\d{2}-\d{2}Z$")  # S3's dated report folders
BATCH_ROWS = 65_536


class Row(NamedTuple):
    """One object of an inventory. `uri`: scheme://bucket/key or file:/path, not decoded."""

    uri: str
    size: int
    mtime_ms: int
    is_dir: bool = False


@dataclass
class Inventory:
    """An inventory opened for reading: what it is, and its rows (read as they are iterated)."""

    source: str  # what was read, for the plan's reasons
    bucket: str | None  # the bucket an S3 report covers (None: any)
    rows: Iterator[Row]


def open_inventory(
    uri: str, fmt: InventoryFormat, options: dict[str, Any] | None = None
) -> Inventory:
    """The inventory at `uri`, read as `fmt` (AUTO: by what is there)."""
    folder, name = _split(uri)
    storage = open_storage(folder, options)
    if fmt is InventoryFormat.AUTO:
        fmt = _detect(storage, name)
    if fmt is InventoryFormat.S3:
        found = _s3_report(storage, name, uri, options)
    elif fmt is InventoryFormat.DELTA:
        table = open_table(uri, options)
        keys = [str(p) for p in table.snapshot().files["path"].to_pylist()]
        found = Inventory(f"Delta table {uri}", None, _delta_rows(table.storage, keys, uri))
    else:
        found = Inventory(f"Parquet inventory {uri}", None, _parquet_rows(storage, name, uri))
    found.rows = _guarded(found.rows, uri)
    return found


class _Unreadable(Exception):
    """A report's file that cannot be read, said plainly; `_guarded` names the inventory."""


def _guarded(rows: Iterator[Row], uri: str) -> Iterator[Row]:
    """`rows`, with whatever a report that cannot be read raises as they are read turned into
    an InvalidInputError naming the inventory (the store's own errors pass as they are)."""
    try:
        yield from rows
    except DeltaError:
        raise
    except _Unreadable as e:
        raise InvalidInputError(f"inventory {uri}: {e}") from e
    except FileNotFoundError as e:
        raise InvalidInputError(f"inventory {uri}: {e.filename or e} not found") from e
    except (OSError, ValueError, EOFError, csv.Error, pa.ArrowException) as e:
        raise InvalidInputError(f"inventory {uri}: cannot be read ({type(e).__name__}: {e})") from e


def _parquet_file(storage: Storage, key: str, size: int | None = None) -> pq.ParquetFile:
    """A Parquet file of a report; _Unreadable when it is gone or not Parquet."""
    try:
        return pq.ParquetFile(storage.open_input(key, size))
    except FileNotFoundError as e:
        raise _Unreadable(f"{storage.uri}/{key} not found") from e
    except (pa.ArrowInvalid, OSError) as e:
        raise _Unreadable(f"{storage.uri}/{key} is not a Parquet file ({e})") from e


def _split(uri: str) -> tuple[str, str]:
    """(folder, file name) of a URI that names a manifest or a Parquet file; else (uri, '')."""
    head, sep, last = uri.rstrip("/").rpartition("/")
    if last.endswith((".json", ".parquet")):
        return (head or sep or "."), last  # a bare relative name lies in the current folder
    return uri.rstrip("/"), ""


def _detect(storage: Storage, name: str) -> InventoryFormat:
    if name.endswith(".json"):
        return InventoryFormat.S3
    if name:
        return InventoryFormat.PARQUET
    names = {f.name for f in storage.list_from("")}
    if MANIFEST in names or any(REPORT_FOLDER.match(n) for n in names):
        return InventoryFormat.S3
    if paths.LOG_DIR in names:
        return InventoryFormat.DELTA
    return InventoryFormat.PARQUET


# -- Delta's inventory schema -------------------------------------------------------------------
def _parquet_rows(storage: Storage, name: str, uri: str) -> Iterator[Row]:
    """The Parquet file the URI names, or every visible Parquet file below its folder."""
    if name:
        files = [FileInfo(name, -1, 0)]
    else:
        found = (f for f in storage.walk("") if f.key.endswith(".parquet") and not _hidden(f.key))
        files = sorted(found, key=lambda f: f.key)
    if not files:
        raise InvalidInputError(f"inventory {uri}: no Parquet files found there")
    for f in files:
        file = _parquet_file(storage, f.key, f.size if f.size >= 0 else None)
        yield from _delta_schema_rows(file, uri)


def _delta_rows(storage: Storage, keys: Iterable[str], uri: str) -> Iterator[Row]:
    """The rows of a Delta table's live files (relative paths, as an inventory table has)."""
    for key in keys:
        if "://" in key or key.startswith("/"):
            raise InvalidInputError(f"inventory table {uri}: file {key} lies outside it")
        yield from _delta_schema_rows(_parquet_file(storage, unquote(key)), uri)


def _hidden(key: str) -> bool:
    return any(part.startswith(("_", ".")) for part in key.split("/"))


def _delta_schema_rows(file: pq.ParquetFile, uri: str) -> Iterator[Row]:
    schema = file.schema_arrow
    wrong = [
        f"{name} ({schema.field(name).type if name in schema.names else 'missing'})"
        for name, kind in DELTA_SCHEMA.items()
        if name not in schema.names or schema.field(name).type != kind
    ]
    if wrong:
        want = ", ".join(f"{n} {t}" for n, t in DELTA_SCHEMA.items())
        raise InvalidInputError(
            f"inventory {uri}: not in Delta's inventory schema ({want}): {', '.join(wrong)}"
        )
    for batch in file.iter_batches(BATCH_ROWS, columns=list(DELTA_SCHEMA)):
        cols = [batch.column(i).to_pylist() for i in range(4)]
        for path, length, is_dir, mtime in zip(*cols, strict=True):
            if path is not None:
                yield Row(path, length or 0, mtime or 0, bool(is_dir))


# -- S3 Inventory -------------------------------------------------------------------------------
def _s3_report(storage: Storage, name: str, uri: str, options: dict[str, Any] | None) -> Inventory:
    key = name or _manifest_key(storage, uri)
    try:
        manifest = json.loads(storage.read(key))
        source = str(manifest["sourceBucket"])
        destination = str(manifest["destinationBucket"]).rsplit(":", 1)[-1]
        fmt = str(manifest["fileFormat"]).upper()
        files = [_report_key(str(f["key"]), key) for f in manifest["files"]]
        schema = str(manifest.get("fileSchema", ""))
    except FileNotFoundError as e:
        raise InvalidInputError(f"inventory {uri}: {key} not found") from e
    except _Unreadable as e:
        raise InvalidInputError(f"inventory {uri}: {e}") from e
    except (ValueError, KeyError, TypeError, RecursionError) as e:
        raise InvalidInputError(f"inventory {uri}: {key} is not an S3 Inventory manifest") from e
    if fmt not in ("CSV", "PARQUET"):
        raise InvalidInputError(f"inventory {uri}: {fmt} reports are not read; use CSV or Parquet")
    scheme = uri.split("://", 1)[0]
    reports = open_storage(f"{scheme}://{destination}", options)
    made = manifest.get("creationTimestamp")
    when = f", made {when_text(int(made))}" if str(made).isdigit() else ""
    text = f"S3 Inventory report {storage.uri}/{key} ({fmt}, {len(files)} files{when})"
    reader = _csv_rows if fmt == "CSV" else _s3_parquet_rows
    rows = (row for f in files for row in reader(reports, f, schema, scheme))
    return Inventory(text, source, rows)


def _report_key(found: str, manifest: str) -> str:
    """A data file's key as the manifest names it, in the destination bucket; one that would
    leave it (`..`, an absolute path or a URI) is refused, never read."""
    parts = found.split("/")
    if not found or found.startswith("/") or "://" in found or ".." in parts or "\0" in found:
        raise _Unreadable(
            f"{manifest} names file {found!r}, which lies outside the destination bucket"
        )
    return found


def _manifest_key(storage: Storage, uri: str) -> str:
    """The manifest a URI names: the file itself, the one in the folder, or the one of the
    newest dated report below an inventory configuration's folder."""
    if storage.head(MANIFEST) is not None:
        return MANIFEST
    dated = sorted(n for n in storage.list_folders("") if REPORT_FOLDER.match(n))
    for folder in reversed(dated):
        if storage.head(f"{folder}/{MANIFEST}") is not None:
            return f"{folder}/{MANIFEST}"
    raise InvalidInputError(
        f"inventory {uri}: no {MANIFEST} there, nor in a dated report folder below it"
    )


def _csv_rows(storage: Storage, key: str, schema: str, scheme: str) -> Iterator[Row]:
    names = [n.strip() for n in schema.split(",")]
    missing = [n for n in ("Bucket", "Key") if n not in names]
    if missing:
        raise InvalidInputError(f"S3 Inventory fileSchema lacks {', '.join(missing)}: {schema}")
    try:
        data = storage.read(key)
    except FileNotFoundError as e:
        raise _Unreadable(f"{storage.uri}/{key} not found") from e
    text = gzip.decompress(data) if key.endswith(".gz") else data
    for line, values in enumerate(csv.reader(io.StringIO(text.decode("utf-8"))), start=1):
        row = dict(zip(names, values, strict=False))
        if _is_object(row.get("IsLatest"), row.get("IsDeleteMarker")):
            path = f"{scheme}://{row['Bucket']}/{unquote_plus(row['Key'])}"
            try:
                mtime = _mtime(row.get("LastModifiedDate"))
            except ValueError as e:
                raise _Unreadable(f"{key}: line {line}: {e}") from e
            yield Row(path, _size(row.get("Size")), mtime)


def _s3_parquet_rows(storage: Storage, key: str, schema: str, scheme: str) -> Iterator[Row]:
    file = _parquet_file(storage, key)
    present = [c for c in S3_COLUMNS if c in file.schema_arrow.names]
    if "bucket" not in present or "key" not in present:
        raise InvalidInputError(f"S3 Inventory file {key} has no bucket and key columns")
    for batch in file.iter_batches(BATCH_ROWS, columns=present):
        cols = {c: batch.column(c).to_pylist() for c in present}
        for i in range(batch.num_rows):
            get = {c: cols[c][i] for c in present}
            if _is_object(get.get("is_latest"), get.get("is_delete_marker")):
                path = f"{scheme}://{get['bucket']}/{get['key']}"
                yield Row(path, _size(get.get("size")), _mtime(get.get("last_modified_date")))


def _is_object(latest: Any, delete_marker: Any) -> bool:
    """A current version that is not a delete marker (absent columns: an unversioned bucket)."""
    return str(latest).lower() not in ("false", "0") and str(delete_marker).lower() not in (
        "true",
        "1",
    )


def _size(value: Any) -> int:
    try:
        return int(value or 0)
    except ValueError:
        return 0


def _mtime(value: Any) -> int:
    """Milliseconds from a CSV ISO 8601 text or a Parquet timestamp."""
    if isinstance(value, datetime):
        return int(value.timestamp() * 1000)
    if isinstance(value, int):
        return value
    if not value:
        return 0
    try:
        when = datetime.fromisoformat(str(value).replace("Z", "+00:00"))
    except ValueError:
        raise ValueError(f"LastModifiedDate {value!r} is not an ISO 8601 time") from None
    return int(when.timestamp() * 1000)


def file_info(row: Row, key: str) -> FileInfo:
    """A row as the listing would have given it, with its key relative to the table root."""
    return FileInfo(key + "/" if row.is_dir else key, row.size, row.mtime_ms, row.is_dir)
