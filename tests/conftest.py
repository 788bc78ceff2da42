from __future__ import annotations

import shutil
from collections import Counter
from collections.abc import Iterator
from pathlib import Path

import pytest

from deltakeeper.runtime import credentials

CORPUS = Path(__file__).resolve().parents[1].parent / "shared" / "conformance" / "tables"


@pytest.fixture(scope="session")
def corpus() -> Path:
    if not CORPUS.is_dir():
        pytest.fail(f"conformance corpus not found at {CORPUS}; ../shared must sit beside the repo")
    return CORPUS


@pytest.fixture
def corpus_copy(corpus: Path, tmp_path: Path):
    """Copy a corpus table to a writable temp folder: corpus_copy('simple_table') -> Path."""

    def copy(name: str) -> Path:
        dest = tmp_path / name
        shutil.copytree(corpus / name, dest)
        for p in dest.rglob("*"):
            p.chmod(0o755 if p.is_dir() else 0o644)
        dest.chmod(0o755)
        return dest

    return copy


# What the conformance and store tests compared, printed at the end of the run.
TALLY: Counter[str] = Counter()


@pytest.fixture
def tally() -> Counter[str]:
    return TALLY


def pytest_terminal_summary(terminalreporter) -> None:  # type: ignore[no-untyped-def]
    if TALLY:
        parts = ", ".join(f"{k} {v}" for k, v in sorted(TALLY.items()))
        terminalreporter.write_line(f"compared: {parts}")


@pytest.fixture(autouse=True)
def _scrubber_per_test() -> Iterator[None]:
    """The CLI registers the secrets of its arguments in the process-wide scrubber for good, as
    a one-shot command should; tests run many commands in one process, and MinIO's access key
    of one test must not mask that word in the next test's output."""
    yield
    credentials.SCRUBBER.clear()
