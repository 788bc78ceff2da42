"""Data-file vacuum as a plan: which files under the table root may go, and why.

Three ways to find candidates (`Mode`), one way to decide, as Delta Spark's VacuumCommand:

- FULL lists every file under the table root.
- LITE lists nothing under the root: its candidates are the files the commits since the last
  vacuum name as removed (and their deletion-vector files) or as change data (vacuum/lite.py).
  It cannot find files no commit names (a failed write's), nor empty folders.
- INVENTORY reads a storage inventory instead of listing (vacuum/inventory.py): only the objects it
  lists are candidates, so files newer than the report stay.

Every candidate then meets the same rules:

1. A path with any component that is hidden is never considered: names starting with `_` or `.`
   (so `_delta_log`, Hadoop `.crc` files, `_SUCCESS`), except `_delta_index*`, `_change_data*`
   and partition directories `<partitionColumn>=...`; and `metadata` when the table has Iceberg
   universal format on. `_change_data` files are not referenced by any snapshot, so they go
   once they are older than the cut-off, as in Delta.
2. The cut-off is `now - retention`. Referenced are: the paths of live adds, the paths of
   tombstones not yet expired (`deletionTimestamp >= cut-off`; a tombstone without one counts
   as expired, as in Delta), and the deletion-vector files of both. Paths in the log are
   URL-encoded, relative to the root or absolute; an absolute path outside the root is a
   reference to something else and protects nothing here.
3. Delete the unreferenced candidates older than the cut-off: by their modification time when
   listed, by their `deletionTimestamp` when a remove names them (LITE; 0 for cdc files). Then,
   as Delta Spark does, remove the folders a listing showed left empty (never the root, nor a
   hidden one such as `_delta_log`): those whose every file and folder goes and which were
   modified before the cut-off (a writer may have just created a newer one). Delta Spark
   removes folders that were empty before it ran; this also takes those it empties, a run
   earlier. Object stores have no folders.
4. Never descend into a folder (other than the root) that holds its own `_delta_log`: it is
   another Delta table, whose files this table's log knows nothing of. Delta Spark's VACUUM
   would delete them all; deltakeeper skips the folder and names it in the plan.

After the deletes, `record_vacuum` moves `_delta_log/_last_vacuum_info` (vacuum/info.py) to N,
the newest commit at or before the cut-off, after a FULL run too (Delta Spark writes `{}` then,
so its FULL run never makes LITE possible again); never backwards, and never after an
INVENTORY run, whose report may predate files removed since.

Safety leans one way: when a log path could name a file in two spellings (URL-decoded or as
written) both are protected, and the referenced set may hold keys that are not listed.

Pure planning (`plan_vacuum`), table I/O (`plan_table_vacuum`), execution (`execute_vacuum`,
`remove_empty_folders`, `record_vacuum`), mirroring cleanup.py. `plan_table_vacuum` refuses,
before listing anything, retention below `MIN_VACUUM_RETENTION_MS` unless allowed, tables with
reader or writer features this build does not know (vacuumProtocolCheck asks for the writer
check; deltakeeper always does it), and catalog-managed tables (their catalog owns file
deletion, and Delta Spark refuses them too).

The snapshot needs the add columns `path`, `deletionVector` and the remove columns `path`,
`deletionTimestamp`, `deletionVector`; `load_for_vacuum` loads exactly those.
"""

from __future__ import annotations

import os
import posixpath
import re
import uuid
from collections import Counter
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import unquote, urlsplit

import pyarrow as pa
import pyarrow.compute as pc

