from __future__ import annotations

import os
import shutil
from collections import Counter
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from deltakeeper.runtime import credentials

# Tests never leave loopback: an S3 table opened without credentials must not send deltakeeper
# (object_store) to the EC2 instance metadata service at 169.254.169.254. With the lookup off,
# "no credentials" is said before any request; a test that asks a metadata service runs its own
# on 127.0.0.1 (tests/support/http.py). Subprocesses inherit both.
os.environ.setdefault("AWS_EC2_METADATA_DISABLED", "true")
os.environ.setdefault("AWS_METADATA_ENDPOINT", "http://127.0.0.1:1")

TESTS = Path(__file__).resolve().parent
CORPUS = TESTS.parents[1] / "shared" / "conformance" / "tables"

# The run's wall time against a budget, and tests over a minute without a reason (Slow:).
pytest_plugins = ("tests.support.timing",)


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


def pytest_sessionfinish(session: pytest.Session) -> None:
    # An xdist worker hands its tally to the controller, which adds them up for the summary.
    workeroutput = getattr(session.config, "workeroutput", None)
    if workeroutput is not None:
        workeroutput["tally"] = dict(TALLY)


@pytest.hookimpl(optionalhook=True)
def pytest_testnodedown(node: Any, error: object) -> None:
    TALLY.update(getattr(node, "workeroutput", {}).get("tally", {}))


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


# -- in parallel: `make test` runs the suite on pytest-xdist workers (--dist loadgroup) --------
# Each worker is a process of its own: it starts the services its tests ask for (session
# fixtures: emulators, an API server, a Spark session) on ports the OS hands out, with data
# under its own basetemp, and every process they start dies with it. A test is handed to
# whichever worker is free, except:
# - a module with a module-scoped (or class-scoped) fixture runs whole on one worker, so that
#   fixture (an operator, a Helm release, tables uploaded once) is set up once and the module's
#   tests run in the order written;
# - tests/image runs on one worker: its builds share one buildah store and dist/.
# Spark tests are not kept together: a worker that runs one starts a JVM of its own (about
# 1 GiB), but two groups of them (tried) ran 25 minutes after the third worker had finished all
# the rest.
# Slow layers are handed out first (with --no-loadscope-reorder the queue keeps this order), so
# no long group starts when the others are done; the unit tests fill the gaps at the end.
WHOLE_LAYERS = ("image",)
FIRST_LAYERS = ("image", "e2e", "integration", "monitoring", "conformance", "chart")
_SHARED_SCOPES = ("module", "class", "package")


def _layer(item: pytest.Item) -> str:
    try:
        return item.path.relative_to(TESTS).parts[0]
    except ValueError:
        return ""


def _group(item: pytest.Item) -> str | None:
    layer = _layer(item)
    if layer in WHOLE_LAYERS:
        return layer
    fixtures = getattr(item, "_fixtureinfo", None)
    for defs in fixtures.name2fixturedefs.values() if fixtures else ():
        if defs and defs[-1].scope in _SHARED_SCOPES:
            return item.nodeid.split("::", 1)[0]
    return None


@pytest.hookimpl(tryfirst=True)  # before xdist reads the xdist_group marks
def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    if not hasattr(config, "workerinput"):  # not an xdist worker: run as collected
        return
    rank = {layer: n for n, layer in enumerate(FIRST_LAYERS)}
    items.sort(key=lambda item: rank.get(_layer(item), len(rank)))  # stable: modules keep order
    for item in items:
        group = _group(item)
        if group is not None:
            item.add_marker(pytest.mark.xdist_group(group))
