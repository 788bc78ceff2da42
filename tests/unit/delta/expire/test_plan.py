"""delta/expire/plan.py: which files an expiry removes, keeps and reports, and what it refuses,
read from hand-written logs."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from deltakeeper.delta.errors import (
    CatalogOwnedError,
    ExpiryLimitError,
    InvalidInputError,
    UnsupportedProtocolError,
)
from deltakeeper.delta.expire.plan import check_fraction
from deltakeeper.delta.expire.run import Expiry, plan_expiry
from deltakeeper.delta.table import open_table
from tests.support.expire_tables import KEEP_MS, NOW_MS, add, metadata, stats, table, ts
from tests.support.logbuilder import protocol


def planned(root: Path, column: str, max_fraction: float = 1.0) -> Any:
    return plan_expiry(open_table(str(root)), Expiry(column, KEEP_MS, max_fraction), NOW_MS)


def removed(plan: Any) -> list[str]:
    return sorted(plan.paths())


def test_string_day_partitions_before_the_cutoffs_day_go_whole(tmp_path: Path) -> None:
    root = table(
        tmp_path,
        metadata(("day",)),
        *(
            add(f"day=2026-01-0{d}/{i}.parquet", day=f"2026-01-0{d}")
            for d in range(3, 8)
            for i in range(2)
        ),
        add("day=null/0.parquet", day=None),  # type: ignore[arg-type]
        add("day=empty/0.parquet", day=""),
    )
    plan = planned(root, "day")
    assert removed(plan) == [f"day=2026-01-0{d}/{i}.parquet" for d in (3, 4) for i in range(2)]
    assert (plan.rows, plan.bytes, plan.table_rows, plan.table_files) == (40, 400, 120, 12)
    assert plan.predicate == "`day` < '2026-01-05'"
    assert plan.by == "partition values"
    assert not plan.straddling and not plan.without_stats


def test_hour_partitions_go_by_the_hour(tmp_path: Path) -> None:
    hours = ["2026-01-05T10", "2026-01-05T11", "2026-01-05T12", "2026-01-05T13"]
    root = table(tmp_path, metadata(("day",)), *(add(f"h={h}/0.parquet", day=h) for h in hours))
    plan = planned(root, "day")
    assert removed(plan) == ["h=2026-01-05T10/0.parquet", "h=2026-01-05T11/0.parquet"]
    assert plan.predicate == "`day` < '2026-01-05T12'"


def test_a_date_partition_column(tmp_path: Path) -> None:
    root = table(
        tmp_path,
        metadata(("d",)),
        *(add(f"d={d}/0.parquet", d=d) for d in ("2026-01-04", "2026-01-05")),
    )
    plan = planned(root, "d")
    assert removed(plan) == ["d=2026-01-04/0.parquet"]
    assert plan.predicate == "`d` < DATE'2026-01-05'"


def test_a_partition_value_that_is_not_iso_is_refused_naming_it(tmp_path: Path) -> None:
    root = table(
        tmp_path,
        metadata(("day",)),
        add("a/0.parquet", day="2026-01-01"),
        add("b/0.parquet", day="20260102"),
    )
    with pytest.raises(InvalidInputError, match="'20260102' of column 'day' is not an ISO-8601"):
        planned(root, "day")


def test_by_statistics_wholly_older_files_go_straddling_and_unknown_ones_stay(
    tmp_path: Path,
) -> None:
    root = table(
        tmp_path,
        metadata(),
        add("old.parquet", stat=stats(10, low=ts(1), high=ts(5, 11))),
        add("edge.parquet", stat=stats(10, low=ts(1), high="2026-01-05T11:59:59.999Z")),
        add("straddles.parquet", stat=stats(10, low=ts(4), high=ts(6))),
        add("new.parquet", stat=stats(10, low=ts(5, 12), high=ts(9))),
        add("nostats.parquet", records=None),
        add("other-columns-only.parquet", stat=stats(10, column="id", low="1", high="2")),
        add("old-with-nulls.parquet", stat=stats(10, low=ts(1), high=ts(2), nulls=3)),
        add("all-null.parquet", stat=stats(10, nulls=10)),
    )
    plan = planned(root, "ts")
    assert removed(plan) == ["edge.parquet", "old.parquet"]
    assert sorted(plan.straddling) == ["old-with-nulls.parquet", "straddles.parquet"]
    assert sorted(plan.without_stats) == ["nostats.parquet", "other-columns-only.parquet"]
    assert plan.predicate == "`ts` < TIMESTAMP'2026-01-05 12:00:00.000000Z'"
    assert plan.by == "statistics"
    assert plan.table_uncounted == 1  # nostats.parquet has no record count either


def test_date_and_timestamp_ntz_columns_by_statistics(tmp_path: Path) -> None:
    root = table(
        tmp_path,
        metadata(),
        add("d-old.parquet", stat=stats(5, "d", "2026-01-01", "2026-01-04")),
        add("d-today.parquet", stat=stats(5, "d", "2026-01-01", "2026-01-05")),
    )
    plan = planned(root, "d")
    assert removed(plan) == ["d-old.parquet"] and plan.straddling == ["d-today.parquet"]
    root = table(
        tmp_path / "ntz",
        metadata(),
        add(
            "old.parquet",
            stat=stats(5, "ntz", "2026-01-01T00:00:00.000", "2026-01-05T11:00:00.000"),
        ),
    )
    plan = planned(root, "ntz")
    assert removed(plan) == ["old.parquet"]
    assert plan.predicate == "`ntz` < TIMESTAMP_NTZ'2026-01-05 12:00:00.000000'"


def test_a_generated_partition_prunes_before_statistics(tmp_path: Path) -> None:
    """day = CAST(ntz AS DATE): partitions wholly older go without statistics, wholly newer
    ones stay without them; the cutoff's own day is read by statistics."""
    root = table(
        tmp_path,
        metadata(("day2",), {"day2": "CAST(ntz AS DATE)"}),
        add("a.parquet", records=None, day2="2026-01-04"),
        add("b.parquet", records=None, day2="2026-01-06"),
        add(
            "c.parquet",
            stat=stats(5, "ntz", "2026-01-05T00:00:00.000", "2026-01-05T10:00:00.000"),
            day2="2026-01-05",
        ),
        add(
            "d.parquet",
            stat=stats(5, "ntz", "2026-01-05T00:00:00.000", "2026-01-05T13:00:00.000"),
            day2="2026-01-05",
        ),
        add("e.parquet", records=None, day2="2026-01-05"),
    )
    plan = planned(root, "ntz")
    assert removed(plan) == ["a.parquet", "c.parquet"]
    assert plan.straddling == ["d.parquet"] and plan.without_stats == ["e.parquet"]
    assert plan.by == "generated partition column day2 and statistics"


