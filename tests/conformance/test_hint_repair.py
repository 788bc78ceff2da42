"""A `_last_checkpoint` that names no complete checkpoint: `inspect` calls it stale, and
`maintain` or `checkpoint` repair it so delta-rs and DuckDB read the table as before."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from deltakeeper.cli import main
from tests.support.oracles import Unreadable
from tests.support.rows import deltars_digest, duckdb_digest

TABLE = "simple_table_with_checkpoint"  # commits 0-10, a classic checkpoint at 10
LOG = "_delta_log"


def cli(capsys, *argv: str) -> tuple[int, dict]:
    code = main([*argv, "--json"])
    out, err = capsys.readouterr()
    assert code == 0, err
    return code, json.loads(out)


def digests(path: Path) -> dict:
    return {"delta-rs": deltars_digest(str(path)), "duckdb": duckdb_digest(str(path))}


def hint(path: Path, body: dict) -> None:
    (path / LOG / "_last_checkpoint").write_text(json.dumps(body))


def no_checkpoint_there(path: Path) -> None:
    hint(path, {"version": 7, "size": 3})


def beyond_the_table(path: Path) -> None:
    hint(path, {"version": 999, "size": 3})


def deleted_file(path: Path) -> None:
    (path / LOG / "00000000000000000010.checkpoint.parquet").unlink()


def multipart_missing_a_part(capsys, path: Path) -> None:
    (path / LOG / "00000000000000000010.checkpoint.parquet").unlink()
    _, report = cli(capsys, "checkpoint", str(path), "--part-size", "1")
    assert report["layout"] == "multipart" and len(report["checkpointFiles"]) >= 2
    assert json.loads((path / LOG / "_last_checkpoint").read_text())["parts"] >= 2
    (path / report["checkpointFiles"][1]).unlink()


DAMAGE = {
    "no-checkpoint-there": no_checkpoint_there,
    "beyond-the-table": beyond_the_table,
    "deleted-file": deleted_file,
    "multipart-missing-a-part": multipart_missing_a_part,
}


@pytest.mark.parametrize("repair", ["maintain", "checkpoint"])
@pytest.mark.parametrize("damage", sorted(DAMAGE))
def test_a_stale_hint_is_reported_and_repaired(damage, repair, corpus, corpus_copy, capsys):
    want = digests(corpus / TABLE)
    assert not any(isinstance(d, Unreadable) for d in want.values()), want
    path = corpus_copy(TABLE)
    if damage == "multipart-missing-a-part":
        multipart_missing_a_part(capsys, path)
        # delta-kernel (in both oracles) trusts the hint's part count and cannot read the table.
        assert all(isinstance(d, Unreadable) for d in digests(path).values())
    else:
        DAMAGE[damage](path)
    _, report = cli(capsys, "inspect", str(path))
    assert report["lastCheckpointFile"] == "stale"
    assert report["version"] == 10
    if repair == "maintain":
        _, done = cli(capsys, "maintain", str(path), "--no-vacuum")
        step = next(s for s in done["plan"]["steps"] if s["operation"] == "checkpoint")
        assert step["due"]
        assert done["results"][0]["result"] == "done"
    else:
        _, done = cli(capsys, "checkpoint", str(path))
        assert done["lastCheckpointMoved"]
    _, report = cli(capsys, "inspect", str(path))
    assert report["lastCheckpointFile"] == "ok" and report["lastCheckpointVersion"] == 10
    assert digests(path) == want  # both oracles read the repaired table as the intact one
