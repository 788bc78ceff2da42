"""cli/maintenance.py: `checkpoint`, `cleanup`, `vacuum` and `maintain`: plans, reports,
retention precedence, refusals, flags and exit codes."""

import json

import pytest

from tests.support.cli import run
from tests.support.logbuilder import LogBuilder, add, metadata, protocol, remove
from tests.support.tables import DAY, START, daily_table, log_names, touch

NOW = START + 60 * DAY


def maintain_json(capsys, path, *flags):
    code, out, err = run(capsys, "maintain", str(path), "--now", str(NOW), "--json", *flags)
    return code, json.loads(out), err


def test_json_report_has_the_contract_keys_and_per_step_results(capsys, tmp_path):
    daily_table(tmp_path)
    touch(tmp_path / "stray.parquet", START)
    log = tmp_path / "_delta_log"
    commit_bytes = sum((log / f"{v:020d}.json").stat().st_size for v in range(11))
    code, report, _ = maintain_json(capsys, tmp_path, "--mode", "full")  # FULL finds the stray
    assert code == 0
    assert report["operation"] == "maintain" and report["version"] == 11
    assert report["dryRun"] is False and report["checkpointVersion"] == 11
    assert report["deletedFiles"] == 13  # commits 0-10, f1 and stray
    assert report["deletedBytes"] == commit_bytes + 200
    results = {r["operation"]: r["result"] for r in report["results"]}
    # Cleanup uses the checkpoint written first in the same run: commits 0-10 go.
    assert results == {"checkpoint": "done", "cleanup": "done", "vacuum": "done"}
    cleaned = next(r for r in report["results"] if r["operation"] == "cleanup")
    assert cleaned["deletedFiles"] == 11 and cleaned["deletedBytes"] == commit_bytes
    steps = {s["operation"]: s for s in report["plan"]["steps"]}
    assert steps["vacuum"]["files"] == 2 and steps["checkpoint"]["due"]


def test_dry_run_lists_the_files_and_changes_nothing(capsys, tmp_path):
    daily_table(tmp_path)
    before = log_names(tmp_path)
    code, report, _ = maintain_json(capsys, tmp_path, "--dry-run")
    assert code == 0 and report["dryRun"] and report["deletedFiles"] == 0
    # The cleanup that the checkpoint about to be written allows is shown too.
    commits = [f"_delta_log/{v:020d}.json" for v in range(11)]
    assert report["files"] == [
        "_delta_log/00000000000000000011.checkpoint.parquet",
        *commits,
        "f1.parquet",
    ]
    assert log_names(tmp_path) == before and (tmp_path / "f1.parquet").exists()


def test_text_output_shows_the_plan_then_the_results(capsys, tmp_path):
    daily_table(tmp_path)
    code, out, _ = run(capsys, "maintain", str(tmp_path), "--now", str(NOW), "--no-vacuum")
    assert code == 0
    assert "checkpoint: due: 12 commits and no checkpoint yet; the interval is 10" in out
    assert "vacuum: not due: disabled by the policy" in out
    assert "checkpoint: done:" in out


def test_only_runs_the_named_steps_and_rejects_unknown_ones(capsys, tmp_path):
    daily_table(tmp_path)
    code, report, _ = maintain_json(capsys, tmp_path, "--only", "vacuum")
    assert code == 0 and [r["operation"] for r in report["results"]] == ["vacuum"]
    assert not any(n.endswith(".parquet") for n in log_names(tmp_path))
    code, _, err = run(capsys, "maintain", str(tmp_path), "--only", "compact")
    assert code == 2 and "unknown operation compact" in err


def test_short_retention_is_exit_2_after_the_safe_steps_ran(capsys, tmp_path):
    daily_table(tmp_path)
    code, report, _ = maintain_json(capsys, tmp_path, "--deleted-file-retention", "1d")
    assert code == 2
    results = {r["operation"]: r["result"] for r in report["results"]}
    assert results["vacuum"] == "refused" and results["checkpoint"] == "done"
    assert (tmp_path / "f1.parquet").exists()
    code, report, _ = maintain_json(
        capsys, tmp_path, "--deleted-file-retention", "1d", "--allow-short-retention"
    )
    assert code == 0 and not (tmp_path / "f1.parquet").exists()


