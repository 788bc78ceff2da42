"""Scanning a DeltaLake: which tables appeared and disappeared since the last scan.

Shared by the operator and standalone mode, no Kubernetes: the front-end resolves the lake's
credentials, calls `LakeScanner.scan`, then creates or marks the tables it reports. A failed
scan changes nothing: an unreachable bucket must not read as "every table disappeared".
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from deltakeeper.delta.discover import Scan, discover
from deltakeeper.delta.errors import DeltaError, InvalidInputError, StorageUnreachableError
from deltakeeper.delta.storage import open_storage
from deltakeeper.resources.conditions import ConditionStatus, ConditionType, EventType, Reason
from deltakeeper.resources.lake import LakeResource
from deltakeeper.resources.status_fields import LakeStatusField as L
from deltakeeper.runtime import credentials, health, metrics, status
from deltakeeper.runtime.model import Condition, Event, ScanResult
from deltakeeper.units import rfc3339

log = logging.getLogger("deltakeeper.lakes")
READY, REACHABLE = ConditionType.READY, ConditionType.STORAGE_REACHABLE


@dataclass(frozen=True)
class LakeScan:
    """One scan of a lake and what changed since the one before."""

    result: ScanResult
    time_ms: int
    scan: Scan | None = None  # None when the scan failed
    tables: tuple[str, ...] = ()  # every table known after this scan (kept when it failed)
    appeared: tuple[str, ...] = ()
    disappeared: tuple[str, ...] = ()
    message: str = ""  # why it failed; no credentials in it
    reason: Reason | None = None  # the conditions' reason when it failed (SecretNotFound, ...)

    @property
    def ok(self) -> bool:
        return self.result is ScanResult.OK

    def conditions(self) -> list[Condition]:
        true, false = ConditionStatus.TRUE, ConditionStatus.FALSE
        if self.ok:
            found = f"{len(self.tables)} tables found"
            return [
                Condition(READY, true, Reason.SCANNED, found),
                Condition(REACHABLE, true, Reason.LISTED, found),
            ]
        reachable = ConditionStatus.UNKNOWN if self.result is ScanResult.INVALID else false
        unreachable = self.result is ScanResult.UNREACHABLE
        reason = self.reason or (Reason.STORAGE_UNREACHABLE if unreachable else Reason.INVALID_SPEC)
        return [
            Condition(READY, false, reason, self.message),
            Condition(REACHABLE, reachable, reason, self.message),
        ]

    def events(self) -> list[Event]:
        normal, warning = EventType.NORMAL, EventType.WARNING
        out = [Event(normal, Reason.TABLE_FOUND, f"table {p} appeared") for p in self.appeared]
        out += [
            Event(warning, Reason.TABLE_GONE, f"table {p} disappeared") for p in self.disappeared
        ]
        if not self.ok:
            out.append(Event(warning, Reason.SCAN_FAILED, self.message))
        return out


@dataclass
class LakeScanner:
    """Scans one lake and remembers what the last good scan found."""

    lake: LakeResource
    metrics: metrics.Metrics | None = None
    clock_ms: Callable[[], int] = lambda: int(time.time() * 1000)
    known: tuple[str, ...] | None = None  # None until the first good scan (or given, on restart)
    last: LakeScan | None = field(default=None)

    def scan(self, options: Mapping[str, Any] | None = None) -> LakeScan:
        """List the lake's prefix with storage `options` (credentials resolved by the caller)."""
        now = self.clock_ms()
        try:
            storage = open_storage(self.lake.uri, dict(options or {}))
            found = discover(
                storage,
                include=self.lake.include,
                exclude=self.lake.exclude,
                max_depth=self.lake.max_depth,
            )
        except (StorageUnreachableError, OSError) as e:
            return self._failed(now, ScanResult.UNREACHABLE, e)
        except (InvalidInputError, DeltaError) as e:
            return self._failed(now, ScanResult.INVALID, e)
        before = set(self.known or ())
        after = set(found.tables)
        result = LakeScan(
            ScanResult.OK,
            now,
            found,
            found.tables,
            appeared=tuple(sorted(after - before)),
            disappeared=tuple(sorted(before - after)),
        )
        self.known, self.last = found.tables, result
        if self.metrics is not None:
            self.metrics.lake_scan(
                self.lake.namespace,
                self.lake.name,
                result.result,
                len(found.tables),
                found.seconds,
                found.requests,
            )
        return result

    def failed(self, message: str, reason: Reason | None = None) -> LakeScan:
        """Record a lake that could not be scanned at all (a missing Secret, say)."""
        known = self.known or ()
        now = self.clock_ms()
        scan = LakeScan(ScanResult.INVALID, now, None, known, message=message, reason=reason)
        return self._record(scan)

    def _failed(self, now: int, result: ScanResult, error: Exception) -> LakeScan:
        message = credentials.SCRUBBER.scrub(f"cannot scan {self.lake.uri}: {error}")
        log.warning("lake %s/%s: %s", self.lake.namespace, self.lake.name, message)
        return self._record(LakeScan(result, now, None, self.known or (), message=message))

    def _record(self, scan: LakeScan) -> LakeScan:
        self.last = scan
        if self.metrics is not None:
            self.metrics.lake_scan(self.lake.namespace, self.lake.name, scan.result, None, 0.0, 0)
        return scan


def lake_status(
    scan: LakeScan,
    managed: Mapping[str, Mapping[str, Any] | None],
    previous: Mapping[str, Any] | None,
    generation: int,
) -> dict[str, Any]:
    """The DeltaLake's status: tables found and managed (`managed`: each managed table's
    status by name, None when unknown), their health, the last scan, its conditions."""
    out: dict[str, Any] = dict(previous or {})
    fields = {
        L.OBSERVED_GENERATION: generation,
        L.TABLES: len(scan.tables),
        L.MANAGED_TABLES: len(managed),
        L.HEALTH: health.lake(managed),
        L.LAST_SCAN: {
            "time": rfc3339(scan.time_ms),
            "result": str(scan.result),
            "requests": scan.scan.requests if scan.scan else 0,
            "seconds": round(scan.scan.seconds, 3) if scan.scan else 0.0,
        },
        L.CONDITIONS: status.conditions_status(
            scan.conditions(), previous, generation, scan.time_ms
        ),
    }
    out.update((str(k), v) for k, v in fields.items())
    return out
