"""Scanning a DeltaLake: which tables appeared and disappeared since the last scan.

Shared by the operator and standalone mode, no Kubernetes: the front-end resolves the lake's
credentials, calls `LakeScanner.scan`, then creates or marks the tables it reports. A failed
scan changes nothing: an unreachable bucket must not read as "every table disappeared".
"""

from __future__ import annotations

import enum
import logging
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from deltakeeper.delta.discover import Scan, discover
from deltakeeper.delta.errors import DeltaError, InvalidInputError, StorageUnreachableError
from deltakeeper.delta.storage import open_storage
from deltakeeper.resources.lake import LakeResource
from deltakeeper.runtime import credentials, metrics, status
from deltakeeper.runtime.watcher import Condition, ConditionStatus, Event

log = logging.getLogger("deltakeeper.lakes")
TABLE_FOUND = "TableFound"  # the condition of a lake's table: did the last good scan find it


class ScanResult(enum.StrEnum):
    OK = "ok"
    UNREACHABLE = "unreachable"  # the store did not answer or refused the listing
    INVALID = "invalid"  # the lake cannot be scanned as written (URI, credentials)


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
    reason: str = ""  # the conditions' reason when it failed (SecretNotFound, ...)

    @property
    def ok(self) -> bool:
        return self.result is ScanResult.OK

    def conditions(self) -> list[Condition]:
        true, false = ConditionStatus.TRUE, ConditionStatus.FALSE
        if self.ok:
            found = f"{len(self.tables)} tables found"
            return [
                Condition("Ready", true, "Scanned", found),
                Condition("StorageReachable", true, "Listed", found),
            ]
        reachable = ConditionStatus.UNKNOWN if self.result is ScanResult.INVALID else false
        unreachable = self.result is ScanResult.UNREACHABLE
        reason = self.reason or ("StorageUnreachable" if unreachable else "InvalidSpec")
        return [
            Condition("Ready", false, reason, self.message),
            Condition("StorageReachable", reachable, reason, self.message),
        ]

    def events(self) -> list[Event]:
        out = [Event("Normal", "TableFound", f"table {p} appeared") for p in self.appeared]
        out += [Event("Warning", "TableGone", f"table {p} disappeared") for p in self.disappeared]
        if not self.ok:
            out.append(Event("Warning", "ScanFailed", self.message))
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

    def failed(self, message: str, reason: str = "") -> LakeScan:
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


def table_found(lake: str, path: str, found: bool, kept: str = "") -> Condition:
    """A lake's table's TableFound condition; `kept` says what became of a table not found."""
    if found:
        message = f"the last scan of DeltaLake {lake} found {path}"
        return Condition(TABLE_FOUND, ConditionStatus.TRUE, "Found", message)
    message = f"the last scan of DeltaLake {lake} did not find {path}; {kept}".rstrip("; ")
    return Condition(TABLE_FOUND, ConditionStatus.FALSE, "NotFound", message)


def lake_status(
    scan: LakeScan, managed: int, previous: Mapping[str, Any] | None, generation: int
) -> dict[str, Any]:
    """The DeltaLake's status: tables found and managed, the last scan, its conditions."""
    out: dict[str, Any] = dict(previous or {})
    out.update(
        {
            "observedGeneration": generation,
            "tables": len(scan.tables),
            "managedTables": managed,
            "lastScan": {
                "time": status.timestamp(scan.time_ms),
                "result": str(scan.result),
                "requests": scan.scan.requests if scan.scan else 0,
                "seconds": round(scan.scan.seconds, 3) if scan.scan else 0.0,
            },
            "conditions": status.conditions_status(
                scan.conditions(), previous, generation, scan.time_ms
            ),
        }
    )
    return out
