"""Defaults and effective policy. Every default deltakeeper uses is defined here and only here.

Precedence (ARCHITECTURE.md): the DeltaTable spec (or CLI flag), then a DeltaMaintenancePolicy that
selects the table, then Delta Lake's defaults. Retention follows the table as Delta Spark does:
an explicit setting never goes below the table's own property (`delta.logRetentionDuration`,
`delta.deletedFileRetentionDuration`); with none, the table's property is used as it is (even
below Delta's default); else Delta's default. `Policy.sources` says which of these won.
"""

from __future__ import annotations

import enum
import weakref
from collections.abc import Mapping
from dataclasses import dataclass
from dataclasses import field as dataclass_field
from typing import Any

from deltakeeper.delta import properties
from deltakeeper.delta.properties import (
    DAY_MS,
    DELETED_FILE_RETENTION,
    HOUR_MS,
    LOG_RETENTION,
    PropertyError,
    TableProperties,
)
from deltakeeper.delta.vacuum.modes import InventoryFormat, Mode

# Files below this size count as "small" in status, metrics and `inspect`.
SMALL_FILE_BYTES = 32 * 2**20
# Delta Lake's own defaults.
LOG_RETENTION_MS = 30 * DAY_MS
DELETED_FILE_RETENTION_MS = 7 * DAY_MS
CHECKPOINT_INTERVAL = 10
# Vacuum below this needs an explicit allowShortRetention (Delta's rule, kept in delta/properties).
MIN_VACUUM_RETENTION_MS = properties.MIN_VACUUM_RETENTION_MS
# On v2Checkpoint tables, a classic-named V2 checkpoint (every action inline, readable by
# readers that do not know sidecars) when none was written in this many checkpoint intervals.
CLASSIC_V2_EVERY_INTERVALS = 10
# The watch loop (operator and standalone mode): how often a table is polled, how often metadata
# cleanup is looked at even without a new checkpoint (log files expire as time passes), and how
# often vacuum runs when vacuum.schedule is not set (a FULL one lists the whole table).
POLL_INTERVAL_MS = 30_000
# A table whose storage events arrive (spec.events) is still polled this often, in case one
# was lost (docs/events.md); while its event source is down, at its pollInterval.
RESYNC_INTERVAL_MS = HOUR_MS
# spec.events.source: the webhook, or a queue URI of these schemes (resources/event_sources.py).
EVENT_SOURCES = ("webhook",)
QUEUE_SCHEMES = ("sqs", "pubsub", "azqueue")
# Where the daemons serve /metrics: this machine only, as metrics name every table; other hosts
# get them only when asked for (`--metrics-bind-address 0.0.0.0`; the Helm chart does).
METRICS_PORT = 9108
METRICS_BIND_ADDRESS = "127.0.0.1"
# The daemons: at most this many tables under maintenance at once (--max-concurrent; the
# chart's maxConcurrent), and this many compaction jobs at once, all tables together
# (--max-compaction-jobs; the chart's compaction.maxJobs).
MAX_CONCURRENT = 2
MAX_COMPACTION_JOBS = 1
# The Spark master of the jobs spark-submit runs (--master): this machine, every core.
SPARK_MASTER = "local[*]"
# A DeltaLake: how often its prefix is scanned for tables that appeared or disappeared.
LAKE_SCAN_INTERVAL_MS = 10 * 60_000
CLEANUP_EVERY_MS = HOUR_MS  # when its last run did not say when to look again
# A table's next look at cleanup (its cut-off's move, at the same midnight for most tables) is
# put off by up to this, drawn per table, so a fleet does not list every log at once.
LOOK_AGAIN_SPREAD_MS = HOUR_MS
VACUUM_EVERY_MS = DAY_MS
# Data retention (dataRetention): an expiry runs this often when dataRetention.schedule is not
# set, and refuses a run that would remove more than this share of the table's rows (a keep of
# 9d meant as 90d cannot empty a table). delta/expire/plan.py's DEFAULT_MAX_FRACTION is the
# same (a test holds them together).
EXPIRE_EVERY_MS = DAY_MS
EXPIRE_MAX_FRACTION = 0.5
# The daemons' vacuum: LITE (from the log) while Delta allows it, and a FULL listing this often
# under AUTO, for the files no commit names (those of failed writes).
VACUUM_MODE = Mode.AUTO
VACUUM_FULL_INTERVAL_MS = 7 * DAY_MS
# The command line's `vacuum` and `maintain`: FULL, as Delta Spark's VACUUM with no mode. It
# keeps no record of when the last FULL ran, so AUTO there would run LITE every time and never
# find those files.
CLI_VACUUM_MODE = Mode.FULL
# Compaction (off unless a spec, policy or flag enables it). Target size as Delta's
# delta.targetFileSize, else 128 MiB; small below half of it; due at 50 small files in a
# partition (Delta's auto compaction), or two once the oldest is an hour old, or a file with
# more than 5% of its rows deleted (Delta's optimize.maxDeletedRowsRatio).
MIB = 2**20
COMPACTION_TARGET_FILE_SIZE = 128 * MIB
COMPACTION_MIN_FILES = 50
COMPACTION_MAX_AGE_MS = HOUR_MS
COMPACTION_MAX_DELETED_ROWS_RATIO = 0.05
# At most one job per table in this interval: a job costs a JVM and rewrites data.
COMPACTION_MIN_INTERVAL_MS = HOUR_MS
# A job running longer than this is stopped and counts as failed.
COMPACTION_DEADLINE_MS = HOUR_MS
# A failed job is retried after this, doubled per further failure, up to the cap.
COMPACTION_RETRY_MS = 5 * 60_000
COMPACTION_RETRY_CAP_MS = 6 * HOUR_MS
# The job replays the log in Spark in one partition per this many file actions (adds and
# tombstones), at most Delta's default of 50 (spark.databricks.delta.snapshotPartitions): 50
# tasks for a small log cost more than the replay. A table of 1,000,000 gets Delta's 50.
COMPACTION_SNAPSHOT_ACTIONS_PER_PARTITION = 20_000
COMPACTION_SNAPSHOT_PARTITIONS_MAX = 50

