"""The Spark job: run by spark-submit, it compacts the partitions a plan names, or (for a
table too big for deltakeeper's memory budget) writes a checkpoint or vacuums with Delta Spark,
or rewrites the files an expiry could not remove whole (Delta Spark's DELETE).

It imports nothing but PySpark, delta-spark and the standard library, so it runs in a plain
Spark image. deltakeeper plans, this file executes: the spec (one JSON object, from
`--spec FILE` or `--spec-json TEXT`) names the table, the partitions to bin-pack and the ones
whose only problem is deleted rows (purged with REORG), the file sizes and a job id. The job id
goes into the commit's `userMetadata`, so the result can be read back from the log itself.

Spec keys:
  jobId            required; written to commitInfo.userMetadata
  table            required; a path or URI Spark reads (s3a://, abfss://, gs://, file:/...)
  operation        optional: compaction (default), checkpoint (Delta Spark's own checkpoint of
                   the latest version, in the layout the table asks for, then `_last_checkpoint`
                   and Delta's own expired-log cleanup, as a writer's checkpoint does) or vacuum
                   (Delta Spark's VACUUM with `retentionHours`; `allowShortRetention` turns off
                   its retention check, as deltakeeper's own flag does) or expire (Delta
                   Spark's `DELETE WHERE condition`, limited to `partitions`)
  condition        expire: the rows to delete, a Spark SQL condition (its timestamps UTC)
  partitions       expire: the partitions to delete in ({logical column: serialized value});
                   [] or [{}]: the whole table
  compact          list of partitions to bin-pack: {logical column: serialized value or null};
                   [{}] on an unpartitioned table means the whole table
  purge            list of partitions to rewrite without their deleted rows (same form)
  minFileSize, maxFileSize, maxThreads, maxDeletedRowsRatio   optional OPTIMIZE settings
  zOrderBy         optional list of columns: Z-order instead of bin-packing
  plannedVersion   optional; the version the plan was made at (reported back); the job's
                   commits are looked for after it (without it: after the latest version)
  partitionTypes   optional {logical partition column: Spark SQL type} ({} unpartitioned);
                   without it the job asks Spark (DeltaTable.detail and the schema)
  snapshotPartitions  optional; Spark partitions for replaying the log (Delta's default: 50),
                   set unless the Spark conf (the user's sparkConf) sets it already

Output: one JSON line on stdout (`"deltakeeperCompaction": 1` marks it); `seconds` is the
job's time from its start (after the JVM's), `sessionSeconds` the part of it spent starting the
Spark session, `tunedConf` the Spark conf it set from the spec. Exit 0 when the work
is done or there was nothing to do, 1 when it failed (a conflicting concurrent write, a bad
spec, an unreadable table); the line says why.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
import time
from collections.abc import Callable
from typing import Any
from urllib.parse import urlsplit

MARK = "deltakeeperCompaction"
OPERATIONS = ("compaction", "checkpoint", "vacuum", "expire")

# Spark conf keys of Delta's OPTIMIZE, by spec key.
OPTIMIZE_CONF = {
    "minFileSize": "spark.databricks.delta.optimize.minFileSize",
    "maxFileSize": "spark.databricks.delta.optimize.maxFileSize",
    "maxThreads": "spark.databricks.delta.optimize.maxThreads",
    "maxDeletedRowsRatio": "spark.databricks.delta.optimize.maxDeletedRowsRatio",
}
USER_METADATA_CONF = "spark.databricks.delta.commitInfo.userMetadata"
# Delta swallows a failed checkpoint (a writer's commit must not fail for it); a job that only
# checkpoints must fail instead.
CHECKPOINT_THROWS_CONF = "spark.databricks.delta.checkpoint.exceptionThrowing.enabled"
RETENTION_CHECK_CONF = "spark.databricks.delta.retentionDurationCheck.enabled"
# Delta 4 ignores VACUUM's RETAIN hours (but 0) and takes the table's property; deltakeeper's
# retention (never below that property) must hold, so the job's argument counts.
RETENTION_IGNORED_CONF = "spark.databricks.delta.vacuum.retentionWindowIgnore.enabled"
# Spark conf keys the job tunes from the spec, by spec key; a value the Spark conf has wins.
TUNING_CONF = {"snapshotPartitions": "spark.databricks.delta.snapshotPartitions"}


class SpecError(ValueError):
    """The spec is malformed; the message says which key."""


# ------------------------------------------------------------------------------------------
# Predicates: typed, quoted SQL built from the serialized partition values of the log
# ------------------------------------------------------------------------------------------


def quote_identifier(name: str) -> str:
    return "`" + name.replace("`", "``") + "`"


def quote_string(value: str) -> str:
    """A Spark SQL string literal: backslashes and single quotes escaped, the rest verbatim."""
    return "'" + value.replace("\\", "\\\\").replace("'", "\\'") + "'"


def value_sql(raw: str, sql_type: str) -> str:
    literal = quote_string(raw)
    return literal if sql_type == "string" else f"CAST({literal} AS {sql_type})"


def partition_predicate(values: dict[str, str | None], types: dict[str, str]) -> str:
    """`values` maps logical partition columns to the log's serialized values (None = null)."""
    terms = []
    for column, raw in sorted(values.items()):
        if column not in types:
            raise SpecError(f"{column!r} is not a partition column (have: {sorted(types)})")
        ident = quote_identifier(column)
        if raw is None:
            terms.append(f"{ident} IS NULL")
        else:
            terms.append(f"{ident} = {value_sql(raw, types[column])}")
    return " AND ".join(terms) if terms else "true"


