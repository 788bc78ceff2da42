"""Each live file's record count as deltakeeper reads it (the derived `numRecords` column: from
a checkpoint's `stats_parsed`, else from the `stats` JSON of checkpoints and commits), on every
corpus table: where delta-rs reports one (`get_add_actions`' `num_records`), the same; and
every count is the data file's own row count (its Parquet footer), where the file is there.
delta-rs reads no `stats_parsed`, so a table with struct statistics only has counts for us and
none for it: the footers decide."""

from __future__ import annotations

from pathlib import Path
from urllib.parse import unquote

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from deltalake import DeltaTable

from deltakeeper.delta import schema
from deltakeeper.delta.errors import DeltaError
from deltakeeper.delta.table import open_table
from tests.conftest import CORPUS

COLUMNS = (*schema.LEAN_ADD, schema.NUM_RECORDS.name)


def _tables() -> list[str]:
    return sorted(p.name for p in CORPUS.iterdir() if (p / "_delta_log").is_dir())


def _deltars(path: Path) -> dict[str, int | None] | None:
    try:
        actions = pa.table(DeltaTable(str(path)).get_add_actions(flatten=True))
    except Exception:  # delta-rs cannot read it: nothing to compare with
        return None
    return dict(zip(actions["path"].to_pylist(), actions["num_records"].to_pylist(), strict=True))


@pytest.mark.parametrize("name", _tables())
def test_record_counts_agree_with_delta_rs(name: str, tally) -> None:
    path = CORPUS / name
    try:
        snap = open_table(str(path)).snapshot(add_cols=COLUMNS)
    except DeltaError:
        tally["unreadable by us"] += 1
        return
    theirs = _deltars(path)
    if theirs is None:
        tally["unreadable by delta-rs"] += 1
        return
    ours = dict(
        zip(snap.files["path"].to_pylist(), snap.files["numRecords"].to_pylist(), strict=True)
    )
    assert ours.keys() == theirs.keys()
    assert {p: n for p, n in theirs.items() if n is not None}.items() <= ours.items()
    for p, n in ours.items():
        data = path / unquote(p)
        if n is not None and data.is_file():
            assert n == pq.ParquetFile(data).metadata.num_rows, p
            tally["counts checked against footers"] += 1
    tally["tables compared"] += 1
    tally["files without a count"] += sum(n is None for n in ours.values())
