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
    """(line number, raw line, action name, action body) for each line of a JSON log file."""
    try:
        data = storage.read(key)
    except FileNotFoundError as e:
        raise MissingLogFileError(f"{storage.uri}/{key} was listed but is gone") from e
    for lineno, line in enumerate(data.split(b"\n"), start=1):
        if not line.strip():
            continue
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
        if (kind == "add" or kind == "remove") and not (
            type(body) is dict and type(body.get("path")) is str
        ):
            raise CorruptLogError(f"{storage.uri}/{key}: line {lineno}: {kind} without a path")
        yield lineno, line, kind, body
