"""What `deltakeeper operator` configures (kopf's memo carries it to the handlers), and the
environment's defaults for `kopf run -m deltakeeper.k8s`."""

from __future__ import annotations

import json
import os
import random
import time
from dataclasses import dataclass, field
from typing import Any

from deltakeeper.delta.errors import InvalidInputError
from deltakeeper.delta.storage_options import normalize_options
from deltakeeper.maintenance import memory
from deltakeeper.maintenance.policy import (
    COMPACTION_RETRY_MS,
    MAX_COMPACTION_JOBS,
    MAX_CONCURRENT,
    METRICS_BIND_ADDRESS,
    METRICS_PORT,
    POLL_INTERVAL_MS,
)
from deltakeeper.runtime import webhook
from deltakeeper.units import parse_interval_ms

PEERING = "deltakeeper"  # the name of kopf's peering objects
SPARK_TEMPLATE = "/etc/deltakeeper/spark-application.yaml"  # where the chart mounts it


def start_priority(now_s: float | None = None) -> int:
    """A peering priority that grows with the start time, so the newest replica acts: a
    restarted one (after a kill) need not wait the minute until its old entry expires, and a
    rollout's new pod takes over as it starts. Random low digits part two that start in the
    same millisecond (kopf pauses both of an equal pair). Below 2**53, exact in any JSON."""
    started_ms = int((time.time() if now_s is None else now_s) * 1000)
    return started_ms * 1000 + random.randrange(1000)


@dataclass
class Options:
    """Set by `deltakeeper operator`; from the environment under `kopf run -m deltakeeper.k8s`."""

    metrics_port: int = int(os.environ.get("DELTAKEEPER_METRICS_PORT", METRICS_PORT))
    metrics_bind_address: str = field(
        default_factory=lambda: (
            os.environ.get("DELTAKEEPER_METRICS_BIND_ADDRESS") or METRICS_BIND_ADDRESS
        )
    )
    max_concurrent: int = int(os.environ.get("DELTAKEEPER_MAX_CONCURRENT", MAX_CONCURRENT))
    # Bytes for maintenance steps, all tables together (maintenance/memory.py); None: none.
    memory_budget: int | None = field(default_factory=memory.budget_from_env)
    # SparkApplications running at once, all tables together.
    max_compaction_jobs: int = int(
        os.environ.get("DELTAKEEPER_MAX_COMPACTION_JOBS", MAX_COMPACTION_JOBS)
    )
    # Executor cores in compaction jobs at once, all jobs together (None: no limit).
    compaction_cores: int | None = field(
        default_factory=lambda: (
            int(os.environ["DELTAKEEPER_COMPACTION_CORES"])
            if os.environ.get("DELTAKEEPER_COMPACTION_CORES")
            else None
        )
    )
    # The operator-wide SparkApplication template (a YAML SparkApplication; the chart mounts
    # one here). Absent at the default path: spark_application.py's defaults alone.
    spark_application: str = field(
        default_factory=lambda: os.environ.get("DELTAKEEPER_SPARK_APPLICATION", SPARK_TEMPLATE)
    )
    # The wait before retrying a failed compaction job; doubled per failure, up to 6 hours.
    compaction_retry_ms: int = field(
        default_factory=lambda: _interval_ms("DELTAKEEPER_COMPACTION_RETRY", COMPACTION_RETRY_MS)
    )
    # For tables whose spec and policy set no pollInterval.
    default_poll_interval_ms: int = field(
        default_factory=lambda: _interval_ms("DELTAKEEPER_DEFAULT_POLL_INTERVAL", POLL_INTERVAL_MS)
    )
    # kopf pauses every replica that sees a peer of higher or equal priority: see `start_priority`.
    priority: int = field(default_factory=start_priority)
    # Watch DeltaLakes and make DeltaTables for the tables they find (needs the chart's
    # discovery.enabled rights).
    discovery: bool = field(default_factory=lambda: discovery_enabled())
    # The operation history (runtime/history.py): its table's URI and storage options (JSON).
    history_uri: str = field(default_factory=lambda: os.environ.get("DELTAKEEPER_HISTORY_URI", ""))
    history_options: dict[str, Any] = field(default_factory=lambda: _history_options())
    # The webhook event source's listener (runtime/webhook.py); None: none. `deltakeeper
    # operator` sets it from its flags, else the same environment variables.
    events: webhook.Config | None = field(default_factory=lambda: webhook.config_from(None, None))
    # Empty: cluster-wide.
    namespaces: list[str] = field(
        default_factory=lambda: [
            n for n in os.environ.get("DELTAKEEPER_NAMESPACE", "").split(",") if n
        ]
    )


def _history_options() -> dict[str, Any]:
    """$DELTAKEEPER_HISTORY_OPTIONS: a JSON object of storage options (the chart's Secret)."""
    text = os.environ.get("DELTAKEEPER_HISTORY_OPTIONS", "").strip()
    if not text:
        return {}
    try:
        options = json.loads(text)
    except ValueError:
        options = None
    if not isinstance(options, dict):
        # never echoed: it holds credentials
        raise InvalidInputError(
            "$DELTAKEEPER_HISTORY_OPTIONS is not a JSON object of storage options"
        )
    return normalize_options(options)


def discovery_enabled() -> bool:
    return os.environ.get("DELTAKEEPER_DISCOVERY", "").lower() in ("1", "true", "yes")


def _interval_ms(variable: str, default: int) -> int:
    text = os.environ.get(variable)
    try:
        return parse_interval_ms(text) if text else default
    except ValueError as e:
        raise InvalidInputError(f"{variable}: {e}") from None
