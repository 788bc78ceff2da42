"""resources/spec.py: a DeltaTable's and its policy's spec as settings; bad fields named."""

import re
from typing import Any

import pytest

from deltakeeper.delta.vacuum.modes import Mode
from deltakeeper.maintenance import policy
from deltakeeper.maintenance.policy import DAY_MS, MIB, CompactionSettings, PolicyError, effective
from deltakeeper.resources import spec
from deltakeeper.resources.manifests import PolicyResource, TableResource
from deltakeeper.resources.spec import from_spec, merge, settings


def test_spec_settings_parse_the_manifest_fields():
    spec = {
        "logRetention": "14d",
        "deletedFileRetention": "12h",
        "checkpoint": {"interval": 25, "writeChecksum": True},
        "vacuum": {"enabled": False, "allowShortRetention": True},
    }
    assert from_spec(spec) == {
        "log_retention_ms": 14 * DAY_MS,
        "deleted_file_retention_ms": 12 * 3_600_000,
        "checkpoint_interval": 25,
        "write_checksum": True,
        "vacuum_enabled": False,
        "allow_short_retention": True,
    }
    assert from_spec({}) == {}


@pytest.mark.parametrize(
    "spec, message",
    [
        ({"logRetention": "30 days"}, "logRetention"),
        ({"checkpoint": {"interval": 0}}, "checkpoint.interval"),
        ({"checkpoint": {"interval": "10"}}, "checkpoint.interval"),
        ({"vacuum": {"enabled": "yes"}}, "vacuum.enabled"),
        ({"vacuum": {"mode": "fast"}}, "vacuum.mode: expected one of auto, lite, full, inventory"),
        ({"vacuum": {"fullInterval": "0s"}}, "vacuum.fullInterval"),
        ({"vacuum": {"fullInterval": "weekly"}}, "vacuum.fullInterval"),
        ({"vacuum": {"inventory": "s3://x"}}, "vacuum.inventory: expected {uri, format}"),
        ({"vacuum": {"inventory": {"uri": "s3://x", "format": "orc"}}}, "vacuum.inventory.format"),
        (
            {"checkpoint": {"engine": "flink"}},
            "checkpoint.engine: expected one of auto, local, spark",
        ),
        ({"vacuum": {"engine": "Spark"}}, "vacuum.engine: expected one of auto, local, spark"),
    ],
)
def test_bad_spec_settings_name_the_field(spec, message):
    with pytest.raises(PolicyError, match=re.escape(message)):
        from_spec(spec)


def test_spec_engines_become_settings() -> None:
    got = from_spec({"checkpoint": {"engine": "spark"}, "vacuum": {"engine": "local"}})
    assert got == {"checkpoint_engine": "spark", "vacuum_engine": "local"}
    pol = effective({}, **got)
    assert (pol.checkpoint_engine, pol.vacuum_engine) == (policy.Engine.SPARK, policy.Engine.LOCAL)
    assert effective({}).checkpoint_engine is policy.Engine.AUTO


def test_spec_vacuum_modes_become_settings() -> None:
    spec = {
        "vacuum": {
            "mode": "inventory",
            "fullInterval": "3d",
            "inventory": {"uri": "s3://inventory/lake/events/", "format": "s3"},
        }
    }
    got = from_spec(spec)
    assert got == {
        "vacuum_mode": Mode.INVENTORY,
        "vacuum_full_interval_ms": 3 * DAY_MS,
        "vacuum_inventory": policy.InventorySettings("s3://inventory/lake/events/", "s3"),
    }
    pol = effective({}, **got)
    assert (pol.vacuum_mode, pol.vacuum_inventory.format) == (Mode.INVENTORY, "s3")
    assert (
        effective({}).vacuum_mode is Mode.AUTO
        and effective({}).vacuum_full_interval_ms == 7 * DAY_MS
    )
    with pytest.raises(PolicyError, match=r"needs vacuum\.inventory\.uri"):
        effective({}, vacuum_mode=Mode.INVENTORY)


def test_spec_compaction_becomes_settings() -> None:
    spec = {
        "compaction": {
            "enabled": True,
            "targetFileSize": "8Mi",
            "minFileSize": "1Mi",
            "minFilesPerPartition": 8,
            "maxAge": "10m",
            "maxDeletedRowsRatio": 0.2,
            "minInterval": "5m",
            "deadline": "30m",
            "zOrderBy": ["country", "day"],
            "maxThreads": 4,
            "sparkApplication": {"image": "deltakeeper-spark:test"},
        }
    }
    c = effective({}, **from_spec(spec)).compaction
    assert c == CompactionSettings(
        target_file_size=8 * MIB,
        min_file_size=MIB,
        min_files_per_partition=8,
        max_age_ms=10 * 60_000,
        max_deleted_rows_ratio=0.2,
        enabled=True,
        min_interval_ms=5 * 60_000,
        deadline_ms=30 * 60_000,
        z_order_by=("country", "day"),
        max_threads=4,
        spark_application={"image": "deltakeeper-spark:test"},
    )


