"""`deltakeeper compact` without Spark: the plan, --where, --dry-run, refusals and bad flags,
and the checkpoint before the job (a stand-in launcher takes spark-submit's place). A real job
runs in tests/integration/test_compaction_job.py and, after `compact`'s checkpoint,
tests/integration/test_compaction_matrix.py."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path
from typing import Any, ClassVar

import pytest

from deltakeeper.compaction import submit
from deltakeeper.compaction.launcher import JobRequest, JobResult
from deltakeeper.delta.errors import StorageUnreachableError
from deltakeeper.delta.table import open_table
from deltakeeper.maintenance import compaction_plan, planner
from deltakeeper.maintenance.operations import checkpoint as checkpoint_op
from deltakeeper.maintenance.policy import CompactionSettings, effective
from tests.support.cli import run
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


# ------------------------------------------------------------------------------------------
# The checkpoint before the job (the rule `maintain` uses: the table's checkpoint interval)
# ------------------------------------------------------------------------------------------


def long_log(root: Path, commits: int, **conf: str) -> Path:
    """`commits` commits (the first makes the table), four small files in partition a each."""
    log = LogBuilder(root)
    log.commit(protocol(), metadata(("day",), **conf))
    for c in range(1, commits):
        log.commit(*(add(f"day=a/{c}-{i}.parquet", size=1000, day="a") for i in range(4)))
    return root


class StandInJob:
    def __init__(self, request: JobRequest, log: Path) -> None:
        self.job_id = request.job_id
        self.request = request
        # What the job would have found in the log when it started.
        self.found = sorted(p.name for p in log.iterdir())

    def poll(self) -> JobResult:
        return self.wait()

    def wait(self) -> JobResult:
        return JobResult(0, {"result": "nothing-to-do", "commits": []}, "")

    def stop(self) -> None:
        pass


class StandInLauncher:
    """Stands in for spark-submit: notes the log as the job would find it, and ends."""

    jobs: ClassVar[list[StandInJob]] = []

    def __init__(self, cfg: object) -> None:
        pass

    def start(self, request: JobRequest) -> StandInJob:
        self.jobs.append(StandInJob(request, Path(request.uri) / "_delta_log"))
        return self.jobs[-1]


@pytest.fixture
def jobs(monkeypatch: pytest.MonkeyPatch) -> list[StandInJob]:
    monkeypatch.setattr(submit, "SubmitLauncher", StandInLauncher)
    StandInLauncher.jobs = []
    return StandInLauncher.jobs


def compact_json(capsys: pytest.CaptureFixture[str], table: Path, *flags: str) -> tuple[int, Any]:
    code, out, err = run(
        capsys, "compact", str(table), "--min-files", "4", "--now", NOW, "--json", *flags
    )
    assert out, err
    return code, json.loads(out)


def test_a_due_checkpoint_is_written_before_the_job_starts(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], jobs: list[StandInJob]
) -> None:
    table = long_log(tmp_path / "t", 11)  # versions 0-10: 11 commits, the interval is 10

    code, report = compact_json(capsys, table)

    assert code == 0, report
    checkpoint = "00000000000000000010.checkpoint.parquet"
    assert report["checkpointVersion"] == 10 and report["version"] == 10
    assert report["checkpoint"]["result"] == "done" and report["checkpoint"]["error"] is None
    [job] = jobs
    assert checkpoint in job.found and "_last_checkpoint" in job.found
    assert json.loads((table / "_delta_log" / "_last_checkpoint").read_text())["version"] == 10
    assert job.request.spec["plannedVersion"] == 10  # the job plans at the checkpoint's version
    assert report["job"] == {"result": "nothing-to-do", "commits": []}


def test_no_checkpoint_below_the_interval_and_the_tables_own_interval_counts(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], jobs: list[StandInJob]
) -> None:
    short = long_log(tmp_path / "short", 5)
    code, report = compact_json(capsys, short)
    assert code == 0 and len(jobs) == 1
    assert report["checkpointVersion"] is None
    assert report["checkpoint"]["result"] == "skipped"
    assert report["checkpoint"]["message"] == "5 commits and no checkpoint yet; the interval is 10"
    assert not list((short / "_delta_log").glob("*.checkpoint*"))

    own = long_log(tmp_path / "own", 5, **{"delta.checkpointInterval": "4"})
    code, report = compact_json(capsys, own)
    assert code == 0 and report["checkpointVersion"] == 4
    assert (own / "_delta_log" / "00000000000000000004.checkpoint.parquet").is_file()


def test_no_checkpoint_flag_and_dry_run_write_nothing_but_say_what_would_happen(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], jobs: list[StandInJob]
) -> None:
    table = long_log(tmp_path / "t", 11)
    before = tree_digest(table)

    code, report = compact_json(capsys, table, "--dry-run")
    assert code == 0 and jobs == [] and tree_digest(table) == before
    assert report["checkpointVersion"] == 10 and report["job"] is None
    assert report["checkpoint"]["result"] == "dry-run"
    assert report["checkpoint"]["files"] == ["_delta_log/00000000000000000010.checkpoint.parquet"]
    code, out, _ = run(capsys, "compact", str(table), "--min-files", "4", "--now", NOW, "--dry-run")
    assert "checkpoint: due: 11 commits and no checkpoint yet; the interval is 10" in out
    assert "checkpoint: dry-run: _delta_log/00000000000000000010.checkpoint.parquet" in out

    code, report = compact_json(capsys, table, "--no-checkpoint")
    assert code == 0 and len(jobs) == 1
    assert report["checkpoint"] is None and report["checkpointVersion"] is None
    assert not list((table / "_delta_log").glob("*.checkpoint*"))


def test_no_checkpoint_when_no_partition_is_due(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], jobs: list[StandInJob]
) -> None:
    table = long_log(tmp_path / "t", 11)
    code, report = compact_json(capsys, table, "--min-files", "100", "--max-age", "2d")
    assert code == 0 and jobs == [] and not report["plan"]["due"]
    assert report["checkpoint"] is None
    assert not list((table / "_delta_log").glob("*.checkpoint*"))


def test_a_failed_checkpoint_is_reported_and_the_job_runs_all_the_same(
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    jobs: list[StandInJob],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    def refused(*args: Any, **kwargs: Any) -> None:
        raise StorageUnreachableError("cannot write _delta_log/...checkpoint.parquet: refused")

    monkeypatch.setattr(checkpoint_op, "write_source", refused)
    table = long_log(tmp_path / "t", 11)

    code, out, err = run(capsys, "compact", str(table), "--min-files", "4", "--now", NOW, "--json")

    report = json.loads(out)
    assert code == 0 and len(jobs) == 1, report  # the job's exit code: it ran
    assert report["checkpointVersion"] is None
    assert report["checkpoint"]["result"] == "failed"
    assert report["checkpoint"]["error"] == "StorageUnreachable"
    assert "warning: the checkpoint before the job failed: cannot write" in err
    assert "deltakeeper checkpoint URI" in err


def test_only_the_checkpoint_before_compacts_job_is_optional(tmp_path: Path) -> None:
    """maintain's checkpoint is not optional: its failure still keeps cleanup and vacuum
    (which delete) from running on a log that is not what the plan saw
    (test_maintenance.py: test_a_failing_step_skips_the_ones_after_it)."""
    table = open_table(str(long_log(tmp_path / "t", 11)))
    snap = table.snapshot()
    pol = effective({})
    steps = planner.plan(table, snap, pol, 0, ("checkpoint", "vacuum")).steps
    assert not any(s.optional for s in steps)
    found = compaction_plan.plan(
        snap.files, ("day",), CompactionSettings(min_files_per_partition=4), 0
    )
    forced = planner.forced_compaction(table, snap, pol, 0, found, checkpoint=True)
    assert [(s.operation, s.optional) for s in forced.steps] == [
        ("checkpoint", True),
        ("compaction", False),
    ]
    alone = planner.forced_compaction(table, snap, pol, 0, found)
    assert [s.operation for s in alone.steps] == ["compaction"]