from deltakeeper.delta import features, paths
from deltakeeper.delta.errors import (
    CorruptLogError,
    InvalidInputError,
    Stopped,
    UnsupportedProtocolError,
)
from deltakeeper.delta.held import HeldSnapshot, update_held
from deltakeeper.delta.log.segment import Listing, group
from deltakeeper.delta.properties import (
    MIN_VACUUM_RETENTION_MS,
    TableProperties,
    duration_text,
    when_text,
)
from deltakeeper.delta.snapshot import Snapshot, SnapshotHeader
from deltakeeper.delta.storage import (
    Deletes,
    FileInfo,
    FsspecStorage,
    LocalStorage,
    ObjectStorage,
    Storage,
)
from deltakeeper.delta.table import Table
from deltakeeper.delta.vacuum import info as vacuum_info
from deltakeeper.delta.vacuum import lite as vacuum_lite
from deltakeeper.delta.vacuum.info import InfoStatus, LastVacuumInfo
from deltakeeper.delta.vacuum.inventory import Inventory, Row, file_info
from deltakeeper.delta.vacuum.lite import Named, Window
from deltakeeper.delta.vacuum.modes import Mode

# Keys per delete_many call, one progress report each: four S3 DeleteObjects of 1,000, which
# an object store sends at once (ObjectStorage.DELETE_THREADS).
DELETE_BATCH = 4000

VACUUM_ADD = ("path", "deletionVector")
VACUUM_REMOVE = ("path", "deletionTimestamp", "deletionVector")


# -- deletion vectors -------------------------------------------------------------------------
Z85_ALPHABET = (
    "0123456789abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ.-:+=^!/*?&<>()[]{}@%$#"
)
_Z85_VALUE = {c: i for i, c in enumerate(Z85_ALPHABET)}
DV_UUID_CHARS = 20  # a UUID's 16 bytes in Z85


def z85_decode(text: str) -> bytes:
    """ZeroMQ's Base85 (RFC 32/Z85): every 5 characters are 4 bytes, big-endian."""
    if len(text) % 5:
        raise ValueError(f"Z85 text length must be a multiple of 5, got {len(text)}")
    out = bytearray()
    for i in range(0, len(text), 5):
        value = 0
        for char in text[i : i + 5]:
            digit = _Z85_VALUE.get(char)
            if digit is None:
                raise ValueError(f"{char!r} is not a Z85 character")
            value = value * 85 + digit
        if value >= 2**32:
            raise ValueError(f"Z85 group {text[i : i + 5]!r} is out of range")
        out += value.to_bytes(4, "big")
    return bytes(out)


def dv_relative_path(path_or_inline: str) -> str:
    """Where a storageType 'u' deletion vector lives, relative to the table root:
    `[<random prefix>/]deletion_vector_<uuid>.bin`."""
    if len(path_or_inline) < DV_UUID_CHARS:
        raise ValueError(f"{path_or_inline!r} is shorter than a Z85-encoded UUID")
    prefix, encoded = path_or_inline[:-DV_UUID_CHARS], path_or_inline[-DV_UUID_CHARS:]
    name = f"deletion_vector_{uuid.UUID(bytes=z85_decode(encoded))}.bin"
    return f"{prefix}/{name}" if prefix else name


# -- paths ------------------------------------------------------------------------------------
# Scheme spellings that name the same store.
_FAMILY = {
    "file": "file",
    "s3": "s3",
    "s3a": "s3",
    "s3n": "s3",
    "gs": "gs",
    "gcs": "gs",
    "az": "az",
    "abfs": "az",
    "abfss": "az",
    "wasb": "az",
    "wasbs": "az",
    "adl": "az",
}
_ABSOLUTE = re.compile(r"^[A-Za-z][A-Za-z0-9+.-]*:/")


@dataclass(frozen=True)
class Root:
    """Where a table lives, to tell which absolute paths point inside it."""

    family: str  # file, s3, gs, az
    bucket: str  # '' for the local disk
    paths: tuple[str, ...]  # the root folder ('/'-separated, no trailing '/'), all spellings


