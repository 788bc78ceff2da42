"""`deltakeeper maintain --compact`: compaction as a step of maintain, run to its end by a real
spark-submit (local[2], the Delta jars), between the checkpoint and cleanup. Files before and
after come from the log, rows from delta-rs at every version."""

from __future__ import annotations

import json
import time
from collections import Counter
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest

from deltakeeper.cli import main
from deltakeeper.delta.table import open_table
from tests.support.compaction import cli_spark_flags
from tests.support.oracles import table_versions
from tests.support.rows import deltars_digest

pytestmark = pytest.mark.spark

HOUR_MS = 3_600_000


def small_files(path: Path, rounds: int = 4) -> None:
    """`rounds` delta-rs appends, each one small file in partitions a and b."""
    from deltalake import write_deltalake

    for r in range(rounds):
        batch = pa.table({"id": pa.array([2 * r, 2 * r + 1], pa.int64()), "p": ["a", "b"]})
        write_deltalake(str(path), batch, mode="append", partition_by=["p"])


def files_per_partition(path: Path) -> Counter[str]:
    files = open_table(str(path)).snapshot().files.to_pylist()
    return Counter(dict(row["partitionValues"])["p"] for row in files)


def maintain(capsys: pytest.CaptureFixture[str], path: Path, now_ms: int) -> tuple[int, Any]:
    argv = ["maintain", str(path), "--compact", "--now", str(now_ms), "--json", *cli_spark_flags()]
    code = main(argv)
    out, err = capsys.readouterr()
    assert out, err
    return code, json.loads(out)


def test_maintain_compacts_after_the_checkpoint_and_keeps_every_row(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    table = tmp_path / "t"
    small_files(table)
    assert files_per_partition(table) == {"a": 4, "b": 4}
    versions = table_versions(str(table))
    rows = {v: deltars_digest(str(table), v) for v in versions}
    # Eight small files, four a partition: due once the oldest is an hour old (maxAge).
    later = int(time.time() * 1000) + 2 * HOUR_MS

    code, report = maintain(capsys, table, later)

    assert code == 0, report
    results = {r["operation"]: r for r in report["results"]}
    assert list(results) == ["checkpoint", "compaction", "cleanup", "vacuum"]
    done = results["compaction"]
    assert done["result"] == "done", done
    compacted = done["compacted"]
    assert (compacted["filesRemoved"], compacted["filesAdded"]) == (8, 2)
    assert compacted["bytesRemoved"] > compacted["bytesAdded"] > 0
    assert done["job"]["filesRemoved"] == 8  # the job's own line says the same
    assert files_per_partition(table) == {"a": 1, "b": 1}
    [version] = compacted["versions"]
    log = table / "_delta_log" / f"{version:020d}.json"
    actions = [json.loads(line) for line in log.read_text().splitlines() if line]
    info = next(a["commitInfo"] for a in actions if "commitInfo" in a)
    assert info["operation"] == "OPTIMIZE" and info["userMetadata"] == done["jobId"]
    changes = [a.get("add") or a.get("remove") for a in actions if "add" in a or "remove" in a]
    assert all(c["dataChange"] is False for c in changes)
    # delta-rs reads the same rows at the compacted version and at every version before.
    assert {v: deltars_digest(str(table), v) for v in versions} == rows
    assert deltars_digest(str(table), version) == rows[versions[-1]]

    # Nothing is due any more; no second job.
    code, again = maintain(capsys, table, later)
    assert code == 0
    step = next(s for s in again["plan"]["steps"] if s["operation"] == "compaction")
    assert not step["due"] and "no partition is due" in step["reason"]
    assert max(table_versions(str(table))) == version
