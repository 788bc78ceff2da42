"""The argparse tree of `deltakeeper`: every command, flag, help text and default.

It imports nothing heavy, and no command's module: each command's function is named by a
`Command` and imported when the command runs, so `--help`, `--version` and a usage error
start fast."""

from __future__ import annotations

import argparse
import enum
import importlib
from typing import Any, NoReturn

from deltakeeper import __version__
from deltakeeper.cli import exits
from deltakeeper.cli.output import LAKES_KEY
from deltakeeper.delta import errors
from deltakeeper.delta.discover import DEFAULT_MAX_DEPTH
from deltakeeper.delta.vacuum.modes import InventoryFormat, Mode
from deltakeeper.maintenance import memory, policy
from deltakeeper.maintenance.operations import Operation
from deltakeeper.units import format_duration, format_size, parse_size

# Defaults as help texts state them (the values are policy.py's).
LOG_RETENTION = format_duration(policy.LOG_RETENTION_MS)
FILE_RETENTION = format_duration(policy.DELETED_FILE_RETENTION_MS)
MIN_VACUUM_RETENTION = format_duration(policy.MIN_VACUUM_RETENTION_MS)
POLL_INTERVAL = format_duration(policy.POLL_INTERVAL_MS)
# compute-stats' limits are delta/stats/compute.py's BATCH and MAX_DATA_BYTES, stated here
# because importing it loads pyarrow (tests/unit/cli/test_parser.py checks they agree).
STATS_BATCH = 10_000
STATS_MAX_READ_BYTES = 256 * 2**20
# expire's default maxFraction is delta/expire/plan.py's DEFAULT_MAX_FRACTION (likewise).
EXPIRE_MAX_FRACTION = 0.5


class Command:
    """A command's function, `cmd_<name>` in its family's module of this package, imported
    when the command runs (each family of commands loads only what it uses)."""

    def __init__(self, family: str, name: str) -> None:
        self.module = f"deltakeeper.cli.{family}"
        self.function = f"cmd_{name}"

    def __call__(self, args: argparse.Namespace) -> int:
        return int(getattr(importlib.import_module(self.module), self.function)(args))

    def __repr__(self) -> str:
        return f"Command({self.module}.{self.function})"


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


def _size(text: str) -> int:
    try:
        return parse_size(text)
    except ValueError as e:
        raise argparse.ArgumentTypeError(str(e)) from None


def _positive(text: str) -> int:
    return _whole(text, 1)


def _non_negative(text: str) -> int:
    return _whole(text, 0)


