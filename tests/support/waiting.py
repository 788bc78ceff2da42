"""Polling for a condition in tests that watch a live process."""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any


def until(check: Callable[[], Any], timeout: float, what: str, every: float = 0.3) -> Any:
    """`check()`'s first truthy value; AssertionError naming `what` after `timeout` seconds."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = check()
        if value:
            return value
        time.sleep(every)
    raise AssertionError(f"timed out waiting for {what}")
