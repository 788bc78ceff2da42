"""The entry point: write a checkpoint of a source in the layout the table calls for, read it
back, then move `_last_checkpoint` to it (never backwards)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from deltakeeper.delta import features, paths
from deltakeeper.delta.checkpoint.content import Content, HeaderRow
from deltakeeper.delta.checkpoint.layouts import (
    V2_PART_SIZE,
    Layout,
    Writer,
    checkpoint_metadata,
    num_parts,
    sidecar_row,
    write_classic,
    write_v2,
)
from deltakeeper.delta.checkpoint.sources import CheckpointSource, checkpoint_source
from deltakeeper.delta.errors import InvalidInputError
from deltakeeper.delta.log import last_checkpoint
from deltakeeper.delta.paths import Kind
from deltakeeper.delta.snapshot import Snapshot, SnapshotHeader
from deltakeeper.delta.table import Table

LAST_CHECKPOINT_LIST_LIMIT = 30  # Delta Spark's limit for lists embedded in _last_checkpoint


@dataclass(frozen=True)
class CheckpointResult:
    version: int
    key: str  # the file a reader opens first: the classic file, part 1, or the V2 file
    rows: int
    adds: int
    tombstones: int
    expired_tombstones: int
    size_bytes: int
    last_checkpoint_moved: bool
    layout: Layout = Layout.CLASSIC
    keys: tuple[str, ...] = ()  # every file written (or that would be), sidecars first
    parts: int | None = None  # multi-part only
    sidecars: int = 0


def write_checkpoint(table: Table, snap: Snapshot, *args: Any, **kw: Any) -> CheckpointResult:
    """Write `snap` (loaded with `load_for_checkpoint`) as a checkpoint; the other arguments
    are `write_source`'s."""
    return write_source(table, CheckpointSource(table, snap), *args, **kw)


def checkpoint_table(table: Table, version: int | None, *args: Any, **kw: Any) -> CheckpointResult:
    """Checkpoint `version` (latest when None): from the newest checkpoint and the commits
    after it when that checkpoint can be streamed, else from a snapshot loaded in memory. The
    other arguments are `write_source`'s."""
    return write_source(table, checkpoint_source(table, version), *args, **kw)


def write_source(
    table: Table,
    source: CheckpointSource,
    now_ms: int,
    tombstone_retention_ms: int,
    txn_retention_ms: int | None = None,
    dry_run: bool = False,
    *,
    part_size: int | None = None,
    classic: bool = False,
) -> CheckpointResult:
    """Write a checkpoint of `source`; expire old tombstones and txns.

    The layout: on a table using V2 checkpoints (see `uses_v2`), a UUID-named V2 checkpoint
    with sidecars of at most `part_size` actions (default 50,000, as Delta Spark), or with
    `classic=True` a classic-named V2 checkpoint that older readers recognise. Otherwise a
    classic checkpoint, split into ceil(actions / part_size) parts when `part_size` is set
    and that is more than one (Delta Spark writes one file unless checkpoint.partSize is set).
    With `dry_run` everything is computed and nothing is written.
    """
    snap = source.header
    features.require_writable(snap, "checkpoint")
    if part_size is not None and part_size < 1:
        raise InvalidInputError(f"checkpoint part size must be at least 1, got {part_size}")
    v2 = uses_v2(snap)
    # Only layouts split by count need the counts before the rows (a pass less otherwise).
    split = (v2 and not classic) or (not v2 and part_size is not None)
    content = source.content(now_ms, tombstone_retention_ms, txn_retention_ms, count_first=split)
    writer = Writer(table, snap.version, now_ms, dry_run)
    try:
        layout = _write_layout(writer, content, snap, v2 and not classic, part_size)
    except BaseException:
        writer.abort()
        raise
    moved = False
    if not dry_run:
        writer.verify()
        moved = move_last_checkpoint(table, snap.version, writer, content, layout)
    return CheckpointResult(
        version=snap.version,
        key=writer.main_key,
        rows=writer.rows,
        adds=content.num_adds,
        tombstones=content.num_removes,
        expired_tombstones=content.expired,
        size_bytes=writer.size_bytes,
        last_checkpoint_moved=moved,
        layout=layout,
        keys=tuple(f.key for f in [*writer.sidecars, *writer.files]),
        parts=len(writer.files) if layout is Layout.MULTIPART else None,
        sidecars=len(writer.sidecars),
    )


