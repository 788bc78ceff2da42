"""The suite's own time plugin (tests/support/timing.py), run in a pytest of its own."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.support.timing import slow_reason, workers_ended

REPO = Path(__file__).resolve().parents[3]

pytest_plugins = ("pytester",)

TESTS = '''
import time

def test_quick():
    pass

def test_slow_with_a_reason():
    """Sleeps.

    Slow: it sleeps on purpose.
    """
    time.sleep(0.3)

def test_slow_without_one():
    """Sleeps too, and says nothing about it."""
    time.sleep(0.3)
'''


def test_the_reason_is_the_text_after_slow():
    assert slow_reason("Does X.\n\n    Slow: one JVM start.\n") == "one JVM start."
    assert slow_reason("Does X slowly.") is None
    assert slow_reason("Slow:") is None  # a reason is a sentence, not the word
    assert slow_reason(None) is None


def test_the_idle_time_at_the_end_is_between_the_first_and_last_worker_to_finish():
    ended = {"gw1": 1000.0 + 25 * 60, "gw0": 1000.0 + 28 * 60 + 5, "gw2": 1000.0 + 21 * 60}
    said = workers_ended(ended, 1000.0)
    assert said == "gw0 28:05, gw1 25:00, gw2 21:00; idle at the end up to 7:05"


@pytest.mark.parametrize("workers", [[], ["-n", "2"]], ids=["in-process", "xdist"])
def test_tests_over_the_limit_without_a_reason_are_named(pytester, monkeypatch, workers, tmp_path):
    monkeypatch.setenv("PYTHONPATH", str(REPO))  # the plugin, from this clone
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    pytester.makepyfile(test_sleepy=TESTS)
    args = ["-p", "tests.support.timing", "--slow-limit", "0.2", "--time-budget", "1"]
    result = pytester.runpytest_subprocess(*args, *workers)
    result.assert_outcomes(passed=3)
    out = result.stdout.str()
    assert "tests over 0.2 s without a 'Slow:' line" in out, out
    assert "test_sleepy.py::test_slow_without_one" in out
    assert "test_slow_with_a_reason" not in out and "test_quick" not in out
    result.stdout.re_match_lines([r"wall time 0:\d\d, within the budget of 1:00"])
    kept = json.loads((tmp_path / "cache" / "deltakeeper" / "test-times.json").read_text())
    assert kept["test_sleepy.py::test_slow_without_one"]["seconds"] >= 0.3
    if workers:
        result.stdout.re_match_lines([r"each worker's last test ended at: gw0 0:\d\d, gw1 .*"])
