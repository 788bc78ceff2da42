"""Every corpus table at every version: deltakeeper agrees with delta-rs and DuckDB.

delta-rs answers version, protocol, metadata and the live files with sizes; DuckDB's delta
extension answers the set of live files. Where an oracle cannot read a table, the reason is
recorded and deltakeeper must agree with the other one; a table no oracle reads is a failure
unless deltakeeper refuses it for the same reason.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from deltakeeper.delta.errors import DeltaError
from tests.conftest import CORPUS
from tests.support.compare import check_against_oracles, ours
from tests.support.oracles import Unreadable, deltars_state, duckdb_state, table_versions


def _cases() -> list[tuple[str, int | None]]:
    cases: list[tuple[str, int | None]] = []
    for table in sorted(p.name for p in CORPUS.iterdir() if p.is_dir()):
        versions = (
            table_versions(str(CORPUS / table)) if (CORPUS / table / "_delta_log").is_dir() else []
        )
        cases += [(table, v) for v in versions] or [(table, None)]
    return cases


@pytest.mark.parametrize("table, version", _cases())
def test_agrees_with_oracles(table: str, version: int | None, corpus: Path, tally) -> None:
    path = corpus / table
    mine = ours(path, version)
    if isinstance(mine, DeltaError):
        # deltakeeper refuses: so must every oracle (not a table, or a protocol nobody supports)
        assert isinstance(deltars_state(str(path), version), Unreadable), f"we refused: {mine}"
        assert isinstance(duckdb_state(str(path), version), Unreadable), f"we refused: {mine}"
        tally["refused by all"] += 1
        return
    agreed = check_against_oracles(mine, path, version, tally)
    assert agreed, f"no oracle could read {table}@{version}; find out why before trusting us"
    tally["table-versions checked"] += 1
    for name in agreed:
        tally[f"{name} agreed"] += 1


def _checkpointed_tables() -> list[str]:
    out = []
    for p in sorted(CORPUS.iterdir()):
        log = p / "_delta_log"
        if log.is_dir() and any(".checkpoint." in f.name for f in log.iterdir()):
            out.append(p.name)
    return out


LAST_CHECKPOINT_VARIANTS = {
    "missing": None,
    "corrupt": b'{"version": 1, "size": ',
    "bad-checksum": b'{"version":0,"size":1,"checksum":"00000000000000000000000000000000"}',
    "stale": b'{"version": 999999, "size": 3}',
    "behind": b'{"version": 0, "size": 1}',
}


@pytest.mark.parametrize("variant", sorted(LAST_CHECKPOINT_VARIANTS))
@pytest.mark.parametrize("table", _checkpointed_tables())
def test_last_checkpoint_variants_give_the_same_answer(table, variant, corpus, corpus_copy, tally):
    want = ours(corpus / table, None)
    assert not isinstance(want, DeltaError), want
    copy = corpus_copy(table)
    hint = copy / "_delta_log" / "_last_checkpoint"
    content = LAST_CHECKPOINT_VARIANTS[variant]
    if content is None:
        hint.unlink(missing_ok=True)
    else:
        hint.write_bytes(content)
    got = ours(copy, None)
    assert not isinstance(got, DeltaError), got
    for key in (
        "version",
        "protocol",
        "tableId",
        "files",
        "numTombstones",
        "lastCheckpointVersion",
    ):
        assert got[key] == want[key], key
    expected_status = {
        "missing": "missing",
        "corrupt": "corrupt",
        "bad-checksum": "corrupt",
        "stale": "stale",
    }
    if variant in expected_status:
        assert got["lastCheckpointFile"] == expected_status[variant]
    # delta-kernel (inside both oracles) gives up on a hint that points nowhere, where the spec
    # and Delta Spark fall back to listing; so the reference is the oracles on the intact table.
    agreed = check_against_oracles(got, corpus / table, None, tally)
    assert agreed
    tally["_last_checkpoint variants checked"] += 1


def test_inspect_json_is_valid_json_for_every_readable_table(corpus, capsys):
    from deltakeeper.cli import main

    readable = 0
    for table in sorted(p.name for p in corpus.iterdir() if p.is_dir()):
        code = main(["inspect", str(corpus / table), "--json"])
        out, _ = capsys.readouterr()
        if code == 0:
            assert json.loads(out)["uri"] == str(corpus / table)
            readable += 1
        else:
            # An unreadable table is a JSON error object on stdout (README: exit codes).
            assert code in (2, 3)
            error = json.loads(out)
            assert error["exitCode"] == code and error["error"] and error["message"]
    assert readable >= 40
