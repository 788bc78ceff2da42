"""The CRDs of deltakeeper.io/v1alpha1, as data. `scripts/gen_crds.py` writes crds/*.yaml."""

from __future__ import annotations

import enum
from collections.abc import Mapping
from typing import Any

from deltakeeper.delta.discover import DEFAULT_MAX_DEPTH
from deltakeeper.delta.properties import DAY_MS
from deltakeeper.delta.vacuum.modes import InventoryFormat, Mode
from deltakeeper.maintenance import policy as defaults
from deltakeeper.maintenance import record
from deltakeeper.maintenance.operations import Operation
from deltakeeper.maintenance.operations.registry import CATALOG_PERMITS
from deltakeeper.maintenance.policy import SOURCES, Engine
from deltakeeper.resources.conditions import ConditionStatus, ConditionType
from deltakeeper.resources.status_fields import COUNTS, LakeStatusField, PolicyStatusField
from deltakeeper.resources.status_fields import StatusField as F
from deltakeeper.units import format_duration, format_size

# The one definition of the API group and version; k8s/ and the manifests read these.
GROUP = "deltakeeper.io"
VERSION = "v1alpha1"
API_VERSION = f"{GROUP}/{VERSION}"
# The resources' plurals: their API paths and CRD names.
TABLES, POLICIES, LAKES = "deltatables", "deltamaintenancepolicies", "deltalakes"

# What units.py parses: durations 30d, 12h, 90m, 45s; sizes 4096, 500M, 128Mi, 1Gi.
DURATION = r"^[0-9]+(d|h|m|s)$"
SIZE = r"^[0-9]+(Ki|Mi|Gi|Ti|K|M|G|T|B)?$"
# A scheme and something after it; which schemes are supported is the operator's call (it
# reports an unknown one in the Ready condition), so a typo shows up in `kubectl get`.
URI = r"^([a-z][a-z0-9+.-]*://.+|file:/.+|/.+)$"  # file:/path too, as Spark writes it
# Five fields of digits, *, ranges, steps, lists and names, or a macro like @daily.
_FIELD = r"[0-9A-Za-z*?/,-]+"
CRON = rf"^(@(yearly|annually|monthly|weekly|daily|midnight|hourly)|{_FIELD}( +{_FIELD}){{4}})$"


def _str(pattern: str, description: str) -> dict[str, Any]:
    return {"type": "string", "pattern": pattern, "description": description}


def _int(description: str, minimum: int = 1) -> dict[str, Any]:
    return {"type": "integer", "format": "int64", "minimum": minimum, "description": description}


def _obj(properties: dict[str, Any], description: str = "", **extra: Any) -> dict[str, Any]:
    out: dict[str, Any] = {"type": "object", "properties": properties}
    if description:
        out["description"] = description
    out.update(extra)
    return out


def _engine(step: str) -> dict[str, Any]:
    return {
        "type": "string",
        "enum": [str(e) for e in Engine],
        "description": f"What runs the {step}: auto (default): deltakeeper, or a Spark job "
        "(Delta Spark, through the compaction launcher) when it does not fit the memory "
        "budget; local: deltakeeper only (refused over budget); spark: always a Spark job.",
    }