def table_root(storage: Storage) -> Root:
    if isinstance(storage, LocalStorage):
        spellings = {storage.root, os.path.realpath(storage.root)}
        return Root("file", "", tuple(sorted(p.replace(os.sep, "/") for p in spellings)))
    if isinstance(storage, ObjectStorage):
        scheme = urlsplit(storage.uri).scheme.lower()
        base = ("/" + storage.root).rstrip("/")
        return Root(_FAMILY.get(scheme, scheme), storage.bucket, (base,))
    if isinstance(storage, FsspecStorage):  # scheme://host/path, as its URI says
        parts = urlsplit(storage.uri)
        base = posixpath.normpath(unquote(parts.path)).rstrip("/") if parts.path else ""
        return Root(parts.scheme.lower(), parts.netloc.partition("@")[0], (base,))
    raise InvalidInputError(f"vacuum does not know where {storage.uri} keeps its files")


def keys_for(path: str, root: Root) -> set[str]:
    """The table-relative keys a log path may name: none when it lies outside the root."""
    if path.startswith("/") or _ABSOLUTE.match(path):
        key = _inside(path, root)
        return {key} if key else set()
    keys = set()
    for spelling in (unquote(path), path):
        key = posixpath.normpath(spelling)
        if key not in (".", "..") and not key.startswith(("../", "/")):
            keys.add(key)
    return keys


def _inside(path: str, root: Root) -> str | None:
    parts = urlsplit(path)
    return relative_key(parts.scheme, parts.netloc, unquote(parts.path), root)


def relative_key(scheme: str, netloc: str, full: str, root: Root) -> str | None:
    """The key of `full` (a decoded absolute path in bucket `netloc` of a `scheme` store)
    relative to the root; None when it lies elsewhere."""
    family = _FAMILY.get(scheme.lower(), scheme.lower()) if scheme else "file"
    if family != root.family:
        return None
    bucket = netloc.partition("@")[0]
    if family == "file" and bucket not in ("", "localhost"):
        return None
    if family != "file" and bucket != root.bucket:
        return None
    full = posixpath.normpath(full)
    for base in root.paths:
        if base and full.startswith(base + "/"):
            return full[len(base) + 1 :]
        if not base and full.startswith("/") and len(full) > 1:
            return full[1:]  # the table is a whole bucket
    return None


def candidate_key(path: str, root: Root) -> str | None:
    """The one key a log path names as a file to delete: decoded, as Delta Spark deletes it;
    None outside the root."""
    if path.startswith("/") or _ABSOLUTE.match(path):
        return _inside(path, root)
    key = posixpath.normpath(unquote(path))
    return None if key in (".", "..") or key.startswith(("../", "/")) else key


_RAW_URI = re.compile(r"^(?:([A-Za-z][A-Za-z0-9+.-]*):)?(?://([^/]*))?(/.*)$")


def row_key(uri: str, root: Root) -> str | None:
    """The key of an inventory row's path (a URI as the store spells it, not encoded),
    relative to the root; None outside it."""
    m = _RAW_URI.match(uri)
    return relative_key(m[1] or "", m[2] or "", m[3], root) if m else None


def dv_keys(dv: Mapping[str, Any] | None, root: Root) -> set[str]:
    """The keys of the file a deletion vector is stored in (none for inline ones)."""
    if not dv:
        return set()
    kind, value = dv.get("storageType"), str(dv.get("pathOrInlineDv") or "")
    if kind == "i":
        return set()
    if kind == "u":
        try:
            return keys_for(dv_relative_path(value), root)
        except ValueError as e:
            raise CorruptLogError(f"deletion vector {value!r}: {e}") from e
    if kind == "p":
        return keys_for(value, root)
    raise UnsupportedProtocolError(
        f"deletion vector storage type {kind!r} is not one this build knows; nothing is "
        "deleted. Upgrade deltakeeper before vacuuming this table"
    )


# -- hidden paths -----------------------------------------------------------------------------
def hidden_name(name: str, partition_columns: Iterable[str], iceberg_metadata: bool) -> bool:
    """DeltaTableUtils.isHiddenDirectory, applied to every file and folder name."""
    if iceberg_metadata and name == "metadata":
        return True
    if not name.startswith(("_", ".")):
        return False
    if name.startswith(("_delta_index", "_change_data")):
        return False
    return not any(name.startswith(f"{c}=") for c in partition_columns)