# Where an effective retention came from (Policy.sources): an explicit setting of a DeltaTable
# spec, a DeltaMaintenancePolicy or a CLI flag, the table's own property, or Delta's default.
SOURCES = ("spec", "policy", "flag", "table", "default")
RETENTION_PROPERTIES = {
    "log_retention_ms": LOG_RETENTION,
    "deleted_file_retention_ms": DELETED_FILE_RETENTION,
}
RETENTION_DEFAULTS = {
    "log_retention_ms": LOG_RETENTION_MS,
    "deleted_file_retention_ms": DELETED_FILE_RETENTION_MS,
}


class PolicyError(ValueError):
    pass


class Engine(enum.StrEnum):
    """What runs a table's checkpoint or vacuum (spec.checkpoint.engine, spec.vacuum.engine)."""

    AUTO = "auto"  # deltakeeper, or a Spark job when the step does not fit the memory budget
    LOCAL = "local"  # deltakeeper only: a step too big for the budget is refused
    SPARK = "spark"  # always a Spark job (Delta Spark's checkpoint or VACUUM)


@dataclass(frozen=True)
class CompactionSettings:
    """What the compaction planner and the daemon's job tracking read."""

    target_file_size: int = COMPACTION_TARGET_FILE_SIZE
    min_file_size: int | None = None  # None: half the target
    min_files_per_partition: int = COMPACTION_MIN_FILES
    max_age_ms: int = COMPACTION_MAX_AGE_MS
    max_deleted_rows_ratio: float = COMPACTION_MAX_DELETED_ROWS_RATIO
    enabled: bool = False  # a step of maintain and of the daemon's plan only when true
    min_interval_ms: int = COMPACTION_MIN_INTERVAL_MS
    deadline_ms: int = COMPACTION_DEADLINE_MS
    z_order_by: tuple[str, ...] = ()  # columns: Z-order instead of bin-packing
    max_threads: int | None = None  # bins rewritten at once; None: Delta's default
    # The table's (or its policy's) SparkApplication template, spark-operator's spec fields;
    # the operator merges it over its default. Not read by spark-submit.
    spark_application: Mapping[str, Any] = dataclass_field(default_factory=dict)

    @property
    def small_below(self) -> int:
        return self.min_file_size if self.min_file_size is not None else self.target_file_size // 2


class Rewrite(enum.StrEnum):
    """What becomes of files that straddle an expiry's cutoff (dataRetention.rewrite)."""

    NONE = "none"  # kept until they are wholly older
    SPARK = "spark"  # Delta Spark's DELETE on their partitions, as a Spark job


@dataclass(frozen=True)
class DataRetention:
    """Data retention by age (dataRetention, `deltakeeper expire`): rows older than now minus
    `keep_ms` in `column` are removed from the table."""

    column: str
    keep_ms: int
    dry_run: bool = False
    max_fraction: float = EXPIRE_MAX_FRACTION
    rewrite: Rewrite = Rewrite.NONE
    schedule: str | None = None  # cron, UTC; None: every EXPIRE_EVERY_MS


@dataclass(frozen=True)
class InventorySettings:
    """Where a vacuum in INVENTORY mode reads its storage inventory (vacuum.inventory)."""

    uri: str
    format: InventoryFormat = InventoryFormat.AUTO