def test_column_mapping_reads_physical_names(tmp_path: Path) -> None:
    conf = {"delta.columnMapping.mode": "name", "delta.columnMapping.maxColumnId": "7"}
    root = table(
        tmp_path,
        metadata(**conf),
        add("old.parquet", stat=stats(5, "col-ts", ts(1), ts(2))),
        add("logical-names.parquet", stat=stats(5, "ts", ts(1), ts(2))),
        proto=protocol(2, 5),
    )
    plan = planned(root, "TS")  # Spark's names are case-insensitive
    assert removed(plan) == ["old.parquet"]
    assert plan.without_stats == ["logical-names.parquet"]
    assert plan.column.physical == "col-ts" and plan.column.name == "ts"
    part = table(
        tmp_path / "p",
        metadata(("day",), **conf),
        add("a.parquet", **{"col-day": "2026-01-01"}),
        proto=protocol(2, 5),
    )
    assert removed(planned(part, "day")) == ["a.parquet"]


def test_deletion_vectors_count_the_rows_readers_see(tmp_path: Path) -> None:
    dv = {
        "storageType": "u",
        "pathOrInlineDv": "ab^-aqEH.+t@",
        "offset": 1,
        "sizeInBytes": 36,
        "cardinality": 3,
    }
    with_dv = add("dv.parquet", stat=stats(10, low=ts(1), high=ts(2)))
    with_dv["add"]["deletionVector"] = dv
    root = table(
        tmp_path,
        metadata(),
        with_dv,
        add("new.parquet", stat=stats(10, low=ts(8), high=ts(9))),
        proto=protocol(
            3, 7, readerFeatures=["deletionVectors"], writerFeatures=["deletionVectors"]
        ),
    )
    plan = planned(root, "ts")
    assert removed(plan) == ["dv.parquet"]
    assert (plan.rows, plan.table_rows) == (7, 17)


