"""`deltakeeper ...`: the command line. Exit codes: 0 ok, 1 unexpected, 2 bad input or not a
Delta table, 3 unsupported protocol, 4 storage unreachable."""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from collections.abc import Sequence
from dataclasses import replace
from typing import Any, NoReturn

from deltakeeper import __version__
from deltakeeper.compaction import launcher as launcher_mod
from deltakeeper.compaction import submit
from deltakeeper.delta import cleanup, errors, vacuum
from deltakeeper.delta.checkpoint import checkpoint_source
from deltakeeper.delta.discover import DEFAULT_MAX_DEPTH, Scan, discover
from deltakeeper.delta.errors import DeltaError, InvalidInputError, UnsupportedProtocolError
from deltakeeper.delta.schema import LEAN_ADD
from deltakeeper.delta.snapshot import SnapshotHeader
from deltakeeper.delta.storage import LocalStorage, normalize_options, open_storage
from deltakeeper.delta.summary import summarize
from deltakeeper.delta.table import Table, open_table
from deltakeeper.maintenance import compaction_plan, executor, planner, policy
from deltakeeper.maintenance.operations import Operation
from deltakeeper.resources.lake import table_uri
from deltakeeper.runtime import credentials
from deltakeeper.units import (
    format_bytes,
    format_ms,
    parse_duration_ms,
    parse_interval_ms,
    parse_size,
    parse_timestamp_ms,
)

# `status --json`: the key of the DeltaLakes' statuses, beside the tables' NAMESPACE/NAME keys
LAKES_KEY = "lakes"


def _storage_options(pairs: list[str]) -> dict[str, Any]:
    """KEY=VALUE pairs; true/false become booleans, JSON objects those fsspec wants as
    mappings (client_kwargs=...)."""
    options: dict[str, Any] = {}
    for n, pair in enumerate(pairs, 1):
        key, sep, value = pair.partition("=")
        if not sep or not key:
            # Never echoed: a value typed without its key is still a secret.
            raise InvalidInputError(
                f"--storage-option number {n} is not KEY=VALUE (its text is not shown, it may "
                "be a secret); write it as e.g. --storage-option secret=..."
            )
        lowered = value.lower()
        options[key] = lowered == "true" if lowered in ("true", "false") else value
    return normalize_options(options)


def _integer(text: str, what: str) -> int:
    try:
        return int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not {what}") from None


def _whole(text: str, minimum: int) -> int:
    value = _integer(text, "a whole number")
    if value < minimum:
        raise argparse.ArgumentTypeError(f"must be {minimum} or more, got {value}")
    return value


def _positive(text: str) -> int:
    return _whole(text, 1)


def _non_negative(text: str) -> int:
    return _whole(text, 0)


def _port(text: str) -> int:
    value = _integer(text, "a port number")
    if not 0 <= value <= 65535:
        raise argparse.ArgumentTypeError(f"{value} is not a port; use 1-65535, or 0 for any")
    return value


def _common(p: argparse.ArgumentParser, what: str = "table location") -> None:
    p.add_argument("uri", help=f"{what}: a path, file://, s3://, gs://, abfss:// or az://")
    p.add_argument(
        "--storage-option",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="fsspec option for the store (repeatable), e.g. endpoint_url=http://127.0.0.1:9000",
    )


def _at_version(p: argparse.ArgumentParser, timestamps: bool) -> None:
    g = p.add_mutually_exclusive_group()
    g.add_argument("--version", type=int, metavar="N", help="read the table as of version N")
    if timestamps:
        g.add_argument(
            "--timestamp",
            metavar="T",
            help="read the table as of time T (epoch ms or ISO-8601, e.g. 2024-05-01T12:00:00Z)",
        )


def _table_command(
    sub: Any, name: str, func: Any, help: str, description: str | None = None
) -> argparse.ArgumentParser:
    """A command on one table: the URI and storage options come first in every one."""
    p: argparse.ArgumentParser = sub.add_parser(name, help=help, description=description)
    _common(p)
    p.set_defaults(func=func)
    return p


def _maintenance_flags(p: argparse.ArgumentParser, dry_run: str) -> None:
    p.add_argument("--now", metavar="T", help="the current time (epoch ms or ISO-8601), for tests")
    p.add_argument("--dry-run", action="store_true", help=dry_run)
    p.add_argument("--json", action="store_true", help="print the report as one JSON object")


def _duration_flags(p: argparse.ArgumentParser, **helps: str) -> None:
    """Duration options (30d, 12h, ...), named by their dest: log_retention=help, ..."""
    for dest, text in helps.items():
        p.add_argument("--" + dest.replace("_", "-"), metavar="D", help=text)


def _checkpoint_flags(p: argparse.ArgumentParser, part_size_flag: str) -> None:
    p.add_argument(
        part_size_flag,
        dest="part_size",
        type=int,
        metavar="N",
        help="actions per checkpoint part (multi-part above N; sidecars of N on V2 tables)",
    )
    p.add_argument(
        "--write-checksum", action="store_true", help="also write the version checksum N.crc"
    )


def build_parser() -> argparse.ArgumentParser:
    parser = _Parser(
        prog="deltakeeper",
        description="Keep Delta Lake tables healthy: inspect, checkpoint, clean up, vacuum.",
        epilog="Exit codes: 0 ok, 1 unexpected failure, 2 bad input or not a Delta table, "
        "3 unsupported protocol, 4 storage unreachable.",
    )
    parser.add_argument("--version", action="version", version=f"deltakeeper {__version__}")
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    _read_commands(sub)
    _maintenance_commands(sub)
    _maintain_command(sub)
    _compact_command(sub)
    _discover_command(sub)
    _daemon_commands(sub)
    return parser


