"""A watch observation as the status object users read (`kubectl get`, `deltakeeper status`).

The same shape in the operator's status subresource and standalone mode's status file:
DESIGN.md's fields, `observedGeneration`, and conditions whose `lastTransitionTime` moves only
when their status does.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from datetime import UTC, datetime
from typing import Any

from deltakeeper.runtime.watcher import Condition, Observation, Target

# Written every poll, but not worth a write by itself (10,000 tables at 30 s would be 333/s).
VOLATILE = ("lastPoll",)
# A status whose only change is `lastPoll` is still written this often, to show liveness.
REFRESH_S = 300


def build(
    target: Target, obs: Observation, previous: Mapping[str, Any] | None, now_ms: int
) -> dict[str, Any]:
    conditions = conditions_status(obs.conditions, previous, target.generation, now_ms)
    return {**obs.status, "observedGeneration": target.generation, "conditions": conditions}


def conditions_status(
    conditions: Sequence[Condition],
    previous: Mapping[str, Any] | None,
    generation: int,
    now_ms: int,
) -> list[dict[str, Any]]:
    """Conditions as status entries; a `lastTransitionTime` moves only with its status."""
    before = {
        c.get("type"): c for c in (previous or {}).get("conditions") or [] if isinstance(c, dict)
    }
    stamp = timestamp(now_ms)
    out = []
    for c in conditions:
        old = before.get(c.type)
        moved = old is None or old.get("status") != c.status
        since = stamp if old is None or moved else old.get("lastTransitionTime", stamp)
        out.append(
            {
                "type": c.type,
                "status": c.status,
                "reason": c.reason,
                "message": c.message,
                "lastTransitionTime": since,
                "observedGeneration": generation,
            }
        )
    return out


def timestamp(ms: int) -> str:
    """UTC, to the second, as Kubernetes writes times."""
    return datetime.fromtimestamp(ms // 1000, tz=UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def worth_writing(
    old: Mapping[str, Any] | None, new: Mapping[str, Any], now_ms: int, written_ms: int
) -> bool:
    """Whether `new` says more than `old` (written at `written_ms`) did: any field but
    `lastPoll`, or an old lastPoll."""
    if not old or now_ms - written_ms >= REFRESH_S * 1000:
        return True
    return any(old.get(k) != v for k, v in new.items() if k not in VOLATILE) or len(old) != len(new)


def last_maintenance(previous: Mapping[str, Any]) -> dict[str, Any]:
    """A stored status's lastMaintenance with each time also in ms (`timeMs`), so a restarted
    watcher keeps its schedules instead of running everything at once."""
    out: dict[str, Any] = {}
    for op, entry in (previous.get("lastMaintenance") or {}).items():
        if not isinstance(entry, dict) or not isinstance(entry.get("time"), str):
            continue
        try:
            when = datetime.fromisoformat(entry["time"].replace("Z", "+00:00"))
        except ValueError:
            continue
        out[op] = {**entry, "timeMs": int(when.timestamp() * 1000)}
    return out
