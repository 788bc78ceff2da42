"""The one commit writer: version v+1 of a table, from a snapshot at v, by put-if-absent.

A commit that loses the race reads the winning commits and is checked against them with Delta
Spark's conflict rules (ConflictChecker.scala), for the kinds of commit deltakeeper makes:

- a winner that changed the protocol or the metadata: give up (Protocol/MetadataChanged);
- a winner that removed a file this commit read (re-adds, with new statistics) or removes too:
  those files are dropped from the commit when the change allows it, else give up
  (ConcurrentDeleteRead / ConcurrentDeleteDelete);
- a winner that added data files this commit's predicate would have read (`Change.reads_added`:
  a DELETE's, such as an expiry's): give up (ConcurrentAppend), so rows appended meanwhile are
  never missed or removed unseen;
- a winner that set the same application transaction, or wrote the same metadata domain: give
  up (ConcurrentTransaction / domain conflicts);
- anything else (appends, other files' changes) does not conflict: commit again at the next
  version, with an in-commit timestamp after the winner's.

A commit is one object written once, so a crash leaves the table at v or at v+1, never between;
data files written before it and never committed are what vacuum removes.
"""

from __future__ import annotations

import time
import uuid
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field, replace
from typing import Any

import orjson

from deltakeeper import __version__
from deltakeeper.delta import paths
from deltakeeper.delta.errors import CommitConflictError, InvalidInputError
from deltakeeper.delta.features import Protocol, require_writable
from deltakeeper.delta.log.json_files import read_actions
from deltakeeper.delta.snapshot import Metadata, SnapshotHeader
from deltakeeper.delta.table import Table
from deltakeeper.delta.types import mapping_on

ENGINE_INFO = f"deltakeeper/{__version__}"
MAX_ATTEMPTS = 10  # commits tried before giving up on a busy table
LOG = paths.LOG_DIR


# What a table can ask of whoever adds new data files (row ids, constraints, generated or
# identity values, physical column names, Iceberg metadata): this writer does none of it, so
# it adds new files only to tables that ask none. Re-adding a file with its own fields (new
# statistics) keeps what the writer of that file did.
def new_file_duties(protocol: Protocol, metadata: Metadata) -> list[str]:
    """The duties a writer of new files to this table would have, by the feature's name."""
    has = protocol.writer_feature_set()
    schema, conf = metadata.schema_string, metadata.configuration
    asked = {
        "rowTracking": "rowTracking" in has,
        "invariants": "invariants" in has and '"delta.invariants"' in schema,
        "checkConstraints": any(k.startswith("delta.constraints.") for k in conf),
        "generatedColumns": '"delta.generationExpression"' in schema,
        "identityColumns": '"delta.identity.' in schema,
        "columnMapping": mapping_on(metadata.properties.column_mapping_mode),
        "icebergCompat": any(
            conf.get(f"delta.enableIcebergCompatV{n}", "").lower() == "true" for n in (1, 2, 3)
        ),
    }
    return sorted(name for name, on in asked.items() if on)


@dataclass(frozen=True)
class Change:
    """What one commit does. `actions` hold no commitInfo (the writer adds it); `reads` are the
    paths whose live state the change depends on (files it re-adds or removes)."""

    operation: str  # commitInfo's operation, as Delta names them: WRITE, COMPUTE STATS, ...
    actions: tuple[dict[str, Any], ...]
    parameters: Mapping[str, Any] = field(default_factory=dict)
    metrics: Mapping[str, Any] = field(default_factory=dict)  # commitInfo operationMetrics
    reads: frozenset[str] = frozenset()
    droppable: bool = False  # a read file removed meanwhile: drop its actions, commit the rest
    # Whether a data file another commit adds falls under this change's predicate (a DELETE
    # reads every file that may hold rows it deletes); None: no predicate, appends never
    # conflict.
    reads_added: Callable[[Mapping[str, Any]], bool] | None = field(default=None, compare=False)

    @property
    def blind_append(self) -> bool:
        return not self.reads and all(
            "add" in a and a["add"].get("dataChange", True) for a in self.actions
        )

    def without(self, dropped: set[str]) -> Change:
        kept = tuple(a for a in self.actions if _path(a) not in dropped)
        return replace(self, actions=kept, reads=self.reads - dropped)


