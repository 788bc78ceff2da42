"""Every condition type, condition status, event type and reason deltakeeper reports, as named
values: the resources' status carries them (crd.py's printer columns read Ready), the
runtime decides which hold (runtime/conditions.py), `kubectl describe` shows them. They sit
with the resources, below the runtime, so that the CRDs and the resource parsers can name them.
"""

from __future__ import annotations

import enum


class ConditionType(enum.StrEnum):
    READY = "Ready"
    STORAGE_REACHABLE = "StorageReachable"
    PROTOCOL_SUPPORTED = "ProtocolSupported"
    DEGRADED = "Degraded"  # the odd one: True is the bad state
    TABLE_FOUND = "TableFound"  # a DeltaLake's table: did the lake's last good scan find it


# What every DeltaTable's status carries, in this order.
TABLE_CONDITIONS = (
    ConditionType.READY,
    ConditionType.STORAGE_REACHABLE,
    ConditionType.PROTOCOL_SUPPORTED,
    ConditionType.DEGRADED,
)


class ConditionStatus(enum.StrEnum):
    TRUE = "True"
    FALSE = "False"
    UNKNOWN = "Unknown"


class EventType(enum.StrEnum):
    NORMAL = "Normal"
    WARNING = "Warning"


class Reason(enum.StrEnum):
    """Every reason a condition or an event gives (`kubectl describe` shows them)."""

    # A table the poll can read.
    WATCHING = "Watching"
    SUSPENDED = "Suspended"
    REACHABLE = "Reachable"
    SUPPORTED = "Supported"
    NOT_CHECKED = "NotChecked"  # an earlier problem stopped the poll
    AS_EXPECTED = "AsExpected"
    # A spec that cannot be acted on (no storage is touched).
    INVALID_SPEC = "InvalidSpec"
    POLICY_NOT_FOUND = "PolicyNotFound"
    SECRET_NOT_FOUND = "SecretNotFound"
    SECRET_UNREADABLE = "SecretUnreadable"
    INVALID_SECRET = "InvalidSecret"
    INVALID_POLICY = "InvalidPolicy"
    # A table the poll cannot read.
    STORAGE_UNREACHABLE = "StorageUnreachable"
    NOT_A_DELTA_TABLE = "NotADeltaTable"
    UNSUPPORTED_PROTOCOL = "UnsupportedProtocol"
    UNSUPPORTED_FEATURES = "UnsupportedFeatures"
    CORRUPT_LOG = "CorruptLog"
    ERROR = "Error"  # anything else: a bug, named by its exception
    # Degraded: maintenance ran into trouble, or the user should look.
    MAINTENANCE_FAILED = "MaintenanceFailed"
    MAINTENANCE_REFUSED = "MaintenanceRefused"
    DUPLICATE_URI = "DuplicateUri"
    POLICY_WARNING = "PolicyWarning"
    POLLS_STALLED = "PollsStalled"  # no poll finished in STALL_INTERVALS poll intervals
    # Not Degraded: a catalog-managed table's catalog owns operations deltakeeper then leaves
    # alone (Degraded stays False with this reason); also a refused run's own reason.
    CATALOG_OWNED = "CatalogOwned"
    # Events of maintenance are each operation's own (its spec's done_reason, started_reason,
    # warning and dry_run_event, maintenance/operations/).
    # DeltaLakes and their tables.
    SCANNED = "Scanned"
    LISTED = "Listed"
    SCAN_FAILED = "ScanFailed"
    APPLY_FAILED = "ApplyFailed"
    FOUND = "Found"
    NOT_FOUND = "NotFound"
    TABLE_FOUND = "TableFound"
    TABLE_GONE = "TableGone"
