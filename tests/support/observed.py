"""An Observation's status as the front-ends write it, for tests that assert on its fields."""

from __future__ import annotations

from typing import Any

from deltakeeper.runtime import status
from deltakeeper.runtime.model import Observation, Target

_ANY = Target("ns", "t", "")


def status_of(obs: Observation, target: Target = _ANY) -> dict[str, Any]:
    """The status `obs` gives (conditions stamped at time 0, so two such are comparable)."""
    return status.build(target, obs, None, 0)