def test_the_table_spec_wins_field_by_field_over_its_policy() -> None:
    table = TableResource("ns", "t", {}, 1, {"uri": "/x", "compaction": {"targetFileSize": "8Mi"}})
    policy_spec = {"compaction": {"enabled": True, "targetFileSize": "1Gi", "minInterval": "1m"}}
    policy = PolicyResource("ns", "p", {}, 1, policy_spec, None)
    c = effective({}, **settings(table, policy)).compaction
    assert c.enabled and c.target_file_size == 8 * MIB and c.min_interval_ms == 60_000


def test_the_tables_spark_application_merges_key_by_key_over_its_policys() -> None:
    """Table over policy over the operator-wide default: objects merged, lists replaced."""
    from deltakeeper.k8s.spark_application import Owner, merge, spark_application

    policy_app = {
        "image": "spark:policy",
        "driver": {"cores": 2, "memory": "2g", "env": [{"name": "A", "value": "1"}]},
        "executor": {"instances": 4},
        "sparkConf": {"spark.a": "policy", "spark.b": "policy"},
    }
    table_app = {
        "driver": {"memory": "8g", "env": [{"name": "B", "value": "2"}]},
        "sparkConf": {"spark.b": "table"},
    }
    table = TableResource(
        "ns", "t", {}, 1, {"uri": "/x", "compaction": {"sparkApplication": table_app}}
    )
    policy_spec = {"compaction": {"enabled": True, "sparkApplication": policy_app}}
    policy = PolicyResource("ns", "p", {}, 1, policy_spec, None)
    got = effective({}, **settings(table, policy)).compaction.spark_application
    assert got == {
        "image": "spark:policy",
        "driver": {"cores": 2, "memory": "8g", "env": [{"name": "B", "value": "2"}]},
        "executor": {"instances": 4},
        "sparkConf": {"spark.a": "policy", "spark.b": "table"},
    }
    assert policy_app["driver"]["memory"] == "2g"  # the policy's own spec is left alone
    default = {"image": "spark:default", "serviceAccount": "sa", "executor": {"cores": 3}}
    owner = Owner("t", "ns", "uid")
    spec = spark_application(owner, "j", {"jobId": "j"}, merge(default, got), {})["spec"]
    assert (spec["image"], spec["serviceAccount"]) == ("spark:policy", "sa")
    assert spec["executor"] == {**spec["executor"], "instances": 4, "cores": 3}
    assert spec["driver"]["memory"] == "8g" and spec["driver"]["cores"] == 2
    assert spec["sparkConf"]["spark.a"] == "policy" and spec["sparkConf"]["spark.b"] == "table"


@pytest.mark.parametrize(
    ("field", "value", "message"),
    [
        ("enabled", "yes", "compaction.enabled: expected true or false"),
        ("targetFileSize", "big", "compaction.targetFileSize"),
        ("minFilesPerPartition", 0, "compaction.minFilesPerPartition"),
        ("maxAge", "1y", "compaction.maxAge"),
        ("maxDeletedRowsRatio", 2, "compaction.maxDeletedRowsRatio: expected a number from 0"),
        ("zOrderBy", "day", "compaction.zOrderBy: expected a list of column names"),
        ("zOrderBy", [], "compaction.zOrderBy: expected a list of column names"),
        ("zOrderBy", ["day", 3], "compaction.zOrderBy: expected column names, got 3"),
        ("zOrderBy", ["day", "day"], "compaction.zOrderBy: day named more than once"),
        ("maxThreads", 0, "compaction.maxThreads: expected a whole number above 0"),
        ("maxThreads", "4", "compaction.maxThreads: expected a whole number above 0"),
        ("sparkApplication", "spark:4", "compaction.sparkApplication: expected the fields"),
        (
            "sparkApplication",
            {"arguments": ["x"]},
            "sparkApplication.arguments: set by deltakeeper",
        ),
        ("sparkApplication", {"type": "Scala"}, "sparkApplication.type: the compaction job is Py"),
        ("sparkApplication", {"driver": "big"}, "sparkApplication.driver: expected an object"),
        ("sparkApplication", {"sparkConf": {"a": 1}}, r"sparkConf.a: expected a string value"),
        ("sparkApplication", {"timeToLiveSeconds": -1}, "timeToLiveSeconds: expected a whole"),
        (
            "sparkApplication",
            {"driver": {"env": [{"name": "AWS_SECRET_ACCESS_KEY", "value": "x"}]}},
            "driver.env: AWS_SECRET_ACCESS_KEY has a literal value; use valueFrom.secretKeyRef",
        ),
    ],
)
def test_bad_compaction_fields_name_themselves(field: str, value: Any, message: str) -> None:
    with pytest.raises(PolicyError, match=message):
        from_spec({"compaction": {field: value}})


