"""JSON log files (commits, JSON checkpoints) as actions, one per line.

A bad line is a CorruptLogError that names the file and the line; a file listed but gone is a
MissingLogFileError, so the caller can list again.
"""

from __future__ import annotations

import threading
from collections import deque
from collections.abc import Iterator, Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from typing import Any

import orjson

from deltakeeper.delta.errors import CorruptLogError, MissingLogFileError
from deltakeeper.delta.storage import Storage


def read_actions(storage: Storage, key: str) -> list[tuple[int, dict[str, Any]]]:
    """(line number, action) pairs of a JSON log file; a bad line is a CorruptLogError naming it."""
    return [(lineno, {kind: body}) for lineno, _, kind, body in commit_lines(storage, key)]


def commit_lines(
    storage: Storage, key: str, data: bytes | None = None
) -> Iterator[tuple[int, bytes, str, Any]]:
    """(line number, raw line, action name, action body) for each line of a JSON log file
    (`data`: its bytes, read already); a line whose action is not shaped as the protocol says
    is a CorruptLogError naming it."""
    data = _read(storage, key) if data is None else data
    for lineno, line in enumerate(data.split(b"\n"), start=1):
        if line.strip():
            kind, body = _parsed(storage, key, lineno, line)
            yield lineno, line, kind, body


# Commits on their way at once while a segment's are read in order: on an object store each
# read is a request's latency (a table catching up 30 commits read them one by one in 0.5 s).
READ_AHEAD = 8
_POOL: ThreadPoolExecutor | None = None
_POOL_LOCK = threading.Lock()


def read_in_order(storage: Storage, keys: Sequence[str]) -> Iterator[bytes]:
    """Each of `keys`' bytes, in order, with up to READ_AHEAD reads in flight on a store whose
    reads wait on the network (one on the local disk). A failed read raises where its file
    comes (MissingLogFileError for a file gone); only one file is handed out at a time."""
    if len(keys) < 2 or not storage.overlap_reads:
        for key in keys:
            yield _read(storage, key)
        return
    pool = _pool()
    waiting: deque[Future[tuple[bytes, Any]]] = deque()
    following = iter(keys)

    def fetch(key: str) -> tuple[bytes, Any]:
        twin = storage.fork()  # its own request counter: counted back below
        return _read(twin, key), twin.requests

    for key in following:
        waiting.append(pool.submit(fetch, key))
        if len(waiting) >= READ_AHEAD:
            break
    try:
        while waiting:
            data, counted = waiting.popleft().result()
            storage.requests.update(counted)
            after = next(following, None)
            if after is not None:
                waiting.append(pool.submit(fetch, after))
            yield data
    finally:
        for left in waiting:
            left.cancel()


def _pool() -> ThreadPoolExecutor:
    global _POOL
    with _POOL_LOCK:
        if _POOL is None:
            _POOL = ThreadPoolExecutor(READ_AHEAD, thread_name_prefix="commit-read")
        return _POOL


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