def _read_commands(sub: Any) -> None:
    p = _table_command(
        sub, "inspect", cmd_inspect, "show a table's version, protocol, files and log health"
    )
    _at_version(p, timestamps=True)
    p.add_argument("--json", action="store_true", help="print one JSON object (stable keys)")
    p.add_argument(
        "--small-file-size",
        default=str(policy.SMALL_FILE_BYTES),
        metavar="SIZE",
        help="files below this count as small (bytes or 16Mi, 1Gi; default 32Mi)",
    )
    p = _table_command(sub, "files", cmd_files, "list the live files of a table")
    _at_version(p, timestamps=False)
    p.add_argument("--json", action="store_true", help="one JSON object a line")


def _maintenance_commands(sub: Any) -> None:
    p = _table_command(
        sub,
        "checkpoint",
        cmd_checkpoint,
        "write a checkpoint and move _last_checkpoint (expired tombstones dropped)",
        "Write the checkpoint of the latest version (or --version): a classic single file, "
        "multi-part with --part-size, or V2 with sidecars on v2Checkpoint tables.",
    )
    _at_version(p, timestamps=False)
    _duration_flags(
        p,
        deleted_file_retention="keep tombstones younger than D (30d, 12h, ...; default 7d, "
        "never below the table's delta.deletedFileRetentionDuration)",
    )
    _checkpoint_flags(p, "--part-size")
    p.add_argument(
        "--classic",
        action="store_true",
        help="on v2Checkpoint tables: a classic-named V2 checkpoint with every action inline, "
        "for readers that do not know sidecars",
    )
    _maintenance_flags(p, dry_run="compute the checkpoint, write nothing")

    p = _table_command(
        sub,
        "cleanup",
        cmd_cleanup,
        "delete log files older than the log retention (metadata cleanup)",
    )
    _duration_flags(
        p,
        log_retention="keep the log for D (30d, 12h, ...; default 30d, never below the "
        "table's delta.logRetentionDuration)",
    )
    _maintenance_flags(p, dry_run="list what would be deleted, delete nothing")

    p = _table_command(
        sub,
        "vacuum",
        cmd_vacuum,
        "delete data files no version inside the retention references (VACUUM)",
    )
    _duration_flags(
        p,
        deleted_file_retention="keep unreferenced files and tombstoned files younger than D "
        "(default 7d, never below the table's delta.deletedFileRetentionDuration; below 7d "
        "needs --allow-short-retention)",
    )
    p.add_argument(
        "--allow-short-retention",
        action="store_true",
        help="allow a retention below 7 days (jobs reading older versions may fail)",
    )
    _maintenance_flags(p, dry_run="list what would be deleted, with sizes; delete nothing")


def _maintain_command(sub: Any) -> None:
    p = _table_command(
        sub,
        "maintain",
        cmd_maintain,
        "run what the policy says is due: checkpoint, then log cleanup, then vacuum",
        "Plan (what is due and why), then run the due steps in order: checkpoint, "
        "compaction (with --compact), log cleanup, vacuum. A failed step skips the ones after "
        "it. Exit code: the worst of the steps (1 for a failed compaction job, 2 for a refused "
        "vacuum retention, 3 for an unsupported protocol).",
    )
    _duration_flags(
        p,
        log_retention="log retention (default 30d)",
        deleted_file_retention="tombstone and vacuum retention (default 7d)",
    )
    p.add_argument(
        "--checkpoint-interval",
        type=_positive,
        metavar="N",
        help="checkpoint once N commits have passed since the last one (default: the table's "
        "delta.checkpointInterval, else 10)",
    )
    p.add_argument("--allow-short-retention", action="store_true", help="allow vacuum below 7 days")
    p.add_argument("--no-vacuum", action="store_true", help="never vacuum data files")
    p.add_argument(
        "--compact",
        action="store_true",
        help="also compact small files (after the checkpoint), running the job with "
        "spark-submit to its end; the planner's defaults as for `compact`",
    )
    _spark_flags(p)
    _checkpoint_flags(p, "--checkpoint-part-size")
    p.add_argument(
        "--only",
        metavar="OPS",
        help="comma-separated subset of " + ",".join(planner.OPERATIONS),
    )
    _maintenance_flags(p, dry_run="print the plan and what each step would do; change nothing")


_DISCOVER = (
    "List URI folder by folder (delimited listings, never every data file) and print each "
    "folder holding a _delta_log/ with a commit or checkpoint, relative to URI ('.' when URI "
    "is itself a table). Tables inside tables are not looked for, nor folders starting with "
    "'_' or '.'. Patterns are globs on the relative path where '*' also matches '/', so "
    "'sales/*' takes every table below sales/."
)
_PATTERNS = {
    "--include": "only tables whose path matches GLOB (repeatable: any of them)",
    "--exclude": "leave out tables whose path matches GLOB (repeatable)",
}


def _discover_command(sub: Any) -> None:
    what = "find the Delta tables under a prefix (what a DeltaLake would manage)"
    p = sub.add_parser("discover", help=what, description=_DISCOVER)
    _common(p, "the prefix to look under")
    p.add_argument(
        "--max-depth",
        type=_non_negative,
        default=DEFAULT_MAX_DEPTH,
        metavar="N",
        help=f"look for tables at most N folders below URI (default {DEFAULT_MAX_DEPTH})",
    )
    for flag, text in _PATTERNS.items():
        p.add_argument(flag, action="append", default=[], metavar="GLOB", help=text)
    p.add_argument(
        "--json", action="store_true", help="print one JSON object: tables, requests, seconds"
    )
    p.set_defaults(func=cmd_discover)


def cmd_discover(args: argparse.Namespace) -> int:
    try:
        storage = open_storage(args.uri, _storage_options(args.storage_option))
    except errors.NotADeltaTableError as e:  # a local file: discover wants a folder, not a table
        raise InvalidInputError(f"{args.uri} is a file; give the folder the tables are in") from e
    if isinstance(storage, LocalStorage) and not os.path.isdir(storage.root):
        raise InvalidInputError(f"{args.uri}: no such folder; give the folder the tables are in")
    scan = discover(storage, include=args.include, exclude=args.exclude, max_depth=args.max_depth)
    if args.json:
        print(json.dumps(_discover_json(args.uri, scan)))
        return 0
    for path in scan.tables:
        print(path)
    print(
        f"{len(scan.tables)} tables under {args.uri} ({scan.excluded} left out by patterns, "
        f"{len(scan.empty_logs)} _delta_log folders without commits); {scan.requests} "
        f"requests in {scan.seconds:.2f}s",
        file=sys.stderr,
    )
    return 0


