"""cli/daemons.py: `run`, `status` and `operator`. --default-poll-interval and the compaction
options reach standalone mode and the memo, bad values and variables are refused by name, and
--log-format json masks secrets as text logs do."""

from __future__ import annotations

import asyncio
import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import kopf
import pytest

from deltakeeper.cli import build_parser, main
from deltakeeper.delta.errors import InvalidInputError
from deltakeeper.k8s.options import Options
from deltakeeper.maintenance.policy import COMPACTION_RETRY_MS, POLL_INTERVAL_MS
from deltakeeper.runtime.history import History
from deltakeeper.runtime.metrics import Metrics
from deltakeeper.standalone import daemon as standalone_daemon
from deltakeeper.standalone import tables as standalone

TABLE = """\
apiVersion: deltakeeper.io/v1alpha1
kind: DeltaTable
metadata: {{name: {name}}}
spec: {{uri: "file:///lake/{name}"{extra}}}
"""


@pytest.mark.parametrize("command", ["run", "operator"])
@pytest.mark.parametrize("value", ["0s", "5x", "-3m", "99999999999d", ""])
def test_bad_values_exit_2_naming_the_flag(
    command: str, value: str, capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    argv = [command, "--default-poll-interval", value]
    if command == "run":
        argv += ["--manifests", str(tmp_path), "--once"]
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert "--default-poll-interval" in err and "Traceback" not in err


@pytest.mark.parametrize("command", ["run", "operator"])
def test_help_says_what_it_is_for_and_its_default(
    command: str, capsys: pytest.CaptureFixture[str]
) -> None:
    with pytest.raises(SystemExit) as e:
        main([command, "--help"])
    assert e.value.code == 0
    out = " ".join(capsys.readouterr().out.split())
    assert "--default-poll-interval DURATION" in out
    assert "neither its spec nor its policy sets pollInterval" in out
    default = f"{POLL_INTERVAL_MS // 1000}s"
    if command == "operator":
        default = f"$DELTAKEEPER_DEFAULT_POLL_INTERVAL, else {default}"
    assert f"(e.g. 2m; default {default})" in out


def test_run_passes_it_to_standalone_mode(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    seen: list[Any] = []
    monkeypatch.setattr(standalone_daemon, "run", lambda *args, **_: seen.append(args[-1]) or 0)
    assert main(["run", "--manifests", str(tmp_path), "--default-poll-interval", "2m"]) == 0
    assert main(["run", "--manifests", str(tmp_path)]) == 0
    assert seen == [120_000, None]


def test_run_writes_the_history_its_flags_name(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    seen: list[Any] = []
    monkeypatch.setattr(standalone_daemon, "run", lambda *a, **kw: seen.append(kw["history"]) or 0)
    # Opening the history at start: tests/unit/cli/test_run_history.py. No request to S3 here.
    monkeypatch.setattr(History, "check", lambda self: None)
    flags = ["--history-uri", "s3://lake/history", "--history-option", "aws_region=eu-west-1"]
    assert main(["run", "--manifests", str(tmp_path), *flags]) == 0
    assert main(["run", "--manifests", str(tmp_path)]) == 0
    assert seen[1] is None
    assert (seen[0].uri, seen[0].storage_options) == (
        "s3://lake/history",
        {"aws_region": "eu-west-1"},
    )
    assert main(["run", "--manifests", str(tmp_path), "--history-option", "x=1"]) == 2
    assert "--history-option needs --history-uri" in capsys.readouterr().err
    bad = ["--history-uri", "s3://lake/history", "--history-option", "sk-secret"]
    assert main(["run", "--manifests", str(tmp_path), *bad]) == 2
    err = capsys.readouterr().err
    assert "--history-option number 1 is not KEY=VALUE" in err and "sk-secret" not in err
    assert len(seen) == 2


def test_standalone_mode_polls_tables_without_an_interval_at_the_default(tmp_path: Path) -> None:
    (tmp_path / "a.yaml").write_text(TABLE.format(name="a", extra=""))
    (tmp_path / "b.yaml").write_text(TABLE.format(name="b", extra=", pollInterval: 10s"))
    daemon = standalone.Standalone(
        tmp_path, tmp_path / "status.json", Metrics(), default_poll_ms=120_000
    )

    async def interval(name: str) -> float:
        key = ("default", name)
        return (await daemon.target(key, daemon.tables[key])).poll_interval_s

    try:
        assert daemon.reload()
        assert asyncio.run(interval("a")) == 120
        assert asyncio.run(interval("b")) == 10
    finally:
        daemon.fleet.close()


def test_operator_passes_it_through_the_memo(monkeypatch: pytest.MonkeyPatch) -> None:
    memos: list[Any] = []
    monkeypatch.setattr(kopf, "configure", lambda **_: None)
    monkeypatch.setattr(kopf, "run", lambda **kw: memos.append(kw["memo"]))
    assert main(["operator", "--default-poll-interval", "2m"]) == 0
    monkeypatch.setenv("DELTAKEEPER_DEFAULT_POLL_INTERVAL", "90s")
    assert main(["operator"]) == 0  # no flag: the variable (as under `kopf run`)
    assert main(["operator", "--default-poll-interval", "2m"]) == 0  # the flag wins
    monkeypatch.delenv("DELTAKEEPER_DEFAULT_POLL_INTERVAL")
    assert main(["operator"]) == 0
    got = [m.options.default_poll_interval_ms for m in memos]
    assert got == [120_000, 90_000, 120_000, POLL_INTERVAL_MS]


def test_a_bad_variable_is_refused_with_its_name(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("DELTAKEEPER_DEFAULT_POLL_INTERVAL", "0s")
    with pytest.raises(InvalidInputError, match="DELTAKEEPER_DEFAULT_POLL_INTERVAL"):
        Options()


def test_operator_compaction_options_reach_the_memo(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    memos: list[Any] = []
    monkeypatch.setattr(kopf, "configure", lambda **_: None)
    monkeypatch.setattr(kopf, "run", lambda **kw: memos.append(kw["memo"]))
    template = tmp_path / "spark-application.yaml"
    template.write_text("kind: SparkApplication\nspec: {image: dk-spark:1}\n")
    args = ["--max-compaction-jobs", "3", "--spark-application", str(template)]
    assert main(["operator", *args]) == 0
    assert main(["operator"]) == 0
    got = [(m.options.max_compaction_jobs, m.options.spark_application) for m in memos]
    assert got == [(3, str(template)), (1, "/etc/deltakeeper/spark-application.yaml")]
    assert main(["operator", "--spark-application", str(tmp_path / "none.yaml")]) == 2
    assert "none.yaml does not exist" in capsys.readouterr().err
    assert len(memos) == 2  # refused before the operator started


def test_the_compaction_retry_comes_from_the_flag_else_the_variable(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    memos: list[Any] = []
    monkeypatch.setattr(kopf, "configure", lambda **_: None)
    monkeypatch.setattr(kopf, "run", lambda **kw: memos.append(kw["memo"]))
    assert main(["operator", "--compaction-retry", "20s"]) == 0
    monkeypatch.setenv("DELTAKEEPER_COMPACTION_RETRY", "1m")
    assert main(["operator"]) == 0
    monkeypatch.delenv("DELTAKEEPER_COMPACTION_RETRY")
    assert main(["operator"]) == 0
    assert [m.options.compaction_retry_ms for m in memos] == [20_000, 60_000, COMPACTION_RETRY_MS]
    assert main(["operator", "--compaction-retry", "0s"]) == 2
    assert "--compaction-retry: '0s' must be more than 0s" in capsys.readouterr().err
    assert len(memos) == 3


SECRET = "AKIAsecretvalue-1234"
# The operator's logging set-up as `cmd_operator` and its startup handler make it, in a child
# process so this test's own logging stays as it is.
CHILD = f"""
import logging, sys
import kopf
from deltakeeper.runtime import credentials
from deltakeeper.cli import main
from unittest import mock

with mock.patch("kopf.run"):
    main(["operator", "--log-format", sys.argv[1], "--metrics-port", "0"])
credentials.install_log_scrubbing()
credentials.SCRUBBER.register(["{SECRET}"])
log = logging.getLogger("deltakeeper.operator")
log.warning("reading s3://lake/t with key %s", "{SECRET}")
try:
    raise ValueError("refused: {SECRET}")
except ValueError:
    log.exception("poll failed")
"""


def _run(log_format: str) -> str:
    done = subprocess.run(
        [sys.executable, "-c", CHILD, log_format], capture_output=True, text=True, check=True
    )
    return done.stderr


def test_json_lines_with_secrets_masked() -> None:
    out = _run("json")
    assert SECRET not in out
    records = [json.loads(line) for line in out.splitlines() if line.strip()]
    assert len(records) == 2
    assert records[0]["message"] == "reading s3://lake/t with key ***"
    assert records[0]["severity"] == "warn" and records[0]["timestamp"]
    assert records[1]["message"].startswith("poll failed\nTraceback")
    assert "refused: ***" in records[1]["message"]


def test_text_is_the_default_and_masked_too() -> None:
    assert build_parser().parse_args(["operator"]).log_format == "text"
    out = _run("text")
    assert SECRET not in out and "with key ***" in out
    with pytest.raises(ValueError):
        json.loads(out.splitlines()[0])


def test_unknown_log_format_is_refused(capsys: pytest.CaptureFixture[str]) -> None:
    # Usage errors go through main's one error path (exit 2, JSON with --json).
    assert main(["operator", "--log-format", "yaml"]) == 2
    assert "invalid choice: 'yaml'" in capsys.readouterr().err


def test_the_core_budget_comes_from_the_flag_else_the_variable(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    memos: list[Any] = []
    monkeypatch.setattr(kopf, "configure", lambda **_: None)
    monkeypatch.setattr(kopf, "run", lambda **kw: memos.append(kw["memo"]))
    assert main(["operator", "--compaction-cores", "16"]) == 0
    monkeypatch.setenv("DELTAKEEPER_COMPACTION_CORES", "8")
    assert main(["operator"]) == 0
    monkeypatch.delenv("DELTAKEEPER_COMPACTION_CORES")
    assert main(["operator"]) == 0
    assert [m.options.compaction_cores for m in memos] == [16, 8, None]
    seen: list[Any] = []
    monkeypatch.setattr(standalone_daemon, "run", lambda *a, **_: seen.append(a[7]) or 0)
    assert main(["run", "--manifests", str(tmp_path), "--compaction-cores", "4"]) == 0
    assert seen[0].launcher.cores == 4 and seen[0].launcher.limit == 1
