"""cli/flags.py: what flags mean, as settings through maintenance/policy.py."""

from __future__ import annotations

import dataclasses

import pytest

from deltakeeper.cli import build_parser, flags
from deltakeeper.delta.vacuum.modes import Mode
from deltakeeper.maintenance import policy


@pytest.mark.parametrize("name", ["checkpoint", "cleanup", "vacuum", "maintain", "compact"])
def test_without_flags_a_command_has_the_tables_own_policy(name: str) -> None:
    args = build_parser().parse_args([name, "t"])
    expected = policy.effective({})
    if name in ("vacuum", "maintain"):  # the command line's vacuum mode: below
        expected = dataclasses.replace(expected, vacuum_mode=Mode.FULL)
    assert flags.policy_for("t", {}, flags.settings(args)) == expected


@pytest.mark.parametrize("name", ["vacuum", "maintain"])
def test_the_command_line_vacuums_full_unless_told_otherwise(name: str) -> None:
    # As Delta Spark's VACUUM with no mode; the daemons keep AUTO (with vacuum.fullInterval).
    assert policy.CLI_VACUUM_MODE is Mode.FULL and policy.VACUUM_MODE is Mode.AUTO
    assert policy.effective({}).vacuum_mode is Mode.AUTO
    for argv, mode in (
        ([], Mode.FULL),
        (["--mode", "lite"], Mode.LITE),
        (["--mode", "auto"], Mode.AUTO),
    ):
        args = build_parser().parse_args([name, "t", *argv])
        assert flags.policy_for("t", {}, flags.settings(args)).vacuum_mode is mode, argv
    args = build_parser().parse_args([name, "t", "--inventory", "s3://b/inv/manifest.json"])
    assert flags.policy_for("t", {}, flags.settings(args)).vacuum_mode is Mode.INVENTORY


def test_compact_flags_set_the_compaction_settings() -> None:
    argv = ["--target-file-size", "64Mi", "--min-file-size", "1Mi", "--min-files", "3"]
    args = build_parser().parse_args(["compact", "t", *argv, "--max-age", "2h"])
    got = flags.policy_for("t", {}, flags.settings(args)).compaction
    assert got == policy.CompactionSettings(
        target_file_size=64 * 2**20,
        min_file_size=2**20,
        min_files_per_partition=3,
        max_age_ms=2 * policy.HOUR_MS,
    )


def test_maintain_flags_set_the_policy() -> None:
    argv = ["--log-retention", "40d", "--no-vacuum", "--only", "compaction,vacuum"]
    args = build_parser().parse_args(["maintain", "t", *argv, "--checkpoint-interval", "5"])
    got = flags.policy_for("t", {}, flags.settings(args))
    assert got.log_retention_ms == 40 * 24 * policy.HOUR_MS
    assert got.sources["log_retention_ms"] == "flag"
    assert (got.vacuum_enabled, got.compaction.enabled, got.checkpoint_interval) == (False, True, 5)
    assert flags.operations(args.only) == ("compaction", "vacuum")