def policy_fields() -> dict[str, Any]:
    """The fields a DeltaTable and a DeltaMaintenancePolicy both carry."""
    return {
        "pollInterval": _str(
            DURATION,
            "How often the table's log is checked "
            f"(default {format_duration(defaults.POLL_INTERVAL_MS)}).",
        ),
        "events": _obj(
            {
                "source": {
                    "type": "string",
                    "minLength": 1,
                    "description": "webhook: S3 event notifications POSTed to the daemon's "
                    "--events-listen (MinIO, Ceph RGW, ...); or a queue: "
                    "sqs://REGION/ACCOUNT/QUEUE (AWS S3 notifications, direct, via SNS or "
                    "EventBridge), pubsub://projects/P/subscriptions/S (GCS notifications), "
                    "azqueue://ACCOUNT/QUEUE (Event Grid BlobCreated); ?endpoint=URL for a "
                    "compatible server (docs/events.md).",
                },
                "resyncInterval": _str(
                    DURATION,
                    "While events arrive, the table is still polled this often "
                    f"(default {format_duration(defaults.RESYNC_INTERVAL_MS)}); at pollInterval "
                    "while its source is down or events go missing.",
                ),
            },
            "Storage events wake the table: its next poll happens when its log changes "
            "(docs/events.md).",
            required=["source"],
        ),
        "logRetention": _str(
            DURATION,
            f"Keep log files this long (default {format_duration(defaults.LOG_RETENTION_MS)}).",
        ),
        "deletedFileRetention": _str(
            DURATION,
            "Keep tombstones and unreferenced data files this long "
            f"(default {format_duration(defaults.DELETED_FILE_RETENTION_MS)}).",
        ),
        "smallFileSize": _str(
            SIZE,
            "Files below this size count as small "
            f"(default {format_size(defaults.SMALL_FILE_BYTES)}).",
        ),
        "checkpoint": _obj(
            {
                "interval": _int(
                    "Checkpoint once this many commits passed "
                    f"(default {defaults.CHECKPOINT_INTERVAL})."
                ),
                "partSize": _int("Actions per checkpoint part; unset: one file."),
                "writeChecksum": {"type": "boolean", "description": "Also write N.crc."},
                "engine": _engine("checkpoint"),
            }
        ),
        "vacuum": _obj(
            {
                "enabled": {"type": "boolean", "description": "Vacuum data files (default true)."},
                "schedule": _str(CRON, "Cron schedule in UTC (default: once a day)."),
                "dryRun": {"type": "boolean", "description": "Report what would go; delete none."},
                "allowShortRetention": {
                    "type": "boolean",
                    "description": "Allow deletedFileRetention below "
                    f"{defaults.MIN_VACUUM_RETENTION_MS // DAY_MS} days.",
                },
                "mode": {
                    "type": "string",
                    "enum": [str(m) for m in Mode],
                    "description": "lite: the files the commits since the last vacuum name; "
                    "full: list the table; inventory: read vacuum.inventory; auto (default): "
                    "lite, and full every fullInterval or when Delta refuses lite.",
                },
                "fullInterval": _str(
                    DURATION,
                    "auto: a full vacuum this often "
                    f"(default {format_duration(defaults.VACUUM_FULL_INTERVAL_MS)}).",
                ),
                "engine": _engine("vacuum"),
                "inventory": _obj(
                    {
                        "uri": _str(
                            URI,
                            "An S3 Inventory manifest.json or its folder, or "
                            "Parquet or a Delta table in Delta's inventory schema.",
                        ),
                        "format": {
                            "type": "string",
                            "enum": [str(f) for f in InventoryFormat],
                            "description": "What uri holds (default auto: by what is there).",
                        },
                    },
                    "The storage inventory an inventory vacuum reads instead of listing.",
                    required=["uri"],
                ),
            }
        ),
        "dataRetention": _obj(
            {
                "column": {
                    "type": "string",
                    "minLength": 1,
                    "description": "The time column: date, timestamp, timestamp_ntz (read as "
                    "UTC), or a partition column of ISO-8601 strings.",
                },
                "keep": _str(DURATION, "Keep rows this recent: the cutoff is now minus keep."),
                "dryRun": {
                    "type": "boolean",
                    "description": "Report what would be removed; commit nothing.",
                },
                "maxFraction": {
                    "type": "number",
                    "minimum": 0,
                    "maximum": 1,
                    "description": "Refuse a run that would remove more than this share of the "
                    f"table's rows (default {defaults.EXPIRE_MAX_FRACTION:g}).",
                },
                "rewrite": {
                    "type": "string",
                    "enum": [str(r) for r in defaults.Rewrite],
                    "description": "Files straddling the cutoff: none (default) keeps them "
                    "until they are wholly older; spark deletes their expired rows with Delta "
                    "Spark's DELETE, a Spark job, after the expiry's commit.",
                },
                "schedule": _str(CRON, "Cron schedule in UTC (default: once a day)."),
            },
            "Data retention by age: rows older than keep are removed, whole files at a time, "
            "in one DELETE commit (never on catalog-managed tables).",
            required=["column", "keep"],
        ),
        "stats": _obj(
            {
                "enabled": {
                    "type": "boolean",
                    "description": "Give live files the statistics the table asks for, as "
                    "Delta Spark computes them (default false).",
                },
            }
        ),
        "logCompaction": _obj(
            {
                "interval": {
                    "type": "integer",
                    "minimum": 2,
                    "description": "Write a log compaction file every this many commits "
                    "(default: none).",
                },
            }
        ),
        "compaction": _obj(
            {
                "enabled": {
                    "type": "boolean",
                    "description": "Compact small files (default false).",
                },
                "targetFileSize": _str(
                    SIZE,
                    "Size of compacted files (default: delta.targetFileSize, else "
                    f"{format_size(defaults.COMPACTION_TARGET_FILE_SIZE)}).",
                ),
                "minFileSize": _str(SIZE, "Files below this are small (default: half the target)."),
                "minFilesPerPartition": _int(
                    "Compact a partition once it has this many small files "
                    f"(default {defaults.COMPACTION_MIN_FILES})."
                ),
                "maxAge": _str(
                    DURATION,
                    "Or once its oldest of two or more small files is this old "
                    f"({format_duration(defaults.COMPACTION_MAX_AGE_MS)}).",
                ),
                "maxDeletedRowsRatio": {
                    "type": "number",
                    "minimum": 0,
                    "maximum": 1,
                    "description": "Or once a file has more of its rows deleted "
                    f"(default {defaults.COMPACTION_MAX_DELETED_ROWS_RATIO}).",
                },
                "minInterval": _str(
                    DURATION,
                    "At most one job per table in this time "
                    f"({format_duration(defaults.COMPACTION_MIN_INTERVAL_MS)}).",
                ),
                "deadline": _str(
                    DURATION,
                    "A job running longer fails and is stopped "
                    f"({format_duration(defaults.COMPACTION_DEADLINE_MS)}).",
                ),
                "zOrderBy": {
                    "type": "array",
                    "minItems": 1,
                    "items": {"type": "string", "minLength": 1},
                    "description": "Z-order the compacted files by these columns.",
                },
                "maxThreads": _int("Bins a job rewrites at once (Delta's default: 15)."),
                "sparkApplication": {
                    "type": "object",
                    "x-kubernetes-preserve-unknown-fields": True,
                    "description": "Template of the SparkApplication that compacts.",
                },
            }
        ),
        "catalog": _obj(
            {
                "allowedOperations": {
                    "type": "array",
                    "items": {"type": "string", "enum": [str(op) for op in CATALOG_PERMITS]},
                    "description": "On a catalog-managed table, the operations its catalog "
                    "permits deltakeeper to run (default: none; checkpoints, log compaction "
                    "files and checksums need no permission). Set only by whoever owns the "
                    "catalog: it stands in for the catalog's own permission.",
                },
            },
            "Catalog-managed tables (the catalogManaged feature).",
        ),
    }


