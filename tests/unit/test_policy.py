import pytest

from deltakeeper.maintenance import policy
from deltakeeper.maintenance.policy import DAY_MS, PolicyError, effective, parse_interval_ms


@pytest.mark.parametrize(
    "text, ms",
    [
        ("interval 30 days", 30 * DAY_MS),
        ("interval 1 week", 7 * DAY_MS),
        ("7 days", 7 * DAY_MS),
        ("INTERVAL 2 days 12 hours", 2 * DAY_MS + 12 * 3_600_000),
        ("interval 90 minutes", 90 * 60_000),
        ("interval 1 second", 1000),
    ],
)
def test_delta_intervals(text, ms):
    assert parse_interval_ms(text) == ms


@pytest.mark.parametrize("text", ["", "30d", "interval 1 month", "interval 2 years", "soon"])
def test_bad_intervals(text):
    with pytest.raises(PolicyError):
        parse_interval_ms(text)


def test_defaults_are_delta_lakes():
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


def test_table_switches():
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


def test_small_file_default_is_defined_once():
    assert policy.SMALL_FILE_BYTES == 32 * 2**20