def any_of(predicates: list[str]) -> str:
    return " OR ".join(f"({p})" for p in predicates)


# ------------------------------------------------------------------------------------------
# The spec
# ------------------------------------------------------------------------------------------


def load_spec(args: argparse.Namespace) -> dict[str, Any]:
    text = args.spec_json
    if args.spec:
        with open(args.spec, encoding="utf-8") as f:
            text = f.read()
    if not text:
        raise SpecError("no spec: give --spec FILE or --spec-json TEXT")
    try:
        spec = json.loads(text)
    except json.JSONDecodeError as e:
        raise SpecError(f"the spec is not JSON: {e}") from e
    if not isinstance(spec, dict):
        raise SpecError("the spec must be a JSON object")
    for key in ("jobId", "table"):
        if not isinstance(spec.get(key), str) or not spec[key]:
            raise SpecError(f"spec.{key} must be a non-empty string")
    operation = spec.setdefault("operation", "compaction")
    if operation not in OPERATIONS:
        raise SpecError(f"spec.operation must be one of {', '.join(OPERATIONS)}, got {operation!r}")
    hours = spec.get("retentionHours")
    if operation == "vacuum" and (
        isinstance(hours, bool) or not isinstance(hours, (int, float)) or hours < 0
    ):
        raise SpecError("spec.retentionHours must be a number of hours >= 0 for a vacuum")
    condition = spec.get("condition")
    if operation == "expire" and (not isinstance(condition, str) or not condition.strip()):
        raise SpecError("spec.condition must be the DELETE's condition for an expire")
    for key in ("compact", "purge", "partitions"):
        groups = spec.setdefault(key, [])
        if not isinstance(groups, list) or not all(isinstance(g, dict) for g in groups):
            raise SpecError(f"spec.{key} must be a list of {{column: value}} objects")
    types = spec.get("partitionTypes")
    if types is not None and not (
        isinstance(types, dict) and all(isinstance(t, str) and t for t in types.values())
    ):
        raise SpecError("spec.partitionTypes must be an object of {column: Spark SQL type}")
    planned = spec.get("plannedVersion")
    if planned is not None and (type(planned) is not int or planned < 0):
        raise SpecError("spec.plannedVersion must be a version number (an integer >= 0)")
    parts = spec.get("snapshotPartitions")
    if parts is not None and (type(parts) is not int or parts < 1):
        raise SpecError("spec.snapshotPartitions must be an integer >= 1")
    return spec


# ------------------------------------------------------------------------------------------
# Storage credentials: from the environment (Secret references) into Hadoop's configuration,
# in-process, so no secret is ever on a command line or in the SparkApplication.
# ------------------------------------------------------------------------------------------