def _discover_json(uri: str, scan: Scan) -> dict[str, Any]:
    return {
        "uri": uri,
        "tables": [{"path": p, "uri": table_uri(uri, p)} for p in scan.tables],
        "requests": scan.requests,
        "seconds": round(scan.seconds, 3),
        "foldersListed": scan.folders_listed,
        "logsChecked": scan.logs_checked,
        "emptyLogs": list(scan.empty_logs),
        "excluded": scan.excluded,
    }


def _compact_command(sub: Any) -> None:
    p = _table_command(
        sub,
        "compact",
        cmd_compact,
        "plan small-file compaction and run it as a Spark job (spark-submit)",
        "Plan which partitions need compaction and why (small files, their age, "
        "deleted rows), then run Delta's OPTIMIZE on exactly those partitions with "
        "spark-submit (and REORG ... APPLY (PURGE) where only deleted rows are the problem). "
        "A checkpoint due by the table's checkpoint interval is written first, as `maintain` "
        "would (--no-checkpoint skips it). Needs PySpark, delta-spark "
        "(pip install 'deltakeeper[spark]') and Java 17.",
    )
    p.add_argument(
        "--target-file-size",
        metavar="S",
        help="size of compacted files (default: the table's delta.targetFileSize, else 128Mi)",
    )
    p.add_argument(
        "--min-file-size", metavar="S", help="files below S are small (default: half the target)"
    )
    p.add_argument(
        "--min-files",
        type=_positive,
        default=policy.COMPACTION_MIN_FILES,
        metavar="N",
        help=f"compact a partition at N small files (default {policy.COMPACTION_MIN_FILES})",
    )
    _duration_flags(
        p, max_age="or once it has two small files and the oldest is D old (default 1h)"
    )
    p.add_argument(
        "--where",
        action="append",
        default=[],
        metavar="COL=VALUE",
        help="only partitions whose partition column COL has VALUE (repeatable; all must hold)",
    )
    p.add_argument(
        "--no-checkpoint",
        action="store_true",
        help="do not write the checkpoint that is due (by the table's checkpoint interval, as "
        "`maintain` decides) before the job; with one, Spark reads the table from it instead "
        "of replaying every commit. If writing it fails, the job runs all the same: the "
        "failure is reported (stderr, --json 'checkpoint') and the exit code is the job's",
    )
    _spark_flags(p)
    _maintenance_flags(p, dry_run="print the plan (and the checkpoint it would write); run no job")


def _spark_flags(p: argparse.ArgumentParser) -> None:
    p.add_argument("--master", default="local[*]", help="Spark master (default local[*])")
    p.add_argument(
        "--jars-dir",
        metavar="DIR",
        help="a folder of Delta Lake jars (default: --packages from Maven Central)",
    )
    p.add_argument(
        "--spark-conf",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="a Spark setting for the job (repeatable)",
    )


def _submit_config(args: argparse.Namespace) -> submit.SubmitConfig:
    conf = dict(pair.partition("=")[::2] for pair in args.spark_conf)
    return submit.SubmitConfig(args.master, jars_dir=args.jars_dir, conf=conf)


def _daemon_commands(sub: Any) -> None:
    p = sub.add_parser(
        "run",
        help="standalone mode: watch and maintain the tables of DeltaTable manifests in a folder",
        description="Read DeltaTable, DeltaMaintenancePolicy and Secret manifests from DIR "
        "(re-read when they change), keep every table healthy as the operator would, serve "
        "Prometheus metrics, and write each table's status to DIR/.deltakeeper/status.json "
        "(see `deltakeeper status`). Ctrl-C stops cleanly.",
    )
    p.add_argument("--manifests", required=True, metavar="DIR", help="folder of YAML manifests")
    _daemon_flags(p, policy.METRICS_BIND_ADDRESS, f"{policy.POLL_INTERVAL_MS // 1000}s")
    p.add_argument("--status-file", metavar="FILE", help="where to write the status JSON")
    p.add_argument(
        "--once", action="store_true", help="poll (and maintain) every table once, then exit"
    )
    p.add_argument(
        "--summary-every",
        type=float,
        default=0,
        metavar="S",
        help="print a status table every S seconds (0: never)",
    )
    _compaction_flags(p)
    p.set_defaults(func=cmd_run)

    p = sub.add_parser("status", help="print the status `deltakeeper run` wrote")
    g = p.add_mutually_exclusive_group(required=True)
    g.add_argument("--manifests", metavar="DIR", help="the folder `deltakeeper run` watches")
    g.add_argument("--status-file", metavar="FILE", help="the status JSON file")
    p.add_argument(
        "--json",
        action="store_true",
        help="print the statuses as JSON: each table's under its NAMESPACE/NAME and, when the "
        f"folder has DeltaLakes, theirs under the key '{LAKES_KEY}' (no table's key: those hold "
        "a '/'), by NAMESPACE/NAME",
    )
    p.set_defaults(func=cmd_status)

    p = sub.add_parser(
        "operator",
        help="run the Kubernetes operator (DeltaTables and policies; DeltaLakes with --discovery)",
        description="Reconcile DeltaTables on the cluster of $KUBECONFIG (or the pod's service "
        "account). Replicas elect one active instance through kopf peering.",
    )
    g = p.add_mutually_exclusive_group()
    g.add_argument("--namespace", action="append", metavar="NS", help="watch NS only (repeatable)")
    g.add_argument("--all-namespaces", action="store_true", help="watch every namespace (default)")
    _daemon_flags(
        p,
        f"$DELTAKEEPER_METRICS_BIND_ADDRESS, else {policy.METRICS_BIND_ADDRESS}",
        f"$DELTAKEEPER_DEFAULT_POLL_INTERVAL, else {policy.POLL_INTERVAL_MS // 1000}s",
    )
    p.add_argument(
        "--discovery",
        action="store_true",
        help="also watch DeltaLakes: scan their prefixes and make a DeltaTable for each table "
        "found (needs the rights the Helm chart's discovery.enabled grants; "
        "$DELTAKEEPER_DISCOVERY=true does the same)",
    )
    p.add_argument("--verbose", action="store_true", help="log kopf's own debug messages")
    p.add_argument(
        "--log-format",
        choices=("text", "json"),
        default="text",
        help="text (default) or json: one JSON object a line, for a cluster's log collector",
    )
    p.add_argument(
        "--max-compaction-jobs",
        type=_positive,
        default=None,
        metavar="N",
        help="at most N compaction SparkApplications at once, all tables together "
        "($DELTAKEEPER_MAX_COMPACTION_JOBS, else 1)",
    )
    _retry_flag(p, "$DELTAKEEPER_COMPACTION_RETRY, else ")
    p.add_argument(
        "--spark-application",
        default=None,
        metavar="FILE",
        help="the default SparkApplication (YAML) of compaction jobs; a table's "
        "spec.compaction.sparkApplication is merged over its spec "
        "($DELTAKEEPER_SPARK_APPLICATION, else /etc/deltakeeper/spark-application.yaml if it "
        "exists)",
    )
    p.set_defaults(func=cmd_operator)