def hidden_key(key: str, partition_columns: Iterable[str], iceberg_metadata: bool) -> bool:
    columns = tuple(partition_columns)
    return any(hidden_name(n, columns, iceberg_metadata) for n in key.split("/"))


def iceberg_enabled(configuration: Mapping[str, str]) -> bool:
    return "iceberg" in TableProperties(configuration).universal_formats


# -- the plan ---------------------------------------------------------------------------------
@dataclass
class VacuumPlan(Deletes):
    """What a vacuum would delete, and why. Plain data; nothing deletes here."""

    version: int
    retention_ms: int
    cutoff_ms: int  # files modified before this, and tombstones deleted before it, expire
    scanned: int = 0  # candidates considered: files listed, named by the log or inventoried
    referenced: int = 0  # keys referenced by live files, DVs and unexpired tombstones
    hidden: int = 0  # candidates never considered (hidden paths, _delta_log)
    in_use: int = 0  # candidates that are referenced
    too_new: int = 0  # unreferenced, but modified (or removed) at or after the cut-off
    delete: list[FileInfo] = field(default_factory=list)  # sorted by key
    folders: list[str] = field(default_factory=list)  # empty afterwards: removed, sorted
    nested: list[str] = field(default_factory=list)  # roots of other Delta tables, skipped
    in_nested: int = 0  # listed files inside them
    notes: list[str] = field(default_factory=list)
    mode: Mode = Mode.FULL
    listed: int = 0  # objects the listing or the inventory returned (LITE lists none)
    outside: int = 0  # INVENTORY: rows outside the table root, skipped
    last_info: LastVacuumInfo = field(default_factory=lambda: LastVacuumInfo(InfoStatus.MISSING))
    window: Window | None = None  # LITE: the commits read
    newest_outside: int | None = None  # N: the newest commit at or before the cut-off
    source: str = ""  # INVENTORY: the report read
    why: str = ""  # why this mode ran (the caller's choice, for AUTO)
    requests: Counter[str] = field(default_factory=Counter)  # storage requests planning sent

    @property
    def record(self) -> int | None:
        """The N `record_vacuum` writes to `_last_vacuum_info` (None: the file is left as it
        is): never after an INVENTORY run, and never an N older than the one there, unless that
        one lies beyond the table's version (another table's, at the same place)."""
        n = self.newest_outside
        if n is None or self.mode is Mode.INVENTORY:
            return None
        last = self.last_info.version if self.last_info.status is InfoStatus.RECORDED else None
        return n if last is None or n > last or last > self.version else None

    def reasons(self) -> list[str]:
        lines = [
            f"version {self.version}, retention {duration_text(self.retention_ms)}: cut-off "
            f"{when_text(self.cutoff_ms)}; unreferenced files {self._aged} before it go",
            f"{self.referenced} files referenced by live files, deletion vectors and tombstones "
            "deleted at or after the cut-off"
            if self.scanned
            else "no candidates, so no references to check",
            self._found(),
            *self.notes,
        ]
        if self.nested:
            lines.append(
                f"skipped {len(self.nested)} nested Delta tables ({self.in_nested} files; each "
                f"has its own _delta_log): {', '.join(self.nested)}"
            )
        if self.folders:
            lines.append(f"remove {len(self.folders)} folders left empty")
        lines.append(self._record_line())
        if not self.delete:
            return [*lines, "nothing to delete"]
        return [*lines, f"delete {self.files} unreferenced files, {self.bytes} bytes"]

    @property
    def _aged(self) -> str:
        return "removed" if self.mode is Mode.LITE else "modified"

    def _found(self) -> str:
        counts = (
            f"{self.hidden} hidden (_delta_log, names starting with _ or .), {self.in_use} "
            f"referenced, {self.too_new} unreferenced but too new"
        )
        if self.mode is Mode.LITE:
            w = self.window
            read = (
                "no commits to read"
                if w is None or w.empty
                else f"read commits {w.start} to {w.end}"
            )
            return (
                f"LITE: {self.last_info.describe()}; {read}, which name {self.scanned} files "
                f"(removed, their deletion vectors, change data): {counts}"
            )
        if self.mode is Mode.INVENTORY:
            return (
                f"INVENTORY: {self.source}: {self.listed} rows, {self.outside} outside the "
                f"table; {self.scanned} files in it: {counts}"
            )
        return f"FULL: listed {self.scanned} files: {counts}"

    def _record_line(self) -> str:
        n = self.newest_outside
        if self.mode is Mode.INVENTORY:
            return f"{paths.LAST_VACUUM_INFO} stays as it is (an inventory may predate removes)"
        if n is None:
            return f"no commit is older than the cut-off; {paths.LAST_VACUUM_INFO} stays as it is"
        if self.record is None:
            return f"{paths.LAST_VACUUM_INFO} already records N = {n} or later"
        return f"then {paths.LAST_VACUUM_INFO} records N = {n}, the newest commit past the cut-off"

    def __str__(self) -> str:
        return "\n".join(self.reasons())


