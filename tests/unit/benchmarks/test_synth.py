"""benchmarks/synth.py: the benchmark table generator writes logs delta-rs (an oracle) reads."""

import json

import pyarrow.parquet as pq
import pytest
from deltalake import DeltaTable

from benchmarks.synth import Params, generate


@pytest.fixture(scope="module")
def small(tmp_path_factory):
    params = Params(files=200, commits=20, commits_after_checkpoint=5, seed=3)
    out = tmp_path_factory.mktemp("synth") / "table"
    return params, out, generate(params, out)


def test_delta_rs_reads_checkpoint_plus_commits(small):
    _, out, _ = small
    dt = DeltaTable(str(out))
    assert dt.version() == 19
    assert dt.get_add_actions().num_rows == 200
    assert len(dt.file_uris()) == 200
    assert dt.metadata().partition_columns == ["date", "region"]
    assert (dt.protocol().min_reader_version, dt.protocol().min_writer_version) == (1, 2)
    # Stats are real JSON that delta-rs parses into typed columns.
    assert "min.ts" in dt.get_add_actions(flatten=True).column_names


def test_the_checkpoint_and_the_json_commits_after_it_are_as_asked(small):
    params, out, info = small
    log = out / "_delta_log"
    last = json.loads((log / "_last_checkpoint").read_text())
    assert last["version"] == params.checkpoint_version == 14
    ck = pq.read_table(log / f"{last['version']:020d}.checkpoint.parquet")
    assert ck.column_names == ["txn", "add", "remove", "metaData", "protocol"]
    assert ck.num_rows == last["size"]
    adds = ck.column("add").drop_null()
    assert len(adds) == last["numOfAddFiles"]
    assert DeltaTable(str(out), version=14).get_add_actions().num_rows == len(adds)
    # Metadata cleanup is simulated: only the checkpoint's own commit and later ones are JSON.
    assert sorted(p.name for p in log.glob("*.json"))[0] == f"{14:020d}.json"
    assert info["json_commits"] == 6


def test_one_seed_gives_the_same_log(small, tmp_path):
    params, out, _ = small
    again = tmp_path / "again"
    generate(params, again)
    for f in sorted((out / "_delta_log").iterdir()):
        assert (again / "_delta_log" / f.name).read_bytes() == f.read_bytes(), f.name


def test_a_history_without_a_checkpoint_is_json_only_and_readable(tmp_path):
    params = Params(files=300, commits=50, checkpoint=False, seed=5)
    generate(params, tmp_path / "t")
    assert not (tmp_path / "t" / "_delta_log" / "_last_checkpoint").exists()
    dt = DeltaTable(str(tmp_path / "t"))
    assert (dt.version(), len(dt.file_uris())) == (49, 300)
