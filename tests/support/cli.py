"""Running `deltakeeper` in-process, as the CLI tests do."""

from __future__ import annotations

import pytest

from deltakeeper.cli import main


def run(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    """The exit code, stdout and stderr of `deltakeeper ARGV...`."""
    code = main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err
