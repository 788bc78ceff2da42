"""`deltakeeper run`: standalone mode's entry point, as k8s/handlers.py is the operator's.
Serves the metrics, runs the folder's tables (tables.py) until SIGINT or SIGTERM, or polls each
once with `once`."""

from __future__ import annotations

import asyncio
import logging
import signal
from pathlib import Path

from deltakeeper.delta.errors import InvalidInputError
from deltakeeper.maintenance.operations.outcome import Compactor
from deltakeeper.maintenance.policy import POLL_INTERVAL_MS
from deltakeeper.runtime import credentials, metrics, webhook
from deltakeeper.runtime.history import History
from deltakeeper.standalone.status_file import status_file_for
from deltakeeper.standalone.tables import Standalone

log = logging.getLogger("deltakeeper.standalone")


def run(
    folder: str,
    metrics_port: int,
    host: str,
    status_path: str | None,
    max_concurrent: int,
    once: bool,
    summary_s: float,
    compactor: Compactor | None = None,
    default_poll_ms: int | None = None,
    history: History | None = None,
    memory_budget: int | None = None,
    events: webhook.Config | None = None,
) -> int:
    credentials.install_log_scrubbing()
    path = Path(folder)
    if not path.is_dir():
        raise InvalidInputError(f"--manifests {folder}: no such folder; put DeltaTable YAML there")
    registry = metrics.Metrics()
    daemon = Standalone(
        path,
        Path(status_path) if status_path else status_file_for(path),
        registry,
        max_concurrent,
        default_poll_ms=default_poll_ms or POLL_INTERVAL_MS,
        compactor=compactor,
        history=history,
        memory_budget=memory_budget,
    )
    server = None if once else metrics.serve(registry, metrics_port, host, daemon.fleet.healthy)
    if server is not None:
        log.info("metrics: %s", metrics.url(server))

    async def main() -> int:
        stop = asyncio.Event()
        loop = asyncio.get_running_loop()
        for sig in (signal.SIGINT, signal.SIGTERM):
            loop.add_signal_handler(sig, stop.set)
        listener = None
        if events is not None and not once:  # one poll each: no events to wait for
            listener = webhook.Listener(daemon.fleet.events, events)
            daemon.fleet.events.ready = False  # 503 until run() has indexed the tables
            await listener.start()
        try:
            return await daemon.run(stop, once=once, summary_s=summary_s)
        finally:
            if listener is not None:
                await listener.stop()
            await daemon.queues.close()

    try:
        return asyncio.run(main())
    finally:
        if server is not None:
            server.shutdown()
