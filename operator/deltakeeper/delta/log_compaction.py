"""Log compaction files: `<x>.<y>.compacted.json`, the reconciled actions of commits x..y
(PROTOCOL.md, "Log Compaction Files"), which readers between checkpoints may read instead of
the commits.

Reconciled as Delta Kernel's LogCompactionWriter does, newest wins per key: the latest
protocol and metadata of the range, the latest `txn` per application, the latest
`domainMetadata` per domain (removed ones too, so that an older domain stays removed), and per
`(path, dvId)` the latest add or remove. No `commitInfo` and no `cdc`: they belong to their
commit. Unlike Kernel, tombstones are kept even past the deleted-file retention: dropping one
whose file was added before x would bring that file back for a reader that replays an older
checkpoint with this file.

Only published versions are compacted (each commit of the range must be listed), and the file
is created with put-if-absent, so two writers never interleave and a crash leaves no half file
(a reader only ever sees the whole object).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import orjson

from deltakeeper.delta import paths
from deltakeeper.delta.errors import InvalidInputError
from deltakeeper.delta.features import require_writable
from deltakeeper.delta.log.json_files import commit_lines
from deltakeeper.delta.log.reconcile import dv_unique_id
from deltakeeper.delta.log.segment import Listing
from deltakeeper.delta.table import Table

LOG = paths.LOG_DIR
TABLE_LEVEL = ("protocol", "metaData")


@dataclass(frozen=True)
class Compaction:
    start: int
    end: int
    key: str
    actions: int  # lines written (or that would be)
    size_bytes: int
    written: bool  # False: a dry run, or the file was there already
    existed: bool


def due(version: int, interval: int) -> bool:
    """Whether a compaction file ends at `version` for `interval` (Kernel's rule: every n
    commits, counting version 0 as the first)."""
    return interval > 1 and version > 0 and (version + 1) % interval == 0


def ranges(after: int, upto: int, interval: int) -> list[tuple[int, int]]:
    """The compaction ranges due at versions after..upto (exclusive, inclusive)."""
    return [(v + 1 - interval, v) for v in range(after + 1, upto + 1) if due(v, interval)]


def compact_log(table: Table, start: int, end: int, dry_run: bool = False) -> Compaction:
    """Write `<start>.<end>.compacted.json` from commits start..end of `table`."""
    if not 0 <= start < end:
        raise InvalidInputError(
            f"a log compaction covers at least two commits: --from {start} --to {end}"
        )
    listing = table.list_log(start)
    _require_published(table, listing, start, end)
    # The protocol at `end` decides; the file actions are not needed (paths only: cheap).
    snap = table.snapshot(version=end, add_cols=("path",), remove_cols=("path",))
    require_writable(snap, "checkpoint")
    key = f"{LOG}/{paths.compacted(start, end)}"
    lines = reconciled(table, [listing.commits[v].key for v in range(start, end + 1)])
    body = b"".join(orjson.dumps(a) + b"\n" for a in lines)
    existed = any(e.name.name == paths.compacted(start, end) for e in listing.others)
    written = False
    if not dry_run and not existed:
        try:
            table.storage.put_if_absent(key, body)
            written = True
        except FileExistsError:
            existed = True
    return Compaction(start, end, key, len(lines), len(body), written, existed)


def _require_published(table: Table, listing: Listing, start: int, end: int) -> None:
    """Refuse a range with a commit the log does not list. The end is checked against the
    newest commit first, so that a range of any size costs nothing per version."""
    newest = listing.latest_commit
    if newest is None or end > newest:
        newest = table.latest_version() if newest is None else newest
        raise InvalidInputError(
            f"{table.uri}: cannot compact commits {start}..{end}: commit {max(start, newest + 1)}"
            f" is not published; the newest published commit is {newest}"
        )
    missing = next((v for v in range(start, end + 1) if v not in listing.commits), None)
    if missing is not None:
        raise InvalidInputError(
            f"{table.uri}: cannot compact commits {start}..{end}: commit {missing} is not "
            "published (or was cleaned up); compact a range of commits the log still has"
        )


def reconciled(table: Table, keys: list[str]) -> list[dict[str, Any]]:
    """The actions of the commits `keys` (oldest first), reconciled newest-wins."""
    level: dict[str, dict[str, Any]] = {}
    txns: dict[str, dict[str, Any]] = {}
    domains: dict[str, dict[str, Any]] = {}
    files: dict[tuple[str, str | None], tuple[str, dict[str, Any]]] = {}
    for key in keys:
        for _, _, kind, body in commit_lines(table.storage, key):
            if kind in TABLE_LEVEL:
                level[kind] = body
            elif kind == "txn" and isinstance(body.get("appId"), str):
                txns[body["appId"]] = body
            elif kind == "domainMetadata" and isinstance(body.get("domain"), str):
                domains[body["domain"]] = body
            elif kind in ("add", "remove"):
                file_key = (body["path"], dv_unique_id(body.get("deletionVector")))
                files.pop(file_key, None)  # re-inserted: newest last, as the commits had it
                files[file_key] = (kind, body)
    out: list[dict[str, Any]] = [{k: level[k]} for k in TABLE_LEVEL if k in level]
    out += [{"txn": t} for t in txns.values()]
    out += [{"domainMetadata": d} for d in domains.values()]
    out += [{kind: body} for kind, body in files.values() if kind == "add"]
    out += [{kind: body} for kind, body in files.values() if kind == "remove"]
    return out