def _table_spec() -> dict[str, Any]:
    fields = {
        "uri": _str(URI, "Table root: s3://, gs://, abfss://, az://, file:// or an absolute path."),
        "storage": _storage(),
        **_table_settings(),
    }
    return _obj(fields, required=["uri"])


def _storage() -> dict[str, Any]:
    return _obj(
        {
            "secretRef": _obj(
                {"name": {"type": "string", "minLength": 1}},
                "Secret in the table's namespace with the store's credentials.",
                required=["name"],
            ),
            "options": {
                "type": "object",
                "additionalProperties": {"type": "string"},
                "description": "Non-secret fsspec options, e.g. endpoint_url.",
            },
        }
    )


def _table_settings() -> dict[str, Any]:
    """A DeltaTable's spec fields other than where the table is (uri, storage)."""
    return {
        "policyRef": _obj(
            {"name": {"type": "string", "minLength": 1}},
            "DeltaMaintenancePolicy in the same namespace; it wins over label selection.",
            required=["name"],
        ),
        "suspend": {"type": "boolean", "description": "Observe only; run no maintenance."},
        **policy_fields(),
    }


def _condition() -> dict[str, Any]:
    return _obj(
        {
            "type": {"type": "string"},
            "status": {"type": "string", "enum": [str(s) for s in ConditionStatus]},
            "reason": {"type": "string"},
            "message": {"type": "string"},
            "lastTransitionTime": {"type": "string", "format": "date-time"},
            str(F.OBSERVED_GENERATION): {"type": "integer", "format": "int64"},
        },
        required=["type", "status"],
    )


