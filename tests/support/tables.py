"""Small Delta tables on the local disk, built by hand for the unit tests of several modules."""

from __future__ import annotations

import json
from pathlib import Path

from tests.support.logbuilder import metadata, protocol


def make_table(root: Path, rel: str, *, checkpoint_only: bool = False) -> Path:
    """A table at `root/rel`: one commit, or (`checkpoint_only`) only a checkpoint, as a table
    whose commits were cleaned up looks to a scan."""
    log = root / rel / "_delta_log"
    log.mkdir(parents=True, exist_ok=True)
    if checkpoint_only:
        (log / "00000000000000000010.checkpoint.parquet").write_bytes(b"PAR1")
    else:
        lines = (json.dumps(a) for a in (protocol(), metadata()))
        (log / "00000000000000000000.json").write_text("\n".join(lines) + "\n")
    return root / rel