@dataclass(frozen=True)
class Committed:
    """The version written (None: nothing was left to commit), the attempts it took, the
    paths dropped because a concurrent commit removed them, and the commit's timestamp (its
    in-commit timestamp when the table has them): what a next commit based on it needs."""

    version: int | None
    attempts: int
    dropped: tuple[str, ...] = ()
    timestamp_ms: int | None = None


@dataclass(frozen=True)
class Verdict:
    """How a change stands against the winning commits: `reason` set means give up."""

    drop: frozenset[str] = frozenset()
    reason: str | None = None


def commit(
    table: Table,
    base: SnapshotHeader,
    change: Change,
    now_ms: int | None = None,
    attempts: int = MAX_ATTEMPTS,
) -> Committed:
    """Write `change` as the version after `base`; after a lost race, check the winners and
    retry (see the module). CommitConflictError names the winner and the reason on giving up."""
    require_writable(base, "commit")
    _check_duties(base, change)
    version, ict_floor = base.version + 1, _ict_floor(base)
    dropped: set[str] = set()
    for attempt in range(1, attempts + 1):
        if not change.actions:
            return Committed(None, attempt - 1, tuple(sorted(dropped)))
        info = commit_info(change, base.version, _now(now_ms), ict_floor if ict_floor else None)
        try:
            table.storage.put_if_absent(f"{LOG}/{paths.commit(version)}", _lines(info, change))
            return Committed(version, attempt, tuple(sorted(dropped)), info["timestamp"])
        except FileExistsError:
            pass
        winners = _winners(table, version)
        verdict = judge(change, winners)
        if verdict.reason is not None:
            raise CommitConflictError(
                f"{table.uri}: {change.operation} gave up at version {version}: {verdict.reason}"
            )
        if verdict.drop and not change.droppable:
            raise CommitConflictError(
                f"{table.uri}: {change.operation} gave up at version {version}: a concurrent "
                f"commit removed {', '.join(sorted(verdict.drop)[:3])}"
            )
        change, dropped = change.without(set(verdict.drop)), dropped | verdict.drop
        if ict_floor:
            ict_floor = max(ict_floor, *(_ict(w) + 1 for _, w in winners))
        version = winners[-1][0] + 1
    raise CommitConflictError(
        f"{table.uri}: {change.operation} gave up after {attempts} attempts: the table is "
        "committed to faster than this writer can follow; try again later"
    )


def create(table: Table, protocol: Protocol, metadata: dict[str, Any], now_ms: int) -> int:
    """Write version 0 of a new table: its protocol and metadata. FileExistsError when a table
    (or another creator, first) is there."""
    change = Change(
        "CREATE TABLE",
        ({"protocol": protocol.to_json()}, {"metaData": metadata}),
        parameters={"partitionBy": list(metadata.get("partitionColumns") or [])},
    )
    info = commit_info(change, None, now_ms, None)
    table.storage.put_if_absent(f"{LOG}/{paths.commit(0)}", _lines(info, change))
    return 0


def judge(change: Change, winners: Iterable[tuple[int, list[dict[str, Any]]]]) -> Verdict:
    """`change` against the commits that won the race, by Delta's conflict rules."""
    removes = {_path(a) for a in change.actions if "remove" in a}
    app_ids = {a["txn"].get("appId") for a in change.actions if "txn" in a}
    domains = {a["domainMetadata"].get("domain") for a in change.actions if "domainMetadata" in a}
    drop: set[str] = set()
    for version, actions in winners:
        for action in actions:
            ((kind, body),) = action.items()
            if kind in ("protocol", "metaData"):
                what = "protocol" if kind == "protocol" else "metadata (schema or properties)"
                return Verdict(reason=f"version {version} changed the table's {what}")
            if kind == "txn" and body.get("appId") in app_ids:
                return Verdict(reason=f"version {version} set transaction {body.get('appId')}")
            if kind == "domainMetadata" and body.get("domain") in domains:
                return Verdict(reason=f"version {version} wrote domain {body.get('domain')}")
            if kind == "add" and _read_added(change, body):
                return Verdict(
                    reason=f"version {version} added {body.get('path')}, which may hold "
                    f"rows this {change.operation} reads (a concurrent append into them)"
                )
            if kind == "remove" and (
                body.get("path") in change.reads or body.get("path") in removes
            ):
                drop.add(body["path"])
    return Verdict(frozenset(drop))


