"""Every rule from a DeltaTable or DeltaMaintenancePolicy spec to settings, in one place.

The table's spec wins over its policy's; what neither sets is left out here and filled in by
maintenance/policy.py, where the defaults and the rest of the precedence live.
"""

from __future__ import annotations

import copy
from collections.abc import Mapping
from enum import StrEnum
from typing import Any

from deltakeeper.delta.storage import is_local
from deltakeeper.delta.vacuum.modes import InventoryFormat, Mode
from deltakeeper.maintenance import policy as defaults
from deltakeeper.maintenance.operations.registry import catalog_allowed
from deltakeeper.maintenance.policy import Engine, PolicyError, positive
from deltakeeper.maintenance.schedule import check_cron
from deltakeeper.resources import event_sources
from deltakeeper.resources.manifests import PolicyResource, TableResource
from deltakeeper.units import parse_duration_ms, parse_size


def from_spec(spec: Mapping[str, Any]) -> dict[str, Any]:
    """The settings (policy.SETTINGS) a DeltaTable or DeltaMaintenancePolicy spec sets, parsed
    and checked."""
    out: dict[str, Any] = {}
    for field, key in (
        ("log_retention_ms", "logRetention"),
        ("deleted_file_retention_ms", "deletedFileRetention"),
    ):
        if spec.get(key) is not None:
            out[field] = _duration(key, spec[key])
    checkpoint = spec.get("checkpoint") or {}
    if checkpoint.get("interval") is not None:
        out["checkpoint_interval"] = positive("checkpoint.interval", checkpoint["interval"])
    if checkpoint.get("partSize") is not None:
        out["checkpoint_part_size"] = positive("checkpoint.partSize", checkpoint["partSize"])
    if checkpoint.get("writeChecksum") is not None:
        out["write_checksum"] = _bool("checkpoint.writeChecksum", checkpoint["writeChecksum"])
    if checkpoint.get("engine") is not None:
        out["checkpoint_engine"] = _choice("checkpoint.engine", checkpoint["engine"], Engine)
    vacuum = spec.get("vacuum") or {}
    if vacuum.get("enabled") is not None:
        out["vacuum_enabled"] = _bool("vacuum.enabled", vacuum["enabled"])
    short = vacuum.get("allowShortRetention", spec.get("allowShortRetention"))
    if short is not None:
        out["allow_short_retention"] = _bool("allowShortRetention", short)
    out.update(_vacuum(vacuum))
    if vacuum.get("engine") is not None:
        out["vacuum_engine"] = _choice("vacuum.engine", vacuum["engine"], Engine)
    out.update(_compaction(spec.get("compaction") or {}))
    stats = spec.get("stats") or {}
    if stats.get("enabled") is not None:
        out["stats_enabled"] = _bool("stats.enabled", stats["enabled"])
    log = spec.get("logCompaction") or {}
    if log.get("interval") is not None:
        out["log_compaction_interval"] = _at_least_two("logCompaction.interval", log["interval"])
    if spec.get("dataRetention") is not None:
        out["data_retention"] = data_retention(spec["dataRetention"])
    allowed = (spec.get("catalog") or {}).get("allowedOperations")
    if allowed is not None:
        out["catalog_allowed"] = catalog_allowed("catalog.allowedOperations", allowed)
    return out


def data_retention(spec: Any) -> defaults.DataRetention:
    """spec.dataRetention as expire's settings (a table's replaces its policy's whole: its
    column and keep belong together)."""
    key = "dataRetention"
    if not isinstance(spec, Mapping):
        raise PolicyError(f"{key}: expected {{column, keep, ...}}, got {spec!r}")
    column = spec.get("column")
    if not isinstance(column, str) or not column.strip():
        raise PolicyError(f"{key}.column: expected the name of the time column, got {column!r}")
    if spec.get("keep") is None:
        raise PolicyError(f"{key}.keep: required (how much to keep, e.g. 90d)")
    keep = positive(f"{key}.keep", _duration(f"{key}.keep", spec["keep"]))
    rewrite = _choice(f"{key}.rewrite", spec.get("rewrite", "none"), defaults.Rewrite)
    schedule = spec.get("schedule")
    if schedule:
        check_cron(schedule, f"{key}.schedule")
    fraction = spec.get("maxFraction")
    return defaults.DataRetention(
        column,
        keep,
        dry_run=_bool(f"{key}.dryRun", spec.get("dryRun", False)),
        max_fraction=defaults.EXPIRE_MAX_FRACTION
        if fraction is None
        else _ratio(f"{key}.maxFraction", fraction),
        rewrite=rewrite,
        schedule=schedule or None,
    )


def _at_least_two(key: str, value: Any) -> int:
    if positive(key, value) < 2:
        raise PolicyError(f"{key}: a log compaction file covers at least 2 commits, got {value}")
    return int(value)


