"""Symlink format manifests (`_symlink_format_manifest/`), as Delta Spark's
GenerateSymlinkManifest writes them, for engines that read a Delta table through Hive-style
manifests (Redshift Spectrum, Presto and Athena set-ups).

One `manifest` file per partition, at `_symlink_format_manifest/<col>=<value>/.../manifest`
(Hive's path escaping, `__HIVE_DEFAULT_PARTITION__` for null), or one at
`_symlink_format_manifest/manifest` for an unpartitioned table: the absolute path of each live
data file, one a line, each line ended by a newline, paths decoded as Hadoop prints them
(`file:/...` on a local disk; the table URI's own scheme on object stores). Lines are sorted
(Spark's order is whatever its shuffle gives).

Each manifest is written whole with one overwrite (an object store's PUT, a rename on a local
disk), so a reader never sees half of one; only manifests whose content changed are written;
those of partitions that no longer hold files are deleted. Refused, as Spark refuses, on tables
with column mapping or with deletion vectors in any live file (a manifest cannot hide rows).
"""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import unquote, urlsplit

from deltakeeper.delta.errors import InvalidInputError, UnsupportedProtocolError
from deltakeeper.delta.features import require_writable
from deltakeeper.delta.storage.local import LocalStorage
from deltakeeper.delta.table import Table
from deltakeeper.delta.types import mapping_on

MANIFEST_DIR = "_symlink_format_manifest"
MANIFEST = "manifest"
DEFAULT_PARTITION = "__HIVE_DEFAULT_PARTITION__"
# Hive's FileUtils escapes these in partition folder names (Spark's ExternalCatalogUtils).
_ESCAPED = frozenset(map(chr, range(1, 32))) | frozenset("\"#%'*/:=?\\\x7f{[]^")


@dataclass
class ManifestRun:
    version: int
    written: list[str] = field(default_factory=list)  # manifest keys written (or that would be)
    unchanged: int = 0
    deleted: list[str] = field(default_factory=list)  # stale manifests deleted (or would be)
    files: int = 0  # data files listed

    def to_json(self) -> dict[str, Any]:
        return {
            "version": self.version,
            "files": self.files,
            "written": self.written,
            "unchanged": self.unchanged,
            "deleted": self.deleted,
        }


def escape_path_name(text: str) -> str:
    return "".join(f"%{ord(c):02X}" if c in _ESCAPED else c for c in text)


def partition_dir(columns: Sequence[str], values: Mapping[str, str | None]) -> str:
    """`a=1/b=x%2Fy`: the folder of a partition, as Hive names it."""
    parts = []
    for column in columns:
        value = values.get(column)
        shown = escape_path_name(value) if value else DEFAULT_PARTITION
        parts.append(f"{escape_path_name(column)}={shown}")
    return "/".join(parts)


def table_location(table: Table) -> str:
    """The table's root as Hadoop prints a qualified path: `file:/abs/path`, `s3://b/p`."""
    storage = table.storage
    if isinstance(storage, LocalStorage):
        return "file:" + os.path.abspath(storage.root).replace(os.sep, "/").rstrip("/")
    parts = urlsplit(storage.uri)
    return f"{parts.scheme}://{parts.netloc}{unquote(parts.path)}".rstrip("/")


def data_file_location(root: str, path: str) -> str:
    """An add's path as an absolute, decoded location (Delta's absolutePath, printed)."""
    parts = urlsplit(path)
    if parts.scheme:
        netloc = f"//{parts.netloc}" if parts.netloc else ""
        return f"{parts.scheme}:{netloc}{unquote(parts.path)}"
    if path.startswith("/"):
        return "file:" + unquote(path) if root.startswith("file:") else unquote(path)
    return f"{root}/{unquote(path).lstrip('/')}"


def manifest_key(folder: str) -> str:
    return f"{MANIFEST_DIR}/{folder}/{MANIFEST}" if folder else f"{MANIFEST_DIR}/{MANIFEST}"


def generate(table: Table, dry_run: bool = False, catalog_allows: bool = False) -> ManifestRun:
    """Bring `_symlink_format_manifest/` in line with the table's live files. A catalog-managed
    table's manifests are its catalog's (they would show the newest published version, which
    may trail the catalog): refused unless `catalog_allows`."""
    snap = table.snapshot(add_cols=("path", "partitionValues", "deletionVector"))
    require_writable(snap, "manifest", catalog_allows)
    meta = snap.metadata
    if mapping_on(meta.properties.column_mapping_mode):
        raise InvalidInputError(
            f"{table.uri}: symlink manifests are not generated for tables with column mapping "
            "(Delta Spark refuses too): engines reading manifests would read the physical names"
        )
    adds = snap.files.to_pylist()
    if any(a.get("deletionVector") for a in adds):
        raise UnsupportedProtocolError(
            f"{table.uri}: symlink manifests cannot hide the rows deletion vectors delete; "
            "purge them first (REORG TABLE ... APPLY (PURGE)), as Delta Spark requires"
        )
    run = ManifestRun(snap.version, files=len(adds))
    wanted = _contents(table_location(table), meta.partition_columns, adds)
    existing = {
        f.key for f in table.storage.walk(MANIFEST_DIR) if f.key.rsplit("/", 1)[-1] == MANIFEST
    }
    for key, body in sorted(wanted.items()):
        if key in existing and table.storage.read(key) == body:
            run.unchanged += 1
            continue
        run.written.append(key)
        if not dry_run:
            table.storage.overwrite(key, body)
    run.deleted = sorted(existing - set(wanted))
    if run.deleted and not dry_run:
        table.storage.delete_many(run.deleted)
        folders = {k.rsplit("/", 1)[0] + "/" for k in run.deleted if "/" in k}
        table.storage.remove_empty_folders(_with_parents(folders))
    return run


def _contents(root: str, columns: Sequence[str], adds: list[dict[str, Any]]) -> dict[str, bytes]:
    """Each manifest's key and bytes; an unpartitioned table always has its one manifest."""
    lines: dict[str, list[str]] = {manifest_key(""): []} if not columns else {}
    for add in adds:
        values = dict(add.get("partitionValues") or [])
        key = manifest_key(partition_dir(columns, values))
        lines.setdefault(key, []).append(data_file_location(root, add["path"]))
    return {k: "".join(f"{p}\n" for p in sorted(v)).encode() for k, v in lines.items()}


def _with_parents(folders: set[str]) -> set[str]:
    out = set()
    for folder in folders:
        parts = folder.rstrip("/").split("/")
        for i in range(2, len(parts) + 1):  # never the manifest folder itself
            out.add("/".join(parts[:i]) + "/")
    return out
