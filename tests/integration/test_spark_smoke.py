"""The Spark-written tables exist, carry the feature each was made for, and Spark reads them back.

The tables come from tests/support/spark.py (cached under ~/.cache/deltakeeper/spark-tables/);
the feature checks read the raw `_delta_log` files, the read-back uses Delta Spark itself and
compares with the row model the generator kept in tables.json.
"""

from __future__ import annotations

import os
from typing import Any

import pytest

from tests.support import spark as spark_support
from tests.support.spark import TABLES, spark_session, table_manifest, verify_table

pytestmark = pytest.mark.spark

# The session fixture, also usable from a conftest (`from tests.support.spark import ...`).
spark_tables = spark_support.spark_tables


@pytest.fixture(scope="module")
def spark() -> Any:
    """The worker's session, kept for the whole run (stopping it would make the next module
    start another)."""
    return spark_session("deltakeeper-spark-smoke")


def test_every_table_is_generated(spark_tables: dict[str, str]) -> None:
    assert sorted(spark_tables) == sorted(TABLES)
    for name, path in spark_tables.items():
        assert os.path.isdir(os.path.join(path, "_delta_log")), name
        assert table_manifest(path)["rows"] > 0, name


@pytest.mark.parametrize("name", TABLES)
def test_table_has_its_feature(spark_tables: dict[str, str], name: str) -> None:
    verify_table(name, spark_tables[name])


@pytest.mark.parametrize("name", TABLES)
def test_spark_reads_back_expected_rows(
    spark: Any, spark_tables: dict[str, str], name: str
) -> None:
    path = spark_tables[name]
    expected = table_manifest(path)
    df = spark.read.format("delta").load(path)
    row = df.selectExpr("count(*) AS n", "coalesce(sum(id), 0) AS s").collect()[0]
    assert (row["n"], row["s"]) == (expected["rows"], expected["id_sum"])
    history = spark.sql(f"DESCRIBE HISTORY delta.`{path}`").selectExpr("max(version)").collect()
    assert history[0][0] == expected["version"]