@pytest.mark.parametrize(
    ("column", "message"),
    [
        ("missing", "no column 'missing' in the table \\(columns: id, day, d, ts, ntz, n"),
        ("n", "column 'n' is of type integer; expire reads date, timestamp or timestamp_ntz"),
        ("day", "column 'day' is of type string \\(not a partition column\\)"),
    ],
)
def test_a_missing_column_or_another_type_is_refused(
    tmp_path: Path, column: str, message: str
) -> None:
    root = table(tmp_path, metadata(), add("a.parquet"))
    with pytest.raises(InvalidInputError, match=message):
        planned(root, column)


def test_append_only_tables_are_refused(tmp_path: Path) -> None:
    root = table(
        tmp_path,
        metadata(("day",), **{"delta.appendOnly": "true"}),
        add("a.parquet", day="2026-01-01"),
        proto=protocol(1, 2),
    )
    with pytest.raises(InvalidInputError, match=r"delta\.appendOnly is set"):
        planned(root, "day")


def test_catalog_managed_tables_are_refused(tmp_path: Path) -> None:
    proto = protocol(3, 7, readerFeatures=["catalogManaged"], writerFeatures=["catalogManaged"])
    root = table(tmp_path, metadata(("day",)), add("a.parquet", day="2026-01-01"), proto=proto)
    with pytest.raises(
        CatalogOwnedError, match=r"expire refused.*catalog-managed.*owns data cleanup"
    ):
        planned(root, "day")


def test_unknown_features_are_refused(tmp_path: Path) -> None:
    proto = protocol(3, 7, readerFeatures=[], writerFeatures=["someFutureFeature"])
    root = table(tmp_path, metadata(("day",)), add("a.parquet", day="2026-01-01"), proto=proto)
    with pytest.raises(
        UnsupportedProtocolError, match=r"expire refused, nothing removed: .*someFutureFeature"
    ):
        planned(root, "day")


def test_max_fraction_refuses_with_both_figures_and_the_setting(tmp_path: Path) -> None:
    root = table(
        tmp_path,
        metadata(("day",)),
        *(add(f"{d}.parquet", records=10, day=f"2026-01-0{d}") for d in range(1, 9)),
    )
    plan = planned(root, "day")  # days 1..4 of 8
    assert plan.share() == (0.5, "rows")
    check_fraction(plan, 0.5)  # exactly the share allowed
    with pytest.raises(
        ExpiryLimitError,
        match=r"remove 40 of the table's 80 rows \(50.0%\), more than maxFraction 0.4 \(40%\)",
    ):
        check_fraction(plan, 0.4)
    with pytest.raises(ExpiryLimitError):
        planned(root, "day", max_fraction=0.3)


def test_without_record_counts_the_share_is_of_bytes(tmp_path: Path) -> None:
    root = table(
        tmp_path,
        metadata(("day",)),
        add("old.parquet", records=None, size=900, day="2026-01-01"),
        add("new.parquet", records=10, size=100, day="2026-01-09"),
    )
    plan = planned(root, "day")
    assert plan.share() == (0.9, "bytes") and plan.uncounted == 1
    with pytest.raises(ExpiryLimitError, match="remove 900 of the table's 1000 bytes"):
        check_fraction(plan, 0.5)