def _conditions() -> dict[str, Any]:
    return {
        "type": "array",
        "items": _condition(),
        "x-kubernetes-list-type": "map",
        "x-kubernetes-list-map-keys": ["type"],
    }


def _table_status() -> dict[str, Any]:
    count = {"type": "integer", "format": "int64"}
    nullable_count = {**count, "nullable": True}
    retention = _obj({"ms": count, "source": {"type": "string", "enum": list(SOURCES)}})
    runs = {str(op): _obj(dict(record.fields(op))) for op in Operation}
    counts = {f: nullable_count if f is F.LAST_CHECKPOINT_VERSION else count for f in COUNTS}
    fields = {
        F.OBSERVED_GENERATION: count,
        F.LAST_COMMIT_TIME: {"type": "string", "format": "date-time", "nullable": True},
        **counts,
        F.POLICY: {"type": "string", "nullable": True},
        F.RETENTION: _obj({"logRetention": retention, "deletedFileRetention": retention}),
        F.LAST_POLL: {"type": "string", "format": "date-time"},
        F.LAST_MAINTENANCE: _obj(runs),
        F.COMPACTION: _compaction_status(count),
        F.HEALTH: _health(),
        F.EVENTS: _obj(
            {
                "source": {"type": "string"},
                "live": {
                    "type": "boolean",
                    "description": "Events stand in for polls: the source is up and none went "
                    "missing (then polled every resyncInterval).",
                },
                "lastEventTime": {"type": "string", "format": "date-time", "nullable": True},
                "missed": {
                    "type": "integer",
                    "description": "Resync polls in a row that found commits no event announced.",
                },
            },
            "Storage events (spec.events): whether they are live and when the last one came.",
        ),
        F.CONDITIONS: _conditions(),
    }
    return _fields(F, fields)


def _fields(names: type[enum.StrEnum], schemas: Mapping[Any, Any]) -> dict[str, Any]:
    """A status schema with exactly the fields of its list (status_fields.py), in its order."""
    assert schemas.keys() == set(names), f"every {names.__name__} has a schema, and only they"
    return _obj({str(f): schemas[f] for f in names})


def _health() -> dict[str, Any]:
    score = {"type": "integer", "minimum": 0, "maximum": 100}
    return _obj(
        {
            "score": {**score, "description": "0-100, 100 healthy: the components' weighted mean."},
            "band": {"type": "string", "description": "healthy (>= 80), fair (>= 50) or poor."},
            "worst": {
                "type": "string",
                "nullable": True,
                "description": "The lowest-scoring component; null when all score 100.",
            },
            "components": {
                "type": "object",
                "additionalProperties": score,
                "description": "Each component's score: smallFiles, vacuumDebt, deletedRows, "
                "checkpointLag, logDebt, missingStats (docs/health.md gives their formulas).",
            },
        },
        "The table's health as of the last poll.",
    )


