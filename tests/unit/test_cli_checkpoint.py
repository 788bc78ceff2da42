"""`deltakeeper checkpoint`: the report, --dry-run, retention precedence and refusals."""

import json

from deltakeeper.cli import main
from tests.support.logbuilder import LogBuilder, add, metadata, protocol, remove

DAY = 86_400_000
NOW = 1_800_000_000_000


def table(tmp_path, **conf):
    b = LogBuilder(tmp_path)
    b.commit(protocol(), metadata(**conf), add("a"), add("b"), add("c"))
    b.commit(remove("a", ts=NOW - 3 * DAY), remove("b", ts=NOW - 20 * DAY))
    return tmp_path


def run(capsys, *argv):
    code = main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


def checkpoint_json(capsys, path, *flags):
    code, out, err = run(capsys, "checkpoint", str(path), "--now", str(NOW), "--json", *flags)
    assert code == 0, err
    return json.loads(out)


def test_dry_run_writes_nothing(capsys, tmp_path):
    t = table(tmp_path)
    before = sorted(p.name for p in (t / "_delta_log").iterdir())
    report = checkpoint_json(capsys, t, "--dry-run")
    assert report["dryRun"] and report["files"] == [
        "_delta_log/00000000000000000001.checkpoint.parquet"
    ]
    assert sorted(p.name for p in (t / "_delta_log").iterdir()) == before


def test_default_retention_is_seven_days(capsys, tmp_path):
    report = checkpoint_json(capsys, table(tmp_path))
    assert (report["addFiles"], report["tombstones"], report["expiredTombstones"]) == (1, 1, 1)
    assert report["lastCheckpointMoved"] and report["checkpointVersion"] == 1
    assert (tmp_path / "_delta_log" / "00000000000000000001.checkpoint.parquet").exists()


def test_flag_overrides_default_but_table_property_is_a_floor(capsys, tmp_path):
    assert (
        checkpoint_json(capsys, table(tmp_path / "a"), "--deleted-file-retention", "30d")[
            "tombstones"
        ]
        == 2
    )
    floor = table(tmp_path / "b", **{"delta.deletedFileRetentionDuration": "interval 30 days"})
    report = checkpoint_json(capsys, floor, "--deleted-file-retention", "1d")
    assert report["tombstones"] == 2 and report["expiredTombstones"] == 0


def test_bad_duration_is_exit_2(capsys, tmp_path):
    code, _, err = run(capsys, "checkpoint", str(table(tmp_path)), "--deleted-file-retention", "1w")
    assert code == 2 and "--deleted-file-retention" in err


def test_unknown_feature_is_exit_3_and_nothing_written(capsys, tmp_path):
    LogBuilder(tmp_path).commit(protocol(1, 7, writerFeatures=["novelThing"]), metadata(), add("a"))
    code, _, err = run(capsys, "checkpoint", str(tmp_path))
    assert code == 3 and "novelThing" in err
    assert [p.name for p in (tmp_path / "_delta_log").iterdir()] == ["00000000000000000000.json"]


def test_part_size_and_checksum_flags(capsys, tmp_path):
    t = table(tmp_path)
    report = checkpoint_json(capsys, t, "--part-size", "1", "--write-checksum")  # 1 add, 1 remove
    assert report["layout"] == "multipart" and report["parts"] == 2
    assert len(report["checkpointFiles"]) == 2
    assert report["checksumFile"] == "_delta_log/00000000000000000001.crc"
    assert report["checksumExisted"] is False
    assert json.loads((t / "_delta_log/00000000000000000001.crc").read_text())["numFiles"] == 1
    # the same version again: the checksum stands, and the checkpoint keeps its two parts
    # (one layout per version) although no part size was asked for
    again = checkpoint_json(capsys, t, "--write-checksum")
    assert again["checksumExisted"] is True
    assert (again["layout"], again["parts"]) == ("multipart", 2)


def test_bad_part_size_is_exit_2(capsys, tmp_path):
    code, _, err = run(capsys, "checkpoint", str(table(tmp_path)), "--part-size", "0")
    assert code == 2 and "part size" in err
