"""JSON log files (commits, JSON checkpoints) as actions, one per line.

A bad line is a CorruptLogError that names the file and the line; a file listed but gone is a
MissingLogFileError, so the caller can list again.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import orjson

from deltakeeper.delta.errors import CorruptLogError, MissingLogFileError
from deltakeeper.delta.storage import Storage


def read_actions(storage: Storage, key: str) -> list[tuple[int, dict[str, Any]]]:
    """(line number, action) pairs of a JSON log file; a bad line is a CorruptLogError naming it."""
    return [(lineno, {kind: body}) for lineno, _, kind, body in commit_lines(storage, key)]


def commit_lines(storage: Storage, key: str) -> Iterator[tuple[int, bytes, str, Any]]:
    """(line number, raw line, action name, action body) for each line of a JSON log file;
    a line whose action is not shaped as the protocol says is a CorruptLogError naming it."""
    for lineno, line in enumerate(_read(storage, key).split(b"\n"), start=1):
        if line.strip():
            kind, body = _parsed(storage, key, lineno, line)
            yield lineno, line, kind, body


# A line that begins so is an add or a remove (one action per line, its name the only key).
FILE_ACTION_STARTS = (b'{"add"', b'{"remove"')


def table_action_lines(storage: Storage, key: str) -> Iterator[tuple[str, Any]]:
    """(action name, body) of a JSON log file's actions other than its file actions, whose
    lines (those beginning as FILE_ACTION_STARTS) are not parsed: a log of millions of files
    is read for its table-level actions at the speed of a split. A file action written another
    way (a space after the brace) is parsed and left out."""
    for lineno, line in enumerate(_read(storage, key).split(b"\n"), start=1):
        if line.strip() and not line.startswith(FILE_ACTION_STARTS):
            kind, body = _parsed(storage, key, lineno, line)
            if kind != "add" and kind != "remove":
                yield kind, body


def _read(storage: Storage, key: str) -> bytes:
    try:
        return storage.read(key)
    except FileNotFoundError as e:
        raise MissingLogFileError(f"{storage.uri}/{key} was listed but is gone") from e


def _parsed(storage: Storage, key: str, lineno: int, line: bytes) -> tuple[str, Any]:
    """A line's one action, as (name, body); CorruptLogError naming the line when it is not."""
    try:
        action = orjson.loads(line)
    except orjson.JSONDecodeError as e:
        raise CorruptLogError(f"{storage.uri}/{key}: line {lineno}: not valid JSON: {e}") from e
    try:
        ((kind, body),) = action.items()  # exactly one action per line
    except (AttributeError, ValueError):
        raise CorruptLogError(
            f"{storage.uri}/{key}: line {lineno}: expected one action object per line"
        ) from None
    need = SHAPES.get(kind)
    if need is None:
        return kind, body  # an action this build does not read: left as it is
    if type(body) is not dict:
        raise CorruptLogError(f"{storage.uri}/{key}: line {lineno}: {kind} is not an object")
    if need and type(body.get(need)) is not str:
        article = "an" if need[0] in "aeiou" else "a"
        raise CorruptLogError(
            f"{storage.uri}/{key}: line {lineno}: {kind} without {article} {need}"
        )
    if (kind == "add" or kind == "remove") and type(
        body.get("deletionVector", EMPTY)
    ) not in DV_TYPES:
        raise CorruptLogError(
            f"{storage.uri}/{key}: line {lineno}: {kind}'s deletionVector is not an object"
        )
    return kind, body


# The actions this build reads, each an object, and the string field it cannot be without
# ("": none). Checked once here, where every JSON log line is parsed, so that replay, the
# checkpoint writer, log compaction and vacuum never meet a `{"txn": "x"}`.
SHAPES = {
    "add": "path",
    "remove": "path",
    "cdc": "path",
    "txn": "appId",
    "domainMetadata": "domain",
    "sidecar": "path",
    "protocol": "",
    "metaData": "",
    "commitInfo": "",
    "checkpointMetadata": "",
}
EMPTY: dict[str, Any] = {}
DV_TYPES = (dict, type(None))
