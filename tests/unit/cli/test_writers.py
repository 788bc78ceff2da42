"""cli/maintenance.py: `compute-stats` and `manifest`: their JSON, text, dry runs and exit
codes on bad input."""

import json

import pyarrow as pa
import pyarrow.parquet as pq

from tests.support.cli import run
from tests.support.logbuilder import LogBuilder, add, commit_info, dv, metadata, protocol

DV = protocol(3, 7, readerFeatures=["deletionVectors"], writerFeatures=["deletionVectors"])


def one_file_table(root, *head):
    root.mkdir(parents=True, exist_ok=True)
    pq.write_table(pa.table({"id": pa.array([7], pa.int64()), "day": ["d"]}), root / "f.parquet")
    size = (root / "f.parquet").stat().st_size
    LogBuilder(root).commit(
        commit_info(), *(head or (protocol(),)), metadata(), add("f.parquet", size=size)
    )


def test_compute_stats_json_then_nothing_left(capsys, tmp_path):
    one_file_table(tmp_path)
    code, out, _ = run(capsys, "compute-stats", str(tmp_path), "--json", "--dry-run")
    report = json.loads(out)
    assert code == 0 and report["dryRun"] and (report["givenStats"], report["commits"]) == (1, [])
    code, out, err = run(capsys, "compute-stats", str(tmp_path))
    assert code == 0 and "gave 1 statistics in commits 1" in out and "1/1 footers read" in err
    code, out, _ = run(capsys, "compute-stats", str(tmp_path), "--json")
    assert json.loads(out)["missingStats"] == 0


def test_compute_stats_names_an_unreadable_file_and_exits_1(capsys, tmp_path):
    one_file_table(tmp_path)
    (tmp_path / "f.parquet").write_bytes(b"garbage" * 20)
    code, _, err = run(capsys, "compute-stats", str(tmp_path))
    assert code == 1 and "f.parquet: not read" in err


def test_compute_stats_bad_input_is_exit_2(capsys, tmp_path):
    one_file_table(tmp_path)
    code, _, err = run(capsys, "compute-stats", str(tmp_path), "--max-read-bytes", "lots")
    assert code == 2 and "not a size" in err
    code, _, err = run(capsys, "compute-stats", str(tmp_path), "--columns", "`id")
    assert code == 2 and "backtick" in err
    code, _, err = run(capsys, "compute-stats", str(tmp_path / "nowhere"))
    assert code == 2 and "not a Delta table" in err


def test_manifest_text_json_and_refusal(capsys, tmp_path):
    one_file_table(tmp_path / "t")
    code, out, _ = run(capsys, "manifest", str(tmp_path / "t"), "--dry-run")
    assert code == 0 and "would write 1 manifests" in out
    assert not (tmp_path / "t" / "_symlink_format_manifest").exists()
    code, out, _ = run(capsys, "manifest", str(tmp_path / "t"), "--json")
    assert code == 0 and json.loads(out)["written"] == ["_symlink_format_manifest/manifest"]
    LogBuilder(tmp_path / "dv").commit(commit_info(), DV, metadata(), add("f.parquet", dv=dv("x")))
    code, _, err = run(capsys, "manifest", str(tmp_path / "dv"))
    assert code == 3 and "deletion vectors" in err