@dataclass(frozen=True)
class Policy:
    log_retention_ms: int
    deleted_file_retention_ms: int
    checkpoint_interval: int
    expired_log_cleanup: bool
    txn_retention_ms: int | None
    vacuum_enabled: bool = True
    allow_short_retention: bool = False
    write_checksum: bool = False  # N.crc next to each checkpoint deltakeeper writes
    checkpoint_part_size: int | None = None  # actions per part; None: one file (Delta's default)
    compaction: CompactionSettings = CompactionSettings()
    vacuum_mode: Mode = VACUUM_MODE
    vacuum_full_interval_ms: int = VACUUM_FULL_INTERVAL_MS  # AUTO: a FULL vacuum this often
    vacuum_inventory: InventorySettings | None = None
    vacuum_schedule: str | None = None  # cron, UTC; None: every VACUUM_EVERY_MS
    vacuum_dry_run: bool = False  # report what a vacuum would delete, delete nothing
    stats_enabled: bool = False  # compute-stats as a step (off by default)
    log_compaction_interval: int | None = None  # a log compaction file every n commits
    manifest_enabled: bool = False  # the table's delta.compatibility.symlinkFormatManifest
    checkpoint_engine: Engine = Engine.AUTO
    vacuum_engine: Engine = Engine.AUTO
    # The operations (by name) that a catalog-managed table's catalog permits: its owner says
    # so in catalog.allowedOperations, standing in for the catalog's own word until deltakeeper
    # can ask a catalog. Empty: only what Delta allows every client (checkpoints, log
    # compaction files, checksums) runs on such a table.
    catalog_allowed: frozenset[str] = frozenset()
    data_retention: DataRetention | None = None  # expire, where set
    # For each retention field: spec, policy, flag, table or default (see SOURCES).
    sources: Mapping[str, str] = dataclass_field(default_factory=dict)

    def retention_json(self) -> dict[str, dict[str, Any]]:
        """The retentions with where each came from, as status and `maintain --json` show them."""
        return {
            "logRetention": {
                "ms": self.log_retention_ms,
                "source": self.sources.get("log_retention_ms", "default"),
            },
            "deletedFileRetention": {
                "ms": self.deleted_file_retention_ms,
                "source": self.sources.get("deleted_file_retention_ms", "default"),
            },
        }


# CompactionSettings' fields a spec, policy or flag can set, each as `compaction_<field>`.
COMPACTION_FIELDS = (
    "enabled",
    "target_file_size",
    "min_file_size",
    "min_files_per_partition",
    "max_age_ms",
    "max_deleted_rows_ratio",
    "min_interval_ms",
    "deadline_ms",
    "z_order_by",
    "max_threads",
    "spark_application",
)

# The explicit settings a DeltaTable spec, a DeltaMaintenancePolicy spec or CLI flags can carry,
# as keyword arguments of `effective`; a missing key means "not set here".
SETTINGS = (
    "log_retention_ms",
    "deleted_file_retention_ms",
    "checkpoint_interval",
    "vacuum_enabled",
    "allow_short_retention",
    "write_checksum",
    "checkpoint_part_size",
    "vacuum_mode",
    "vacuum_full_interval_ms",
    "vacuum_inventory",
    "vacuum_schedule",
    "vacuum_dry_run",
    "stats_enabled",
    "log_compaction_interval",
    "checkpoint_engine",
    "vacuum_engine",
    "catalog_allowed",
    "data_retention",
    *(f"compaction_{name}" for name in COMPACTION_FIELDS),
    "sources",
)


def layered(*layers: Mapping[str, Any]) -> dict[str, Any]:
    """Settings from the most specific layer first (flags, table spec, policy): first set wins."""
    out: dict[str, Any] = {}
    for layer in layers:
        for key, value in layer.items():
            if value is not None:
                out.setdefault(key, value)
    return out


def sources_of(**layers: Mapping[str, Any]) -> dict[str, str]:
    """For each retention setting, the name of the first layer (most specific first) that sets
    it: `sources_of(spec=..., policy=...)`. Passed to `effective` as `sources`."""
    out: dict[str, str] = {}
    for name, layer in layers.items():
        for key in RETENTION_PROPERTIES:
            if layer.get(key) is not None:
                out.setdefault(key, name)
    return out


def positive(key: str, value: Any) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value <= 0:
        raise PolicyError(f"{key}: expected a whole number above 0, got {value!r}")
    return value


