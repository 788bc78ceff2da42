"""Polling for a condition in tests that watch a live process, and stopping one."""

from __future__ import annotations

import subprocess
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


def stop(proc: subprocess.Popen[Any], grace_s: float, kill_wait_s: float = 10) -> bool:
    """SIGTERM, then SIGKILL if `proc` has not exited within `grace_s`; True when it exited
    by itself (or had already)."""
    if proc.poll() is not None:
        return True
    proc.terminate()
    try:
        proc.wait(timeout=grace_s)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait(timeout=kill_wait_s)
        return False
    return True