def _compaction_status(count: dict[str, Any]) -> dict[str, Any]:
    """The running compaction job (null when none) and the last one's result."""
    date = {"type": "string", "format": "date-time"}
    running = _obj(
        {
            "operation": {
                "type": "string",
                "description": "compaction, or a checkpoint or vacuum run on Spark.",
            },
            "jobId": {"type": "string"},
            "started": date,
            "plannedVersion": count,
            "partitions": count,
            "files": count,
            "bytes": count,
        },
        nullable=True,
    )
    last = _obj(
        {
            "jobId": {"type": "string"},
            "result": {"type": "string"},
            "time": date,
            "message": {"type": "string"},
        }
    )
    return _obj(
        {
            "running": running,
            "last": last,
            "failures": count,
            "nextAttempt": {**date, "nullable": True},
        },
        "The compaction job running now, the last one's result, and when the next may start.",
    )


def _selector() -> dict[str, Any]:
    expression = _obj(
        {
            "key": {"type": "string"},
            "operator": {"type": "string", "enum": ["In", "NotIn", "Exists", "DoesNotExist"]},
            "values": {"type": "array", "items": {"type": "string"}},
        },
        required=["key", "operator"],
    )
    return _obj(
        {
            "matchLabels": {"type": "object", "additionalProperties": {"type": "string"}},
            "matchExpressions": {"type": "array", "items": expression},
        },
        "Labels of the DeltaTables (same namespace) this policy applies to; {} selects all.",
    )


def _ready_columns() -> list[dict[str, Any]]:
    """The Ready condition's status, and its reason in the wide output."""
    ready = f'.status.conditions[?(@.type=="{ConditionType.READY}")]'
    return [
        _column("Ready", f"{ready}.status", "string"),
        _column("Reason", f"{ready}.reason", "string", priority=1),
    ]


def _crd(kind: str, plural: str, short: list[str], spec: Any, status: Any, columns: Any) -> Any:
    return {
        "apiVersion": "apiextensions.k8s.io/v1",
        "kind": "CustomResourceDefinition",
        "metadata": {"name": f"{plural}.{GROUP}"},
        "spec": {
            "group": GROUP,
            "scope": "Namespaced",
            "names": {
                "kind": kind,
                "listKind": f"{kind}List",
                "plural": plural,
                "singular": kind.lower(),
                "shortNames": short,
                "categories": ["deltakeeper"],
            },
            "versions": [
                {
                    "name": VERSION,
                    "served": True,
                    "storage": True,
                    "subresources": {"status": {}},
                    "additionalPrinterColumns": columns,
                    "schema": {
                        "openAPIV3Schema": _obj(
                            {
                                "apiVersion": {"type": "string"},
                                "kind": {"type": "string"},
                                "metadata": {"type": "object"},
                                "spec": spec,
                                "status": status,
                            },
                            required=["spec"],
                        )
                    },
                }
            ],
        },
    }


def _column(name: str, path: str, kind: str = "integer", **extra: Any) -> dict[str, Any]:
    return {"name": name, "type": kind, "jsonPath": path, **extra}


def delta_table() -> dict[str, Any]:
    columns = [
        _column("Version", ".status.version"),
        _column("Behind", ".status.commitsSinceCheckpoint", description="commits since checkpoint"),
        _column("Files", ".status.files"),
        _column("Small", ".status.smallFiles"),
        _column("Health", ".status.health.score", description="0-100, 100 healthy"),
        *_ready_columns(),
        _column("URI", ".spec.uri", "string", priority=1),
        _column("Age", ".metadata.creationTimestamp", "date"),
    ]
    return _crd("DeltaTable", TABLES, ["dt", "dtable"], _table_spec(), _table_status(), columns)