def hadoop_credentials(env: dict[str, str], table: str = "") -> dict[str, str]:
    conf = azure_credentials(env, table)
    if env.get("AWS_ACCESS_KEY_ID") and env.get("AWS_SECRET_ACCESS_KEY"):
        conf["fs.s3a.access.key"] = env["AWS_ACCESS_KEY_ID"]
        conf["fs.s3a.secret.key"] = env["AWS_SECRET_ACCESS_KEY"]
        if env.get("AWS_SESSION_TOKEN"):
            conf["fs.s3a.session.token"] = env["AWS_SESSION_TOKEN"]
    if env.get("AWS_ENDPOINT_URL"):  # an S3-compatible store named in the Secret
        conf["fs.s3a.endpoint"] = env["AWS_ENDPOINT_URL"]
        conf["fs.s3a.path.style.access"] = "true"
    keyfile = env.get("GOOGLE_APPLICATION_CREDENTIALS") or _keyfile(env)
    if keyfile:
        conf["google.cloud.auth.type"] = "SERVICE_ACCOUNT_JSON_KEYFILE"
        conf["google.cloud.auth.service.account.json.keyfile"] = keyfile
    return conf


AZURE_HOSTS = ("dfs.core.windows.net", "blob.core.windows.net")
OAUTH_PROVIDER = "org.apache.hadoop.fs.azurebfs.oauth2.ClientCredsTokenProvider"


def azure_credentials(env: dict[str, str], table: str = "") -> dict[str, str]:
    """ABFS settings per account host: a shared key, else a SAS token, else a service
    principal (client id, secret, tenant). The account is the environment's, else the one in
    the table's abfss:// host."""
    parts = urlsplit(table)
    host = parts.netloc.partition("@")[2] if parts.scheme in ("abfs", "abfss") else ""
    account = env.get("AZURE_STORAGE_ACCOUNT_NAME") or host.split(".", 1)[0]
    if not account:
        return {}
    hosts = [f"{account}.{suffix}" for suffix in AZURE_HOSTS]
    if host and host not in hosts:  # another Azure cloud's host
        hosts.insert(0, host)
    per_host = _azure_auth(env)
    return {f"{key}.{h}": value for h in hosts for key, value in per_host.items()}


def _azure_auth(env: dict[str, str]) -> dict[str, str]:
    if env.get("AZURE_STORAGE_ACCOUNT_KEY"):
        return {"fs.azure.account.key": env["AZURE_STORAGE_ACCOUNT_KEY"]}
    if env.get("AZURE_STORAGE_SAS_TOKEN"):
        return {
            "fs.azure.account.auth.type": "SAS",
            "fs.azure.sas.fixed.token": env["AZURE_STORAGE_SAS_TOKEN"].lstrip("?"),
        }
    client = [env.get(k) for k in ("AZURE_CLIENT_ID", "AZURE_CLIENT_SECRET", "AZURE_TENANT_ID")]
    if all(client):
        client_id, secret, tenant = client
        return {
            "fs.azure.account.auth.type": "OAuth",
            "fs.azure.account.oauth.provider.type": OAUTH_PROVIDER,
            "fs.azure.account.oauth2.client.id": str(client_id),
            "fs.azure.account.oauth2.client.secret": str(secret),
            "fs.azure.account.oauth2.client.endpoint": (
                f"https://login.microsoftonline.com/{tenant}/oauth2/token"
            ),
        }
    return {}


def _keyfile(env: dict[str, str]) -> str | None:
    """A service-account key given as JSON text goes to a private file: the GCS connector
    reads keys from files only."""
    text = env.get("GOOGLE_APPLICATION_CREDENTIALS_JSON")
    if not text:
        return None
    fd, path = tempfile.mkstemp(prefix="deltakeeper-gcs-", suffix=".json")
    with os.fdopen(fd, "w", encoding="utf-8") as f:
        f.write(text)
    return path


# ------------------------------------------------------------------------------------------
# Running it
# ------------------------------------------------------------------------------------------


def tuning(spec: dict[str, Any], configured: Callable[[str], str | None]) -> dict[str, str]:
    """The Spark conf the job sets from the spec: only keys the Spark conf (`configured`, the
    user's sparkConf and spark-submit's --conf) leaves unset."""
    wanted = {conf: spec.get(key) for key, conf in TUNING_CONF.items()}
    return {k: str(v) for k, v in wanted.items() if v is not None and configured(k) is None}


def _session(spec: dict[str, Any]) -> tuple[Any, dict[str, str]]:
    from pyspark.sql import SparkSession

    name = f"deltakeeper-{spec.get('operation') or 'compaction'}-{spec['jobId']}"
    builder = SparkSession.builder.appName(name)
    # Partition values of timestamps are serialized in UTC; compare them in UTC.
    builder = builder.config("spark.sql.session.timeZone", "UTC")
    spark = builder.getOrCreate()
    hadoop = spark.sparkContext._jsc.hadoopConfiguration()
    for key, value in hadoop_credentials(dict(os.environ), spec["table"]).items():
        hadoop.set(key, value)
    for key, conf in OPTIMIZE_CONF.items():
        if spec.get(key) is not None:
            spark.conf.set(conf, str(spec[key]))
    spark.conf.set(USER_METADATA_CONF, spec["jobId"])
    tuned = tuning(spec, lambda key: spark.conf.get(key, None))
    for key, value in tuned.items():
        spark.conf.set(key, value)
    return spark, tuned


