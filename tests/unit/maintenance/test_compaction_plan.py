"""maintenance/compaction_plan.py: which partitions are due and why; a job's commits read back."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pyarrow as pa

from deltakeeper.compaction.launcher import JobResult
from deltakeeper.delta.schema import add_schema
from deltakeeper.delta.snapshot import Metadata
from deltakeeper.delta.table import open_table
from deltakeeper.maintenance import compaction_plan
from deltakeeper.maintenance.compaction_plan import (
    CompactionSettings,
    Why,
    plan,
    timestamp_partitions,
)
from deltakeeper.maintenance.operations.compaction import job_outcome
from deltakeeper.maintenance.operations.outcome import Result
from tests.support.logbuilder import add, remove
from tests.support.tables import small_file_table

MIB = 2**20
NOW = 1_800_000_000_000
HOUR = 3_600_000
COLUMNS = ("path", "partitionValues", "size", "modificationTime", "deletionVector", "stats")


def files(rows: list[dict[str, Any]]) -> pa.Table:
    full = [
        {
            "path": r.get("path", f"f{i}.parquet"),
            "partitionValues": list((r.get("part") or {}).items()),
            "size": r["size"],
            "modificationTime": r.get("mtime", NOW),
            "deletionVector": r.get("dv"),
            "stats": r.get("stats"),
        }
        for i, r in enumerate(rows)
    ]
    return pa.Table.from_pylist(full, schema=add_schema(COLUMNS))


def dv(deleted: int) -> dict[str, Any]:
    return {
        "storageType": "u",
        "pathOrInlineDv": "ab^-aqEH.-t@S}K{vb[*k^",
        "offset": 1,
        "sizeInBytes": 36,
        "cardinality": deleted,
        "maxRowIndex": None,
    }


def stats(records: int) -> str:
    return json.dumps({"numRecords": records})


SETTINGS = CompactionSettings(target_file_size=128 * MIB, min_files_per_partition=4)


def test_a_partition_is_due_at_the_minimum_count_of_small_files() -> None:
    rows = [{"part": {"p": "a"}, "size": MIB} for _ in range(4)]
    rows += [{"part": {"p": "b"}, "size": MIB} for _ in range(3)]
    result = plan(files(rows), ("p",), SETTINGS, NOW)
    [due] = result.partitions
    assert due.values == {"p": "a"} and due.why is Why.MANY_SMALL_FILES
    assert (due.files, due.bytes, due.expected_files) == (4, 4 * MIB, 1)
    assert result.small_files == 7 and result.partitions_scanned == 2


def test_files_at_half_the_target_or_more_are_not_small() -> None:
    rows = [{"part": {"p": "a"}, "size": 64 * MIB} for _ in range(10)]
    rows += [{"part": {"p": "a"}, "size": 64 * MIB - 1} for _ in range(3)]
    result = plan(files(rows), ("p",), SETTINGS, NOW)
    assert not result.due and result.small_files == 3


def test_an_explicit_minimum_file_size_wins_over_half_the_target() -> None:
    rows = [{"size": 10 * MIB} for _ in range(5)]
    settings = CompactionSettings(128 * MIB, min_file_size=8 * MIB, min_files_per_partition=4)
    assert not plan(files(rows), (), settings, NOW).due
    assert plan(files(rows), (), SETTINGS, NOW).due


def test_two_small_files_are_due_once_the_oldest_is_older_than_max_age() -> None:
    young = [{"part": {"p": "x"}, "size": MIB, "mtime": NOW - HOUR + 1} for _ in range(2)]
    old = [
        {"part": {"p": "y"}, "size": MIB, "mtime": NOW - HOUR},
        {"part": {"p": "y"}, "size": MIB},
    ]
    lone = [{"part": {"p": "z"}, "size": MIB, "mtime": NOW - 10 * HOUR}]
    result = plan(files(young + old + lone), ("p",), SETTINGS, NOW)
    [due] = result.partitions
    assert due.values == {"p": "y"} and due.why is Why.SMALL_FILES_AGED
    assert due.oldest_ms == NOW - HOUR


def test_deleted_rows_over_the_ratio_make_a_purge() -> None:
    rows = [
        {"part": {"p": "a"}, "size": 100 * MIB, "dv": dv(6), "stats": stats(100)},  # 6% > 5%
        {"part": {"p": "b"}, "size": 100 * MIB, "dv": dv(5), "stats": stats(100)},  # 5%: not over
        {"part": {"p": "c"}, "size": 100 * MIB, "dv": dv(1)},  # no record count: a candidate
    ]
    result = plan(files(rows), ("p",), SETTINGS, NOW)
    assert [(p.values["p"], p.why, p.purge_only) for p in result.partitions] == [
        ("a", Why.DELETED_ROWS, True),
        ("c", Why.DELETED_ROWS, True),
    ]
    assert result.partitions[0].files == 1 and result.partitions[0].bytes == 100 * MIB


def test_null_and_special_partition_values_group_apart() -> None:
    values = ["it's", "a=b/c", "ünï", None, ""]
    rows = [{"part": {"s": v}, "size": MIB} for v in values for _ in range(4)]
    result = plan(files(rows), ("s",), SETTINGS, NOW)
    # The protocol reads an empty partition value as null: "" and null are one partition.
    got = {p.values["s"]: p.files for p in result.partitions}
    assert got == {"it's": 4, "a=b/c": 4, "ünï": 4, None: 8}


def test_expected_files_are_the_bytes_in_target_sized_files() -> None:
    rows = [{"size": 60 * MIB} for _ in range(5)]
    result = plan(files(rows), (), SETTINGS, NOW)
    assert result.expected_files == 3  # 300 MiB in 128 MiB files


def test_an_empty_table_plans_nothing() -> None:
    result = plan(files([]), ("p",), SETTINGS, NOW)
    assert not result.due and result.small_files == 0 and result.partitions_scanned == 0
    assert result.to_json()["partitions"] == []


def test_the_plan_says_why_in_json() -> None:
    rows = [{"part": {"p": "a"}, "size": MIB} for _ in range(4)]
    out = plan(files(rows), ("p",), SETTINGS, NOW).to_json()
    assert out["due"] is True and out["files"] == 4 and out["expectedFiles"] == 1
    assert out["partitions"][0]["why"] == "many-small-files"
    assert out["partitions"][0]["partition"] == {"p": "a"}


def test_one_timestamp_partition_in_two_spellings_is_one_partition() -> None:
    """delta-rs and Delta Spark spell the same UTC instant differently; Spark's compaction
    of a delta-rs table leaves both spellings in one partition."""
    spellings = ["2024-02-29 12:30:01.123456", "2024-02-29T12:30:01.123456Z"]
    rows = [{"part": {"ts": t, "p": "a"}, "size": MIB} for t in spellings for _ in range(2)]
    rows += [{"part": {"ts": "1999-12-31 23:59:59", "p": "a"}, "size": MIB}]
    result = plan(files(rows), ("p", "ts"), SETTINGS, NOW, timestamps=frozenset({"ts"}))
    [due] = result.partitions
    assert due.values == {"p": "a", "ts": "2024-02-29 12:30:01.123456"} and due.files == 4
    assert result.partitions_scanned == 2
    # Without the column's type, the spellings stay apart and neither group is due.
    assert not plan(files(rows), ("p", "ts"), SETTINGS, NOW).due


def test_timestamp_partitions_are_named_as_in_the_log() -> None:
    fields = [
        {"name": "ts", "type": "timestamp", "nullable": True, "metadata": {}},
        {"name": "ntz", "type": "timestamp_ntz", "nullable": True, "metadata": {}},
        {"name": "d", "type": "timestamp", "nullable": True, "metadata": {}},
    ]
    meta = Metadata.from_action(
        {
            "id": "t",
            "schemaString": json.dumps({"type": "struct", "fields": fields}),
            "partitionColumns": ["ts", "ntz"],
            "configuration": {},
        }
    )
    assert timestamp_partitions(meta) == {"ts"}


def test_the_job_spec_carries_z_order_columns_and_threads_only_when_set() -> None:
    from deltakeeper.maintenance.compaction_plan import job_spec

    rows = [{"part": {"p": "a"}, "size": MIB} for _ in range(4)]
    plain = job_spec(plan(files(rows), ("p",), SETTINGS, NOW), {"p": "p"}, "dk-1", 3)
    assert "zOrderBy" not in plain and "maxThreads" not in plain
    settings = CompactionSettings(
        128 * MIB, min_files_per_partition=4, z_order_by=("x", "y"), max_threads=2
    )
    spec = job_spec(plan(files(rows), ("p",), settings, NOW), {"p": "p"}, "dk-1", 3)
    assert spec["zOrderBy"] == ["x", "y"] and spec["maxThreads"] == 2
    assert spec["compact"] == [{"p": "a"}] and spec["plannedVersion"] == 3


def _meta(fields: list[tuple[str, Any]], partitions: list[str], mode: str = "none") -> Metadata:
    schema = [
        {
            "name": name,
            "type": kind,
            "nullable": True,
            "metadata": {"delta.columnMapping.physicalName": f"col-{i}"},
        }
        for i, (name, kind) in enumerate(fields)
    ]
    return Metadata.from_action(
        {
            "id": "t",
            "schemaString": json.dumps({"type": "struct", "fields": schema}),
            "partitionColumns": partitions,
            "configuration": {"delta.columnMapping.mode": mode},
        }
    )


def test_partition_types_are_spark_sql_names_by_logical_column() -> None:
    from deltakeeper.maintenance.compaction_plan import spark_partition_types

    kinds = [
        ("s", "string"),
        ("l", "long"),
        ("i", "integer"),
        ("sh", "short"),
        ("b", "byte"),
        ("f", "float"),
        ("d", "double"),
        ("bo", "boolean"),
        ("bi", "binary"),
        ("dt", "date"),
        ("ts", "timestamp"),
        ("ntz", "timestamp_ntz"),
        ("dec", "decimal(12, 3)"),
        ("dec0", "decimal"),
        ("data", "string"),
    ]
    meta = _meta(kinds, [k for k, _ in kinds if k != "data"], mode="name")
    assert spark_partition_types(meta) == {
        "s": "string",
        "l": "bigint",
        "i": "int",
        "sh": "smallint",
        "b": "tinyint",
        "f": "float",
        "d": "double",
        "bo": "boolean",
        "bi": "binary",
        "dt": "date",
        "ts": "timestamp",
        "ntz": "timestamp_ntz",
        "dec": "decimal(12,3)",
        "dec0": "decimal(10,0)",
    }
    # Keyed as partitionColumns names the column, even when the schema's case differs.
    assert spark_partition_types(_meta([("Region", "string")], ["region"])) == {"region": "string"}
    assert spark_partition_types(_meta([("x", "long")], [])) == {}


def test_partition_types_unknown_to_this_build_leave_the_job_to_ask_spark() -> None:
    from deltakeeper.maintenance.compaction_plan import spark_partition_types

    assert spark_partition_types(_meta([("p", "string"), ("v", "variant")], ["p", "v"])) is None
    assert spark_partition_types(_meta([("p", "string")], ["p", "gone"])) is None
    assert spark_partition_types(_meta([("p", "decimal(x,1)")], ["p"])) is None


def test_the_job_spec_carries_partition_types_only_when_given() -> None:
    from deltakeeper.maintenance.compaction_plan import job_spec

    rows = [{"part": {"col-0": "a"}, "size": MIB} for _ in range(4)]
    settings = CompactionSettings(128 * MIB, min_files_per_partition=4)
    found = plan(files(rows), ("col-0",), settings, NOW)
    assert "partitionTypes" not in job_spec(found, {"col-0": "p"}, "dk-1", 3)
    spec = job_spec(found, {"col-0": "p"}, "dk-1", 3, {"p": "date"})
    assert spec["partitionTypes"] == {"p": "date"} and spec["compact"] == [{"p": "a"}]


def test_the_log_replay_gets_a_partition_per_20000_actions_up_to_deltas_50() -> None:
    from deltakeeper.maintenance.compaction_plan import job_spec, snapshot_partitions

    sizes = [0, 1, 20_000, 20_001, 200_000, 1_000_000, 50_000_000]
    assert [snapshot_partitions(n) for n in sizes] == [1, 1, 1, 2, 10, 50, 50]
    rows = [{"part": {"p": "a"}, "size": MIB} for _ in range(4)]
    found = plan(files(rows), ("p",), CompactionSettings(128 * MIB, min_files_per_partition=4), NOW)
    assert "snapshotPartitions" not in job_spec(found, {"p": "p"}, "dk-1", 3)
    assert job_spec(found, {"p": "p"}, "dk-1", 3, None, 45_000)["snapshotPartitions"] == 3


def test_a_jobs_commits_are_read_back_by_their_tag(tmp_path: Path) -> None:
    log = small_file_table(tmp_path)
    tag = "deltakeeper-abc-1"
    info = {"commitInfo": {"operation": "OPTIMIZE", "userMetadata": tag}}
    removes = [remove(f"day=a/{i}.parquet") for i in range(4)]
    for r in removes:
        r["remove"]["size"] = 1000
    v = log.commit(info, *removes, add("day=a/big.parquet", size=3000, day="a"))
    other = log.commit({"commitInfo": {"operation": "OPTIMIZE", "userMetadata": "someone"}})
    table = open_table(str(tmp_path))
    back = compaction_plan.read_back(table, tag, [v, other, 99])
    assert back.versions == (v,)
    assert (back.files_removed, back.files_added) == (4, 1)
    assert (back.bytes_removed, back.bytes_added) == (4000, 3000)

    done = {"result": "done", "commits": [{"version": v}]}
    outcome = job_outcome(table, tag, JobResult(0, done, ""))
    assert outcome.result is Result.DONE and outcome.detail == back
    assert "rewrote 4 files" in outcome.message and f"at version {v}" in outcome.message

    # A job that claims a commit the log does not carry with its tag did not do it.
    claims = {"result": "done", "commits": [{"version": other}]}
    assert job_outcome(table, tag, JobResult(0, claims, "")).result is Result.FAILED
    failed = {"result": "failed", "error": "ConcurrentDeleteReadException", "message": "lost"}
    outcome = job_outcome(table, tag, JobResult(1, failed, ""))
    assert outcome.result is Result.FAILED
    assert outcome.message == "ConcurrentDeleteReadException: lost"


def test_a_job_line_naming_commits_the_log_has_not_is_not_believed() -> None:
    proven = compaction_plan.Compacted("dk-1", (4, 5))
    assert compaction_plan.not_in_log(proven, [4, 5]) is None
    partly = compaction_plan.Compacted("dk-1", (4,))
    said = "the job reported commits at [5], but the log has none of dk-1 there"
    assert compaction_plan.not_in_log(partly, [4, 5]) == said