def maintenance_policy() -> dict[str, Any]:
    spec = _obj({"tableSelector": _selector(), **policy_fields()})
    status = _fields(
        PolicyStatusField,
        {
            PolicyStatusField.OBSERVED_GENERATION: {"type": "integer", "format": "int64"},
            PolicyStatusField.TABLES: {"type": "integer"},
        },
    )
    columns = [
        _column("Tables", ".status.tables"),
        _column("Log-Retention", ".spec.logRetention", "string"),
        _column("File-Retention", ".spec.deletedFileRetention", "string"),
        _column("Age", ".metadata.creationTimestamp", "date"),
    ]
    return _crd("DeltaMaintenancePolicy", POLICIES, ["dmp"], spec, status, columns)


def _lake_spec() -> dict[str, Any]:
    globs = {"type": "array", "items": {"type": "string", "minLength": 1}}
    template = _obj(
        {
            "labels": {
                "type": "object",
                "additionalProperties": {"type": "string"},
                "description": "Labels of every DeltaTable made (policies select by them).",
            },
            **_table_settings(),
        },
        "What every DeltaTable made for a found table gets: labels and DeltaTable spec fields.",
    )
    fields = {
        "uri": _str(URI, "Prefix searched for tables: s3://, gs://, abfss://, az://, file://."),
        "storage": _storage(),
        "include": {**globs, "description": "Globs on table paths under uri; none: all."},
        "exclude": {**globs, "description": "Globs on table paths under uri to leave out."},
        "maxDepth": _int(
            "Folders below uri a table root may be; 0: uri is the table "
            f"(default {DEFAULT_MAX_DEPTH}).",
            0,
        ),
        "scanInterval": _str(
            DURATION,
            "How often uri is searched for tables "
            f"(default {format_duration(defaults.LAKE_SCAN_INTERVAL_MS)}).",
        ),
        "tableTemplate": template,
    }
    return _obj(fields, required=["uri"])


def _lake_status() -> dict[str, Any]:
    count = {"type": "integer", "format": "int64"}
    scan = _obj(
        {
            "time": {"type": "string", "format": "date-time"},
            "result": {"type": "string"},
            "requests": {**count, "description": "Listing requests the scan sent."},
            "seconds": {"type": "number"},
        },
        "The last scan of the prefix.",
    )
    L = LakeStatusField
    return _fields(
        L,
        {
            L.OBSERVED_GENERATION: count,
            L.TABLES: {**count, "description": "Tables found by the last good scan."},
            L.MANAGED_TABLES: {**count, "description": "DeltaTables this lake manages."},
            L.MISSING_TABLES: {
                **count,
                "description": "Managed DeltaTables whose table the last scan did not find.",
            },
            L.HEALTH: _lake_health(count),
            L.LAST_SCAN: scan,
            L.CONDITIONS: _conditions(),
        },
    )


def _lake_health(count: dict[str, Any]) -> dict[str, Any]:
    worst = _obj(
        {
            "table": {"type": "string"},
            "score": {"type": "integer"},
            "worst": {"type": "string", "nullable": True},
        }
    )
    return _obj(
        {
            "bands": {
                "type": "object",
                "additionalProperties": count,
                "description": "Managed tables by health: healthy (>= 80), fair (>= 50), poor, "
                "unknown (not scored yet).",
            },
            "worst": {
                "type": "array",
                "items": worst,
                "description": "The ten lowest-scoring tables below 100, worst first.",
            },
        },
        "The managed tables' health, as of the last scan.",
    )


def delta_lake() -> dict[str, Any]:
    columns = [
        _column("Prefix", ".spec.uri", "string"),
        _column("Tables", ".status.tables"),
        _column("Poor", ".status.health.bands.poor", description="tables scoring below 50"),
        *_ready_columns(),
        _column("Age", ".metadata.creationTimestamp", "date"),
    ]
    return _crd("DeltaLake", LAKES, ["dl", "dlake"], _lake_spec(), _lake_status(), columns)


def all_crds() -> dict[str, dict[str, Any]]:
    """File name under crds/ -> CRD."""
    return {
        "deltatable.yaml": delta_table(),
        "deltamaintenancepolicy.yaml": maintenance_policy(),
        "deltalake.yaml": delta_lake(),
    }
