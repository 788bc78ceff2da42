"""The one place that retries, and how a store's failures become our errors.

obstore (object_store) is built with its own retries off, so every attempt here is one request
and backoff is not multiplied. Its errors say what happened in their class (FileNotFoundError,
AlreadyExistsError, PermissionDeniedError, ...) and in their text (the HTTP status, "error
sending request"); both are read here. Our errors name the URI without secrets (`safe_uri`) and
are raised outside the handler, so the store's text (a URL, a response body) is not chained.
"""

from __future__ import annotations

import enum
import re
import time
from collections.abc import Callable, Iterable, Iterator
from typing import Any, TypeVar
from urllib.parse import urlparse

from deltakeeper.delta.errors import InvalidInputError, StorageUnreachableError
from deltakeeper.delta.storage_options import NO_AWS_CREDENTIALS

T = TypeVar("T")


class Failure(enum.Enum):
    MISSING = "missing"
    EXISTS = "exists"
    REFUSED = "refused"
    TRANSIENT = "transient"  # throttling, 5xx, a concurrent conditional write, the network
    OTHER = "other"


def safe_uri(uri: str) -> str:
    """The URI without a password, query or fragment: where keys and SAS tokens could hide."""
    p = urlparse(uri)
    if not p.scheme or not p.netloc:
        return uri
    netloc = p.netloc.rsplit("@", 1)[-1] if has_password(p) else p.netloc
    return f"{p.scheme}://{netloc}{p.path}"


def has_password(parsed: Any) -> bool:
    try:
        return parsed.password is not None
    except ValueError:  # a malformed port after the password; still a password
        return "@" in parsed.netloc and ":" in parsed.netloc.split("@", 1)[0]


# Throttling words where a failure carries no status; S3's answer to two conditional writes at
# once: retry to learn who won.
_TRANSIENT_MARKERS = ("ConditionalRequestConflict", "SlowDown", "TooManyRequests")
# object_store's words for a request that got no answer.
_CONNECTION_MARKERS = (
    "error sending request",
    "Connection refused",
    "connection closed",
    "connection reset",
    "operation timed out",
    "dns error",
    "IncompleteMessage",
    "error decoding response body",
)
_STATUS = re.compile(r"status code: (\d{3})")
# The EC2 instance metadata service's paths: object_store asks it for credentials when no
# other source gave any, and a failure there is no credentials, not the bucket's answer.
_METADATA_PATHS = ("/latest/api/token", "/latest/meta-data/")


def http_status(e: BaseException) -> int | None:
    """The HTTP status the store answered with, when the error says."""
    for x in _chain(e):
        found = _STATUS.search(str(x))
        if found:
            return int(found.group(1))
        v = getattr(x, "status", None)
        if isinstance(v, int) and 100 <= v < 600:
            return v
    return None


def classify(e: BaseException) -> Failure:
    """What kind of failure `e` is: by the HTTP status when there is one, else by its class
    and words."""
    text, names, status = str(e), _names(e), http_status(e)
    if _asked_metadata(text):
        return Failure.OTHER  # no credentials: asking again finds none
    if "ConditionalRequestConflict" in text:
        return Failure.TRANSIENT
    if isinstance(e, FileNotFoundError) or status == 404:
        return Failure.MISSING
    if isinstance(e, FileExistsError) or status in (409, 412):
        return Failure.EXISTS
    if _has(names, ("AlreadyExists", "Precondition")):
        return Failure.EXISTS
    if status in (401, 403) or isinstance(e, PermissionError):
        return Failure.REFUSED
    if _has(names, ("PermissionDenied", "Unauthenticated")):
        return Failure.REFUSED
    if status is not None:
        return Failure.TRANSIENT if status in (408, 429) or status >= 500 else Failure.OTHER
    if isinstance(e, ConnectionError | TimeoutError):
        return Failure.TRANSIENT
    if _has(text, _CONNECTION_MARKERS) or _has(text, _TRANSIENT_MARKERS):
        return Failure.TRANSIENT
    return Failure.OTHER


# The pause before the first retry; it doubles before each next one (3 s in all over 5 attempts).
FIRST_BACKOFF_S = 0.2


def with_retries(uri: str, op: str, fn: Callable[[], T], attempts: int = 5) -> T:
    """Run `fn`, retrying throttling, 5xx and connection failures with exponential backoff.

    A missing object becomes FileNotFoundError, a failed create-only condition FileExistsError;
    a refusal, a missing bucket or a failure that outlasts the retries StorageUnreachableError.
    Anything else is raised as it came. Messages name the URI (without secrets), never
    credentials.
    """
    delay = FIRST_BACKOFF_S
    for attempt in range(attempts):
        try:
            return fn()
        except Exception as e:
            failure, error = classify(e), e
        if failure is Failure.TRANSIENT and attempt + 1 < attempts:
            time.sleep(delay)
            delay *= 2
            continue
        raise translate(uri, op, failure, error, attempts)
    raise AssertionError("unreachable")


def translate(
    uri: str, op: str, failure: Failure, e: BaseException, attempts: int = 1
) -> Exception:
    """Our error for a store's failure of `op` on `uri`."""
    where = safe_uri(uri)
    status = http_status(e)
    if _asked_metadata(str(e)):
        answer = f"answered HTTP {status}" if status else "did not answer"
        return StorageUnreachableError(
            f"{NO_AWS_CREDENTIALS}, for {where}: none is configured, and the instance metadata "
            f"service, asked for some, {answer} (off the cloud, set AWS_EC2_METADATA_DISABLED="
            "true so it is not asked)"
        )
    if failure is Failure.MISSING:
        if op == "list":  # listing a missing prefix is not an error; a missing bucket is
            return StorageUnreachableError(f"list on {where} failed: bucket or container not found")
        return FileNotFoundError(f"{where}: not found ({op})")
    if failure is Failure.EXISTS:
        return FileExistsError(f"{where}: already exists ({op})")
    if failure is Failure.REFUSED:
        return StorageUnreachableError(
            f"{op} on {where} was refused ({status or type(e).__name__}): "
            "check the credentials and permissions"
        )
    if failure is Failure.TRANSIENT:
        what = f"HTTP {status}" if status else "no answer"
        return StorageUnreachableError(
            f"{op} on {where} failed after {attempts} attempts ({what}): "
            "check the endpoint and check the network"
        )
    if "builder error" in str(e):
        return InvalidInputError(
            f"cannot send requests to {where}: the endpoint is http:// but plain HTTP is not "
            "allowed; set allow_http=true (AWS_ALLOW_HTTP) or use https://"
        )
    return e if isinstance(e, Exception) else RuntimeError(str(e))


def _asked_metadata(text: str) -> bool:
    return _has(text, _METADATA_PATHS)


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
    """Exception class names along the chain, for matching."""
    return " ".join(type(x).__name__ for x in _chain(e))
