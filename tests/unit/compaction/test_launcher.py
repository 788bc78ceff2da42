"""compaction/launcher.py: Limited, the global limit on compaction jobs running at once."""

from __future__ import annotations

import pytest

from deltakeeper.compaction.launcher import AtLimit, Limited
from tests.support.jobs import StandInLauncher, request


def test_the_global_limit_refuses_a_second_job_until_the_first_ends() -> None:
    inner = StandInLauncher()
    limited = Limited(inner, 1)
    first = limited.start(request("a"))
    with pytest.raises(AtLimit):
        limited.start(request("b"))
    assert first.poll() is None and limited.running == 1
    inner.jobs[0].end(0, {"result": "nothing-to-do"})
    assert first.poll() is not None and limited.running == 0
    assert first.poll() is not None and limited.running == 0  # given back once
    limited.start(request("b"))
    assert limited.running == 1
