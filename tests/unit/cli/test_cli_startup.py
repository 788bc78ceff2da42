"""The CLI starts light: `--version`, `--help`, each command's `--help` and a usage error load
no heavy library and no command's module (issue 23: a CLI should start in under 0.15 s; these
libraries alone take longer). Checked by what is imported, not by a clock."""

from __future__ import annotations

import importlib.metadata
import json
import subprocess
import sys

from deltakeeper import __version__
from deltakeeper.cli import build_parser, main

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
