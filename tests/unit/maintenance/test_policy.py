"""maintenance/policy.py: Delta's defaults, explicit settings above a table's floor, sources."""

import pytest
import yaml

from deltakeeper.maintenance import policy
from deltakeeper.maintenance.policy import (
    COMPACTION_MIN_INTERVAL_MS,
    DAY_MS,
    HOUR_MS,
    MIB,
    CompactionSettings,
    PolicyError,
    effective,
)
from deltakeeper.resources.spec import from_spec
from deltakeeper.units import format_duration
from tests.support.chart import CHART


def test_the_defaults_are_delta_lakes():
    p = effective({})
    assert p.log_retention_ms == 30 * DAY_MS
    assert p.deleted_file_retention_ms == 7 * DAY_MS
    assert p.checkpoint_interval == 10
    assert p.expired_log_cleanup and p.txn_retention_ms is None


def test_explicit_values_win_over_defaults_but_not_below_the_table_floor():
    conf = {"delta.logRetentionDuration": "interval 60 days"}
    assert effective(conf, log_retention_ms=90 * DAY_MS).log_retention_ms == 90 * DAY_MS
    assert effective(conf, log_retention_ms=1 * DAY_MS).log_retention_ms == 60 * DAY_MS
    assert effective({}, deleted_file_retention_ms=DAY_MS).deleted_file_retention_ms == DAY_MS


def test_the_tables_properties_turn_cleanup_off_and_set_intervals():
    conf = {
        "delta.enableExpiredLogCleanup": "false",
        "delta.checkpointInterval": "25",
        "delta.setTransactionRetentionDuration": "interval 3 days",
    }
    p = effective(conf)
    assert not p.expired_log_cleanup
    assert p.checkpoint_interval == 25
    assert p.txn_retention_ms == 3 * DAY_MS


def test_a_bad_table_property_names_itself():
    with pytest.raises(PolicyError, match=r"delta\.deletedFileRetentionDuration"):
        effective({"delta.deletedFileRetentionDuration": "forever"})


def test_the_small_file_default_is_32_mib():
    assert policy.SMALL_FILE_BYTES == 32 * 2**20


def test_layered_settings_take_the_table_spec_then_the_policy_then_defaults():
    table_spec = from_spec({"logRetention": "60d"})
    policy_spec = from_spec({"logRetention": "90d", "deletedFileRetention": "14d"})
    flags = {"log_retention_ms": None, "checkpoint_interval": 5}
    p = effective({}, **policy.layered(flags, table_spec, policy_spec))
    assert p.log_retention_ms == 60 * DAY_MS
    assert p.deleted_file_retention_ms == 14 * DAY_MS
    assert p.checkpoint_interval == 5
    assert p.vacuum_enabled and not p.allow_short_retention and not p.write_checksum


def test_table_properties_stay_a_floor_under_layered_settings():
    conf = {"delta.deletedFileRetentionDuration": "interval 30 days"}
    p = effective(conf, **policy.layered(from_spec({"deletedFileRetention": "7d"})))
    assert p.deleted_file_retention_ms == 30 * DAY_MS


def test_bad_checkpoint_interval_property_is_a_policy_error():
    with pytest.raises(PolicyError, match=r"delta\.checkpointInterval"):
        effective({"delta.checkpointInterval": "often"})


def test_the_tables_own_retention_is_used_when_nothing_explicit_is_set():
    # Delta Spark honours a table's delta.logRetentionDuration even below its 30-day default.
    conf = {
        "delta.logRetentionDuration": "interval 1 day",
        "delta.deletedFileRetentionDuration": "interval 2 days",
    }
    p = effective(conf)
    assert p.log_retention_ms == DAY_MS
    assert p.deleted_file_retention_ms == 2 * DAY_MS
    assert p.retention_json() == {
        "logRetention": {"ms": DAY_MS, "source": "table"},
        "deletedFileRetention": {"ms": 2 * DAY_MS, "source": "table"},
    }


def test_retention_sources_say_which_layer_won():
    conf = {"delta.logRetentionDuration": "interval 10 days"}
    table_spec = from_spec({"logRetention": "5d"})
    policy_spec = from_spec({"logRetention": "20d", "deletedFileRetention": "14d"})
    settings = policy.layered(table_spec, policy_spec)
    sources = policy.sources_of(spec=table_spec, policy=policy_spec)
    p = effective(conf, **settings, sources=sources)
    # The spec's 5d is below the table's 10d: the table's property wins.
    assert p.sources == {"log_retention_ms": "table", "deleted_file_retention_ms": "policy"}
    assert (p.log_retention_ms, p.deleted_file_retention_ms) == (10 * DAY_MS, 14 * DAY_MS)
    p = effective({}, **policy.layered(policy_spec), sources=policy.sources_of(policy=policy_spec))
    assert p.sources == {"log_retention_ms": "policy", "deleted_file_retention_ms": "policy"}
    p = effective({}, log_retention_ms=DAY_MS)
    assert p.sources == {"log_retention_ms": "flag", "deleted_file_retention_ms": "default"}


def test_compaction_is_off_with_delta_like_defaults() -> None:
    c = effective({}).compaction
    assert c == CompactionSettings()
    assert not c.enabled
    assert (c.target_file_size, c.small_below) == (128 * MIB, 64 * MIB)
    assert (c.min_files_per_partition, c.max_age_ms, c.max_deleted_rows_ratio) == (
        50,
        HOUR_MS,
        0.05,
    )
    assert c.min_interval_ms == COMPACTION_MIN_INTERVAL_MS


def test_the_tables_target_file_size_is_the_default_target() -> None:
    c = effective({"delta.targetFileSize": "32mb"}).compaction
    assert (c.target_file_size, c.small_below) == (32 * MIB, 16 * MIB)
    explicit = effective({"delta.targetFileSize": "32mb"}, compaction_target_file_size=MIB)
    assert explicit.compaction.target_file_size == MIB


# The chart's values that mirror a default of policy.py: the chart cannot import Python, so
# each value and its row in the chart's README are checked against the constant.
CHART_DEFAULTS = {
    ("maxConcurrent",): policy.MAX_CONCURRENT,
    ("compaction", "maxJobs"): policy.MAX_COMPACTION_JOBS,
    ("metrics", "port"): policy.METRICS_PORT,
}


def test_the_charts_defaults_are_policys():
    values = yaml.safe_load((CHART / "values.yaml").read_text())
    readme = (CHART / "README.md").read_text()
    for path, default in CHART_DEFAULTS.items():
        value = values
        for key in path:
            value = value[key]
        assert value == default, f"values.yaml {'.'.join(path)}"
        assert f"| `{'.'.join(path)}` | `{default}` |" in readme
    # An empty defaultPollInterval falls back to the operator's own default, stated as such.
    poll = format_duration(policy.POLL_INTERVAL_MS)
    assert values["operator"]["defaultPollInterval"] == ""
    assert f"the operator's default, {poll}" in readme
    assert f"the operator's own default, {poll}" in (CHART / "values.yaml").read_text()


def test_equal_policies_are_one_object_while_held():
    """A daemon holds a policy per table; tables with the same one share it."""
    first = policy.shared(effective({"delta.logRetentionDuration": "interval 7 days"}))
    again = policy.shared(effective({"delta.logRetentionDuration": "interval 7 days"}))
    other = policy.shared(effective({"delta.logRetentionDuration": "interval 8 days"}))
    assert again is first and other is not first
    assert other != first and other.log_retention_ms == 8 * DAY_MS