def plan_vacuum(
    listed: Iterable[FileInfo],
    referenced: set[str],
    cutoff_ms: int,
    *,
    version: int = -1,
    retention_ms: int = 0,
    partition_columns: Iterable[str] = (),
    iceberg_metadata: bool = False,
) -> VacuumPlan:
    """Plan a vacuum. `listed`: every file under the table root (keys relative to it, as the
    store spells them). `referenced`: the keys that must stay (see `referenced_keys`)."""
    columns = tuple(partition_columns)
    plan = VacuumPlan(version, retention_ms, cutoff_ms, referenced=len(referenced))
    infos = list(listed)
    plan.nested = nested_tables(infos)
    doomed = []
    for info in infos:
        if info.is_dir:
            continue
        plan.scanned += 1
        if inside(info.key, plan.nested):
            plan.in_nested += 1
        elif hidden_key(info.key, columns, iceberg_metadata):
            plan.hidden += 1
        elif info.key in referenced:
            plan.in_use += 1
        elif info.mtime_ms >= cutoff_ms:
            plan.too_new += 1
        else:
            doomed.append(info)
    plan.delete = sorted(doomed, key=lambda f: f.key)
    folders = empty_folders(infos, plan, columns, iceberg_metadata)
    plan.folders = _without_live_files(folders, referenced)
    return plan


def _without_live_files(folders: list[str], referenced: set[str]) -> list[str]:
    """The folders no referenced file lies in. A listing shows those files, but an inventory
    can list a folder and miss the live files written after it was made. Only looked at when
    some folder would go, which a steady table seldom has."""
    if not folders:
        return folders
    busy: set[str] = set()
    for key in referenced:
        parts = key.split("/")
        busy.update("/".join(parts[:i]) + "/" for i in range(1, len(parts)))
    return [f for f in folders if f not in busy]


def nested_tables(infos: Iterable[FileInfo]) -> list[str]:
    """Folders below the root that hold a `_delta_log` of their own (outermost only)."""
    roots = set()
    for info in infos:
        parts = info.key.rstrip("/").split("/")
        for i, part in enumerate(parts[1:], start=1):
            if part == "_delta_log":
                roots.add("/".join(parts[:i]))
                break
    return sorted(r for r in roots if not inside(r, [o for o in roots if o != r]))


def inside(key: str, folders: Iterable[str]) -> bool:
    return any(key == f or key.startswith(f + "/") for f in folders)


def empty_folders(
    infos: list[FileInfo], plan: VacuumPlan, columns: tuple[str, ...], iceberg: bool
) -> list[str]:
    """Folders (keys ending in '/') that hold nothing once `plan.delete` is gone and were
    modified before the cut-off; never hidden ones or those of nested tables."""
    doomed = {f.key for f in plan.delete}
    busy: set[str] = set()  # folders something stays in
    for info in infos:
        key = info.key.rstrip("/")
        if info.is_dir:
            if info.mtime_ms < plan.cutoff_ms and not hidden_key(key, columns, iceberg):
                continue  # empty unless something below it stays
            busy.add(key)
        elif info.key in doomed:
            continue
        parts = key.split("/")  # whatever stays keeps every folder above it
        busy.update("/".join(parts[:i]) for i in range(1, len(parts)))
    return sorted(
        f.key
        for f in infos
        if f.is_dir and f.key.rstrip("/") not in busy and not inside(f.key.rstrip("/"), plan.nested)
    )


