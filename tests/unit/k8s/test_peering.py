"""k8s/peering.py: whether this replica acts, by kopf's peering rule."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

from deltakeeper.k8s import options, peering

NOW = datetime(2027, 1, 15, 8, 0, tzinfo=UTC)


def peer(priority: int, seen_s_ago: float = 0, lifetime: int = 60) -> dict[str, Any]:
    return {
        "priority": priority,
        "lifetime": lifetime,
        "lastseen": (NOW - timedelta(seconds=seen_s_ago)).isoformat(),
    }


def test_acting_follows_kopfs_rule() -> None:
    def acts(*peerings: dict[str, Any]) -> bool:
        return peering.acting([{"status": p} for p in peerings], 500, NOW)

    assert acts({"me": peer(500)})
    assert acts({"me": peer(500), "low": peer(100)})
    assert not acts({"me": peer(500), "high": peer(900)})
    assert not acts({"me": peer(500), "twin": peer(500)})  # same priority: kopf pauses both
    assert acts({"me": peer(500), "high": peer(900, seen_s_ago=61)})  # dead: lifetime passed
    assert not acts({"me": peer(500), "high": peer(900, seen_s_ago=59)})
    assert acts({"me": peer(500), "gone": None})  # kopf's exit writes null
    assert acts({})  # no entry yet (or kopf runs --standalone): nobody outranks us
    assert acts()
    # Namespaced mode: one peering object per namespace; any higher peer anywhere pauses.
    assert not acts({"me": peer(500)}, {"me": peer(500), "high": peer(501)})
    # A peer without lastseen counts as seen now, as kopf reads it.
    assert not acts({"me": peer(500), "odd": {"priority": 900}})


def test_a_replica_started_later_outranks_an_earlier_one() -> None:
    """A restarted replica acts at once, even beside its killed predecessor's live entry."""
    first = options.start_priority(now_s=1_800_000_000.0)
    later = options.start_priority(now_s=1_800_000_000.001)
    assert later > first
    assert peering.acting([{"status": {"old": peer(first), "me": peer(later)}}], later, NOW)
    assert not peering.acting([{"status": {"old": peer(first), "me": peer(later)}}], first, NOW)
    # Kept exact by every JSON reader (and by kopf's peering object) until the year 2255.
    assert options.start_priority(now_s=9_000_000_000.0) < 2**53