def _table(labels: dict[str, str], **spec: Any) -> TableResource:
    return TableResource("lake", "t", labels, 1, {"uri": "s3://lake/t", **spec})


def _policy(name: str, selector: Any, **spec: Any) -> PolicyResource:
    return PolicyResource("lake", name, {}, 1, {"tableSelector": selector, **spec}, selector)


def test_table_settings_win_over_the_policy_over_defaults() -> None:
    p = _policy("p", {}, logRetention="60d", deletedFileRetention="14d", pollInterval="1m")
    t = _table({}, logRetention="10d", checkpoint={"interval": 5})
    settings = spec.settings(t, p)
    assert settings["log_retention_ms"] == 10 * policy.DAY_MS
    assert settings["deleted_file_retention_ms"] == 14 * policy.DAY_MS
    assert settings["checkpoint_interval"] == 5
    assert settings["sources"] == {
        "log_retention_ms": "spec",
        "deleted_file_retention_ms": "policy",
    }
    assert spec.poll_interval_ms(t, p) == 60_000
    assert spec.poll_interval_ms(t, None) == policy.POLL_INTERVAL_MS
    assert spec.small_file_bytes(t, None) == policy.SMALL_FILE_BYTES


def test_poll_interval_spec_then_policy_then_the_daemons_default() -> None:
    bare, own = _table({}), _table({}, pollInterval="10s")
    p = _policy("p", {}, pollInterval="1m")
    assert spec.poll_interval_ms(own, p, default_ms=120_000) == 10_000
    assert spec.poll_interval_ms(bare, p, default_ms=120_000) == 60_000
    assert spec.poll_interval_ms(bare, None, default_ms=120_000) == 120_000
    assert spec.poll_interval_ms(bare, None) == policy.POLL_INTERVAL_MS
    settings = spec.watch_settings(bare, None, default_poll_ms=120_000)
    assert settings["poll_interval_s"] == 120
    with pytest.raises(ValueError, match="more than 0s"):
        spec.poll_interval_ms(_table({}, pollInterval="0s"), None, default_ms=120_000)


def test_merge_merges_objects_and_replaces_the_rest() -> None:
    base = {"a": {"b": 1, "c": [1]}, "d": 1}
    assert merge(base, {"a": {"c": [2]}, "e": 2}) == {"a": {"b": 1, "c": [2]}, "d": 1, "e": 2}
    assert base == {"a": {"b": 1, "c": [1]}, "d": 1}


def test_events_from_the_table_else_its_policy_with_the_resync_default() -> None:
    p = _policy("p", {}, events={"source": "webhook", "resyncInterval": "2h"})
    assert spec.watch_settings(_table({}), p)["resync_interval_s"] == 7200
    own = _table({}, events={"source": "webhook"})
    got = spec.watch_settings(own, p)
    assert (got["events_source"], got["resync_interval_s"]) == ("webhook", 3600)
    assert "events_source" not in spec.watch_settings(_table({}), None)  # polled only


@pytest.mark.parametrize(
    ("source", "uri"),
    [
        ("sqs://eu-west-1/123456789012/lake-events", "s3://lake/t"),
        ("sqs://us-east-1/000000000000/q?endpoint=http://127.0.0.1:9324", "s3://lake/t"),
        ("pubsub://projects/my-project/subscriptions/lake-events", "gs://lake/t"),
        ("azqueue://lakeacct/lake-events", "abfss://lake@lakeacct.dfs.core.windows.net/t"),
        ("azqueue://lakeacct/lake-events", "az://lake/t"),
    ],
)
def test_queue_sources_of_the_tables_store_are_taken(source: str, uri: str) -> None:
    table = TableResource("lake", "t", {}, 1, {"uri": uri, "events": {"source": source}})
    assert spec.watch_settings(table, None)["events_source"] == source