def test_unsupported_protocol_is_exit_3_and_nothing_written(capsys, tmp_path):
    b = LogBuilder(tmp_path)
    b.commit(
        protocol(3, 7, readerFeatures=["futureRead"], writerFeatures=["futureRead"]),
        metadata(),
        add("a.parquet"),
    )
    for _ in range(11):
        b.commit(add("a.parquet"))
    before = log_names(tmp_path)
    code, out, err = run(capsys, "maintain", str(tmp_path), "--now", str(NOW), "--json")
    assert code == 3 and "futureRead" in err
    assert json.loads(out) == {
        "error": "UnsupportedProtocol",
        "message": err.strip().removeprefix("deltakeeper: error: "),
        "exitCode": 3,
    }
    assert log_names(tmp_path) == before


def test_checkpoint_interval_flag_and_table_property(capsys, tmp_path):
    daily_table(tmp_path, **{"delta.checkpointInterval": "20"})
    _, report, _ = maintain_json(capsys, tmp_path, "--dry-run")
    assert not {s["operation"]: s for s in report["plan"]["steps"]}["checkpoint"]["due"]
    _, report, _ = maintain_json(capsys, tmp_path, "--dry-run", "--checkpoint-interval", "5")
    assert {s["operation"]: s for s in report["plan"]["steps"]}["checkpoint"]["due"]


def v2_table(root, commits: int):
    b = LogBuilder(root)
    features = ["v2Checkpoint"]
    b.commit(protocol(3, 7, readerFeatures=features, writerFeatures=features), metadata())
    for v in range(1, commits):
        b.commit(add(f"f{v}.parquet"), mtime_ms=START + v * DAY)
    return b


def test_v2_tables_get_a_classic_named_checkpoint_now_and_then(capsys, tmp_path):
    b = v2_table(tmp_path, 12)
    code, report, _ = maintain_json(capsys, tmp_path, "--no-vacuum")
    assert code == 0 and "classic-named" in report["plan"]["steps"][0]["reason"]
    assert "00000000000000000011.checkpoint.parquet" in log_names(tmp_path)
    for v in range(12, 24):
        b.commit(add(f"f{v}.parquet"))
    code, report, _ = maintain_json(capsys, tmp_path, "--no-vacuum")
    assert code == 0 and "classic-named" not in report["plan"]["steps"][0]["reason"]
    uuid_named = [
        n for n in log_names(tmp_path) if n.startswith("00000000000000000023.checkpoint.")
    ]
    assert len(uuid_named) == 1 and uuid_named[0] != "00000000000000000023.checkpoint.parquet"
    assert any(p.name.endswith(".parquet") for p in (tmp_path / "_delta_log/_sidecars").iterdir())


def test_write_checksum_and_part_size_reach_the_checkpoint(capsys, tmp_path):
    daily_table(tmp_path)
    code, report, _ = maintain_json(
        capsys, tmp_path, "--dry-run", "--write-checksum", "--checkpoint-part-size", "5"
    )
    assert code == 0
    crc_key = "_delta_log/00000000000000000011.crc"
    parts = [f for f in report["files"] if ".checkpoint." in f]
    assert len(parts) == 3 and crc_key in report["files"]  # 12 adds + 1 tombstone, 5 a part
    assert not (tmp_path / crc_key).exists()
    code, report, _ = maintain_json(
        capsys, tmp_path, "--write-checksum", "--checkpoint-part-size", "5"
    )
    assert code == 0 and (tmp_path / crc_key).exists()
    assert sum(".checkpoint." in n for n in log_names(tmp_path)) == 3
    crc = json.loads((tmp_path / crc_key).read_text())
    assert crc["numFiles"] == 11 and crc["tableSizeBytes"] == 1100