def _compaction_flags(p: argparse.ArgumentParser) -> None:
    """How standalone mode runs the compaction jobs of tables with compaction.enabled."""
    p.add_argument(
        "--max-compaction-jobs",
        type=_positive,
        default=1,
        metavar="N",
        help="at most N compaction jobs (spark-submit) at once, all tables together (default 1)",
    )
    _retry_flag(p, "default ")
    _spark_flags(p)


def _retry_flag(p: argparse.ArgumentParser, default: str) -> None:
    p.add_argument(
        "--compaction-retry",
        metavar="DURATION",
        help="after a failed compaction job, wait DURATION before the next, doubled per "
        f"failure up to {policy.COMPACTION_RETRY_CAP_MS // policy.HOUR_MS}h "
        f"({default}{policy.COMPACTION_RETRY_MS // 60_000}m)",
    )


def _compactor(args: argparse.Namespace) -> executor.Compactor:
    cfg = _submit_config(args)
    launcher = launcher_mod.Limited(submit.SubmitLauncher(cfg), args.max_compaction_jobs)
    retry = _ms("--compaction-retry", args.compaction_retry, parse_interval_ms)
    if retry is None:
        retry = policy.COMPACTION_RETRY_MS
    return executor.Compactor(launcher, wait=args.once, retry_ms=retry)


def _daemon_flags(p: argparse.ArgumentParser, bind_default: str, poll_default: str) -> None:
    p.add_argument(
        "--metrics-port",
        type=_port,
        default=policy.METRICS_PORT,
        metavar="PORT",
        help=f"serve /metrics and /healthz on PORT (default {policy.METRICS_PORT}; "
        "0: any free port)",
    )
    p.add_argument(
        "--metrics-bind-address",
        default=None,
        metavar="ADDR",
        help=f"the address metrics listen on (default {bind_default}; "
        f"{policy.METRICS_BIND_ADDRESS} is this machine only, 0.0.0.0 lets Prometheus in from "
        "other hosts or pods)",
    )
    p.add_argument(
        "--max-concurrent",
        type=_positive,
        default=2,
        metavar="N",
        help="at most N tables under maintenance at once (default 2)",
    )
    p.add_argument(
        "--default-poll-interval",
        metavar="DURATION",
        help="poll a table this often when neither its spec nor its policy sets pollInterval "
        f"(e.g. 2m; default {poll_default})",
    )


def _configure_logging() -> None:
    import logging

    logging.basicConfig(
        level=logging.INFO,
        format="%(asctime)s %(levelname)s %(name)s: %(message)s",
        stream=sys.stderr,
    )


def cmd_run(args: argparse.Namespace) -> int:
    from deltakeeper.standalone import daemon

    _configure_logging()
    return daemon.run(
        args.manifests,
        args.metrics_port,
        args.metrics_bind_address or policy.METRICS_BIND_ADDRESS,
        args.status_file,
        args.max_concurrent,
        args.once,
        args.summary_every,
        _compactor(args),
        _ms("--default-poll-interval", args.default_poll_interval, parse_interval_ms),
    )


def cmd_status(args: argparse.Namespace) -> int:
    from deltakeeper.standalone import report
    from deltakeeper.standalone.status_file import status_file_for

    path = args.status_file or status_file_for(args.manifests)
    try:
        with open(path) as f:
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
        shown: dict[str, Any] = {**tables, LAKES_KEY: lakes} if lakes else tables
        print(json.dumps(shown, indent=2, sort_keys=True))
        report.print_rejected(rejected, sys.stderr)  # keeps stdout the name -> status map
    else:
        report.print_summary(tables, sys.stdout, rejected, lakes)
    return 0


def cmd_operator(args: argparse.Namespace) -> int:
    import kopf

    from deltakeeper.k8s import handlers  # noqa: F401 (registers the kopf handlers)
    from deltakeeper.k8s.options import PEERING, Options
    from deltakeeper.k8s.spark_launcher import default_template

    options = Options(metrics_port=args.metrics_port, max_concurrent=args.max_concurrent)
    if args.discovery:
        options.discovery = True
    if options.discovery:
        from deltakeeper.k8s import lake_handlers  # noqa: F401 (registers the DeltaLake handlers)
    if args.metrics_bind_address is not None:
        options.metrics_bind_address = args.metrics_bind_address
    if args.namespace:
        options.namespaces = list(args.namespace)
    poll = _ms("--default-poll-interval", args.default_poll_interval, parse_interval_ms)
    if poll is not None:
        options.default_poll_interval_ms = poll
    if args.max_compaction_jobs is not None:
        options.max_compaction_jobs = args.max_compaction_jobs
    retry = _ms("--compaction-retry", args.compaction_retry, parse_interval_ms)
    if retry is not None:
        options.compaction_retry_ms = retry
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
        memo=kopf.Memo(options=options),
    )
    return 0


