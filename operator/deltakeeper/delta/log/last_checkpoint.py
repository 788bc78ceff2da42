"""`_delta_log/_last_checkpoint`: parse, validate (canonical-JSON MD5 checksum) and serialize."""

from __future__ import annotations

import enum
import hashlib
import json
from dataclasses import dataclass
from typing import Any
from urllib.parse import quote


@dataclass(frozen=True)
class LastCheckpoint:
    version: int
    size: int | None
    parts: int | None
    raw: dict[str, Any]


class InvalidLastCheckpoint(ValueError):
    pass


class HintStatus(enum.StrEnum):
    """How far `_last_checkpoint` can be trusted (as `inspect` shows it)."""

    OK = "ok"
    MISSING = "missing"
    CORRUPT = "corrupt"
    STALE = "stale"  # names no complete checkpoint


def _reject_duplicates(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    keys = [k for k, _ in pairs]
    if len(keys) != len(set(keys)):
        raise InvalidLastCheckpoint("duplicate keys")
    return dict(pairs)


def parse(data: bytes) -> LastCheckpoint:
    """Parse and validate; InvalidLastCheckpoint when it cannot be trusted."""
    try:
        raw = json.loads(data.decode("utf-8"), object_pairs_hook=_reject_duplicates)
    except (UnicodeDecodeError, json.JSONDecodeError, RecursionError) as e:  # too deep to parse
        raise InvalidLastCheckpoint(f"not JSON: {e}") from e
    if not isinstance(raw, dict) or not isinstance(raw.get("version"), int) or raw["version"] < 0:
        raise InvalidLastCheckpoint("no integer version")
    if "checksum" in raw and raw["checksum"] != checksum(raw):
        raise InvalidLastCheckpoint("checksum does not match")
    parts = raw.get("parts")
    size = raw.get("size")
    return LastCheckpoint(
        raw["version"],
        size if isinstance(size, int) else None,
        parts if isinstance(parts, int) else None,
        raw,
    )


def _encode(s: str) -> str:
    # Spec: percent-encode every octet but a-z A-Z 0-9 - . _ ~ ; uppercase hex.
    return quote(s, safe="-._~")


def _scalar(v: Any) -> str:
    if v is None:
        return "null"
    if v is True:
        return "true"
    if v is False:
        return "false"
    if isinstance(v, int | float):
        return repr(v)
    return f'"{_encode(str(v))}"'


def _pairs(value: Any, path: list[str], out: list[tuple[bytes, str]]) -> None:
    if isinstance(value, dict):
        for k, v in value.items():
            _pairs(v, [*path, f'"{_encode(k)}"'], out)
    elif isinstance(value, list):
        for i, v in enumerate(value):
            _pairs(v, [*path, str(i)], out)
    else:
        p = "+".join(path)
        out.append((p.encode("utf-8"), f"{p}={_scalar(value)}"))


def canonicalize(obj: dict[str, Any]) -> str:
    pairs: list[tuple[bytes, str]] = []
    _pairs({k: v for k, v in obj.items() if k != "checksum"}, [], pairs)
    return ",".join(s for _, s in sorted(pairs, key=lambda p: p[0]))


def checksum(obj: dict[str, Any]) -> str:
    return hashlib.md5(canonicalize(obj).encode("utf-8")).hexdigest()


def serialize(fields: dict[str, Any]) -> bytes:
    """The file content, with the checksum of everything else added."""
    body = {k: v for k, v in fields.items() if v is not None and k != "checksum"}
    body["checksum"] = checksum(body)
    return json.dumps(body, separators=(",", ":")).encode("utf-8")