def _write_layout(
    writer: Writer, content: Content, snap: SnapshotHeader, sidecars: bool, part_size: int | None
) -> Layout:
    if sidecars:
        write_v2(writer, content, part_size or V2_PART_SIZE)
        return Layout.V2
    v2 = uses_v2(snap)
    if v2:
        content.header.insert(0, ("checkpointMetadata", checkpoint_metadata(snap.version, {})))
    n = 1 if v2 or part_size is None else num_parts(content, part_size)
    n = _existing_parts(snap) or n
    write_classic(writer, content, n)
    return Layout.MULTIPART if n > 1 else Layout.CLASSIC


def uses_v2(snap: SnapshotHeader) -> bool:
    """V2 checkpoints when the table supports v2Checkpoint and its checkpoint policy is not
    explicitly `classic` (Delta Spark sets `classic` while the feature is being dropped)."""
    policy = snap.metadata.properties.checkpoint_policy
    return snap.protocol.has("v2Checkpoint") and policy != "classic"


def _existing_parts(snap: SnapshotHeader) -> int | None:
    """The part count of a classic or multi-part checkpoint already at this version.

    A rewrite keeps that layout: with two layouts at one version, a reader that trusts
    `_last_checkpoint`'s part count but lists the other one first (delta-kernel does, in
    directory order) refuses the table.
    """
    cp = snap.segment.checkpoint
    if cp is not None and cp.version == snap.version and cp.kind is not Kind.UUID_CHECKPOINT:
        return len(cp.files)
    for damaged in snap.damaged_checkpoints:  # a damaged one being rewritten: same layout
        name = paths.parse(damaged.keys[0].removeprefix(paths.LOG_DIR + "/"))
        if damaged.version == snap.version and name and name.kind is Kind.MULTIPART_CHECKPOINT:
            return len(damaged.keys)
    return None


def move_last_checkpoint(
    table: Table, version: int, writer: Writer, content: Content, layout: Layout
) -> bool:
    current = table.read_hint().checkpoint
    if current is not None and current.version > version and _exists(table, current.version):
        return False  # never move backwards, unless the newer one it names is gone
    fields: dict[str, Any] = {
        "version": version,
        "size": writer.rows,
        "parts": len(writer.files) if layout is Layout.MULTIPART else None,
        "sizeInBytes": writer.size_bytes,
        "numOfAddFiles": content.num_adds,
    }
    if layout is Layout.V2:
        fields["v2Checkpoint"] = _v2_info(writer, content.header)
    body = last_checkpoint.serialize(fields)
    table.storage.overwrite(f"{paths.LOG_DIR}/{paths.LAST_CHECKPOINT}", body)
    return True


def _exists(table: Table, version: int) -> bool:
    return version in table.list_log(version).checkpoints


def _v2_info(writer: Writer, header: list[HeaderRow]) -> dict[str, Any]:
    """The `v2Checkpoint` entry of `_last_checkpoint`, as Delta Spark writes it; the embedded
    lists are left out when long, and then readers read the V2 file itself."""
    top = writer.files[-1]
    info: dict[str, Any] = {
        "path": top.key.rsplit("/", 1)[-1],
        "sizeInBytes": top.size,
        "modificationTime": top.mtime_ms,
    }
    actions = [{kind: _json_value(body)} for kind, body in header if kind != "sidecar"]
    if len(actions) <= LAST_CHECKPOINT_LIST_LIMIT:
        info["nonFileActions"] = actions
    if len(writer.sidecars) <= LAST_CHECKPOINT_LIST_LIMIT:
        info["sidecarFiles"] = [_json_value(sidecar_row(f)) for f in writer.sidecars]
    return info


def _json_value(value: Any) -> Any:
    """A header row as JSON for `_last_checkpoint`: null fields left out."""
    if isinstance(value, dict):
        return {k: _json_value(v) for k, v in value.items() if v is not None}
    if isinstance(value, list):
        return [_json_value(x) for x in value]
    return value