def _vacuum(spec: Mapping[str, Any]) -> dict[str, Any]:
    """spec.vacuum's mode, schedule, dryRun, fullInterval and inventory as settings."""
    out: dict[str, Any] = {}
    if spec.get("mode") is not None:
        out["vacuum_mode"] = _choice("vacuum.mode", spec["mode"], Mode)
    if spec.get("schedule"):
        check_cron(spec["schedule"])
        out["vacuum_schedule"] = spec["schedule"]
    if spec.get("dryRun") is not None:
        out["vacuum_dry_run"] = _bool("vacuum.dryRun", spec["dryRun"])
    if spec.get("fullInterval") is not None:
        out["vacuum_full_interval_ms"] = positive(
            "vacuum.fullInterval", _duration("vacuum.fullInterval", spec["fullInterval"])
        )
    found = spec.get("inventory")
    if found is not None:
        if not isinstance(found, Mapping) or not isinstance(found.get("uri"), str):
            raise PolicyError(f"vacuum.inventory: expected {{uri, format}}, got {found!r}")
        fmt = _choice("vacuum.inventory.format", found.get("format", "auto"), InventoryFormat)
        out["vacuum_inventory"] = defaults.InventorySettings(found["uri"], fmt)
    return out


def _choice(key: str, value: Any, names: type[StrEnum]) -> Any:
    if value not in list(names):
        raise PolicyError(f"{key}: expected one of {', '.join(names)}, got {value!r}")
    return names(value)


def _compaction(spec: Mapping[str, Any]) -> dict[str, Any]:
    """spec.compaction as `compaction_<field>` settings (policy.COMPACTION_FIELDS)."""
    parse: dict[str, tuple[str, Any]] = {
        "enabled": ("enabled", _bool),
        "targetFileSize": ("target_file_size", _size),
        "minFileSize": ("min_file_size", _size),
        "minFilesPerPartition": ("min_files_per_partition", positive),
        "maxAge": ("max_age_ms", _duration),
        "maxDeletedRowsRatio": ("max_deleted_rows_ratio", _ratio),
        "minInterval": ("min_interval_ms", _duration),
        "deadline": ("deadline_ms", _duration),
        "zOrderBy": ("z_order_by", _columns),
        "maxThreads": ("max_threads", positive),
        "sparkApplication": ("spark_application", _spark_template),
    }
    out: dict[str, Any] = {}
    for key, (field, check) in parse.items():
        if spec.get(key) is not None:
            out[f"compaction_{field}"] = check(f"compaction.{key}", spec[key])
    return out


def settings(table: TableResource, policy: PolicyResource | None) -> dict[str, Any]:
    """The table's explicit settings over its policy's; Delta's defaults fill the rest in
    policy.effective."""
    spec = from_spec(table.spec)
    chosen = from_spec(policy.spec) if policy else {}
    out = defaults.layered(spec, chosen)
    # A template is merged key by key (driver, executor, sparkConf, ...), not replaced whole;
    # the operator-wide default goes under both when a job is created.
    template = "compaction_spark_application"
    if template in spec and template in chosen:
        out[template] = merge(chosen[template], spec[template])
    out["sources"] = defaults.sources_of(spec=spec, policy=chosen)
    return out


def poll_interval_ms(
    table: TableResource,
    policy: PolicyResource | None,
    default_ms: int = defaults.POLL_INTERVAL_MS,
) -> int:
    """The table's pollInterval, else its policy's, else `default_ms` (the daemon's
    --default-poll-interval, which defaults to policy.py's)."""
    value = _first(table, policy, "pollInterval")
    ms = parse_duration_ms(value) if value else default_ms
    if ms <= 0:
        raise ValueError(f"pollInterval {value!r} must be more than 0s")
    return ms


def small_file_bytes(table: TableResource, policy: PolicyResource | None) -> int:
    value = _first(table, policy, "smallFileSize")
    return parse_size(value) if value else defaults.SMALL_FILE_BYTES


def watch_settings(
    table: TableResource,
    policy: PolicyResource | None,
    default_poll_ms: int = defaults.POLL_INTERVAL_MS,
) -> dict[str, Any]:
    """The settings of a watched table, as the fields of runtime's Target."""
    return {
        "settings": settings(table, policy),
        "poll_interval_s": poll_interval_ms(table, policy, default_poll_ms) / 1000,
        "small_file_bytes": small_file_bytes(table, policy),
        **events_settings(table, policy),
    }