def referenced_keys(snap: Snapshot, cutoff_ms: int, root: Root) -> set[str]:
    """Keys of live files, unexpired tombstones and the deletion vectors of both."""
    _check_columns(snap)
    keys: set[str] = set()
    _add_references(keys, snap.files, root)
    tombs = snap.tombstones
    if tombs.num_rows:
        kept = pc.fill_null(pc.greater_equal(tombs["deletionTimestamp"], cutoff_ms), False)
        _add_references(keys, tombs.filter(kept), root)
    return keys


def _add_references(keys: set[str], actions: pa.Table, root: Root) -> None:
    for path in actions["path"].to_pylist():
        keys |= keys_for(path, root)
    dvs = actions["deletionVector"]
    for dv in dvs.filter(pc.is_valid(dvs)).to_pylist():
        keys |= dv_keys(dv, root)


def _check_columns(snap: Snapshot) -> None:
    missing = [f"add.{c}" for c in VACUUM_ADD if c not in snap.files.column_names]
    missing += [f"remove.{c}" for c in VACUUM_REMOVE if c not in snap.tombstones.column_names]
    if missing:
        raise ValueError(f"the snapshot lacks {', '.join(missing)}; load it with load_for_vacuum")


# -- refusals ---------------------------------------------------------------------------------
def check_retention(retention_ms: int, allow_short_retention: bool) -> None:
    if retention_ms < 0:
        raise InvalidInputError(f"the deleted-file retention must not be negative: {retention_ms}")
    if retention_ms < MIN_VACUUM_RETENTION_MS and not allow_short_retention:
        raise InvalidInputError(
            f"a deleted-file retention of {duration_text(retention_ms)} is below the "
            f"{duration_text(MIN_VACUUM_RETENTION_MS)} minimum: readers and writers still using "
            "older versions could lose files. If no job runs longer than that, pass "
            "--allow-short-retention (allowShortRetention: true in a DeltaTable spec)"
        )


def check_protocol(snap: SnapshotHeader, catalog_allows: bool = False) -> None:
    """Refuse unless this build understands every reader and writer feature (the check
    vacuumProtocolCheck asks for, done for every table), and the table is not catalog-managed
    (unless the caller knows its catalog permits a vacuum)."""
    features.require_writable(snap, "vacuum", catalog_allows)


# -- table I/O --------------------------------------------------------------------------------
def load_for_vacuum(table: Table, version: int | None = None) -> Snapshot:
    """The snapshot with the columns vacuum reads, and no more."""
    return table.snapshot(version=version, add_cols=VACUUM_ADD, remove_cols=VACUUM_REMOVE)


