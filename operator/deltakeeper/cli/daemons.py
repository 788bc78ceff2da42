"""Commands that keep running: `run` (standalone mode), `status` (what `run` wrote) and
`operator` (the Kubernetes operator). Each imports its front-end when it runs: `status` needs
no Kubernetes client, `operator` no manifest folder."""

from __future__ import annotations

import argparse
import json
import logging
import sys
from typing import Any

from deltakeeper.cli import flags, output
from deltakeeper.delta.errors import InvalidInputError
from deltakeeper.maintenance import policy
from deltakeeper.maintenance.operations.outcome import Compactor
from deltakeeper.units import parse_interval_ms


def cmd_run(args: argparse.Namespace) -> int:
    from deltakeeper.compaction import launcher
    from deltakeeper.standalone import daemon

    _configure_logging()
    jobs = launcher.Limited(
        flags.spark_launcher(args), args.max_compaction_jobs, args.compaction_cores
    )
    retry = _interval("--compaction-retry", args.compaction_retry)
    if retry is None:
        retry = policy.COMPACTION_RETRY_MS
    return daemon.run(
        args.manifests,
        args.metrics_port,
        args.metrics_bind_address or policy.METRICS_BIND_ADDRESS,
        args.status_file,
        args.max_concurrent,
        args.once,
        args.summary_every,
        Compactor(jobs, wait=args.once, retry_ms=retry),
        _interval("--default-poll-interval", args.default_poll_interval),
        history=_history(args),
        memory_budget=_memory_budget(args.memory_budget),
        events=_events(args),
    )


def _events(args: argparse.Namespace) -> Any:
    """The webhook listener's settings (flags, else environment); None: no listener. Bad
    ones exit now, before any table is polled."""
    from deltakeeper.runtime import webhook

    return webhook.config_from(
        args.events_listen, args.events_token_file, args.events_tls_cert, args.events_tls_key
    )


def cmd_status(args: argparse.Namespace) -> int:
    from deltakeeper.standalone import report
    from deltakeeper.standalone.status_file import status_file_for

    path = args.status_file or status_file_for(args.manifests)
    try:
        with open(path, "rb") as f:  # UTF-8 whatever the locale says
            body = json.load(f)
    except FileNotFoundError:
        raise InvalidInputError(
            f"no status at {path}; start `deltakeeper run --manifests DIR` first"
        ) from None
    except ValueError as e:
        raise InvalidInputError(f"{path} is not a status file: {e}") from None
    tables = {
        name: {k: v for k, v in s.items() if not k.startswith("_")}
        for name, s in (body.get("tables") or {}).items()
    }
    rejected = [str(r) for r in body.get("rejected") or []]
    lakes = body.get("lakes") or {}
    if args.json:
        shown: dict[str, Any] = {**tables, output.LAKES_KEY: lakes} if lakes else tables
        output.print_json(shown, indent=2, sort_keys=True)
        report.print_rejected(rejected, sys.stderr)  # keeps stdout the name -> status map
    else:
        report.print_summary(tables, sys.stdout, rejected, lakes)
    return 0


def cmd_operator(args: argparse.Namespace) -> int:
    import kopf

    from deltakeeper.k8s import handlers  # importing registers the kopf handlers
    from deltakeeper.k8s.options import PEERING, Options
    from deltakeeper.k8s.spark_launcher import default_template

    options = Options(metrics_port=args.metrics_port, max_concurrent=args.max_concurrent)
    options.events = _events(args)
    if args.memory_budget is not None:
        options.memory_budget = _memory_budget(args.memory_budget)
    if args.discovery:
        options.discovery = True
    if options.discovery:
        from deltakeeper.k8s import lake_handlers  # noqa: F401 (registers the DeltaLake handlers)
    if args.metrics_bind_address is not None:
        options.metrics_bind_address = args.metrics_bind_address
    if args.namespace:
        options.namespaces = list(args.namespace)
    poll = _interval("--default-poll-interval", args.default_poll_interval)
    if poll is not None:
        options.default_poll_interval_ms = poll
    if args.max_compaction_jobs is not None:
        options.max_compaction_jobs = args.max_compaction_jobs
    if args.compaction_cores is not None:
        options.compaction_cores = args.compaction_cores
    retry = _interval("--compaction-retry", args.compaction_retry)
    if retry is not None:
        options.compaction_retry_ms = retry
    if args.history_uri or args.history_option:
        history = _history(args)
        options.history_uri, options.history_options = history.uri, history.storage_options
    elif options.history_uri:  # $DELTAKEEPER_HISTORY_URI: checked as the flag is
        _checked_history(options.history_uri, options.history_options)
    if args.spark_application is not None:
        default_template(args.spark_application, required=True)  # bad input: exit 2 now
        options.spark_application = args.spark_application
    log_format = kopf.LogFormat.JSON if args.log_format == "json" else kopf.LogFormat.FULL
    kopf.configure(verbose=args.verbose, log_format=log_format)
    kopf.run(
        clusterwide=not options.namespaces,
        namespaces=options.namespaces,
        peering_name=PEERING,
        priority=options.priority,
        memo=handlers.SharedMemo(options=options),
    )
    return 0


def _memory_budget(text: str | None) -> int | None:
    """--memory-budget: a size, `none`, or (absent) the container's limit less a margin."""
    from deltakeeper.maintenance import memory

    return memory.budget(text, "--memory-budget")


def _history(args: argparse.Namespace) -> Any:
    """The operation history `--history-uri` names (None without one)."""
    if not args.history_uri:
        if args.history_option:
            raise InvalidInputError("--history-option needs --history-uri")
        return None
    options = flags.storage_options(args.history_option, "--history-option")
    return _checked_history(args.history_uri, options)


def _checked_history(uri: str, options: dict[str, Any]) -> Any:
    """The history at `uri`, opened (or created) now: a setting that can never work is bad
    input at start, not rows dropped later (runtime/history.py, History.check)."""
    from deltakeeper.runtime.history import History

    history = History(uri, options)
    history.check()
    return history


def _interval(flag: str, text: str | None) -> int | None:
    return flags.parsed(flag, text, parse_interval_ms)


def _configure_logging() -> None:
    logging.basicConfig(
        level=logging.INFO,
        format="%(asctime)s %(levelname)s %(name)s: %(message)s",
        stream=sys.stderr,
    )
