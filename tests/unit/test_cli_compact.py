"""`deltakeeper compact` without Spark: the plan, --where, --dry-run, refusals and bad flags.
A real job runs in tests/integration/test_compaction_job.py."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

import pytest

from deltakeeper.cli import main
from tests.support.logbuilder import LogBuilder, add, metadata, protocol

NOW = "2023-11-15T00:00:00Z"  # a day after the log builder's modification times


def table_with_small_files(root: Path) -> Path:
    log = LogBuilder(root)
    log.commit(protocol(), metadata(("day",)))
    for i in range(4):
        log.commit(add(f"day=a/{i}.parquet", size=1000, day="a"))
    for i in range(2):
        log.commit(add(f"day=b/{i}.parquet", size=1000, day="b"))
    log.commit(add("day=c/0.parquet", size=200 * 2**20, day="c"))
    return root


def tree_digest(root: Path) -> str:
    h = hashlib.sha256()
    for p in sorted(root.rglob("*")):
        h.update(str(p.relative_to(root)).encode())
        if p.is_file():
            h.update(p.read_bytes())
    return h.hexdigest()


def run(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    code = main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


def test_dry_run_json_plans_the_due_partitions_and_writes_nothing(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    table = table_with_small_files(tmp_path / "t")
    before = tree_digest(table)
    code, out, _ = run(
        capsys, "compact", str(table), "--min-files", "4", "--now", NOW, "--dry-run", "--json"
    )
    assert code == 0
    report = json.loads(out)
    assert report["operation"] == "compact" and report["dryRun"] is True
    assert report["version"] == 7 and report["job"] is None
    plan = report["plan"]
    # a: four small files; b: two, older than an hour; c: one large file, not small.
    assert [(p["partition"], p["why"], p["files"]) for p in plan["partitions"]] == [
        ({"day": "a"}, "many-small-files", 4),
        ({"day": "b"}, "small-files-aged", 2),
    ]
    assert plan["smallFiles"] == 6 and plan["partitionsScanned"] == 3
    assert tree_digest(table) == before


def test_where_narrows_the_plan_to_one_partition(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    table = table_with_small_files(tmp_path / "t")
    code, out, _ = run(
        capsys, "compact", str(table), "--where", "day=b", "--now", NOW, "--dry-run", "--json"
    )
    assert code == 0
    assert [p["partition"] for p in json.loads(out)["plan"]["partitions"]] == [{"day": "b"}]


@pytest.mark.parametrize("spelling", ["2024-02-29 12:30:01.123456", "2024-02-29T12:30:01.123456Z"])
def test_where_finds_a_timestamp_partition_in_either_spelling(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], spelling: str
) -> None:
    """delta-rs writes one spelling, Delta Spark the other; the planner makes them one
    partition, and --where matches it whichever the user types."""
    fields = [
        {"name": "id", "type": "long", "nullable": True, "metadata": {}},
        {"name": "ts", "type": "timestamp", "nullable": True, "metadata": {}},
    ]
    meta = metadata(("ts",))
    meta["metaData"]["schemaString"] = json.dumps({"type": "struct", "fields": fields})
    log = LogBuilder(tmp_path / "t")
    log.commit(protocol(), meta)
    for i, ts in enumerate(["2024-02-29 12:30:01.123456", "2024-02-29T12:30:01.123456Z"] * 2):
        log.commit(add(f"ts={i}/{i}.parquet", size=1000, ts=ts))
    log.commit(*(add(f"other/{i}.parquet", size=1000, ts="1999-12-31 23:59:59") for i in range(4)))
    argv = ["compact", str(tmp_path / "t"), "--min-files", "4", "--now", NOW, "--dry-run"]
    code, out, _ = run(capsys, *argv, "--json", "--where", f"ts={spelling}")
    assert code == 0
    [due] = json.loads(out)["plan"]["partitions"]
    assert due["partition"] == {"ts": "2024-02-29 12:30:01.123456"} and due["files"] == 4


def test_a_young_table_below_the_count_is_not_due(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    table = table_with_small_files(tmp_path / "t")
    code, out, _ = run(capsys, "compact", str(table), "--now", "2023-11-14T22:13:30Z", "--dry-run")
    assert code == 0
    assert "no partition is due (6 small files in 3 partitions)" in out


@pytest.mark.parametrize(
    ("flags", "message"),
    [
        (["--where", "nope=1"], "--where expects PARTITION_COLUMN=VALUE with one of day"),
        (["--where", "day"], "--where expects PARTITION_COLUMN=VALUE"),
        (["--min-files", "0"], "--min-files: must be 1 or more, got 0"),
        (["--target-file-size", "big"], "--target-file-size"),
        (["--max-age", "1y"], "--max-age"),
    ],
)
def test_bad_flags_exit_2_and_say_what_to_fix(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], flags: list[str], message: str
) -> None:
    table = table_with_small_files(tmp_path / "t")
    code, _, err = run(capsys, "compact", str(table), "--dry-run", *flags)
    assert code == 2
    assert message in err


def test_catalog_managed_and_unknown_features_are_refused_with_exit_3(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    cases = {
        "managed": protocol(
            3, 7, readerFeatures=["catalogManaged"], writerFeatures=["catalogManaged"]
        ),
        "future": protocol(1, 7, writerFeatures=["someFutureWriterFeature"]),
    }
    for name, proto in cases.items():
        log = LogBuilder(tmp_path / name)
        log.commit(proto, metadata(("day",)))
        before = tree_digest(log.root)
        code, _, err = run(capsys, "compact", str(log.root))
        assert code == 3, err
        assert "compaction refused" in err
        assert tree_digest(log.root) == before
