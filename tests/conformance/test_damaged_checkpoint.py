"""A truncated or empty newest checkpoint: every command reads past it to the previous one,
says so, never deletes that one in the same run, and `maintain` rewrites the damaged file so
delta-rs and DuckDB read the table as before."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from deltakeeper.cli import main
from tests.support.oracles import Unreadable
from tests.support.rows import deltars_digest, duckdb_digest

TABLE = "simple_table_with_checkpoint"  # commits 0-10, a classic checkpoint at 10
FAR = 4_102_444_800_000  # 2100-01-01: every commit is past any retention
LOG = "_delta_log"
DAMAGED = f"{LOG}/00000000000000000010.checkpoint.parquet"
OLDER = f"{LOG}/00000000000000000005.checkpoint.parquet"


def run(capsys, *argv: str) -> tuple[int, dict, str]:
    code = main([*argv, "--json"])
    out, err = capsys.readouterr()
    return code, json.loads(out) if out else {}, err


def digests(path: Path) -> dict:
    return {"delta-rs": deltars_digest(str(path)), "duckdb": duckdb_digest(str(path))}


@pytest.mark.parametrize("damage", ["truncated", "empty"])
def test_a_damaged_checkpoint_is_read_past_then_rewritten(damage, corpus, corpus_copy, capsys):
    want = digests(corpus / TABLE)
    assert not any(isinstance(d, Unreadable) for d in want.values()), want
    path = corpus_copy(TABLE)
    assert run(capsys, "checkpoint", str(path), "--version", "5")[0] == 0
    data = (path / DAMAGED).read_bytes()
    (path / DAMAGED).write_bytes(data[: len(data) // 2] if damage == "truncated" else b"")

    code, report, err = run(capsys, "inspect", str(path))
    assert code == 0 and report["version"] == 10
    assert report["lastCheckpointVersion"] == 5
    assert [d["version"] for d in report["damagedCheckpoints"]] == [10]
    assert report["damagedCheckpoints"][0]["files"] == [DAMAGED]
    assert "warning" in err and DAMAGED in err

    code, report, err = run(capsys, "cleanup", str(path), "--now", str(FAR))
    assert code == 0 and DAMAGED in err
    assert report["checkpointVersion"] == 5  # cut at the checkpoint read, never past it
    assert (path / OLDER).exists() and (path / f"{LOG}/00000000000000000005.json").exists()
    code, report, _ = run(capsys, "vacuum", str(path), "--now", str(FAR), "--dry-run")
    assert code == 0

    code, report, err = run(capsys, "maintain", str(path), "--now", str(FAR), "--no-vacuum")
    assert code == 0, err
    done = {r["operation"]: r for r in report["results"]}
    assert done["checkpoint"]["result"] == "done"
    assert done["checkpoint"]["repairedCheckpoints"] == [10]
    assert (path / OLDER).exists()  # the one read instead stays in this run

    code, report, err = run(capsys, "inspect", str(path))
    assert code == 0 and err == ""
    assert report["lastCheckpointVersion"] == 10 and report["damagedCheckpoints"] == []
    assert report["lastCheckpointFile"] == "ok"
    assert digests(path) == want  # both oracles read the repaired table as the intact one
