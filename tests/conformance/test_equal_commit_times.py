"""A table copied with one modification time for every file (`cp` without `-p`): its commit
times are made increasing by 1 ms each, as Delta Spark does, and its log is cleaned."""

from __future__ import annotations

import json
import os
from pathlib import Path

from deltakeeper.cli import main
from tests.support.oracles import Unreadable
from tests.support.rows import deltars_digest, duckdb_digest

TABLE = "simple_table_with_checkpoint"  # commits 0-10, a classic checkpoint at 10
COPIED_AT = 1_700_000_000_000
NOW = COPIED_AT + 40 * 86_400_000  # past the 30-day log retention


def digests(path: Path) -> dict:
    return {"delta-rs": deltars_digest(str(path)), "duckdb": duckdb_digest(str(path))}


def test_a_table_copied_with_equal_file_times_gets_its_log_cleaned(corpus, corpus_copy, capsys):
    want = digests(corpus / TABLE)
    assert not any(isinstance(d, Unreadable) for d in want.values()), want
    path = corpus_copy(TABLE)
    for p in path.rglob("*"):
        os.utime(p, ns=(COPIED_AT * 1_000_000,) * 2)
    code = main(["cleanup", str(path), "--now", str(NOW), "--json"])
    out, err = capsys.readouterr()
    assert code == 0, err
    report = json.loads(out)
    assert report["checkpointVersion"] == 10 and report["deletedFiles"] == 10
    assert not any("went backwards" in r for r in report["reasons"])
    log = sorted(p.name for p in (path / "_delta_log").iterdir())
    assert log == [
        "00000000000000000010.checkpoint.parquet",
        "00000000000000000010.json",
        "_last_checkpoint",
    ]
    assert digests(path) == want  # delta-rs and DuckDB read the cleaned table as before
