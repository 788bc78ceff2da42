"""Moving `_last_checkpoint` to a checkpoint just written; never backwards."""

from __future__ import annotations

from typing import Any

from deltakeeper.delta import last_checkpoint, paths
from deltakeeper.delta.checkpoint.content import Content, HeaderRow
from deltakeeper.delta.checkpoint.layouts import Layout, Writer, sidecar_row
from deltakeeper.delta.table import Table

LAST_CHECKPOINT_LIST_LIMIT = 30  # Delta Spark's limit for lists embedded in _last_checkpoint


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
