"""Defaults and effective policy. Every default deltakeeper uses is defined here and only here."""

from __future__ import annotations

# Files below this size count as "small" in status, metrics and `inspect`.
SMALL_FILE_BYTES = 32 * 2**20
