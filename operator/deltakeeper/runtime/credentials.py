"""Credentials: Secret data turned into fsspec storage options, and kept out of every text.

A DeltaTable's `spec.storage.secretRef` names a Secret (in the operator, read from the API
server; in standalone mode, a Secret manifest in the folder). Its keys use the names the
clouds' own tools use (AWS_ACCESS_KEY_ID, AZURE_STORAGE_ACCOUNT_KEY, ...) or fsspec's option
names directly. Every secret value is registered with `Scrubber`, whose filter removes it from
log records, and whose `scrub` the status, events and exceptions pass through (ARCHITECTURE.md,
promise 6).
"""

from __future__ import annotations

import io
import json
import logging
import threading
from collections.abc import Iterable, Mapping
from typing import Any, TextIO
from urllib.parse import unquote, urlparse

from deltakeeper.delta.errors import InvalidInputError

MASK = "***"

# Secret key -> fsspec option, per store. Keys are matched case-sensitively, as Kubernetes does.
_S3 = {
    "AWS_ACCESS_KEY_ID": "key",
    "AWS_SECRET_ACCESS_KEY": "secret",
    "AWS_SESSION_TOKEN": "token",
    "AWS_ENDPOINT_URL": "endpoint_url",
}
_AZURE = {
    "AZURE_STORAGE_ACCOUNT_NAME": "account_name",
    "AZURE_STORAGE_ACCOUNT_KEY": "account_key",
    "AZURE_STORAGE_CONNECTION_STRING": "connection_string",
    "AZURE_STORAGE_SAS_TOKEN": "sas_token",
    "AZURE_CLIENT_ID": "client_id",
    "AZURE_CLIENT_SECRET": "client_secret",
    "AZURE_TENANT_ID": "tenant_id",
}
_GCS_JSON_KEYS = ("service-account.json", "GOOGLE_APPLICATION_CREDENTIALS_JSON")
_BY_SCHEME = {"s3": _S3, "s3a": _S3, "abfss": _AZURE, "abfs": _AZURE, "az": _AZURE}
# Keys that are fsspec options already (any store); passed through unchanged.
_PLAIN = {
    "key",
    "secret",
    "token",
    "endpoint_url",
    "account_name",
    "account_key",
    "connection_string",
    "sas_token",
    "client_id",
    "client_secret",
    "tenant_id",
}


def storage_options(uri: str, secret: Mapping[str, str]) -> dict[str, Any]:
    """fsspec options for `uri` from a Secret's decoded data; InvalidInputError names the keys
    it cannot use (never their values)."""
    scheme = uri.split("://", 1)[0].lower() if "://" in uri else "file"
    names = _BY_SCHEME.get(scheme, {})
    options: dict[str, Any] = {}
    unknown: list[str] = []
    for key, value in secret.items():
        if key in names:
            options[names[key]] = value
        elif key in _PLAIN:
            options[key] = value
        elif scheme in ("gs", "gcs") and key in _GCS_JSON_KEYS:
            options["token"] = _service_account(key, value)
        elif key == "AWS_REGION" and names is _S3:
            options.setdefault("client_kwargs", {})["region_name"] = value
        else:
            unknown.append(key)
    if unknown:
        raise InvalidInputError(
            f"the Secret has keys deltakeeper does not know for {scheme}:// tables: "
            f"{', '.join(sorted(unknown))}; use {', '.join(sorted({*names, *_PLAIN}))}"
            + (f" or {' / '.join(_GCS_JSON_KEYS)}" if scheme in ("gs", "gcs") else "")
        )
    return options


def _service_account(key: str, value: str) -> dict[str, Any]:
    try:
        info = json.loads(value)
    except ValueError:
        raise InvalidInputError(
            f"the Secret's {key} is not JSON (a service-account key file)"
        ) from None
    if not isinstance(info, dict):
        raise InvalidInputError(f"the Secret's {key} is not a JSON object")
    return info


