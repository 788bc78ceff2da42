"""cli/flags.py: what flags mean, as settings through maintenance/policy.py."""

from __future__ import annotations

import pytest

from deltakeeper.cli import build_parser, flags
from deltakeeper.maintenance import policy


@pytest.mark.parametrize("name", ["checkpoint", "cleanup", "vacuum", "maintain", "compact"])
def test_without_flags_a_command_has_the_tables_own_policy(name: str) -> None:
    args = build_parser().parse_args([name, "t"])
    assert flags.policy_for("t", {}, flags.settings(args)) == policy.effective({})


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