def cmd_inspect(args: argparse.Namespace) -> int:
    try:
        small = parse_size(args.small_file_size)
        ts = parse_timestamp_ms(args.timestamp) if args.timestamp else None
    except ValueError as e:
        raise InvalidInputError(str(e)) from e
    table = open_table(args.uri, _storage_options(args.storage_option))
    snap = table.snapshot(version=args.version, timestamp_ms=ts)
    _warn_damage(snap)
    report = summarize(table, snap, small)
    if args.json:
        print(json.dumps(report, sort_keys=False))
    else:
        _print_inspect(report)
    return 0


def _print_inspect(r: dict[str, Any]) -> None:
    p = r["protocol"]
    features = sorted(set(p["readerFeatures"] or []) | set(p["writerFeatures"] or []))
    flagged = [f + (" (unsupported)" if f in r["unsupportedFeatures"] else "") for f in features]
    cp = r["lastCheckpointVersion"]
    rows = [
        ("table", r["uri"]),
        ("version", f"{r['version']}  committed {format_ms(r['timestamp'])}"),
        ("protocol", f"reader {p['minReaderVersion']}, writer {p['minWriterVersion']}"),
        ("features", ", ".join(flagged) or "-"),
        ("table id", r["tableId"]),
        ("partitioned by", ", ".join(r["partitionColumns"]) or "-"),
        ("live files", f"{r['numFiles']}  ({format_bytes(r['sizeBytes'])})"),
        ("small files", f"{r['smallFiles']}  (< {format_bytes(r['smallFileThreshold'])})"),
        ("tombstones", str(r["numTombstones"])),
        ("transactions", str(r["numTxns"])),
        (
            "last checkpoint",
            "none" if cp is None else f"{cp}  ({r['commitsSinceCheckpoint']} commits since)",
        ),
        ("_last_checkpoint", r["lastCheckpointFile"]),
        ("log", f"{r['logFiles']} files, {format_bytes(r['logBytes'])}"),
    ]
    if r["unpublishedCommits"]:
        rows.append(("unpublished", f"{r['unpublishedCommits']} staged commits (ignored)"))
    for key, value in sorted(r["configuration"].items()):
        rows.append((f"  {key}", value))
    if r["configuration"]:
        rows.insert(len(rows) - len(r["configuration"]), ("configuration", ""))
    width = max(len(k) for k, _ in rows)
    for key, value in rows:
        print(f"{key:<{width}}  {value}")
    if r["unsupportedFeatures"]:
        print(
            f"\nwarning: this build does not support {', '.join(r['unsupportedFeatures'])}; "
            "maintenance will refuse to write to this table",
            file=sys.stderr,
        )


def cmd_files(args: argparse.Namespace) -> int:
    table = open_table(args.uri, _storage_options(args.storage_option))
    snap = table.snapshot(version=args.version)
    _warn_damage(snap)
    out = sys.stdout
    for batch in snap.files.to_batches(max_chunksize=10_000):
        for row in batch.to_pylist():
            if args.json:
                dv = row.get("deletionVector")
                line = {
                    "path": row["path"],
                    "size": row["size"],
                    "partitionValues": _partition_values(row["partitionValues"]),
                    "deletionVector": {k: v for k, v in dv.items() if v is not None}
                    if dv
                    else None,
                }
                out.write(json.dumps(line) + "\n")
            else:
                out.write(f"{row['path']}\t{row['size']}\n")
    return 0


def _warn_damage(snap: SnapshotHeader) -> None:
    note = snap.damage_note()
    if note:
        print(f"deltakeeper: warning: {note}", file=sys.stderr)


def _partition_values(pairs: list[tuple[str, str | None]] | None) -> dict[str, str | None]:
    # The protocol writes a null partition value as "" as often as null; both mean null.
    return {k: None if v == "" else v for k, v in pairs or []}


def _ms(flag: str, text: str | None, parse: Any) -> int | None:
    try:
        return None if text is None else int(parse(text))
    except ValueError as e:
        raise InvalidInputError(f"{flag}: {e}") from e


def _now(args: argparse.Namespace) -> int:
    now = _ms("--now", args.now, parse_timestamp_ms)
    if now is None:
        return int(time.time() * 1000)
    if now == 0:  # once silently replaced by the clock; say so instead
        raise InvalidInputError("--now 0 is the epoch itself; give a time after 1970-01-01")
    return now


def _policy(uri: str, configuration: dict[str, str], **explicit: Any) -> policy.Policy:
    try:
        return policy.effective(configuration, **explicit)
    except policy.PolicyError as e:
        raise InvalidInputError(f"{uri}: {e}") from e