def effective(
    configuration: dict[str, str],
    log_retention_ms: int | None = None,
    deleted_file_retention_ms: int | None = None,
    checkpoint_interval: int | None = None,
    vacuum_enabled: bool | None = None,
    allow_short_retention: bool | None = None,
    write_checksum: bool | None = None,
    checkpoint_part_size: int | None = None,
    vacuum_mode: Mode | None = None,
    vacuum_full_interval_ms: int | None = None,
    vacuum_inventory: InventorySettings | None = None,
    vacuum_schedule: str | None = None,
    vacuum_dry_run: bool | None = None,
    stats_enabled: bool | None = None,
    log_compaction_interval: int | None = None,
    checkpoint_engine: Engine | None = None,
    vacuum_engine: Engine | None = None,
    catalog_allowed: frozenset[str] | None = None,
    data_retention: DataRetention | None = None,
    sources: Mapping[str, str] | None = None,
    **compaction: Any,
) -> Policy:
    """The policy for one table: explicit values (spec, policy or flags; `sources` names where
    each retention came from, "flag" when not said) over Delta's defaults, with retention
    following the table's own properties (see the module's docstring)."""
    props = TableProperties(configuration)
    try:
        table = {
            "log_retention_ms": props.log_retention_ms,
            "deleted_file_retention_ms": props.deleted_file_retention_ms,
        }
        interval = checkpoint_interval or props.checkpoint_interval or CHECKPOINT_INTERVAL
        txn_retention_ms = props.txn_retention_ms
    except PropertyError as e:
        raise PolicyError(str(e)) from e
    explicit = {
        "log_retention_ms": log_retention_ms,
        "deleted_file_retention_ms": deleted_file_retention_ms,
    }
    chosen = {key: _retention(key, explicit[key], table[key], sources or {}) for key in explicit}
    if vacuum_mode is Mode.INVENTORY and vacuum_inventory is None:
        raise PolicyError("vacuum.mode inventory needs vacuum.inventory.uri (--inventory URI)")
    return Policy(
        log_retention_ms=chosen["log_retention_ms"][0],
        deleted_file_retention_ms=chosen["deleted_file_retention_ms"][0],
        checkpoint_interval=interval,
        expired_log_cleanup=props.expired_log_cleanup,
        txn_retention_ms=txn_retention_ms,
        vacuum_enabled=True if vacuum_enabled is None else vacuum_enabled,
        allow_short_retention=bool(allow_short_retention),
        write_checksum=bool(write_checksum),
        checkpoint_part_size=checkpoint_part_size,
        compaction=compaction_settings(props, **compaction),
        vacuum_mode=vacuum_mode or VACUUM_MODE,
        vacuum_full_interval_ms=vacuum_full_interval_ms or VACUUM_FULL_INTERVAL_MS,
        vacuum_inventory=vacuum_inventory,
        vacuum_schedule=vacuum_schedule,
        vacuum_dry_run=bool(vacuum_dry_run),
        stats_enabled=bool(stats_enabled),
        log_compaction_interval=log_compaction_interval,
        manifest_enabled=props.symlink_manifest,
        checkpoint_engine=Engine(checkpoint_engine or Engine.AUTO),
        vacuum_engine=Engine(vacuum_engine or Engine.AUTO),
        catalog_allowed=frozenset(catalog_allowed or ()),
        data_retention=data_retention,
        sources={key: value[1] for key, value in chosen.items()},
    )


# One object for each distinct policy held, while any table holds it: a daemon keeps one per
# table (most of a kilobyte each), and most of its tables have the same.
_POLICIES: weakref.WeakValueDictionary[str, Policy] = weakref.WeakValueDictionary()


def shared(policy: Policy) -> Policy:
    """The one object equal to `policy` among those held (made when the table's log or settings
    change, not at each poll: its key is the policy's repr)."""
    return _POLICIES.setdefault(repr(policy), policy)


def compaction_settings(props: TableProperties, **explicit: Any) -> CompactionSettings:
    """`compaction_<field>` settings over the defaults; the target size, when not set, is the
    table's delta.targetFileSize (Delta's own knob), else 128 MiB."""
    fields: dict[str, Any] = {}
    for key, value in explicit.items():
        name = key.removeprefix("compaction_")
        if name not in COMPACTION_FIELDS:
            raise TypeError(f"effective() got an unexpected keyword argument {key!r}")
        if value is not None:
            fields[name] = value
    if "target_file_size" not in fields and props.target_file_size is not None:
        fields["target_file_size"] = props.target_file_size
    return CompactionSettings(**fields)


def _retention(
    key: str, explicit: int | None, table: int | None, sources: Mapping[str, str]
) -> tuple[int, str]:
    """One retention and its source: explicit but never below the table's property, else the
    table's property, else Delta's default."""
    if explicit is not None and (table is None or explicit >= table):
        return explicit, sources.get(key, "flag")
    if table is not None:
        return table, "table"
    return RETENTION_DEFAULTS[key], "default"
