"""deltakeeper/__init__.py: what importing the package sets for the whole process."""

from __future__ import annotations

import os
import subprocess
import sys

SHOW = "import deltakeeper, os; print(os.environ['MIMALLOC_PURGE_DELAY'])"


def _show(**env: str) -> str:
    base = {k: v for k, v in os.environ.items() if k != "MIMALLOC_PURGE_DELAY"}
    done = subprocess.run(
        [sys.executable, "-c", SHOW], env=base | env, capture_output=True, text=True, check=True
    )
    return done.stdout.strip()


def test_arrow_gives_freed_memory_back_at_once_unless_told_otherwise() -> None:
    assert _show() == "0"
    assert _show(MIMALLOC_PURGE_DELAY="250") == "250"