def test_a_tables_short_log_retention_is_honoured_and_its_source_reported(capsys, tmp_path):
    # Delta Spark keeps one day of log for delta.logRetentionDuration = 1 day, not 30.
    daily_table(tmp_path, **{"delta.logRetentionDuration": "interval 1 day"})
    assert run(capsys, "checkpoint", str(tmp_path), "--version", "9", "--now", str(NOW))[0] == 0
    now = START + 14 * DAY
    code, out, _ = run(capsys, "maintain", str(tmp_path), "--now", str(now), "--json")
    report = json.loads(out)
    assert code == 0
    assert report["retention"] == {
        "logRetention": {"ms": DAY, "source": "table"},
        "deletedFileRetention": {"ms": 7 * DAY, "source": "default"},
    }
    cleaned = next(r for r in report["results"] if r["operation"] == "cleanup")
    assert cleaned["result"] == "done" and cleaned["deletedFiles"] >= 9
    assert "00000000000000000000.json" not in log_names(tmp_path)


def test_an_explicit_retention_below_the_tables_is_raised_to_it(capsys, tmp_path):
    daily_table(tmp_path, **{"delta.logRetentionDuration": "interval 40 days"})
    code, report, _ = maintain_json(capsys, tmp_path, "--log-retention", "2d", "--dry-run")
    assert code == 0
    assert report["retention"]["logRetention"] == {"ms": 40 * DAY, "source": "table"}
    code, report, _ = maintain_json(capsys, tmp_path, "--log-retention", "50d", "--dry-run")
    assert report["retention"]["logRetention"] == {"ms": 50 * DAY, "source": "flag"}


def test_dry_run_shows_the_damaged_checkpoint_it_would_rewrite(capsys, tmp_path):
    daily_table(tmp_path)
    assert run(capsys, "checkpoint", str(tmp_path), "--version", "9", "--now", str(NOW))[0] == 0
    damaged = tmp_path / "_delta_log" / "00000000000000000009.checkpoint.parquet"
    damaged.write_bytes(b"")
    before = {p.name: p.read_bytes() for p in (tmp_path / "_delta_log").iterdir()}
    code, report, err = maintain_json(capsys, tmp_path, "--dry-run", "--no-vacuum")
    assert code == 0 and "00000000000000000009.checkpoint.parquet" in err  # the warning
    step = next(s for s in report["plan"]["steps"] if s["operation"] == "checkpoint")
    assert step["due"] and "damaged checkpoint" in step["reason"]
    result = next(r for r in report["results"] if r["operation"] == "checkpoint")
    assert result["result"] == "dry-run" and result["repairedCheckpoints"] == [9]
    assert "_delta_log/00000000000000000009.checkpoint.parquet" in report["files"]
    after = {p.name: p.read_bytes() for p in (tmp_path / "_delta_log").iterdir()}
    assert after == before


DAY = 86_400_000
NOW = 1_800_000_000_000


def table(tmp_path, **conf):
    b = LogBuilder(tmp_path)
    b.commit(protocol(), metadata(**conf), add("a"), add("b"), add("c"))
    b.commit(remove("a", ts=NOW - 3 * DAY), remove("b", ts=NOW - 20 * DAY))
    return tmp_path


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


# -- vacuum modes ---------------------------------------------------------------------------------
def vacuum_json(capsys, path, *flags):
    code, out, err = run(capsys, "vacuum", str(path), "--now", str(NOW), "--json", *flags)
    return code, json.loads(out) if out else None, err


def test_vacuum_report_says_the_mode_why_candidates_and_requests(capsys, tmp_path):
    daily_table(tmp_path)
    touch(tmp_path / "stray.parquet", START)
    code, report, _ = vacuum_json(capsys, tmp_path, "--mode", "auto")
    assert code == 0 and report["mode"] == "lite" and report["files"] == []
    assert report["modeReason"].startswith("auto: LITE while Delta allows it")
    assert report["deletedFiles"] == 1 and report["candidates"] == 1  # f1; not the stray
    assert report["listedObjects"] == 0 and report["commitsRead"] == [0, 11]
    assert report["lastVacuumInfo"] == {"status": "missing", "before": None, "after": 11}
    assert set(report["requests"]) <= {"list", "read", "delete", "put"}
    assert report["reasons"][0].startswith("mode lite: auto:")
    code, again, _ = vacuum_json(capsys, tmp_path, "--mode", "auto")  # nothing new: none read
    assert again["commitsRead"] is None and again["lastVacuumInfo"]["before"] == 11
    assert again["lastVacuumInfo"]["after"] is None and again["deletedFiles"] == 0
    code, full, _ = vacuum_json(capsys, tmp_path, "--mode", "full")
    assert full["mode"] == "full" and full["deletedFiles"] == 1 and full["listedObjects"] > 12


