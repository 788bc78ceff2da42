"""`deltakeeper operator --log-format json`: kopf's JSON formatter, one object a line, with
secret values masked as in text logs (the scrubbing acts on the record, before any formatter)."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from deltakeeper.cli import build_parser, main

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
