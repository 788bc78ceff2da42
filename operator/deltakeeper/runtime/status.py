"""A table's status as users read it (`kubectl get`, `deltakeeper status`), built in one place.

The same shape in the operator's status subresource and standalone mode's status file: the
fields of resources/status_fields.py, `observedGeneration`, and conditions whose
`lastTransitionTime` moves only when their status does.

    counts = status.counts(summary)              # what a poll read from the log
    body = status.build(target, obs, previous, now_ms)
    if status.worth_writing(previous, body, now_ms, written_ms): ...
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from datetime import datetime
from typing import Any

from deltakeeper.resources.status_fields import COUNTS, VOLATILE, VOLATILE_EVENTS
from deltakeeper.resources.status_fields import StatusField as F
from deltakeeper.runtime.model import Condition, Observation, Target
from deltakeeper.units import rfc3339

# A status whose only change is `lastPoll` is still written this often. A table whose polls
# stop shows it sooner, by its Degraded condition (registry.watch_stalls).
REFRESH_S = 3600
# The operator's refreshes, each an API write and its watch event back to every watcher, are at
# most this many a second across the fleet: beyond 7,200 tables a quiet table's comes every
# tables / REFRESH_PER_S seconds (50,000 tables: about 7 hours), not 14 writes a second.
REFRESH_PER_S = 2.0
# The count fields' names as plain str, made once: `str(member)` makes a new string each time,
# and every table holds its counts.
_COUNT_KEYS = tuple((str(f), key) for f, key in COUNTS.items())


def counts(summary: Mapping[str, Any]) -> dict[str, Any]:
    """The status's numbers from `delta.summary.summarize`'s (the `inspect --json` keys)."""
    out: dict[str, Any] = {name: summary[key] for name, key in _COUNT_KEYS}
    stamp = summary.get("timestamp")
    out[F.LAST_COMMIT_TIME] = rfc3339(stamp) if stamp else None
    return out


def build(
    target: Target,
    obs: Observation,
    previous: Mapping[str, Any] | None,
    now_ms: int,
    extra: Iterable[Condition] = (),
) -> dict[str, Any]:
    """The status of `target` after the poll `obs`; `extra`: conditions another part of the
    front-end says about the table (a DeltaLake's TableFound), written with the poll's."""
    body: dict[str, Any] = {
        F.LAST_POLL: rfc3339(obs.polled_ms),
        F.POLICY: target.policy_name,
        **obs.counts,
    }
    if obs.retention is not None:
        body[F.RETENTION] = obs.retention
    body[F.LAST_MAINTENANCE] = {
        op: {k: v for k, v in entry.items() if k != "timeMs"}
        for op, entry in obs.last_maintenance.items()
    }
    if obs.compaction is not None:
        body[F.COMPACTION] = obs.compaction
    if obs.health is not None:
        body[F.HEALTH] = obs.health.status()
    if obs.storage_events is not None:
        body[F.EVENTS] = obs.storage_events
    body[F.OBSERVED_GENERATION] = target.generation
    body[F.CONDITIONS] = conditions_status(
        [*obs.conditions, *extra], previous, target.generation, now_ms
    )
    return {str(k): v for k, v in body.items()}


def conditions_status(
    conditions: Sequence[Condition],
    previous: Mapping[str, Any] | None,
    generation: int,
    now_ms: int,
) -> list[dict[str, Any]]:
    """Conditions as status entries; a `lastTransitionTime` moves only with its status."""
    before = {
        c.get("type"): c for c in (previous or {}).get(F.CONDITIONS) or [] if isinstance(c, dict)
    }
    stamp = rfc3339(now_ms)
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
                str(F.OBSERVED_GENERATION): generation,
            }
        )
    return out


def refresh_ms(tables: int) -> int:
    """How often the operator rewrites a quiet status among `tables` (REFRESH_PER_S)."""
    return int(max(REFRESH_S, tables / REFRESH_PER_S) * 1000)


def worth_writing(
    old: Mapping[str, Any] | None,
    new: Mapping[str, Any],
    now_ms: int,
    written_ms: int,
    refresh_after_ms: int = REFRESH_S * 1000,
) -> bool:
    """Whether `new` says more than `old` (written at `written_ms`) did: any field but
    `lastPoll` and the events' `lastEventTime`, or a lastPoll older than `refresh_after_ms`."""
    if not old or now_ms - written_ms >= refresh_after_ms:
        return True
    if len(old) != len(new):
        return True
    for k, v in new.items():
        if k in VOLATILE:
            continue
        if k == F.EVENTS:
            if events_differ(old.get(k), v):
                return True
        elif old.get(k) != v:
            return True
    return False


def events_differ(old: Mapping[str, Any] | None, new: Mapping[str, Any] | None) -> bool:
    """Whether two events statuses differ by more than the time of the last event."""
    if old is None or new is None:
        return old is not new
    moved = any(old.get(k) != v for k, v in new.items() if k not in VOLATILE_EVENTS)
    return moved or len(old) != len(new)


def last_maintenance(previous: Mapping[str, Any]) -> dict[str, Any]:
    """A stored status's lastMaintenance with each time also in ms (`timeMs`), so a restarted
    watcher keeps its schedules instead of running everything at once."""
    out: dict[str, Any] = {}
    for op, entry in (previous.get(F.LAST_MAINTENANCE) or {}).items():
        if not isinstance(entry, dict) or not isinstance(entry.get("time"), str):
            continue
        try:
            when = datetime.fromisoformat(entry["time"].replace("Z", "+00:00"))
        except ValueError:
            continue
        out[op] = {**entry, "timeMs": int(when.timestamp() * 1000)}
    return out