def test_inventory_flags_are_checked(capsys, tmp_path):
    daily_table(tmp_path)
    code, _, err = vacuum_json(capsys, tmp_path, "--mode", "inventory")
    assert code == 2 and "--inventory URI" in err
    code, _, err = vacuum_json(capsys, tmp_path, "--mode", "full", "--inventory", "s3://x/y")
    assert code == 2 and "--inventory is read by --mode inventory only" in err
    code, _, err = vacuum_json(capsys, tmp_path, "--inventory", str(tmp_path / "none.parquet"))
    assert code == 2 and "not found" in err


def test_maintain_takes_the_vacuum_mode(capsys, tmp_path):
    daily_table(tmp_path)
    code, report, _ = maintain_json(capsys, tmp_path, "--mode", "lite", "--dry-run")
    vac = next(r for r in report["results"] if r["operation"] == "vacuum")
    assert code == 0 and vac["vacuum"]["mode"] == "lite" and vac["files"] == ["f1.parquet"]
    assert vac["message"].startswith("LITE (vacuum mode lite): would delete 1 files")


def _vacuum_of(command: str, report: dict) -> tuple[str, int]:
    """(mode, files deleted) of the vacuum in a `vacuum` or `maintain` report."""
    if command == "vacuum":
        return report["mode"], report["deletedFiles"]
    vac = next(r for r in report["results"] if r["operation"] == "vacuum")
    return vac["vacuum"]["mode"], vac["deletedFiles"]


@pytest.mark.parametrize("command", ["vacuum", "maintain"])
def test_with_no_mode_the_command_line_vacuums_full_and_deletes_orphans(capsys, tmp_path, command):
    # As Delta Spark's VACUUM with no mode: a listing finds a file no commit names (a failed
    # write's) older than the retention, and deletes it; LITE reads the commits only.
    for mode in ("", "lite"):
        root = tmp_path / (mode or "default")
        daily_table(root)
        orphan = root / "part-00000-failed-write.parquet"
        touch(orphan, START)
        flags = ["--mode", mode] if mode else []
        code, out, err = run(capsys, command, str(root), "--now", str(NOW), "--json", *flags)
        assert code == 0, err
        ran, deleted = _vacuum_of(command, json.loads(out))
        assert not (root / "f1.parquet").exists()  # the tombstoned file, in either mode
        assert (root / "f0.parquet").exists()  # a live one stays
        if mode:
            assert (ran, deleted) == ("lite", 1) and orphan.exists()
        else:
            assert (ran, deleted) == ("full", 2) and not orphan.exists()


def test_only_names_an_operation_the_policy_does_not_ask_for(capsys, tmp_path):
    """--only stats runs the statistics step although stats.enabled is off by default: the
    command line asked for it."""
    import deltalake
    import pyarrow as pa

    deltalake.write_deltalake(str(tmp_path), pa.table({"x": [1, 2, 3]}))
    code, report, _ = maintain_json(capsys, tmp_path, "--only", "stats")
    assert code == 0 and [r["operation"] for r in report["results"]] == ["stats"], report
    assert report["results"][0]["result"] == "skipped", report  # delta-rs wrote statistics
    assert "every file of 1 files has statistics" in report["results"][0]["message"]
    # Named without the setting it needs: not due, and why.
    code, report, _ = maintain_json(capsys, tmp_path, "--only", "logCompaction")
    step = report["plan"]["steps"][0]
    assert code == 0 and not step["due"] and "logCompaction.interval" in step["reason"], report