def cmd_checkpoint(args: argparse.Namespace) -> int:
    now = _now(args)
    retention = _ms("--deleted-file-retention", args.deleted_file_retention, parse_duration_ms)
    table = open_table(args.uri, _storage_options(args.storage_option))
    source = checkpoint_source(table, args.version)  # streams the newest checkpoint when it can
    snap = source.header  # no file actions when the source streams
    _warn_damage(snap)
    pol = _policy(
        args.uri,
        snap.metadata.configuration,
        deleted_file_retention_ms=retention,
        checkpoint_part_size=_part_size(args.part_size),
        write_checksum=args.write_checksum or None,
    )
    plan = planner.forced(
        table, snap, pol, now, Operation.CHECKPOINT, classic=args.classic, source=source
    )
    outcome = _run_one(table, plan, args.dry_run, None)
    result, checksum = outcome.written, outcome.checksum
    assert result is not None
    written = [*result.keys, *([checksum.key] if checksum and not checksum.existed else [])]
    report = {
        "operation": "checkpoint",
        "version": snap.version,
        "dryRun": args.dry_run,
        "checkpointVersion": result.version,
        "checkpointFile": result.key,
        "actions": result.rows,
        "addFiles": result.adds,
        "tombstones": result.tombstones,
        "expiredTombstones": result.expired_tombstones,
        "sizeBytes": result.size_bytes,
        "lastCheckpointMoved": result.last_checkpoint_moved,
        "layout": result.layout,
        "checkpointFiles": list(result.keys),
        "parts": result.parts,
        "sidecars": result.sidecars,
        "checksumFile": checksum.key if checksum else None,
        "checksumExisted": checksum.existed if checksum else None,
        "deletedFiles": 0,
        "deletedBytes": 0,
        "files": written if args.dry_run else [],
    }
    if args.json:
        print(json.dumps(report))
    else:
        verb = "would write" if args.dry_run else "wrote"
        print(
            f"{verb} {result.key}: {result.adds} files, {result.tombstones} tombstones "
            f"({result.expired_tombstones} expired), {format_bytes(result.size_bytes)}"
        )
        if len(result.keys) > 1:
            print(f"{result.layout}: {len(result.keys)} files")
        if not args.dry_run and not result.last_checkpoint_moved:
            print("_last_checkpoint already points at a newer checkpoint; left as it is")
        if checksum is not None:
            print(f"{checksum.key}: {'already there, left as it is' if checksum.existed else verb}")
    return 0


def _run_one(
    table: Table, plan: planner.Plan, dry_run: bool, progress: executor.Progress | None
) -> executor.Outcome:
    """Run a forced plan's one step; its failure is the command's."""
    outcome = executor.execute(table, plan, dry_run, progress).outcomes[0]
    if outcome.error is not None:
        raise outcome.error
    return outcome


def _part_size(value: int | None) -> int | None:
    if value is not None and value <= 0:
        raise InvalidInputError(f"the checkpoint part size must be above 0, got {value}")
    return value


def cmd_cleanup(args: argparse.Namespace) -> int:
    now = _now(args)
    retention = _ms("--log-retention", args.log_retention, parse_duration_ms)
    table = open_table(args.uri, _storage_options(args.storage_option))
    snap = table.snapshot()
    _warn_damage(snap)
    pol = _policy(args.uri, snap.metadata.configuration, log_retention_ms=retention)
    forced = planner.forced(table, snap, pol, now, Operation.CLEANUP)
    deleted = _run_one(table, forced, args.dry_run, None).deleted_files
    step = forced.steps[0]
    plan = step.detail if isinstance(step.detail, cleanup.CleanupPlan) else None
    reasons = plan.reasons() if plan else [f"log cleanup is {step.reason}"]
    report = {
        "operation": "cleanup",
        "version": snap.version,
        "dryRun": args.dry_run,
        "checkpointVersion": plan.cutoff_checkpoint if plan else None,
        "cutoffCommit": plan.cutoff_commit if plan else None,
        "cutoffTimestamp": plan.cutoff_ms if plan else None,
        "deletedFiles": deleted if not args.dry_run else 0,
        "deletedBytes": plan.bytes if plan and not args.dry_run else 0,
        "files": [f.key for f in plan.delete] if plan and args.dry_run else [],
        "reasons": reasons,
    }
    if args.json:
        print(json.dumps(report))
    else:
        print("\n".join(reasons))
        if plan is not None and plan.delete:
            if args.dry_run:
                print("dry run: nothing deleted; would delete:")
                print("\n".join(f"  {f.key}\t{f.size}" for f in plan.delete))
            else:
                print(f"deleted {deleted} files ({format_bytes(plan.bytes)})")
    return 0


def cmd_vacuum(args: argparse.Namespace) -> int:
    now = _now(args)
    retention = _ms("--deleted-file-retention", args.deleted_file_retention, parse_duration_ms)
    table = open_table(args.uri, _storage_options(args.storage_option))
    snap = vacuum.load_for_vacuum(table)
    _warn_damage(snap)
    pol = _policy(
        args.uri,
        snap.metadata.configuration,
        deleted_file_retention_ms=retention,
        allow_short_retention=args.allow_short_retention or None,
    )
    forced = planner.forced(table, snap, pol, now, Operation.VACUUM)
    outcome = _run_one(table, forced, args.dry_run, None if args.json else _progress)
    plan = forced.steps[0].detail
    assert isinstance(plan, vacuum.VacuumPlan)
    deleted, folders = outcome.deleted_files, outcome.deleted_folders
    report = {
        "operation": "vacuum",
        "version": plan.version,
        "dryRun": args.dry_run,
        "checkpointVersion": None,
        "deletedFiles": deleted,
        "deletedBytes": plan.bytes if not args.dry_run else 0,
        "files": [f.key for f in plan.delete] if args.dry_run else [],
        "filesWithSizes": [{"path": f.key, "size": f.size} for f in plan.delete]
        if args.dry_run
        else [],
        "folders": plan.folders,
        "deletedFolders": folders,
        "skippedNestedTables": plan.nested,
        "retentionMs": plan.retention_ms,
        "cutoffTimestamp": plan.cutoff_ms,
        "scannedFiles": plan.scanned,
        "referencedFiles": plan.referenced,
        "reasons": plan.reasons(),
    }
    if args.json:
        print(json.dumps(report))
        return 0
    print("\n".join(plan.reasons()))
    if plan.delete and args.dry_run:
        print("dry run: nothing deleted; would delete:")
        print("\n".join(f"  {f.key}\t{f.size}" for f in plan.delete))
    elif plan.delete:
        print(f"deleted {deleted} files ({format_bytes(plan.bytes)})")
    if plan.folders and args.dry_run:
        print("would remove empty folders:")
        print("\n".join(f"  {key}" for key in plan.folders))
    elif plan.folders:
        print(f"removed {folders} empty folders")
    return 0