def _fraction(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a number") from None
    if not 0 <= value <= 1:
        raise argparse.ArgumentTypeError(f"must be between 0 and 1, got {text}")
    return value


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


def _command(sub: Any, name: str, family: str, **texts: str | None) -> argparse.ArgumentParser:
    """A command run by `cmd_<name>` of cli/<family>.py; `texts`: its help and description."""
    p: argparse.ArgumentParser = sub.add_parser(name, **texts)
    p.set_defaults(func=Command(family, name.replace("-", "_")))
    return p


def _table_command(
    sub: Any, name: str, family: str, help: str, description: str | None = None
) -> argparse.ArgumentParser:
    """A command on one table: the URI and storage options come first in every one."""
    p = _command(sub, name, family, help=help, description=description)
    _common(p)
    return p


def _maintenance_flags(p: argparse.ArgumentParser, dry_run: str) -> None:
    p.add_argument("--now", metavar="T", help="the current time (epoch ms or ISO-8601), for tests")
    _report_flags(p, dry_run)


def _catalog_flag(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "--catalog-allows",
        metavar="OPS",
        help="on a catalog-managed table, the operations its catalog permits (comma-separated, "
        "as a DeltaTable's catalog.allowedOperations): refused without it (docs/maintenance.md)",
    )


def _report_flags(p: argparse.ArgumentParser, dry_run: str) -> None:
    """--dry-run (what it does instead, in `dry_run`) and --json."""
    p.add_argument("--dry-run", action="store_true", help=dry_run)
    p.add_argument("--json", action="store_true", help="print the report as one JSON object")


def _values(names: type[enum.StrEnum]) -> list[str]:
    """An enum's values as choices: argparse prints its choices' repr in a usage error, which
    for the members themselves reads <Mode.AUTO: 'auto'>."""
    return [str(name) for name in names]


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


def _vacuum_flags(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "--mode",
        choices=_values(Mode),
        help=f"how vacuum finds candidates (default: {policy.CLI_VACUUM_MODE}, as Delta Spark's "
        "VACUUM): full lists the table, so it also deletes files no commit names (those of "
        "failed writes); lite reads only the commits since the last vacuum; inventory reads "
        "--inventory; auto runs lite, and full when Delta refuses lite (the daemons also every "
        "vacuum.fullInterval; the command line keeps no record of the last full)",
    )
    p.add_argument(
        "--inventory",
        metavar="URI",
        help="a storage inventory to read instead of listing (implies --mode inventory): an S3 "
        "Inventory manifest.json or its folder, or Parquet or a Delta table in Delta's "
        "inventory schema (path, length, isDir, modificationTime)",
    )
    p.add_argument(
        "--inventory-format",
        choices=_values(InventoryFormat),
        default=InventoryFormat.AUTO,
        help="what --inventory holds (default: auto, by what is there)",
    )


def build_parser() -> argparse.ArgumentParser:
    parser = Parser(
        prog="deltakeeper",
        description="Keep Delta Lake tables healthy: inspect, checkpoint, clean up, vacuum.",
        epilog=f"Exit codes: {exits.OK} ok, {exits.UNEXPECTED} unexpected failure, "
        f"{exits.BAD_INPUT} bad input or not a Delta table, {errors.UNSUPPORTED} unsupported "
        f"protocol, {errors.UNREACHABLE} storage unreachable.",
    )
    parser.add_argument("--version", action="version", version=f"deltakeeper {__version__}")
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    _read_commands(sub)
    _maintenance_commands(sub)
    _maintain_command(sub)
    _compact_log_command(sub)
    _compute_stats_command(sub)
    _expire_command(sub)
    _manifest_command(sub)
    _compact_command(sub)
    _discover_command(sub)
    _run_command(sub)
    _status_command(sub)
    _operator_command(sub)
    return parser


def _read_commands(sub: Any) -> None:
    p = _table_command(
        sub,
        "inspect",
        "inspect",
        "show a table's version, protocol, files and log health",
    )
    _at_version(p, timestamps=True)
    p.add_argument("--json", action="store_true", help="print one JSON object (stable keys)")
    p.add_argument(
        "--small-file-size",
        default=str(policy.SMALL_FILE_BYTES),
        metavar="SIZE",
        help="files below this count as small (bytes or 16Mi, 1Gi; default "
        f"{format_size(policy.SMALL_FILE_BYTES)})",
    )
    p = _table_command(sub, "files", "inspect", "list the live files of a table")
    _at_version(p, timestamps=False)
    p.add_argument("--json", action="store_true", help="one JSON object a line")


def _maintenance_commands(sub: Any) -> None:
    p = _table_command(
        sub,
        "checkpoint",
        "maintenance",
        "write a checkpoint and move _last_checkpoint (expired tombstones dropped)",
        "Write the checkpoint of the latest version (or --version): a classic single file, "
        "multi-part with --part-size, or V2 with sidecars on v2Checkpoint tables.",
    )
    _at_version(p, timestamps=False)
    _duration_flags(
        p,
        deleted_file_retention=f"keep tombstones younger than D (30d, 12h, ...; default "
        f"{FILE_RETENTION}, never below the table's delta.deletedFileRetentionDuration)",
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
        "maintenance",
        "delete log files older than the log retention (metadata cleanup)",
    )
    _duration_flags(
        p,
        log_retention=f"keep the log for D (30d, 12h, ...; default {LOG_RETENTION}, never "
        "below the table's delta.logRetentionDuration)",
    )
    _catalog_flag(p)
    _maintenance_flags(p, dry_run="list what would be deleted, delete nothing")

    p = _table_command(
        sub,
        "vacuum",
        "maintenance",
        "delete data files no version inside the retention references (VACUUM)",
    )
    _duration_flags(
        p,
        deleted_file_retention="keep unreferenced files and tombstoned files younger than D "
        f"(default {FILE_RETENTION}, never below the table's delta.deletedFileRetentionDuration; "
        f"below {MIN_VACUUM_RETENTION} needs --allow-short-retention)",
    )
    p.add_argument(
        "--allow-short-retention",
        action="store_true",
        help=f"allow a retention below {MIN_VACUUM_RETENTION} (jobs reading older versions may "
        "fail)",
    )
    _vacuum_flags(p)
    _catalog_flag(p)
    _maintenance_flags(p, dry_run="list what would be deleted, with sizes; delete nothing")


def _compact_log_command(sub: Any) -> None:
    p = _table_command(
        sub,
        "compact-log",
        "maintenance",
        "write a log compaction file: commits X..Y reconciled into one (X.Y.compacted.json)",
        "Readers between checkpoints (Delta Spark, Delta Kernel) may read the one file instead "
        "of the commits. Only published commits are compacted; an existing file is left alone.",
    )
    p.add_argument("--from", dest="start", type=int, required=True, metavar="X")
    p.add_argument("--to", dest="end", type=int, required=True, metavar="Y")
    _report_flags(p, "reconcile, write nothing")


def _compute_stats_command(sub: Any) -> None:
    p = _table_command(
        sub,
        "compute-stats",
        "maintenance",
        "give live files the statistics the table asks for (numRecords, min/max, nullCount)",
        "Finds live files without statistics, or without them for a column the table now "
        "indexes (delta.dataSkippingNumIndexedCols, delta.dataSkippingStatsColumns), reads "
        "their Parquet footers, and re-adds them with statistics as Delta Spark writes them "
        "(dataChange=false, operation COMPUTE STATS). Files with deletion vectors are left "
        "alone. Columns a footer cannot describe are read, up to --max-read-bytes a run.",
    )
    p.add_argument(
        "--columns",
        metavar="COLS",
        help="collect statistics for these columns (a, b.c, `d.e`), as "
        "delta.dataSkippingStatsColumns would, instead of the table's setting",
    )
    p.add_argument(
        "--max-read-bytes",
        type=_size,
        metavar="SIZE",
        help="column data read a run where footers lack statistics (default "
        f"{format_size(STATS_MAX_READ_BYTES)}); the files past it wait for the next run",
    )
    p.add_argument(
        "--batch-size",
        type=_positive,
        metavar="N",
        help=f"files re-added per commit (default {STATS_BATCH})",
    )
    _report_flags(p, "compute, commit nothing")


def _expire_command(sub: Any) -> None:
    p = _table_command(
        sub,
        "expire",
        "expire",
        "remove the data older than a cutoff (now minus --keep) from the table (DELETE)",
        "Data retention by age. The cutoff is now minus --keep, in UTC; a row expires when its "
        "value in --column is older (a date column: when its day is before the cutoff's day). "
        "The column is a date, timestamp or timestamp_ntz (read as UTC), or a partition column "
        "of ISO-8601 strings (2026-01-05, 2026-01-05T07, 2026-01-05 07:00:00). Files of "
        "partitions older than the cutoff, and files whose maximum statistic for the column is, "
        "are removed in one commit (operation DELETE, as Delta Spark's metadata-only DELETE), "
        "without reading or rewriting data. Files with rows on both sides of the cutoff "
        "(straddling) and files without statistics for the column stay, and are listed. "
        "Refused, nothing written: delta.appendOnly, catalog-managed tables, a missing column "
        "or another type, and a run past --max-fraction (exit 2). Until vacuum deletes the "
        "removed files (after the deleted-file retention), time travel still reads the rows.",
    )
    p.add_argument("--column", required=True, metavar="C", help="the time column")
    p.add_argument(
        "--keep",
        required=True,
        metavar="D",
        help="how much to keep: the cutoff is now minus D (90d, 36h, ...)",
    )
    p.add_argument(
        "--max-fraction",
        type=_fraction,
        default=EXPIRE_MAX_FRACTION,
        metavar="F",
        help="refuse (exit 2, nothing written) a run that would remove more than this share "
        f"of the table's rows, 0 to 1 (default {EXPIRE_MAX_FRACTION:g}; of its bytes when some "
        "files have no record count)",
    )
    p.add_argument(
        "--rewrite",
        choices=["none", "spark"],
        default="none",
        help="straddling files: none (default) keeps them until they are wholly older; spark "
        "then runs Delta Spark's DELETE WHERE the cutoff on their partitions, with spark-submit "
        "(--master, --jars-dir, --spark-conf)",
    )
    _spark_flags(p)
    p.add_argument(
        "--now",
        metavar="T",
        help="compute the cutoff as if now were T (epoch ms or ISO-8601); the commit keeps "
        "the real time",
    )
    _report_flags(p, "list what would be removed, commit nothing")


def _manifest_command(sub: Any) -> None:
    p = _table_command(
        sub,
        "manifest",
        "maintenance",
        "write the table's symlink format manifests (_symlink_format_manifest/) once",
        "For engines that read Delta through Hive-style manifests (Redshift Spectrum, Presto, "
        "Athena): one manifest per partition listing its live data files, in Delta Spark's "
        "layout. Only changed manifests are written (each whole, in one write); those of "
        "emptied partitions are deleted.",
    )
    _catalog_flag(p)
    _report_flags(p, "say what would change; write nothing")


def _maintain_command(sub: Any) -> None:
    p = _table_command(
        sub,
        "maintain",
        "maintenance",
        "run what the policy says is due: checkpoint, then log cleanup, then vacuum",
        "Plan (what is due and why), then run the due steps in order: checkpoint, "
        "compaction (with --compact), log cleanup, vacuum. A failed step skips the ones after "
        "it. Exit code: the worst of the steps (1 for a failed compaction job, 2 for a refused "
        "vacuum retention, 3 for an unsupported protocol).",
    )
    _duration_flags(
        p,
        log_retention=f"log retention (default {LOG_RETENTION})",
        deleted_file_retention=f"tombstone and vacuum retention (default {FILE_RETENTION})",
    )
    p.add_argument(
        "--checkpoint-interval",
        type=_positive,
        metavar="N",
        help="checkpoint once N commits have passed since the last one (default: the table's "
        f"delta.checkpointInterval, else {policy.CHECKPOINT_INTERVAL})",
    )
    p.add_argument(
        "--allow-short-retention",
        action="store_true",
        help=f"allow vacuum below {MIN_VACUUM_RETENTION}",
    )
    p.add_argument("--no-vacuum", action="store_true", help="never vacuum data files")
    _vacuum_flags(p)
    p.add_argument(
        "--compact",
        action="store_true",
        help="also compact small files (after the checkpoint), running the job with "
        "spark-submit to its end; the planner's defaults as for `compact`",
    )
    p.add_argument(
        "--engine",
        choices=_values(policy.Engine),
        help="what runs the checkpoint and the vacuum: spark runs Delta Spark's own checkpoint "
        "and VACUUM with spark-submit (the --master, --jars-dir and --spark-conf below), for a "
        "table too big for this machine; local or auto (default): deltakeeper",
    )
    _spark_flags(p)
    _checkpoint_flags(p, "--checkpoint-part-size")
    p.add_argument(
        "--only",
        metavar="OPS",
        help="comma-separated subset of " + ",".join(Operation),
    )
    _catalog_flag(p)
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
    p = _command(sub, "discover", "discover", help=what, description=_DISCOVER)
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


def _compact_command(sub: Any) -> None:
    p = _table_command(
        sub,
        "compact",
        "compact",
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
        help="size of compacted files (default: the table's delta.targetFileSize, else "
        f"{format_size(policy.COMPACTION_TARGET_FILE_SIZE)})",
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
        p,
        max_age="or once it has two small files and the oldest is D old (default "
        f"{format_duration(policy.COMPACTION_MAX_AGE_MS)})",
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
    p.add_argument(
        "--master",
        default=policy.SPARK_MASTER,
        help=f"Spark master (default {policy.SPARK_MASTER})",
    )
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


def _run_command(sub: Any) -> None:
    p = _command(
        sub,
        "run",
        "daemons",
        help="standalone mode: watch and maintain the tables of DeltaTable manifests in a folder",
        description="Read DeltaTable, DeltaMaintenancePolicy and Secret manifests from DIR "
        "(re-read when they change), keep every table healthy as the operator would, serve "
        "Prometheus metrics, and write each table's status to DIR/.deltakeeper/status.json "
        "(see `deltakeeper status`). Ctrl-C stops cleanly.",
    )
    p.add_argument("--manifests", required=True, metavar="DIR", help="folder of YAML manifests")
    _daemon_flags(p, policy.METRICS_BIND_ADDRESS, POLL_INTERVAL)
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


def _status_command(sub: Any) -> None:
    p = _command(sub, "status", "daemons", help="print the status `deltakeeper run` wrote")
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


def _operator_command(sub: Any) -> None:
    p = _command(
        sub,
        "operator",
        "daemons",
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
        f"$DELTAKEEPER_DEFAULT_POLL_INTERVAL, else {POLL_INTERVAL}",
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
        f"($DELTAKEEPER_MAX_COMPACTION_JOBS, else {policy.MAX_COMPACTION_JOBS})",
    )
    _cores_flag(p, "$DELTAKEEPER_COMPACTION_CORES; ")
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


def _compaction_flags(p: argparse.ArgumentParser) -> None:
    """How standalone mode runs the compaction jobs of tables with compaction.enabled."""
    p.add_argument(
        "--max-compaction-jobs",
        type=_positive,
        default=policy.MAX_COMPACTION_JOBS,
        metavar="N",
        help="at most N compaction jobs (spark-submit) at once, all tables together (default "
        f"{policy.MAX_COMPACTION_JOBS})",
    )
    _cores_flag(p, "")
    _retry_flag(p, "default ")
    _spark_flags(p)


def _cores_flag(p: argparse.ArgumentParser, env: str) -> None:
    p.add_argument(
        "--compaction-cores",
        type=_positive,
        default=None,
        metavar="N",
        help="at most N executor cores in compaction jobs at once, all jobs together; the next "
        f"job goes to the table it helps most ({env}default: no limit but the jobs')",
    )


def _retry_flag(p: argparse.ArgumentParser, default: str) -> None:
    p.add_argument(
        "--compaction-retry",
        metavar="DURATION",
        help="after a failed compaction job, wait DURATION before the next, doubled per "
        f"failure up to {format_duration(policy.COMPACTION_RETRY_CAP_MS)} "
        f"({default}{format_duration(policy.COMPACTION_RETRY_MS)})",
    )


def _events_flags(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "--events-listen",
        metavar="HOST:PORT",
        help="take storage events (S3 event notifications, POST /events) on HOST:PORT for "
        "tables with spec.events.source webhook (docs/events.md; $DELTAKEEPER_EVENTS_LISTEN; "
        "default: no listener)",
    )
    p.add_argument(
        "--events-token-file",
        metavar="FILE",
        help="the bearer token events must carry, read from FILE "
        "($DELTAKEEPER_EVENTS_TOKEN_FILE; required with --events-listen)",
    )
    p.add_argument(
        "--events-tls-cert",
        metavar="FILE",
        help="serve events over TLS with this certificate ($DELTAKEEPER_EVENTS_TLS_CERT)",
    )
    p.add_argument(
        "--events-tls-key",
        metavar="FILE",
        help="and this key ($DELTAKEEPER_EVENTS_TLS_KEY)",
    )


def _daemon_flags(p: argparse.ArgumentParser, bind_default: str, poll_default: str) -> None:
    _events_flags(p)
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
        default=policy.MAX_CONCURRENT,
        metavar="N",
        help=f"at most N tables under maintenance at once (default {policy.MAX_CONCURRENT})",
    )
    p.add_argument(
        "--memory-budget",
        metavar="SIZE",
        help="memory for maintenance steps, all tables together (e.g. 2Gi, or none): a table "
        "whose step is estimated to need more waits until that much is free, and one that "
        "would not fit at all is refused with both figures instead of running out of memory "
        "(default: the container's memory limit less "
        f"{memory.MARGIN_FRACTION * 100:g}%%, at least {format_size(memory.MIN_MARGIN_BYTES)}; "
        "none outside a limited container)",
    )
    p.add_argument(
        "--default-poll-interval",
        metavar="DURATION",
        help="poll a table this often when neither its spec nor its policy sets pollInterval "
        f"(e.g. 2m; default {poll_default})",
    )
    p.add_argument(
        "--history-uri",
        metavar="URI",
        help="append one row per maintenance operation (succeeded, failed or skipped, with its "
        "metrics) to the Delta table at URI, created at start in a new or empty location; "
        "readable by Spark, delta-rs and DuckDB (docs/history.md)",
    )
    p.add_argument(
        "--history-option",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="a storage option of the history table's store, as --storage-option (repeatable)",
    )


class UsageError(Exception):
    """An argparse error, raised so `main` can report it like every other error."""

    def __init__(self, parser: argparse.ArgumentParser, message: str) -> None:
        super().__init__(message)
        self.parser = parser


class Parser(argparse.ArgumentParser):
    def __init__(self, *args: Any, **kwargs: Any) -> None:
        # No abbreviated flags: `--storage-opt X` would slip past the secret masking.
        kwargs.setdefault("allow_abbrev", False)
        super().__init__(*args, **kwargs)

    def error(self, message: str) -> NoReturn:
        raise UsageError(self, message)
