"""Kubernetes names deltakeeper derives: a readable slug, then a hash that keeps them unique."""

from __future__ import annotations

import hashlib
import re
import unicodedata

MAX_NAME = 63  # a DNS label
HASH_CHARS = 10  # 40 bits of sha256: two keys sharing a slug differ here


def dns_label(readable: str, key: str, prefix: str = "") -> str:
    """`<prefix><slug of readable>-<hash of key>`, at most 63 characters, a DNS label: the
    slug is cut to fit and the hash tells apart keys that slug alike or are cut short."""
    digest = hashlib.sha256(key.encode()).hexdigest()[:HASH_CHARS]
    stem = slug(readable)[: MAX_NAME - len(prefix) - HASH_CHARS - 1].rstrip("-")
    return f"{prefix}{stem}-{digest}" if stem else f"{prefix}{digest}"


def slug(text: str) -> str:
    """Lowercase ASCII letters and digits, every other run made one '-'."""
    ascii_text = unicodedata.normalize("NFKD", text).encode("ascii", "ignore").decode()
    return re.sub(r"[^a-z0-9]+", "-", ascii_text.lower()).strip("-")