def partition_types(spec: dict[str, Any], ask: Callable[[], dict[str, str]]) -> dict[str, str]:
    """The spec's partition types; Spark is asked (`ask`, a full snapshot scan for detail())
    only for a spec without them, as older deltakeepers wrote."""
    given = spec.get("partitionTypes")
    return dict(given) if given is not None else ask()


def start_version(spec: dict[str, Any], ask: Callable[[], int]) -> int:
    """The version after which the job's commits are looked for: the planned one, which no
    commit of this job can precede; `ask` (the latest version) for a spec without it."""
    planned = spec.get("plannedVersion")
    return int(planned) if planned is not None else ask()


def _spark_partition_types(table: Any) -> dict[str, str]:
    detail = table.detail().select("partitionColumns").first()
    columns = list(detail["partitionColumns"]) if detail else []
    fields = {f.name: f.dataType.simpleString() for f in table.toDF().schema.fields}
    return {c: fields[c] for c in columns}


def _predicates(groups: list[dict[str, Any]], types: dict[str, str]) -> list[str]:
    return [partition_predicate(group, types) for group in groups]


def newest_history(history: Callable[[int], list[Any]], after: int, first: int = 4) -> list[Any]:
    """The history rows newer than `after`: the latest `first` commits, then four times as many
    until the oldest row read is at `after` or the log has no more. The whole history would
    read every commit file the log keeps."""
    limit = first
    while True:
        rows = history(limit)
        if len(rows) < limit or min(int(r["version"]) for r in rows) <= after:
            return [r for r in rows if int(r["version"]) > after]
        limit *= 4


def _our_commits(table: Any, job_id: str, after: int) -> list[dict[str, Any]]:
    def history(limit: int) -> list[Any]:
        columns = ("version", "operation", "operationMetrics", "userMetadata")
        return list(table.history(limit).select(*columns).collect())

    rows = newest_history(history, after)
    commits = [
        {
            "version": r["version"],
            "operation": r["operation"],
            "metrics": dict(r["operationMetrics"] or {}),
        }
        for r in rows
        if r["userMetadata"] == job_id
    ]
    return sorted(commits, key=lambda c: c["version"])


def _metric(commits: list[dict[str, Any]], name: str) -> int:
    return sum(int(c["metrics"].get(name, 0) or 0) for c in commits)


def _latest_version(table: Any) -> int:
    row = table.history(1).select("version").first()
    if row is None:
        raise SpecError("the table has no history: is it a Delta table?")
    return int(row["version"])


def run(spec: dict[str, Any]) -> dict[str, Any]:
    from delta.tables import DeltaTable

    began = time.monotonic()
    spark, tuned = _session(spec)
    session_seconds = round(time.monotonic() - began, 3)
    timing = {"sessionSeconds": session_seconds, "tunedConf": tuned}
    if spec["operation"] == "checkpoint":
        return {**timing, **_checkpoint(spark, spec["table"])}
    table = DeltaTable.forPath(spark, spec["table"])
    if spec["operation"] == "vacuum":
        return {**timing, **_vacuum(spark, table, spec)}
    if spec["operation"] == "expire":
        return {**timing, **_expire(spark, table, spec)}
    start = start_version(spec, lambda: _latest_version(table))
    types = partition_types(spec, lambda: _spark_partition_types(table))
    if spec["compact"]:
        where = any_of(_predicates(spec["compact"], types))
        builder = table.optimize().where(where) if types else table.optimize()
        zorder = spec.get("zOrderBy") or []
        if zorder:
            builder.executeZOrderBy(*zorder)
        else:
            builder.executeCompaction()
    if spec["purge"]:
        target = f"delta.{quote_identifier(spec['table'])}"
        where = any_of(_predicates(spec["purge"], types)) if types else "true"
        spark.sql(f"REORG TABLE {target} WHERE {where} APPLY (PURGE)")
    commits = _our_commits(table, spec["jobId"], start)
    return {
        "result": "done" if commits else "nothing-to-do",
        "sessionSeconds": session_seconds,
        "startVersion": start,
        "tunedConf": tuned,
        "commits": commits,
        "filesRemoved": _metric(commits, "numRemovedFiles"),
        "filesAdded": _metric(commits, "numAddedFiles"),
        "bytesRemoved": _metric(commits, "numRemovedBytes"),
        "bytesAdded": _metric(commits, "numAddedBytes"),
    }


