"""Delta Spark tables for the vacuum-mode tests, and the clock games those tests play on copies.

- `ensure_cdc_table()`: a table Delta Spark writes with change data feed on, partitioned by a
  string column whose values are hard to quote (space, %, /, #, =, :, +, brackets, braces, a
  quote, non-ASCII), with deletes and an update: `remove`s and `cdc` files in several commits.
  Cached like tests/support/spark.py's tables (its own key: this file and the pinned versions),
  written into a temporary folder renamed into place, so a crash never leaves half a cache.
- `age(copy, source, k, future_ms)`: the clock as VACUUM sees it at `k`: commits up to `k` as
  the source has them (written in the past), later ones moved to `future_ms` (file time,
  in-commit timestamp and every remove's deletionTimestamp), so with a retention of 0 the newest
  commit before the cut-off is `k` and the removes after it protect their files.
"""

from __future__ import annotations

import fcntl
import hashlib
import json
import os
import shutil
import tempfile
from pathlib import Path
from typing import Any

from tests.support import spark as spark_support

PARTS = ["a b", "a%b", "a/b", "é", "a=b", "a#b", "a:b", "a+b", "[x]", "{y}", "q'q", "100%"]


def _gen_cdc(spark: Any, path: Path) -> None:
    t = spark_support._Table(spark, path, "id INT, part STRING, val INT")
    t.create(partitioned_by="part", **{"delta.enableChangeDataFeed": "true"})
    t.append(spark_support._rows(range(0, 24), part=lambda i: PARTS[i % 12], val=lambda i: i))
    t.append(spark_support._rows(range(24, 48), part=lambda i: PARTS[i % 12], val=lambda i: i))
    t.delete("id % 5 = 0", lambda r: r["id"] % 5 == 0)  # v3
    t.update(
        "val = val + 1",
        "id % 7 = 1",
        lambda r: r.update(val=r["val"] + 1),
        lambda r: r["id"] % 7 == 1,
    )  # v4
    t.delete("part = 'a b' OR part = 'a%b'", lambda r: r["part"] in ("a b", "a%b"))  # v5


def ensure_cdc_table() -> Path:
    """The cached change-data-feed table (generated once per key); shared: copy before use."""
    versions = spark_support.pinned_versions()
    digest = hashlib.sha256(Path(__file__).read_bytes() + json.dumps(versions).encode())
    root = spark_support.cache_root() / "vacuum-tables"
    final = root / f"cdc-{digest.hexdigest()[:16]}"
    if (final / "_delta_log").is_dir():
        return final
    root.mkdir(parents=True, exist_ok=True)
    with open(root / ".lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if (final / "_delta_log").is_dir():
            return final
        work = Path(tempfile.mkdtemp(dir=root, prefix=".tmp-"))
        try:
            _gen_cdc(spark_support.spark_session("deltakeeper-vacuum"), work / "t")
            os.rename(work / "t", final)
        finally:
            shutil.rmtree(work, ignore_errors=True)
    return final


def commit_versions(path: Path) -> list[int]:
    return sorted(
        int(f.name[:20]) for f in (path / "_delta_log").glob("*.json") if f.name[:20].isdigit()
    )


def age(copy: Path, source: Path, k: int, future_ms: int) -> None:
    """Commits up to `k` as `source` has them; later ones at `future_ms` (see the module)."""
    log, src = copy / "_delta_log", source / "_delta_log"
    for v in commit_versions(copy):
        name = f"{v:020d}.json"
        if v <= k:
            shutil.copy2(src / name, log / name)
            continue
        actions = [json.loads(line) for line in (log / name).read_text().splitlines() if line]
        for a in actions:
            if "remove" in a:
                a["remove"]["deletionTimestamp"] = future_ms + v
            info = a.get("commitInfo")
            if info is not None and "inCommitTimestamp" in info:
                info["inCommitTimestamp"] = info["timestamp"] = future_ms + v
        (log / name).write_text("".join(json.dumps(a) + "\n" for a in actions))
        ns = (future_ms + v) * 1_000_000
        os.utime(log / name, ns=(ns, ns))
    # Version checksums and Hadoop's checksums of the rewritten commits would not match.
    for f in log.iterdir():
        if f.name.endswith(".crc"):
            f.unlink()