def secret_values(secret: Mapping[str, str]) -> set[str]:
    """Every string worth masking: each value, and the string fields inside JSON values."""
    out: set[str] = set()
    for value in secret.values():
        out.add(value)
        try:
            inner = json.loads(value)
        except ValueError:
            continue
        if isinstance(inner, dict):
            out.update(v for v in inner.values() if isinstance(v, str))
    # Short values ("1", "us-east-1"-like) would mask ordinary words; they are not secrets.
    return {v for v in out if len(v) >= 6}


# Storage options that never carry a credential; every other option's value is masked.
_PUBLIC_OPTIONS = {
    "endpoint_url",
    "account_name",
    "region_name",
    "anon",
    "use_ssl",
    "project",
    "requester_pays",
    "default_location",
    "version_aware",
}


def option_secrets(pair: str) -> set[str]:
    """The values worth masking in one KEY=VALUE storage option (the whole text when it has
    no '=': a value typed without its key)."""
    key, sep, value = pair.partition("=")
    if not sep:
        return secret_values({"": pair})
    return set() if key in _PUBLIC_OPTIONS else secret_values({key: value})


def uri_secrets(uri: str) -> set[str]:
    """The user and password of a URI like s3://KEY:SECRET@bucket/path."""
    try:
        parsed = urlparse(uri)
        user, password = parsed.username, parsed.password
    except ValueError:
        return set()
    if password is None:
        return set()  # abfss://container@account...: no credential in it
    return secret_values({"user": unquote(user or ""), "password": unquote(password)}) | {password}


class ScrubbingStream(io.TextIOBase):
    """A text stream that masks every registered secret before writing to the one it wraps."""

    def __init__(self, inner: TextIO, scrubber: Scrubber | None = None) -> None:
        self.inner = inner
        self.scrubber = scrubber or SCRUBBER

    def write(self, text: str) -> int:
        self.inner.write(self.scrubber.scrub(text))
        return len(text)

    def flush(self) -> None:
        self.inner.flush()

    def isatty(self) -> bool:
        return self.inner.isatty()

    def fileno(self) -> int:
        return self.inner.fileno()

    @property
    def encoding(self) -> str:  # type: ignore[override]
        return getattr(self.inner, "encoding", "utf-8")


class Scrubber:
    """Removes registered secret values from text, and from every log record once installed."""

    def __init__(self) -> None:
        self._values: tuple[str, ...] = ()
        self._lock = threading.Lock()

    def register(self, values: Iterable[str]) -> None:
        with self._lock:
            # Longest first, so a value that contains another is masked whole.
            merged = {*self._values, *values}
            self._values = tuple(sorted(merged, key=len, reverse=True))

    def clear(self) -> None:
        """Forget every value: for a process that runs many commands in turn (tests)."""
        with self._lock:
            self._values = ()

    def scrub(self, text: str) -> str:
        for value in self._values:
            if value in text:
                text = text.replace(value, MASK)
        return text

    def clean_record(self, record: logging.LogRecord) -> None:
        if not self._values:
            return
        try:
            message = record.getMessage()
        except Exception:  # a bad log call: logging reports it when it formats
            return
        if record.exc_info:
            message += "\n" + logging.Formatter().formatException(record.exc_info)
            record.exc_info = None
            record.exc_text = None
        record.msg, record.args = self.scrub(message), None


# One per process: a secret seen anywhere is masked everywhere.
SCRUBBER = Scrubber()
_installed = False


def install_log_scrubbing() -> None:
    """Scrub every log record at creation, whichever logger or handler it goes to."""
    global _installed
    if _installed:
        return
    make = logging.getLogRecordFactory()

    def factory(*args: Any, **kwargs: Any) -> logging.LogRecord:
        record = make(*args, **kwargs)
        SCRUBBER.clean_record(record)
        return record

    logging.setLogRecordFactory(factory)
    _installed = True
