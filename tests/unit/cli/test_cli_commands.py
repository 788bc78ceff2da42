"""Each command's function is where the parser names it, each family of commands loads what
it uses (a table command no Kubernetes client, `status` no kopf), and the flags' settings are
the policy's own keywords."""

from __future__ import annotations

import importlib
import json
import subprocess
import sys
from pathlib import Path

import pytest

from deltakeeper.cli import build_parser, flags
from deltakeeper.cli.parser import Command
from deltakeeper.maintenance import policy

SUBPARSERS = next(a for a in build_parser()._actions if a.dest == "command").choices
CHILD = """
import json, sys
from deltakeeper.cli import main

for argv in json.loads(sys.argv[1]):
    code = main(argv)
    assert code == 0, (argv, code)
print(json.dumps(sorted(sys.modules)))
"""


def _modules_after(*argvs: list[str]) -> set[str]:
    done = subprocess.run(
        [sys.executable, "-c", CHILD, json.dumps(argvs)], capture_output=True, text=True
    )
    assert done.returncode == 0, done.stderr
    return set(json.loads(done.stdout.splitlines()[-1]))


def _roots(modules: set[str]) -> set[str]:
    return {m.split(".")[0] for m in modules}


@pytest.mark.parametrize("name", sorted(SUBPARSERS))
def test_each_command_names_a_function_of_its_family(name: str) -> None:
    func = SUBPARSERS[name].get_default("func")
    assert isinstance(func, Command)
    assert callable(getattr(importlib.import_module(func.module), func.function))


def test_table_commands_load_no_daemon_or_kubernetes_modules(corpus_copy) -> None:
    table = str(corpus_copy("simple_table"))
    now = ["--now", "2100-01-01T00:00:00Z", "--dry-run"]
    loaded = _modules_after(
        ["inspect", table],
        ["files", table],
        ["checkpoint", table, *now],
        ["cleanup", table, *now],
        ["vacuum", table, *now],
        ["maintain", table, *now],
    )
    unused = {"kopf", "kubernetes", "prometheus_client", "jsonschema", "yaml", "croniter"}
    assert _roots(loaded) & unused == set()
    fronts = ("deltakeeper.k8s", "deltakeeper.standalone")
    assert {m for m in loaded if m.startswith(fronts)} == set()
    assert "deltakeeper.cli.daemons" not in loaded


def test_status_loads_no_kubernetes_operator(tmp_path: Path) -> None:
    status = tmp_path / "status.json"
    status.write_text('{"tables": {}}')
    loaded = _modules_after(["status", "--status-file", str(status)])
    assert _roots(loaded) & {"kopf", "pyspark"} == set()
    assert {m for m in loaded if m.startswith("deltakeeper.k8s")} == set()


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
