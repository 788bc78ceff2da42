"""cli/expire.py: `deltakeeper expire`: its report, dry run, refusals and exit codes."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from deltakeeper.cli import parser
from deltakeeper.delta.expire import plan
from tests.support.cli import run
from tests.support.expire_tables import add, metadata, stats, table, ts
from tests.support.logbuilder import protocol

NOW = "2026-01-10T12:00:00Z"  # keep 5d: cutoff 2026-01-05T12:00:00Z


def days(root: Path, **conf: str) -> Path:
    """String day partitions 2026-01-01..08, one 10-row file each."""
    adds = [add(f"day=2026-01-0{d}/0.parquet", day=f"2026-01-0{d}") for d in range(1, 9)]
    return table(root, metadata(("day",), **conf), *adds)


def expire(capsys: pytest.CaptureFixture[str], root: Path, *flags: str) -> tuple[int, str, str]:
    return run(capsys, "expire", str(root), "--column", "day", "--keep", "5d", "--now", NOW, *flags)


def commits(root: Path) -> int:
    return len(list((root / "_delta_log").glob("*.json")))


def test_json_report_of_a_run(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    days(tmp_path)
    code, out, _ = expire(capsys, tmp_path, "--json")
    report = json.loads(out)
    assert code == 0 and commits(tmp_path) == 2
    assert {k: report[k] for k in ("operation", "dryRun", "readVersion", "version", "cutoff")} == {
        "operation": "expire",
        "dryRun": False,
        "readVersion": 0,
        "version": 1,
        "cutoff": "2026-01-05T12:00:00Z",
    }
    assert (report["removedFiles"], report["removedRows"], report["removedBytes"]) == (4, 40, 400)
    assert (report["share"], report["shareOf"], report["predicate"]) == (
        0.5,
        "rows",
        "`day` < '2026-01-05'",
    )


def test_dry_run_lists_and_commits_nothing(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    days(tmp_path)
    code, out, _ = expire(capsys, tmp_path, "--dry-run")
    assert code == 0 and commits(tmp_path) == 1
    assert out.splitlines() == [
        "version 0: cutoff 2026-01-05T12:00:00Z, expiring `day` < '2026-01-05' (by partition "
        "values)",
        "would remove 4 files, 40 rows, 400 B",
    ]


def test_text_report_names_the_files_kept(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    table(
        tmp_path,
        metadata(),
        add("old.parquet", stat=stats(10, low=ts(1), high=ts(2))),
        add("straddles.parquet", stat=stats(10, low=ts(4), high=ts(6))),
        add("unknown.parquet", records=10),
        add("new.parquet", stat=stats(30, low=ts(7), high=ts(9))),
    )
    code, out, _ = run(
        capsys, "expire", str(tmp_path), "--column", "ts", "--keep", "5d", "--now", NOW
    )
    assert code == 0
    assert out.splitlines()[1:] == [
        "removed 1 files, 10 rows, 100 B in version 1",
        "1 files straddling the cutoff (rows on both sides, or nulls): kept",
        "  straddles.parquet",
        f"1 files without statistics for ts: kept; `deltakeeper compute-stats {tmp_path}` gives "
        "them some",
        "  unknown.parquet",
    ]


def test_max_fraction_exits_2_with_nothing_written(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    days(tmp_path)
    code, out, err = expire(capsys, tmp_path, "--max-fraction", "0.25", "--json")
    assert code == 2 and commits(tmp_path) == 1
    error = json.loads(out)
    assert error["error"] == "MaxFractionExceeded" and error["exitCode"] == 2
    assert "remove 40 of the table's 80 rows (50.0%), more than maxFraction 0.25 (25%)" in err


@pytest.mark.parametrize(
    ("flags", "code", "says"),
    [
        (("--column", "nope"), 2, "no column 'nope'"),
        (("--column", "id"), 2, "column 'id' is of type long"),
        (("--keep", "0d"), 2, "--keep: '0d' must be more than 0s"),
        (("--keep", "90"), 2, "--keep: '90' is not a duration"),
        (("--max-fraction", "1.5"), 2, "must be between 0 and 1"),
    ],
)
def test_bad_input_exits_2(
    capsys: pytest.CaptureFixture[str], tmp_path: Path, flags: tuple[str, ...], code: int, says: str
) -> None:
    days(tmp_path)
    try:
        got, _, err = expire(capsys, tmp_path, *flags)
    except SystemExit as e:  # argparse's own refusals
        got, err = int(str(e.code)), capsys.readouterr().err
    assert got == code and says in err
    assert commits(tmp_path) == 1


def test_append_only_exits_2_and_catalog_managed_3(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    days(tmp_path / "a", **{"delta.appendOnly": "true"})
    code, _, err = expire(capsys, tmp_path / "a")
    assert code == 2 and "delta.appendOnly is set" in err
    managed = protocol(3, 7, readerFeatures=["catalogManaged"], writerFeatures=["catalogManaged"])
    table(tmp_path / "c", metadata(("day",)), add("a.parquet", day="2026-01-01"), proto=managed)
    code, out, err = expire(capsys, tmp_path / "c", "--json")
    assert code == 3 and json.loads(out)["error"] == "CatalogOwned"
    assert "catalog owns data cleanup" in err


def test_the_help_states_the_librarys_default() -> None:
    assert parser.EXPIRE_MAX_FRACTION == plan.DEFAULT_MAX_FRACTION


def test_rewrite_spark_dry_run_shows_the_job_and_runs_none(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    """The straddling files' partitions, by logical name, and the condition the job would give
    Delta Spark's DELETE; no Spark is started by a dry run."""
    table(
        tmp_path,
        metadata(("day2",), {"day2": "CAST(ntz AS DATE)"}),
        add("a.parquet", records=None, day2="2026-01-01"),
        add(
            "b.parquet",
            stat=stats(5, "ntz", "2026-01-05T00:00:00.000", "2026-01-05T13:00:00.000"),
            day2="2026-01-05",
        ),
        add(
            "c.parquet",
            stat=stats(5, "ntz", "2026-01-05T01:00:00.000", "2026-01-05T14:00:00.000"),
            day2="2026-01-05",
        ),
        add(
            "d.parquet",
            stat=stats(5, "ntz", "2026-01-06T00:00:00.000", "2026-01-06T13:00:00.000"),
            day2="2026-01-06",
        ),
    )
    flags = ["--column", "ntz", "--keep", "5d", "--now", NOW, "--dry-run", "--json"]
    code, out, _ = run(capsys, "expire", str(tmp_path), *flags, "--rewrite", "spark")
    report = json.loads(out)
    assert code == 0 and report["straddlingFiles"] == 2
    spec = report["job"]["spec"]
    assert (spec["operation"], spec["plannedVersion"]) == ("expire", 0)
    assert spec["condition"] == "`ntz` < TIMESTAMP_NTZ'2026-01-05 12:00:00.000000'"
    assert spec["partitions"] == [{"day2": "2026-01-05"}]
    assert spec["partitionTypes"] == {"day2": "date"}
    assert commits(tmp_path) == 1