def events_settings(table: TableResource, policy: PolicyResource | None) -> dict[str, Any]:
    """spec.events (the table's, else its policy's) as Target fields; {} without events. A
    source this build cannot read (resources/event_sources.py) is refused, not polled as if
    it were not there."""
    events = _first(table, policy, "events")
    if not events:
        return {}
    source = str(events.get("source") or "")
    event_sources.check(source)
    uri = str(table.spec.get("uri", ""))
    if is_local(uri):
        raise PolicyError(
            "events: storage events come from an object store (s3://, gs://, abfss://, az://); "
            f"{uri or 'this table'} is not in one: remove spec.events to poll it"
        )
    event_sources.check_store(source, uri)
    value = events.get("resyncInterval")
    ms = _duration("events.resyncInterval", value) if value else defaults.RESYNC_INTERVAL_MS
    if ms <= 0:
        raise PolicyError(f"events.resyncInterval {value!r} must be more than 0s")
    return {"events_source": source, "resync_interval_s": ms / 1000}


def _first(table: TableResource, policy: PolicyResource | None, key: str) -> Any:
    layers = [table.spec, policy.spec if policy else {}]
    return next((layer[key] for layer in layers if layer.get(key)), None)


def _duration(key: str, value: Any) -> int:
    try:
        return parse_duration_ms(str(value))
    except ValueError as e:
        raise PolicyError(f"{key}: {e}") from e


def _size(key: str, value: Any) -> int:
    try:
        size = parse_size(str(value))
    except ValueError as e:
        raise PolicyError(f"{key}: {e}") from e
    return positive(key, size)


def _ratio(key: str, value: Any) -> float:
    if isinstance(value, bool) or not isinstance(value, int | float) or not 0 <= value <= 1:
        raise PolicyError(f"{key}: expected a number from 0 to 1, got {value!r}")
    return float(value)


def _columns(key: str, value: Any) -> tuple[str, ...]:
    if not isinstance(value, list) or not value:
        raise PolicyError(f"{key}: expected a list of column names, got {value!r}")
    bad = [c for c in value if not isinstance(c, str) or not c.strip()]
    if bad:
        raise PolicyError(f"{key}: expected column names, got {bad[0]!r}")
    twice = sorted({c for c in value if value.count(c) > 1})
    if twice:
        raise PolicyError(f"{key}: {', '.join(twice)} named more than once")
    return tuple(value)


# What deltakeeper sets in every job's SparkApplication: a template cannot change it.
OWNED_SPARK_FIELDS = ("arguments",)
SPARK_OBJECTS = ("driver", "executor", "sparkConf", "restartPolicy", "deps")


def _spark_template(key: str, value: Any) -> dict[str, Any]:
    """A partial SparkApplication spec (spark-operator's field names); the API server checks
    the whole object against the spark-operator CRD when a job is created."""
    if not isinstance(value, dict):
        raise PolicyError(f"{key}: expected the fields of a SparkApplication spec, got {value!r}")
    owned = [k for k in OWNED_SPARK_FIELDS if k in value]
    if owned:
        raise PolicyError(f"{key}.{owned[0]}: set by deltakeeper for each job; remove it")
    if value.get("type", "Python") != "Python":
        raise PolicyError(f"{key}.type: the compaction job is Python, got {value['type']!r}")
    for field in SPARK_OBJECTS:
        if field in value and not isinstance(value[field], dict):
            raise PolicyError(f"{key}.{field}: expected an object, got {value[field]!r}")
    conf = value.get("sparkConf") or {}
    odd = [k for k, v in conf.items() if not isinstance(v, str)]
    if odd:
        raise PolicyError(f"{key}.sparkConf.{odd[0]}: expected a string value (quote it)")
    ttl = value.get("timeToLiveSeconds")
    if ttl is not None:
        positive(f"{key}.timeToLiveSeconds", ttl)
    for role in ("driver", "executor"):
        _no_secret_values(f"{key}.{role}.env", (value.get(role) or {}).get("env"))
    return value


def _no_secret_values(key: str, env: Any) -> None:
    """Credentials reach jobs as Secret references only: a literal value for a credential
    variable would sit in the SparkApplication for anyone who can read it."""
    if env is None:
        return
    if not isinstance(env, list) or not all(isinstance(e, dict) for e in env):
        raise PolicyError(f"{key}: expected a list of {{name, value | valueFrom}} entries")
    for e in env:
        name = str(e.get("name", ""))
        if "value" in e and any(w in name.upper() for w in ("SECRET", "KEY", "TOKEN", "PASSWORD")):
            raise PolicyError(
                f"{key}: {name} has a literal value; use valueFrom.secretKeyRef for credentials"
            )


def _bool(key: str, value: Any) -> bool:
    if not isinstance(value, bool):
        raise PolicyError(f"{key}: expected true or false, got {value!r}")
    return value


def merge(base: Mapping[str, Any], over: Mapping[str, Any]) -> dict[str, Any]:
    """`over` on top of `base`, objects merged key by key, anything else replaced."""
    out = copy.deepcopy(dict(base))
    for key, value in over.items():
        if isinstance(value, Mapping) and isinstance(out.get(key), Mapping):
            out[key] = merge(out[key], value)
        else:
            out[key] = copy.deepcopy(value)
    return out