def cmd_maintain(args: argparse.Namespace) -> int:
    now = _now(args)
    table = open_table(args.uri, _storage_options(args.storage_option))
    snap = table.snapshot()
    _warn_damage(snap)
    flags = {
        "log_retention_ms": _ms("--log-retention", args.log_retention, parse_duration_ms),
        "deleted_file_retention_ms": _ms(
            "--deleted-file-retention", args.deleted_file_retention, parse_duration_ms
        ),
        "checkpoint_interval": args.checkpoint_interval,
        "vacuum_enabled": False if args.no_vacuum else None,
        "allow_short_retention": args.allow_short_retention or None,
        "write_checksum": args.write_checksum or None,
        "checkpoint_part_size": _part_size(args.part_size),
        # --only compaction asks for it as --compact does
        "compaction_enabled": args.compact or "compaction" in (args.only or "").split(",") or None,
    }
    pol = _policy(args.uri, snap.metadata.configuration, **flags)
    ops = _operations(args.only)
    plan = planner.plan(table, snap, pol, now, ops)
    if plan.refusal:
        raise UnsupportedProtocolError(f"{args.uri}: {plan.refusal}")
    if not args.json:
        print("\n".join(plan.lines()))
    launcher = submit.SubmitLauncher(_submit_config(args))
    compactor = executor.Compactor(launcher, _storage_options(args.storage_option))
    progress = None if args.json else _progress
    report = executor.execute(table, plan, args.dry_run, progress, compactor)
    if args.json:
        print(json.dumps(_maintain_json(plan, report)))
    else:
        print("dry run, nothing changed:" if args.dry_run else "done:")
        print("\n".join(report.lines()))
    return max((_exit_code(o.error) for o in report.outcomes), default=0)


def cmd_compact(args: argparse.Namespace) -> int:
    now = _now(args)
    options = _storage_options(args.storage_option)
    table = open_table(args.uri, options)
    snap = table.snapshot(add_cols=(*LEAN_ADD, "stats"))
    refusal = compaction_plan.refusal(snap)
    if refusal:
        raise UnsupportedProtocolError(f"{args.uri}: {refusal}")
    meta = snap.metadata
    names = compaction_plan.logical_partition_names(meta)
    settings = policy.CompactionSettings(
        target_file_size=compaction_plan.target_file_size(
            meta.configuration, _size("--target-file-size", args.target_file_size)
        ),
        min_file_size=_size("--min-file-size", args.min_file_size),
        min_files_per_partition=args.min_files,
        max_age_ms=_ms("--max-age", args.max_age, parse_duration_ms)
        or policy.COMPACTION_MAX_AGE_MS,
    )
    timestamps = compaction_plan.timestamp_partitions(meta)
    files = compaction_plan.only_where(snap.files, _where(args.where, names), timestamps)
    found = compaction_plan.plan(files, tuple(names), settings, now, timestamps)
    # The table's own policy: its checkpoint interval and retention rule the checkpoint step.
    pol = replace(_policy(args.uri, meta.configuration), compaction=settings)
    plan = planner.forced_compaction(
        table, snap, pol, now, found, checkpoint=not args.no_checkpoint
    )
    report: dict[str, Any] = {
        "operation": "compact",
        "version": snap.version,
        "dryRun": args.dry_run,
        "plan": found.to_json(),
        "checkpointVersion": None,
        "checkpoint": None,
        "job": None,
    }
    if not args.json:
        print(f"{args.uri} at version {snap.version}: {found.reason()}")
        for p in found.partitions:
            print(f"  {p.values or '(whole table)'}: {p.why} {p.files} files -> {p.expected_files}")
        for line in plan.lines()[1:-1]:  # the checkpoint step before the job, if any
            print(line)
    code = 0
    if found.due:
        compactor = executor.Compactor(submit.SubmitLauncher(_submit_config(args)), options)
        outcomes = executor.execute(table, plan, args.dry_run, compactor=compactor).outcomes
        outcome = outcomes[-1]
        if len(outcomes) > 1:  # the checkpoint step ran first
            report["checkpoint"] = _checkpoint_first(outcomes[0], args.json)
            report["checkpointVersion"] = outcomes[0].checkpoint_version
        if not args.dry_run:
            if outcome.result is executor.Result.SKIPPED:
                raise launcher_mod.JobRunning(outcome.message)
            if outcome.job_result is None and outcome.error is not None:
                raise outcome.error  # not started: no Spark here, a store Spark cannot read, ...
            report["job"] = outcome.job_result
            code = 0 if outcome.result is executor.Result.DONE else 1
            if not args.json:
                print(_job_line(outcome.job_result or {}))
    if args.json:
        print(json.dumps(report))
    return code


def _checkpoint_first(outcome: executor.Outcome, as_json: bool) -> dict[str, Any]:
    """The checkpoint before the job, as `compact` reports it; a failure is said on stderr
    too, as the job ran all the same (replaying the JSON log) and the exit code is its own."""
    if outcome.error is not None and outcome.result is executor.Result.FAILED:
        print(
            f"deltakeeper: warning: the checkpoint before the job failed: {outcome.message}; "
            "the job replayed the log without it. Fix the cause, then run "
            "`deltakeeper checkpoint URI`.",
            file=sys.stderr,
        )
    elif not as_json and outcome.result is not executor.Result.SKIPPED:  # the plan said why
        print(f"checkpoint: {outcome.result}: {outcome.message}")
    out = outcome.to_json()
    out["error"] = _error_name(outcome.error) if outcome.error is not None else None
    return out


def _job_line(result: dict[str, Any]) -> str:
    if result.get("result") == "failed":
        return f"job failed: {result.get('error')}: {result.get('message')}"
    return (
        f"job {result.get('result')}: {result.get('filesRemoved', 0)} files "
        f"({format_bytes(int(result.get('bytesRemoved', 0)))}) rewritten as "
        f"{result.get('filesAdded', 0)} ({format_bytes(int(result.get('bytesAdded', 0)))})"
    )


