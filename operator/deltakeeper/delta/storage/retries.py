"""The one place that retries, and how a store's failures become our errors.

Messages name the URI without secrets (`safe_uri`), never credentials."""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable, Iterator
from typing import Any, TypeVar
from urllib.parse import urlparse

from deltakeeper.delta.errors import (
    InvalidCredentialsError,
    InvalidInputError,
    StorageUnreachableError,
)

T = TypeVar("T")


class BatchError(OSError):
    def __init__(self, status: int, message: str) -> None:
        super().__init__(message)
        self.status = status


def open_error(uri: str, e: Exception) -> Exception:
    """A client that could not be made: the network (gcsfs checks a token when it starts) or
    the options."""
    if isinstance(e, ConnectionError | TimeoutError) or _has(_names(e), _CONNECTION_MARKERS):
        return StorageUnreachableError(
            f"cannot open {safe_uri(uri)}: {type(e).__name__} while checking the credentials; "
            "check the network and the endpoint"
        )
    return InvalidInputError(
        f"cannot open {safe_uri(uri)} with these storage options ({type(e).__name__}); check the "
        "option names and values (e.g. endpoint_url, key, secret, account_name, token)"
    )


def _unusable_options(uri: str, e: Exception, names: str) -> InvalidInputError | None:
    """Options the client rejects when it first sends: a bad key, an unknown option name."""
    if "AzureSigningError" in names:
        return InvalidCredentialsError(
            f"cannot sign requests to {safe_uri(uri)}: the account key is not valid base64; "
            "check account_key (AZURE_STORAGE_ACCOUNT_KEY in a Secret)"
        )
    if isinstance(e, TypeError) and "unexpected keyword argument" in str(e):
        option = str(e).rsplit(" ", 1)[-1]
        return InvalidCredentialsError(
            f"the client for {safe_uri(uri)} does not know the storage option {option}; check its "
            "spelling against the fsspec backend's options (s3fs, gcsfs, adlfs)"
        )
    return None


def safe_uri(uri: str) -> str:
    """The URI without a password, query or fragment: where keys and SAS tokens could hide."""
    p = urlparse(uri)
    if not p.scheme or not p.netloc:
        return uri
    netloc = p.netloc.rsplit("@", 1)[-1] if has_password(p) else p.netloc
    return f"{p.scheme}://{netloc}{p.path}"


_TRANSIENT_MARKERS = (
    "SlowDown",
    "Throttl",
    "TooManyRequests",
    "ServiceUnavailable",
    "InternalError",
    "RequestTimeout",
    "ConditionalRequestConflict",  # S3: a concurrent conditional write; retry to learn who won
)
_CONNECTION_MARKERS = ("Connect", "Timeout", "ServerDisconnected", "ServiceRequest")
_REFUSED_MARKERS = ("NoCredentials", "Forbidden", "AccessDenied", "ClientAuthentication")


# The pause before the first retry; it doubles before each next one (3 s in all over 5 attempts).
FIRST_BACKOFF_S = 0.2


def with_retries(uri: str, op: str, fn: Callable[[], T], attempts: int = 5) -> T:
    """Run `fn`, retrying throttling, 5xx and connection failures with exponential backoff.

    A missing object becomes FileNotFoundError, a failed create-only condition FileExistsError;
    a refusal, a missing bucket or a failure that outlasts the retries StorageUnreachableError.
    Messages name the URI (without secrets), never credentials.
    """
    delay = FIRST_BACKOFF_S
    for attempt in range(attempts):
        try:
            return fn()
        except FileExistsError:
            raise
        except Exception as e:
            status, names = http_status(e), _names(e)
            if status == 404 or isinstance(e, FileNotFoundError):
                if op == "list":  # listing a missing prefix is not an error; a missing bucket is
                    raise StorageUnreachableError(
                        f"list on {safe_uri(uri)} failed: bucket or container not found"
                    ) from e
                raise FileNotFoundError(f"{safe_uri(uri)}: not found ({op})") from e
            if status == 412 or (status == 409 and "Exist" in names):
                raise FileExistsError(f"{safe_uri(uri)}: already exists ({op})") from e
            if (
                status in (401, 403)
                or isinstance(e, PermissionError)
                or _has(names, _REFUSED_MARKERS)
            ):
                raise StorageUnreachableError(
                    f"{op} on {safe_uri(uri)} was refused ({status or type(e).__name__}): "
                    "check the credentials and permissions"
                ) from e
            transient = (status is not None and (status in (408, 429) or status >= 500)) or _has(
                names, _TRANSIENT_MARKERS
            )
            connection = isinstance(e, ConnectionError | TimeoutError) or _has(
                names, _CONNECTION_MARKERS
            )
            if (unusable := _unusable_options(uri, e, names)) is not None:
                raise unusable from e
            if not (transient or connection):
                raise
            if attempt + 1 < attempts:
                time.sleep(delay)
                delay *= 2
                continue
            what = f"HTTP {status}" if status else type(e).__name__
            raise StorageUnreachableError(
                f"{op} on {safe_uri(uri)} failed after {attempts} attempts ({what}): "
                "check the endpoint and the network"
            ) from e
    raise AssertionError("unreachable")


def _has(text: str, markers: Iterable[str]) -> bool:
    return any(m in text for m in markers)


def _chain(e: BaseException) -> Iterator[BaseException]:
    seen: set[int] = set()
    cur: BaseException | None = e
    while cur is not None and id(cur) not in seen:
        seen.add(id(cur))
        yield cur
        cur = cur.__cause__ or cur.__context__


def _names(e: BaseException) -> str:
    """Exception class names and error codes along the chain, for matching."""
    out = []
    for x in _chain(e):
        out.append(type(x).__name__)
        resp = getattr(x, "response", None)
        if isinstance(resp, dict):
            out.append(str(resp.get("Error", {}).get("Code", "")))
        out.append(str(getattr(x, "error_code", "") or ""))
    return " ".join(out)


def http_status(e: BaseException) -> int | None:
    """The HTTP status of the first exception in the chain that carries one."""
    for x in _chain(e):
        resp = getattr(x, "response", None)
        if isinstance(resp, dict):
            code = resp.get("ResponseMetadata", {}).get("HTTPStatusCode")
            if isinstance(code, int):
                return code
        for attr in ("status", "status_code", "code"):
            v = getattr(x, attr, None)
            if isinstance(v, int) and 100 <= v < 600:
                return v
    return None


def has_password(parsed: Any) -> bool:
    try:
        return parsed.password is not None
    except ValueError:  # a malformed port after the password; still a password
        return "@" in parsed.netloc and ":" in parsed.netloc.split("@", 1)[0]


def transient_codes(codes: str) -> bool:
    """Whether error codes (space-separated) name a failure worth retrying."""
    return _has(codes, _TRANSIENT_MARKERS)
