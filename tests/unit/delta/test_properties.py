"""delta/properties.py: typed `delta.*` table properties, their parsing and Delta's defaults."""

import pytest

from deltakeeper.delta.properties import (
    DAY_MS,
    PropertyError,
    TableProperties,
    duration_text,
    parse_calendar_interval_ms,
)


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
def test_delta_calendar_intervals_parse_to_ms(text, ms):
    assert parse_calendar_interval_ms(text) == ms


@pytest.mark.parametrize("text", ["", "30d", "interval 1 month", "interval 2 years", "soon"])
def test_anything_else_is_not_a_calendar_interval(text):
    with pytest.raises(PropertyError):
        parse_calendar_interval_ms(text)


def test_properties_are_read_when_asked_for():
    props = TableProperties({"delta.logRetentionDuration": "soon"})
    assert props.deleted_file_retention_ms is None  # the bad one does not stop the others
    with pytest.raises(PropertyError, match=r"table property delta\.logRetentionDuration"):
        _ = props.log_retention_ms


def test_defaults_and_parsing_as_delta_has_them():
    empty = TableProperties({})
    assert (empty.checkpoint_interval, empty.checkpoint_policy) == (None, "v2")
    assert empty.expired_log_cleanup and empty.write_stats_as_json
    assert empty.write_stats_as_struct and not empty.in_commit_timestamps
    assert (empty.num_indexed_cols, empty.target_file_size) == (32, None)
    conf = {
        "delta.checkpointPolicy": " Classic ",
        "delta.targetFileSize": "64mb",
        "delta.universalFormat.enabledFormats": "hudi, Iceberg",
        "delta.dataSkippingNumIndexedCols": "many",
    }
    props = TableProperties(conf)
    assert props.checkpoint_policy == "classic"
    assert props.target_file_size == 64 * 2**20
    assert "iceberg" in props.universal_formats
    assert props.num_indexed_cols is None


@pytest.mark.parametrize("value", ["often", "0", ""])
def test_a_checkpoint_interval_is_a_whole_number_above_zero(value):
    with pytest.raises(PropertyError, match=r"delta\.checkpointInterval"):
        _ = TableProperties({"delta.checkpointInterval": value}).checkpoint_interval


def test_durations_read_in_days_or_hours():
    assert [duration_text(ms) for ms in (7 * DAY_MS, 12 * 3_600_000, 1500)] == [
        "7 days",
        "12 hours",
        "1500 ms",
    ]