def _size(flag: str, text: str | None) -> int | None:
    return _ms(flag, text, parse_size)


def _where(pairs: list[str], names: dict[str, str]) -> dict[str, str]:
    """--where COL=VALUE on logical names -> {physical name: value}."""
    physical = {logical: phys for phys, logical in names.items()}
    out: dict[str, str] = {}
    for pair in pairs:
        column, sep, value = pair.partition("=")
        if not sep or column not in physical:
            raise InvalidInputError(
                f"--where expects PARTITION_COLUMN=VALUE with one of "
                f"{', '.join(sorted(physical)) or '(no partition columns)'}; got {pair!r}"
            )
        out[physical[column]] = value
    return out


def _operations(only: str | None) -> tuple[Operation, ...]:
    if not only:
        return planner.OPERATIONS
    ops = tuple(o.strip() for o in only.split(","))
    unknown = [o for o in ops if o not in planner.OPERATIONS]
    if unknown:
        raise InvalidInputError(
            f"--only: unknown operation {', '.join(unknown)}; use {','.join(planner.OPERATIONS)}"
        )
    return tuple(o for o in planner.OPERATIONS if o in ops)  # always in the safe order


def _maintain_json(plan: planner.Plan, report: executor.Report) -> dict[str, Any]:
    written = [o.checkpoint_version for o in report.outcomes if o.checkpoint_version is not None]
    return {
        "operation": "maintain",
        "version": plan.version,
        "dryRun": report.dry_run,
        "checkpointVersion": written[0] if written else None,
        "deletedFiles": report.total("deleted_files"),
        "deletedBytes": report.total("deleted_bytes"),
        "files": [f for o in report.outcomes for f in o.files],
        "retention": plan.policy.retention_json(),
        "plan": plan.to_json(),
        "results": [o.to_json() for o in report.outcomes],
        "seconds": round(report.seconds, 3),
    }


def _progress(operation: str, done: int, total: int) -> None:
    print(f"{operation}: deleted {done}/{total} files", file=sys.stderr, flush=True)


# Each kind of library error: its `error` in --json and its exit code. Most specific first.
_ERRORS = (
    (errors.InvalidCredentialsError, "InvalidCredentials", 2),
    (errors.InvalidInputError, "InvalidInput", 2),
    (errors.NotADeltaTableError, "NotADeltaTable", 2),
    (errors.CorruptLogError, "CorruptLog", 2),
    (errors.UnsupportedProtocolError, "UnsupportedProtocol", 3),
    (errors.StorageUnreachableError, "StorageUnreachable", 4),
    (errors.CommitConflictError, "CommitConflict", 1),
)


class _UsageError(Exception):
    """An argparse error, raised so `main` can report it like every other error."""

    def __init__(self, parser: argparse.ArgumentParser, message: str) -> None:
        super().__init__(message)
        self.parser = parser


class _Parser(argparse.ArgumentParser):
    def __init__(self, *args: Any, **kwargs: Any) -> None:
        # No abbreviated flags: `--storage-opt X` would slip past the secret masking.
        kwargs.setdefault("allow_abbrev", False)
        super().__init__(*args, **kwargs)

    def error(self, message: str) -> NoReturn:
        raise _UsageError(self, message)


def _register_secrets(argv: Sequence[str]) -> None:
    """Every value given on the command line that may be a credential is masked in all output:
    storage option values and the user:password part of a URI."""
    words = list(argv)
    values: set[str] = set()
    for i, word in enumerate(words):
        if word.startswith("--storage-option"):
            pair = word.partition("=")[2] if "=" in word else (words[i + 1 : i + 2] or [""])[0]
            values |= credentials.option_secrets(pair)
        elif "@" in word:
            values |= credentials.uri_secrets(word)
    credentials.SCRUBBER.register(values)


def main(argv: Sequence[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    _register_secrets(argv)
    credentials.install_log_scrubbing()
    stdout, stderr = sys.stdout, sys.stderr
    sys.stdout = credentials.ScrubbingStream(stdout)
    sys.stderr = credentials.ScrubbingStream(stderr)
    try:
        return _main(argv)
    finally:
        sys.stdout, sys.stderr = stdout, stderr


def _main(argv: list[str]) -> int:
    as_json = "--json" in argv
    try:
        args = build_parser().parse_args(argv)
        as_json = bool(getattr(args, "json", False))
        _register_secrets(
            [
                *(f"--storage-option={o}" for o in getattr(args, "storage_option", [])),
                str(getattr(args, "uri", "")),
            ]
        )
        return int(args.func(args))
    except _UsageError as e:
        e.parser.print_usage(sys.stderr)
        command = e.parser.prog.removeprefix("deltakeeper").strip()
        return _fail(as_json, "InvalidInput", f"{command}: {e}" if command else str(e), 2)
    except DeltaError as e:
        return _fail(as_json, _error_name(e), str(e), _exit_code(e))
    except KeyboardInterrupt:
        return 130
    except BrokenPipeError:
        return 0
    except Exception as e:  # the last line of defence: say what failed, never dump secrets
        if os.environ.get("DELTAKEEPER_DEBUG"):
            raise
        return _fail(as_json, "Unexpected", f"unexpected error: {type(e).__name__}: {e}", 1)


def _error_name(e: DeltaError) -> str:
    """The documented `error` of a --json error object (README: Exit codes)."""
    return next((name for cls, name, _ in _ERRORS if isinstance(e, cls)), "Unexpected")


def _exit_code(error: DeltaError | None) -> int:
    """0 without an error; 1 for one DESIGN.md does not name."""
    if error is None:
        return 0
    return next((code for cls, _, code in _ERRORS if isinstance(error, cls)), 1)


def _fail(as_json: bool, error: str, message: str, code: int) -> int:
    """Report an error on stderr, and as one JSON object on stdout when --json asked for JSON."""
    print(f"deltakeeper: error: {message}", file=sys.stderr)
    if as_json:
        print(json.dumps({"error": error, "message": message, "exitCode": code}))
    return code