def plan_table_vacuum(
    table: Table,
    snap: Snapshot | HeldSnapshot,
    retention_ms: int,
    now_ms: int,
    allow_short_retention: bool = False,
    mode: Mode = Mode.FULL,
    inventory: Inventory | None = None,
    info: LastVacuumInfo | None = None,
    catalog_allows: bool = False,
) -> VacuumPlan:
    """Plan a vacuum of `table` from its newest snapshot (`snap` is brought up to date first:
    a plan from an older one would miss files added since), finding candidates as `mode`
    says (INVENTORY reads `inventory`). `info`: what the caller knows `_last_vacuum_info`
    holds (a watcher, from its own last vacuum; an older N only costs commits read again),
    else it is read. Refusals happen before listing; a LITE vacuum Delta would refuse raises
    LiteVacuumImpossible before reading any commit. `catalog_allows`: the catalog of a
    catalog-managed table permits the vacuum (only the caller can know)."""
    if mode is Mode.AUTO:
        raise ValueError("AUTO is a choice between LITE and FULL; plan one of them")
    if mode is Mode.INVENTORY and inventory is None:
        raise InvalidInputError("an INVENTORY vacuum needs an inventory (--inventory URI)")
    check_retention(retention_ms, allow_short_retention)
    before = Counter(table.storage.requests)
    info = vacuum_info.read(table.storage) if info is None else info
    listing = None
    if mode is Mode.LITE:  # one listing of the log serves the update and the window
        listing = vacuum_lite.log_listing(table, info, snap.version)
    snap = (
        table.update(snap, listing)
        if isinstance(snap, Snapshot)
        else update_held(table, snap, listing)
    )
    check_protocol(snap, catalog_allows)
    run = _Run(table, snap, info, now_ms - retention_ms, retention_ms)
    if listing is not None:
        plan = run.lite(listing)
    elif mode is Mode.INVENTORY:
        assert inventory is not None
        plan = run.inventoried(inventory)
    else:
        plan = run.full()
    plan.requests = Counter(table.storage.requests) - before
    if plan.record is not None and info.status is InfoStatus.FOLDER:
        raise InvalidInputError(
            f"{table.uri}/{vacuum_info.LOCATION} is a folder, not a file: the vacuum could not "
            f"record N = {plan.record} there when it is done, so it does not start; nothing "
            "deleted. Remove the folder (Delta Spark writes a file of that name)"
        )
    return plan


@dataclass(frozen=True)
class _Run:
    """One vacuum being planned: the table as it is now, and the cut-off."""

    table: Table
    snap: Snapshot | HeldSnapshot  # a held one has its file actions read only if needed
    info: LastVacuumInfo  # _last_vacuum_info as found
    cutoff_ms: int
    retention_ms: int

    @property
    def root(self) -> Root:
        return table_root(self.table.storage)

    def full(self) -> VacuumPlan:
        listed = list(self.table.storage.walk("", folders=True))
        plan = self.decide(listed, Mode.FULL)
        plan.listed = len(listed)
        log = group(f for f in listed if f.key.startswith(paths.LOG_DIR + "/"))
        plan.newest_outside = self.table.commit_at(self.snap, log.commits, self.cutoff_ms)
        return plan

    def lite(self, listing: Listing) -> VacuumPlan:
        newest = self.table.commit_at(self.snap, listing.commits, self.cutoff_ms)
        window = None
        if newest is not None:
            window = vacuum_lite.window(self.snap, listing, self.info, newest)
        named = (
            [] if window is None else vacuum_lite.named_files(self.table.storage, window.commits)
        )
        plan = self.decide(lite_candidates(named, self.root), Mode.LITE)
        plan.window, plan.newest_outside = window, newest
        return plan

    def inventoried(self, inventory: Inventory) -> VacuumPlan:
        root = self.root
        if (
            inventory.bucket is not None
            and root.family != "file"
            and inventory.bucket != root.bucket
        ):
            raise InvalidInputError(
                f"{inventory.source} covers bucket {inventory.bucket}, not {root.bucket} where "
                f"{self.table.uri} lives"
            )
        listed, rows, outside = inventory_files(inventory.rows, root)
        if not any(f.key.startswith(paths.LOG_DIR + "/") for f in listed):
            raise InvalidInputError(
                f"{inventory.source} lists nothing under {self.table.uri}/{paths.LOG_DIR}/ "
                f"({rows} rows, none in the table's log): it does not cover the table's prefix"
            )
        plan = self.decide(listed, Mode.INVENTORY)
        plan.listed, plan.outside, plan.source = rows, outside, inventory.source
        return plan

    def _files(self) -> Snapshot:
        """The snapshot with its file actions: itself, or read at its version when held."""
        if isinstance(self.snap, Snapshot):
            return self.snap
        return load_for_vacuum(self.table, self.snap.version)

    def decide(self, candidates: Iterable[FileInfo], mode: Mode) -> VacuumPlan:
        """The same rules for every mode's candidates."""
        found = list(candidates)
        # A quiet LITE run has none: the references of a million-file snapshot cost seconds.
        referenced = referenced_keys(self._files(), self.cutoff_ms, self.root) if found else set()
        plan = plan_vacuum(
            found,
            referenced,
            self.cutoff_ms,
            version=self.snap.version,
            retention_ms=self.retention_ms,
            partition_columns=self.snap.metadata.partition_columns,
            iceberg_metadata=iceberg_enabled(self.snap.metadata.configuration),
        )
        plan.mode, plan.last_info = mode, self.info
        return plan


