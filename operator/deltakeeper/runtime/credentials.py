"""Credentials: Secret data turned into storage options, and kept out of every text.

A DeltaTable's `spec.storage.secretRef` names a Secret (in the operator, read from the API
server; in standalone mode, a Secret manifest in the folder). Its keys are storage options in
either spelling delta/storage_options.py takes: the clouds' own names, which object_store's are
(AWS_ACCESS_KEY_ID, AZURE_STORAGE_ACCOUNT_KEY, ..., any case), or fsspec's (key, secret, ...);
plus AZURE_STORAGE_CONNECTION_STRING, and a GCS service-account key file under
`service-account.json` or GOOGLE_APPLICATION_CREDENTIALS_JSON. Every secret value is registered
with `Scrubber`, whose filter removes it from log records, and whose `scrub` the status, events
and exceptions pass through (ARCHITECTURE.md, promise 6).
"""

from __future__ import annotations

import io
import json
import logging
import threading
from collections.abc import Iterable, Mapping
from typing import Any, TextIO
from urllib.parse import unquote, urlparse

from deltakeeper.delta import storage_options as storage_opts
from deltakeeper.delta.errors import InvalidInputError

MASK = "***"
SHORTEST_SECRET = 6  # shorter values ("1", "eu") would mask ordinary words

# Secret keys that are no storage option of their own, per store -> the option they give.
_GCS_JSON_KEYS = ("service-account.json", "GOOGLE_APPLICATION_CREDENTIALS_JSON")
_EXTRA = {"azure": {"AZURE_STORAGE_CONNECTION_STRING": "connection_string"}}
# The names a Secret usually has, listed when it has one deltakeeper does not know.
_USUAL = {
    "s3": (
        "AWS_ACCESS_KEY_ID",
        "AWS_SECRET_ACCESS_KEY",
        "AWS_SESSION_TOKEN",
        "AWS_REGION",
        "AWS_ENDPOINT_URL",
    ),
    "azure": (
        "AZURE_STORAGE_ACCOUNT_NAME",
        "AZURE_STORAGE_ACCOUNT_KEY",
        "AZURE_STORAGE_CONNECTION_STRING",
        "AZURE_STORAGE_SAS_TOKEN",
        "AZURE_CLIENT_ID",
        "AZURE_CLIENT_SECRET",
        "AZURE_TENANT_ID",
    ),
    "gcs": _GCS_JSON_KEYS,
}


def storage_options(uri: str, secret: Mapping[str, str]) -> dict[str, Any]:
    """Storage options for `uri` from a Secret's decoded data, in one spelling (object_store's
    names, options.canonical) on the object stores; as they are for other schemes.
    InvalidInputError names the keys it cannot use (never their values)."""
    store = storage_opts.store_of(uri)
    if store is None:
        return dict(secret)
    options: dict[str, Any] = {}
    for key, value in secret.items():
        if store == "gcs" and key in _GCS_JSON_KEYS:
            options["token"] = _service_account(key, value)
        else:
            options[_EXTRA.get(store, {}).get(key, key)] = value
    unknown = storage_opts.unknown_keys(store, options)
    names = {_EXTRA.get(store, {}).get(k, k): k for k in secret}
    if unknown:
        scheme = uri.split("://", 1)[0].lower()
        raise InvalidInputError(
            f"the Secret has keys deltakeeper does not know for {scheme}:// tables: "
            f"{', '.join(sorted(names.get(k, k) for k in unknown))}; use "
            f"{', '.join(_USUAL[store])} or any storage option (docs/storage.md)"
        )
    return storage_opts.canonical(store, options)


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
    """Every string worth masking: each value, the string fields inside JSON values, and the
    key or SAS inside an Azure connection string."""
    out: set[str] = set()
    for value in secret.values():
        out.add(value)
        out.update(_connection_string_secrets(value))
        try:
            inner = json.loads(value)
        except ValueError:
            continue
        if isinstance(inner, dict):
            out.update(v for v in inner.values() if isinstance(v, str))
    # Short values ("1", "us-east-1"-like) would mask ordinary words; they are not secrets.
    return {v for v in out if len(v) >= SHORTEST_SECRET}


def _connection_string_secrets(value: str) -> set[str]:
    if "AccountKey=" not in value and "SharedAccessSignature=" not in value:
        return set()
    fields = storage_opts.connection_string(value)
    secret = ("azure_storage_account_key", "azure_storage_sas_token")
    return {fields[k] for k in secret if k in fields}


def option_secrets(pair: str) -> set[str]:
    """The values worth masking in one KEY=VALUE storage option (the whole text when it has
    no '=': a value typed without its key)."""
    key, sep, value = pair.partition("=")
    if not sep:
        return secret_values({"": pair})
    return set() if storage_opts.is_public(key) else secret_values({key: value})


def uri_secrets(uri: str) -> set[str]:
    """The user and password of a URI like s3://KEY:SECRET@bucket/path, and its query: a
    presigned URL's signature or a SAS token rides there (?X-Amz-Signature=..., ?sig=...)."""
    try:
        parsed = urlparse(uri)
        user, password = parsed.username, parsed.password
    except ValueError:
        return set()
    found = _query_secrets(parsed.query)
    if password is None:
        return found  # abfss://container@account...: no credential in it
    login = {"user": unquote(user or ""), "password": unquote(password)}
    return found | secret_values(login) | {password}


def _query_secrets(query: str) -> set[str]:
    """The whole query, as written and decoded, and each value in it."""
    if not query:
        return set()
    values = {query, unquote(query)}
    for pair in query.split("&"):
        value = pair.partition("=")[2]
        values.update((value, unquote(value)))
    return {v for v in values if len(v) >= SHORTEST_SECRET}


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
