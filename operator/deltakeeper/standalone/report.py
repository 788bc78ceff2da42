"""The status file as the tables `deltakeeper status` and `deltakeeper run` print: one row a
table (and one a lake), then the reason of each that is not well."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, TextIO

from deltakeeper.maintenance.operations import Operation
from deltakeeper.maintenance.operations.outcome import RunField as R
from deltakeeper.maintenance.operations.registry import REGISTRY
from deltakeeper.resources.conditions import ConditionStatus, ConditionType
from deltakeeper.resources.status_fields import DISCOVERY
from deltakeeper.resources.status_fields import LakeStatusField as L
from deltakeeper.resources.status_fields import StatusField as F

COLUMNS = (
    "TABLE",
    "VERSION",
    "BEHIND",
    "FILES",
    "SMALL",
    "LOG",
    "HEALTH",
    "READY",
    "LAST-MAINTENANCE",
)
LAKE_COLUMNS = ("LAKE", "TABLES", "MANAGED", "POOR", "LAST-SCAN", "REQUESTS", "SECONDS", "READY")


def ready(s: Mapping[str, Any]) -> str:
    """The Ready condition's status ("True", "False" or "Unknown")."""
    for c in s.get(F.CONDITIONS) or []:
        if c.get("type") == ConditionType.READY:
            return str(c.get("status"))
    return ConditionStatus.UNKNOWN


def _reason(s: Mapping[str, Any]) -> str:
    conditions = s.get(F.CONDITIONS) or []
    for c in conditions:
        if c.get("type") == ConditionType.READY and c.get("status") != ConditionStatus.TRUE:
            return f"{c.get('reason')}: {c.get('message')}"
    for c in conditions:
        if c.get("type") == ConditionType.DEGRADED and c.get("status") == ConditionStatus.TRUE:
            return f"{c.get('reason')}: {c.get('message')}"
    return ""


def status_rows(statuses: Mapping[str, Mapping[str, Any]]) -> list[tuple[str, ...]]:
    rows: list[tuple[str, ...]] = []
    for name in sorted(statuses):
        s = statuses[name]
        acted = [(e.get("time", ""), op, e) for op, e in (s.get(F.LAST_MAINTENANCE) or {}).items()]
        done = [f"{op} {e.get('result')} {_deleted(op, e)}{t[11:]}" for t, op, e in sorted(acted)]
        rows.append(
            (
                name,
                _cell(s.get(F.VERSION)),
                _cell(s.get(F.COMMITS_SINCE_CHECKPOINT)),
                _cell(s.get(F.FILES)),
                _cell(s.get(F.SMALL_FILES)),
                _cell(s.get(F.LOG_FILES)),
                _cell((s.get(F.HEALTH) or {}).get("score")),
                ready(s),
                done[-1] if done else "-",
            )
        )
    return rows


def _poor(s: Mapping[str, Any]) -> str:
    """`health 34 (poor): worst smallFiles 12` for a table in the poor band, else ""."""
    h = s.get(F.HEALTH) or {}
    if h.get("band") != "poor":
        return ""
    worst = h.get("worst")
    return f"health {h.get('score')} (poor): worst {worst} {(h.get('components') or {}).get(worst)}"


def _deleted(operation: str, entry: Mapping[str, Any]) -> str:
    """Its operation's brief (a status file of another version may name one this build does
    not have: its deleted files then)."""
    spec = REGISTRY.get(Operation(operation)) if operation in list(Operation) else None
    brief = spec.brief(entry) if spec else f"{entry.get(R.DELETED_FILES, 0)} files"
    return f"{brief} "


def _cell(value: Any) -> str:
    return "-" if value is None else str(value)


def lake_rows(lakes: Mapping[str, Mapping[str, Any]]) -> list[tuple[str, ...]]:
    rows: list[tuple[str, ...]] = []
    for name in sorted(lakes):
        s = lakes[name]
        scan = s.get(L.LAST_SCAN) or {}
        rows.append(
            (
                name,
                _cell(s.get(L.TABLES)),
                _cell(s.get(L.MANAGED_TABLES)),
                _cell(((s.get(L.HEALTH) or {}).get("bands") or {}).get("poor")),
                f"{scan.get('time', '-')} {scan.get('result', '')}".strip(),
                _cell(scan.get("requests")),
                _cell(scan.get("seconds")),
                ready(s),
            )
        )
    return rows


def print_summary(
    statuses: Mapping[str, Mapping[str, Any]],
    out: TextIO,
    rejected: Sequence[str] = (),
    lakes: Mapping[str, Mapping[str, Any]] | None = None,
) -> None:
    _print_rows([COLUMNS, *status_rows(statuses)], out)
    gone = [
        n for n in sorted(statuses) if (statuses[n].get(DISCOVERY) or {}).get("present") is False
    ]
    for name in sorted(statuses):
        why = _reason(statuses[name])
        if why:
            out.write(f"  {name}: {why}\n")
        poor = _poor(statuses[name])
        if poor:
            out.write(f"  {name}: {poor}\n")
    for name in gone:
        where = statuses[name][DISCOVERY]
        out.write(
            f"  {name}: gone from DeltaLake {where['lake']} ({where['path']}); "
            "not polled, status kept, nothing deleted\n"
        )
    if lakes:
        _print_rows([LAKE_COLUMNS, *lake_rows(lakes)], out)
        for name in sorted(lakes):
            why = _reason(lakes[name])
            if why:
                out.write(f"  {name}: {why}\n")
    print_rejected(rejected, out)
    out.flush()


def _print_rows(rows: Sequence[tuple[str, ...]], out: TextIO) -> None:
    widths = [max(len(r[i]) for r in rows) for i in range(len(rows[0]))]
    for row in rows:
        out.write("  ".join(c.ljust(w) for c, w in zip(row, widths, strict=True)).rstrip() + "\n")


def print_rejected(rejected: Sequence[str], out: TextIO) -> None:
    if rejected:
        out.write(f"rejected manifests ({len(rejected)}; fix them, the others run):\n")
        out.writelines(f"  {message}\n" for message in rejected)