def lite_candidates(named: Iterable[Named], root: Root) -> list[FileInfo]:
    """The files a window's commits name, as candidates aged by their deletion time: each key
    once, with its newest time (as Delta Spark keeps the newest of duplicates)."""
    found: dict[str, FileInfo] = {}
    for n in named:
        keys = [(candidate_key(n.path, root), n.size)]
        dv = n.deletion_vector
        if dv and dv.get("storageType") == "u":  # Delta considers only table-relative DVs
            keys.append((dv_candidate(dv, root), int(dv.get("sizeInBytes") or 0)))
        for key, size in keys:
            old = found.get(key) if key else None
            if key and (old is None or n.deleted_ms > old.mtime_ms):
                found[key] = FileInfo(key, size, n.deleted_ms)
    return list(found.values())


def dv_candidate(dv: Mapping[str, Any], root: Root) -> str | None:
    """The key of a table-relative ('u') deletion vector's file."""
    value = str(dv.get("pathOrInlineDv") or "")
    try:
        return candidate_key(dv_relative_path(value), root)
    except ValueError as e:
        raise CorruptLogError(f"deletion vector {value!r}: {e}") from e


def inventory_files(rows: Iterable[Row], root: Root) -> tuple[list[FileInfo], int, int]:
    """The rows inside the root as listed files (each key once, its newest row), how many
    rows were read, and how many lay outside."""
    found: dict[str, FileInfo] = {}
    count = outside = 0
    for row in rows:
        count += 1
        key = row_key(row.uri, root)
        if not key:
            outside += 1
            continue
        info = file_info(row, key)
        old = found.get(info.key)
        if old is None or info.mtime_ms > old.mtime_ms:
            found[info.key] = info
    return list(found.values()), count, outside


def execute_vacuum(
    table: Table,
    plan: VacuumPlan,
    progress: Callable[[int, int], None] | None = None,
    stop: Callable[[], bool] | None = None,
) -> int:
    """Delete what the plan says in batches; `progress(done, total)` after each. Returns how
    many files were deleted (files already gone are not counted). When `stop()` turns true,
    raises Stopped before the next batch: every file the plan names is unreferenced, so the
    ones left are the next vacuum's, and `record_vacuum` must not run."""
    keys = [f.key for f in plan.delete]
    deleted = 0
    for start in range(0, len(keys), DELETE_BATCH):
        if stop is not None and stop():
            raise Stopped(f"vacuum stopped after deleting {deleted} of {len(keys)} files")
        batch = keys[start : start + DELETE_BATCH]
        deleted += table.storage.delete_many(batch)
        if progress is not None:
            progress(start + len(batch), len(keys))
    return deleted


def remove_empty_folders(table: Table, plan: VacuumPlan) -> int:
    """After `execute_vacuum`: remove the folders it left empty; returns how many went (a folder
    a writer has put a file in since is not empty, and stays)."""
    return table.storage.remove_empty_folders(plan.folders)


def record_vacuum(table: Table, plan: VacuumPlan) -> int | None:
    """Last, once every delete is done: move `_last_vacuum_info` to the plan's N (see
    `VacuumPlan.record`), so a crash before it leaves the file where the next run starts from
    the same commits. Returns the N written, or None."""
    if plan.record is not None:
        vacuum_info.write(table.storage, plan.record)
    return plan.record
