"""What `deltakeeper operator` configures (kopf's memo carries it to the handlers), and the
environment's defaults for `kopf run -m deltakeeper.k8s`."""

from __future__ import annotations

import os
import random
from dataclasses import dataclass, field

from deltakeeper.runtime import metrics

PEERING = "deltakeeper"  # the name of kopf's peering objects


@dataclass
class Options:
    """Set by `deltakeeper operator`; from the environment under `kopf run -m deltakeeper.k8s`."""

    metrics_port: int = int(os.environ.get("DELTAKEEPER_METRICS_PORT", metrics.DEFAULT_PORT))
    metrics_bind_address: str = field(
        default_factory=lambda: (
            os.environ.get("DELTAKEEPER_METRICS_BIND_ADDRESS") or metrics.DEFAULT_BIND_ADDRESS
        )
    )
    max_concurrent: int = int(os.environ.get("DELTAKEEPER_MAX_CONCURRENT", "2"))
    # kopf pauses every replica that sees a peer of higher or equal priority, so each replica
    # draws its own: the highest acts, the others wait until it is gone.
    priority: int = field(default_factory=lambda: random.randint(1, 2**30))
    # Empty: cluster-wide.
    namespaces: list[str] = field(
        default_factory=lambda: [
            n for n in os.environ.get("DELTAKEEPER_NAMESPACE", "").split(",") if n
        ]
    )