def _checkpoint(spark: Any, path: str) -> dict[str, Any]:
    """Delta Spark's checkpoint of the latest version (DeltaLog.checkpoint: the layout the
    table's properties ask for, `_last_checkpoint`, then Delta's expired-log cleanup)."""
    jvm = spark._jvm
    spark.conf.set(CHECKPOINT_THROWS_CONF, "true")
    none = jvm.scala.Option.empty()
    log = jvm.org.apache.spark.sql.delta.DeltaLog.forTable(spark._jsparkSession, path)
    snapshot = log.update(False, none, none)
    version = int(snapshot.version())
    if version < 0:
        raise SpecError(f"{path} is not a Delta table (no commits)")
    log.checkpoint(snapshot, none)
    return {"result": "done", "checkpointVersion": version, "commits": []}


def _vacuum(spark: Any, table: Any, spec: dict[str, Any]) -> dict[str, Any]:
    """Delta Spark's VACUUM. Its VACUUM START/END commits (where Delta logs them on this
    store) carry the counts; without them the counts are unknown (null)."""
    spark.conf.set(RETENTION_IGNORED_CONF, "false")
    if spec.get("allowShortRetention"):
        spark.conf.set(RETENTION_CHECK_CONF, "false")
    start = _latest_version(table)
    table.vacuum(float(spec["retentionHours"]))
    commits = _our_commits(table, spec["jobId"], start)
    ended = [c for c in commits if c["operation"] == "VACUUM END"]
    return {
        "result": "done",
        "startVersion": start,
        "commits": commits,
        "filesDeleted": _metric(ended, "numDeletedFiles") if ended else None,
        "directoriesVacuumed": _metric(ended, "numVacuumedDirectories") if ended else None,
    }


def _expire(spark: Any, table: Any, spec: dict[str, Any]) -> dict[str, Any]:
    """Delta Spark's DELETE of the rows `condition` names, in the partitions given (those of
    the files an expiry left because they straddle its cutoff)."""
    start = start_version(spec, lambda: _latest_version(table))
    where = f"({spec['condition']})"
    groups = [g for g in spec["partitions"] if g]
    if groups:
        types = partition_types(spec, lambda: _spark_partition_types(table))
        where += f" AND ({any_of(_predicates(groups, types))})"
    spark.sql(f"DELETE FROM delta.{quote_identifier(spec['table'])} WHERE {where}")
    commits = _our_commits(table, spec["jobId"], start)
    return {
        "result": "done" if commits else "nothing-to-do",
        "startVersion": start,
        "condition": where,
        "commits": commits,
        "rowsDeleted": _metric(commits, "numDeletedRows"),
        "filesRemoved": _metric(commits, "numRemovedFiles"),
        "filesAdded": _metric(commits, "numAddedFiles"),
    }


def _error_name(error: BaseException) -> str:
    """delta-spark raises Python twins of its JVM errors (ConcurrentDeleteReadException, ...);
    anything else from the JVM is named by its Java class."""
    java = getattr(error, "java_exception", None)
    if java is not None:
        return str(java.getClass().getSimpleName())
    return type(error).__name__


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description="deltakeeper's compaction job (spark-submit)")
    parser.add_argument("--spec", help="a file with the job's JSON spec")
    parser.add_argument("--spec-json", help="the job's JSON spec as text")
    args = parser.parse_args(argv)
    began = time.monotonic()
    out: dict[str, Any] = {MARK: 1}
    code = 0
    try:
        spec = load_spec(args)
        out.update(jobId=spec["jobId"], table=spec["table"])
        out["plannedVersion"] = spec.get("plannedVersion")
        out.update(run(spec))
    except Exception as error:  # one JSON line whatever happened; the launcher reads it
        out.update(result="failed", error=_error_name(error), message=str(error)[:2000])
        code = 1
    out["seconds"] = round(time.monotonic() - began, 3)
    print(json.dumps(out, sort_keys=True), flush=True)
    return code


if __name__ == "__main__":
    sys.exit(main())