@pytest.mark.parametrize(
    ("events", "uri", "message"),
    [
        ({"source": "sqs://queue"}, "s3://lake/t", "expected sqs://REGION/ACCOUNT/QUEUE"),
        ({"source": "sqs://us-east-1/12/q"}, "s3://lake/t", "account is 12 digits"),
        ({"source": "sqs://us-east-1/123456789012/q?x=1"}, "s3://lake/t", "only \\?endpoint"),
        ({"source": "sqs://us-east-1/123456789012/q?endpoint=ftp://h"}, "s3://lake/t", "http"),
        ({"source": "pubsub://projects/p/topics/s"}, "gs://lake/t", "subscriptions/SUB"),
        ({"source": "azqueue://Acct/q"}, "az://lake/t", "ACCOUNT/QUEUE"),
        ({"source": "azqueue://acct/Bad_Queue"}, "az://lake/t", "not an Azure queue name"),
        ({"source": "sqs://us-east-1/123456789012/q"}, "gs://lake/t", "not a s3 table"),
        ({"source": "pubsub://projects/p/subscriptions/s"}, "s3://lake/t", "not a gcs table"),
        ({"source": "azqueue://acct/events"}, "s3://lake/t", "not a azure table"),
        ({"source": "kafka"}, "s3://lake/t", "expected webhook or a queue URI"),
        ({"source": "webhook"}, "/data/t", "not in one: remove spec.events"),
        ({"source": "webhook", "resyncInterval": "0s"}, "s3://lake/t", "more than 0s"),
    ],
)
def test_events_this_build_cannot_keep_are_refused(events: Any, uri: str, message: str) -> None:
    table = TableResource("lake", "t", {}, 1, {"uri": uri, "events": events})
    with pytest.raises(PolicyError, match=message):
        spec.watch_settings(table, None)


def test_data_retention_becomes_expire_settings() -> None:
    got = from_spec({"dataRetention": {"column": "day", "keep": "90d"}})
    assert got == {"data_retention": policy.DataRetention("day", 90 * DAY_MS)}
    assert got["data_retention"].max_fraction == policy.EXPIRE_MAX_FRACTION == 0.5
    full = {
        "column": "ts",
        "keep": "36h",
        "dryRun": True,
        "maxFraction": 0.9,
        "rewrite": "spark",
        "schedule": "0 4 * * *",
    }
    assert from_spec({"dataRetention": full})["data_retention"] == policy.DataRetention(
        "ts", 36 * 3_600_000, True, 0.9, policy.Rewrite.SPARK, "0 4 * * *"
    )
    chosen = effective({}, **from_spec({"dataRetention": full}))
    assert chosen.data_retention is not None and chosen.data_retention.column == "ts"
    assert effective({}).data_retention is None


def test_the_delta_library_and_the_policy_default_max_fraction_agree() -> None:
    from deltakeeper.delta.expire.plan import DEFAULT_MAX_FRACTION

    assert DEFAULT_MAX_FRACTION == policy.EXPIRE_MAX_FRACTION


@pytest.mark.parametrize(
    ("retention", "message"),
    [
        ({"keep": "90d"}, "dataRetention.column: expected the name of the time column"),
        ({"column": "day"}, "dataRetention.keep: required"),
        ({"column": "day", "keep": "0d"}, "dataRetention.keep: expected a whole number above 0"),
        ({"column": "day", "keep": "3 months"}, "dataRetention.keep: '3 months' is not a duration"),
        ({"column": "day", "keep": "9d", "maxFraction": 2}, "dataRetention.maxFraction"),
        ({"column": "day", "keep": "9d", "rewrite": "all"}, "dataRetention.rewrite: expected one"),
        ({"column": "day", "keep": "9d", "schedule": "daily"}, "dataRetention.schedule 'daily'"),
        ({"column": "day", "keep": "9d", "dryRun": "yes"}, "dataRetention.dryRun"),
    ],
)
def test_bad_data_retention_names_the_field(retention: dict[str, Any], message: str) -> None:
    with pytest.raises(PolicyError, match=re.escape(message)):
        from_spec({"dataRetention": retention})


def test_a_policys_data_retention_applies_unless_the_table_sets_its_own() -> None:
    ninety = {"dataRetention": {"column": "day", "keep": "90d"}}
    pol = PolicyResource("ns", "std", {}, 1, ninety, None)
    plain = TableResource("ns", "t", {}, 1, {"uri": "s3://b/t"})
    seven = {"column": "ts", "keep": "7d"}
    own = TableResource("ns", "u", {}, 1, {"uri": "s3://b/u", "dataRetention": seven})
    assert settings(plain, pol)["data_retention"] == policy.DataRetention("day", 90 * DAY_MS)
    assert settings(own, pol)["data_retention"] == policy.DataRetention("ts", 7 * DAY_MS)
