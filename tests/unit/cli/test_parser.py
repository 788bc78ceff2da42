"""cli/parser.py and main(): the CLI starts light (`--version`, `--help` and a usage error load
no heavy library and no command module; checked by what is imported, not by a clock), each
command names the function of its family and loads only what that family uses; the console
script, help and --version."""

from __future__ import annotations

import argparse
import importlib
import importlib.metadata
import json
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from deltakeeper import __version__
from deltakeeper.cli import build_parser, main
from deltakeeper.cli.parser import Command
from deltakeeper.maintenance import policy
from deltakeeper.units import format_size
from tests.support.cli import run

REPO = Path(__file__).resolve().parents[3]

HEAVY = (
    "pyarrow",
    "fsspec",
    "kopf",
    "kubernetes",
    "prometheus_client",
    "jsonschema",
    "orjson",
    "yaml",
    "croniter",
    "deltakeeper.delta.table",
    "deltakeeper.delta.storage",
)
SUBPARSERS = next(a for a in build_parser()._actions if a.dest == "command").choices
COMMANDS = tuple(SUBPARSERS)
# The commands' own modules, and the flags they read through.
FAMILIES = (*{p.get_default("func").module for p in SUBPARSERS.values()}, "deltakeeper.cli.flags")
# Each argv in turn in one process; for each, the heavy and command modules loaded so far.
CHILD = """
import json, sys
from deltakeeper.cli import main

unwanted = set(json.loads(sys.argv[1]))
loaded = []
for argv in json.loads(sys.argv[2]):
    try:
        code = main(argv)
    except SystemExit as e:
        code = e.code
    found = {m.split(".")[0] for m in sys.modules if m.split(".")[0] in unwanted}
    loaded.append([argv, code, sorted(found | unwanted.intersection(sys.modules))])
print(json.dumps(loaded))
"""


def _loaded_by(*argvs: list[str]) -> list[list]:
    done = subprocess.run(
        [sys.executable, "-c", CHILD, json.dumps([*HEAVY, *FAMILIES]), json.dumps(argvs)],
        capture_output=True,
        text=True,
        check=True,
    )
    return json.loads(done.stdout.splitlines()[-1])


def test_version_and_help_load_nothing_heavy() -> None:
    for argv, code, found in _loaded_by(["--version"], ["--help"]):
        assert code == 0, argv
        assert found == [], f"{argv} loaded {found}"


def test_each_commands_help_loads_nothing_heavy() -> None:
    for argv, code, found in _loaded_by(*([c, "--help"] for c in COMMANDS)):
        assert code == 0, argv
        assert found == [], f"{argv} loaded {found}"


def test_a_usage_error_loads_nothing_heavy() -> None:
    usage = (["bogus"], ["inspect"], ["inspect", "t", "--storage-opt", "k=v"], ["compact"])
    for argv, code, found in _loaded_by(*usage):
        assert code == 2, argv
        assert found == [], f"{argv} loaded {found}"


def test_python_dash_m_version_imports_nothing_heavy() -> None:
    """`python -m deltakeeper --version`, as a user runs it: -X importtime names every module."""
    done = subprocess.run(
        [sys.executable, "-X", "importtime", "-m", "deltakeeper", "--version"],
        capture_output=True,
        text=True,
        check=True,
    )
    assert done.stdout == f"deltakeeper {__version__}\n"
    imported = {line.rsplit("|", 1)[-1].strip() for line in done.stderr.splitlines()}
    assert "deltakeeper.cli" in imported
    assert sorted(m for m in imported if m.split(".")[0] in HEAVY or m in HEAVY) == []


def test_the_console_script_is_main() -> None:
    scripts = importlib.metadata.entry_points(group="console_scripts")
    assert scripts["deltakeeper"].load() is main


RUN_ALL = """
import json, sys
from deltakeeper.cli import main

for argv in json.loads(sys.argv[1]):
    code = main(argv)
    assert code == 0, (argv, code)
print(json.dumps(sorted(sys.modules)))
"""


def _modules_after(*argvs: list[str]) -> set[str]:
    done = subprocess.run(
        [sys.executable, "-c", RUN_ALL, json.dumps(argvs)], capture_output=True, text=True
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


def test_console_script_runs(corpus):
    proc = subprocess.run(
        [sys.executable, "-m", "deltakeeper", "inspect", str(corpus / "simple_table"), "--json"],
        capture_output=True,
        text=True,
        check=False,
    )
    assert proc.returncode == 0, proc.stderr
    assert json.loads(proc.stdout)["version"] == 4


@pytest.mark.parametrize("argv", [["--help"], ["inspect", "--help"], ["files", "--help"]])
def test_help(argv, capsys):
    with pytest.raises(SystemExit) as e:
        main(argv)
    assert e.value.code == 0
    assert "usage" in capsys.readouterr().out


def test_version_flag_and_version_option_do_not_clash(capsys, corpus):
    with pytest.raises(SystemExit) as e:
        main(["--version"])
    assert e.value.code == 0 and capsys.readouterr().out.startswith("deltakeeper ")
    code, out, _ = run(capsys, "inspect", str(corpus / "simple_table"), "--version", "2", "--json")
    assert code == 0 and json.loads(out)["version"] == 2


def _choices(parser: argparse.ArgumentParser) -> Iterator[tuple[str, list[Any]]]:
    """(option, its choices) for every option with choices, in every command's parser."""
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for sub in action.choices.values():
                yield from _choices(sub)
        elif action.choices is not None:
            yield "/".join(action.option_strings) or action.dest, list(action.choices)


def test_every_choice_is_its_plain_value() -> None:
    # argparse names the choices by their repr when it refuses a value: an enum member's
    # reads <Mode.AUTO: 'auto'>.
    found = list(_choices(build_parser()))
    assert {"--mode", "--inventory-format", "--engine"} <= {option for option, _ in found}
    assert [(o, c) for o, c in found for c in c if type(c) is not str] == []


def test_a_bad_mode_is_refused_with_the_modes_by_their_values(
    capsys: pytest.CaptureFixture[str],
) -> None:
    assert main(["vacuum", "t", "--mode", "bogus"]) == 2
    err = capsys.readouterr().err
    assert "invalid choice: 'bogus' (choose from 'auto', 'lite', 'full', 'inventory')" in err
    assert "Mode." not in err


def test_compute_stats_help_states_the_librarys_limits() -> None:
    """The parser states them without importing delta/stats/compute (pyarrow): they must agree."""
    from deltakeeper.cli import parser
    from deltakeeper.delta.stats import compute

    assert parser.STATS_BATCH == compute.BATCH
    assert parser.STATS_MAX_READ_BYTES == compute.MAX_DATA_BYTES
    flags = {a.dest: a.help for a in SUBPARSERS["compute-stats"]._actions}
    assert f"(default {compute.BATCH})" in flags["batch_size"]
    assert f"(default {format_size(compute.MAX_DATA_BYTES)})" in flags["max_read_bytes"]


@pytest.mark.parametrize("doc", ["standalone.md", "operator.md"])
def test_the_daemon_docs_state_the_max_concurrent_default(doc: str) -> None:
    rows = [
        line
        for line in (REPO / "docs" / doc).read_text().splitlines()
        if line.startswith("| `--max-concurrent N`")
    ]
    assert len(rows) == 1 and f"at once ({policy.MAX_CONCURRENT})" in rows[0]
    run_flags = {a.dest: a for a in SUBPARSERS["run"]._actions}
    assert run_flags["max_concurrent"].default == policy.MAX_CONCURRENT
