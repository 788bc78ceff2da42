"""The suite's time, watched by the suite (a pytest plugin, loaded by tests/conftest.py).

- `--time-budget=MINUTES` (`make test` passes 20): at the end of the run, the run's wall time
  against the budget, and a warning line when it is over. It does not fail the run: on a
  shared two-core machine the same suite varies by more than the margin, so a red run would
  say more about the machine than about the change. `--durations=25` lists the slowest tests.
- `--slow-limit=SECONDS` (default 60): a test that takes longer than this (setup, call and
  teardown added up: a module fixture's setup counts on the test that ran it first) needs a
  line starting `Slow:` in its docstring saying why it cannot be cheaper. Those without one are
  named at the end of the run, as a warning: a test just under the limit on a quiet machine
  goes over it on a loaded one, and a run that fails on that would fail on the machine's load,
  not on the change. Give a test near the limit its reason before it crosses.

Works under pytest-xdist: the workers' reports carry each test's `Slow:` line (as a user
property) to the controller, which adds the phases up.
"""

from __future__ import annotations

import json
import os
import time
from collections import defaultdict
from pathlib import Path
from typing import Any

import pytest

REASON = "slow_reason"  # the user property that carries a test's "Slow:" line
_started = time.monotonic()
_durations: dict[str, float] = defaultdict(float)
_reasons: dict[str, str] = {}
_ended: dict[str, float] = {}  # each worker's last phase's end (epoch seconds)
_where: dict[str, str] = {}  # the worker each test ran on
_started_at = time.time()


def pytest_addoption(parser: pytest.Parser) -> None:
    group = parser.getgroup("deltakeeper timing")
    group.addoption(
        "--time-budget",
        type=float,
        default=None,
        metavar="MINUTES",
        help="print the run's wall time against this budget at the end",
    )
    group.addoption(
        "--slow-limit",
        type=float,
        default=60.0,
        metavar="SECONDS",
        help="tests longer than this need a 'Slow:' line in their docstring (default 60)",
    )


def slow_reason(doc: str | None) -> str | None:
    """The text after the first docstring line that starts with 'Slow:', if there is one."""
    for line in (doc or "").splitlines():
        text = line.strip()
        if text.startswith("Slow:"):
            return text[len("Slow:") :].strip() or None
    return None


def pytest_sessionstart(session: pytest.Session) -> None:
    global _started, _started_at
    _started, _started_at = time.monotonic(), time.time()
    for kept in (_durations, _reasons, _ended, _where):
        kept.clear()


@pytest.hookimpl(tryfirst=True)
def pytest_runtest_setup(item: pytest.Item) -> None:
    function = getattr(item, "function", None)
    reason = slow_reason(getattr(function, "__doc__", None))
    if reason and (REASON, reason) not in item.user_properties:
        item.user_properties.append((REASON, reason))


def pytest_runtest_logreport(report: pytest.TestReport) -> None:
    # Called in the controller for every phase of every test, a worker's included.
    _durations[report.nodeid] += report.duration
    worker = str(getattr(getattr(getattr(report, "node", None), "gateway", None), "id", "main"))
    _ended[worker] = max(_ended.get(worker, 0.0), float(getattr(report, "stop", 0.0)))
    if report.when == "call" or report.outcome != "passed":
        _where[report.nodeid] = worker
    for key, value in report.user_properties:
        if key == REASON:
            _reasons[report.nodeid] = str(value)


def unexplained(limit: float) -> list[tuple[str, float]]:
    """Tests over `limit` seconds without a 'Slow:' reason, slowest first."""
    over = [(n, s) for n, s in _durations.items() if s > limit and n not in _reasons]
    return sorted(over, key=lambda pair: -pair[1])


def _clock(seconds: float) -> str:
    return f"{int(seconds // 60)}:{int(seconds % 60):02d}"


def pytest_terminal_summary(terminalreporter: Any, config: pytest.Config) -> None:
    if hasattr(config, "workerinput"):
        return
    write = terminalreporter.write_line
    limit = config.getoption("--slow-limit")
    missing = unexplained(limit)
    if missing:
        terminalreporter.section(f"tests over {limit:g} s without a 'Slow:' line", sep="-")
        for nodeid, seconds in missing:
            write(f"{seconds:6.1f}s {nodeid}")
        write("Say why in the test's docstring ('Slow: ...'), or make it cheaper.")
    budget = config.getoption("--time-budget")
    if budget is not None:
        wall = time.monotonic() - _started
        verdict = "within" if wall <= budget * 60 else "OVER"
        write(f"wall time {_clock(wall)}, {verdict} the budget of {_clock(budget * 60)}")
        if len(_ended) > 1:
            write(f"each worker's last test ended at: {workers_ended(_ended, _started_at)}")
        _keep_times()


def workers_ended(ended: dict[str, float], started_at: float) -> str:
    """When each worker ran out of tests, from the run's start, and the longest a worker sat
    idle before the last one finished (issue 50: at most 5 minutes)."""
    last = max(ended.values())
    each = ", ".join(f"{w} {_clock(t - started_at)}" for w, t in sorted(ended.items()))
    return f"{each}; idle at the end up to {_clock(last - min(ended.values()))}"


def _keep_times() -> None:
    """Every test's seconds and worker, for the next look at where the time goes (outside the
    clone: `${XDG_CACHE_HOME:-~/.cache}/deltakeeper/test-times.json`)."""
    base = Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "deltakeeper"
    times = {n: {"seconds": round(s, 2), "worker": _where.get(n)} for n, s in _durations.items()}
    try:
        base.mkdir(parents=True, exist_ok=True)
        (base / "test-times.json").write_text(json.dumps(times, indent=0, sort_keys=True))
    except OSError:
        pass  # a record for people; the run is not about it