def commit_info(
    change: Change, read_version: int | None, now_ms: int, ict: int | None
) -> dict[str, Any]:
    """commitInfo as Delta Spark writes it: values of parameters and metrics as strings."""
    info: dict[str, Any] = {}
    if ict is not None:
        info["inCommitTimestamp"] = max(now_ms, ict)
    info |= {
        "timestamp": info.get("inCommitTimestamp", now_ms),
        "operation": change.operation,
        "operationParameters": {k: _text(v) for k, v in change.parameters.items()},
        "isolationLevel": "Serializable",
        "isBlindAppend": change.blind_append,
        "operationMetrics": {k: _text(v) for k, v in change.metrics.items()},
        "engineInfo": ENGINE_INFO,
        "txnId": str(uuid.uuid4()),
    }
    if read_version is not None:
        info["readVersion"] = read_version
    return info


def _read_added(change: Change, add: Mapping[str, Any]) -> bool:
    """Whether `add`, a winner's, is a data file `change`'s predicate would have read."""
    return bool(change.reads_added and add.get("dataChange", True) and change.reads_added(add))


def _check_duties(base: SnapshotHeader, change: Change) -> None:
    new_files = [a for a in change.actions if "add" in a and a["add"].get("dataChange", True)]
    duties = new_file_duties(base.protocol, base.metadata)
    if new_files and duties:
        raise InvalidInputError(
            f"{base.uri}: refusing to add data files: the table uses {', '.join(duties)}, "
            "which this writer does not maintain for new files"
        )
    removes = [a for a in change.actions if "remove" in a and a["remove"].get("dataChange", True)]
    if removes and base.metadata.configuration.get("delta.appendOnly", "").lower() == "true":
        raise InvalidInputError(f"{base.uri}: refusing to remove files: delta.appendOnly is set")


def _winners(table: Table, start: int) -> list[tuple[int, list[dict[str, Any]]]]:
    """The commits from `start` on, in order, up to the first gap."""
    listing = table.list_log(start)
    out = []
    version = start
    while version in listing.commits:
        entry = listing.commits[version]
        out.append((version, [a for _, a in read_actions(table.storage, entry.key)]))
        version += 1
    if not out:  # the create-only write failed, yet no commit is listed: a store out of step
        raise CommitConflictError(f"{table.uri}: version {start} exists but cannot be listed")
    return out


def _ict_floor(base: SnapshotHeader) -> int:
    """The least in-commit timestamp the next commit may have (0: the table has none)."""
    return base.timestamp_ms + 1 if base.in_commit_timestamps else 0


def _ict(actions: list[dict[str, Any]]) -> int:
    for a in actions:
        ts = a.get("commitInfo", {}).get("inCommitTimestamp")
        if isinstance(ts, int):
            return ts
    return 0


def _lines(info: dict[str, Any], change: Change) -> bytes:
    # commitInfo first: in-commit timestamps require it, and readers find it at once
    return b"".join(orjson.dumps(a) + b"\n" for a in ({"commitInfo": info}, *change.actions))


def _path(action: Mapping[str, Any]) -> str | None:
    body = action.get("add") or action.get("remove")
    return body.get("path") if isinstance(body, dict) else None


def _text(value: Any) -> str:
    return value if isinstance(value, str) else orjson.dumps(value).decode()


def _now(now_ms: int | None) -> int:
    return now_ms if now_ms is not None else int(time.time() * 1000)
