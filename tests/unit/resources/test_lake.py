"""resources/lake.py: DeltaLake manifests: parsing, the names and manifests of the tables found."""

from __future__ import annotations

import re
from typing import Any

import pytest

from deltakeeper.resources import manifests
from deltakeeper.resources.lake import (
    LAKE_LABEL,
    PATH_ANNOTATION,
    parse_lake,
    table_manifest,
    table_name,
)
from deltakeeper.resources.manifests import ManifestError
from tests.support.manifests import lake_doc

DNS_LABEL = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$")


def test_a_lake_parses_with_its_defaults_and_fields() -> None:
    lake = parse_lake(lake_doc())
    assert (lake.namespace, lake.name, lake.uri) == ("data", "lake", "s3://bucket/lake/")
    assert (lake.max_depth, lake.scan_interval_s) == (3, 600)
    full = parse_lake(
        lake_doc(
            include=["sales/*"],
            exclude=["*/tmp"],
            maxDepth=5,
            scanInterval="2m",
            storage={"secretRef": {"name": "creds"}, "options": {"endpoint_url": "http://m"}},
            tableTemplate={"labels": {"team": "x"}, "policyRef": {"name": "std"}},
        )
    )
    assert full.include == ("sales/*",) and full.exclude == ("*/tmp",)
    assert (full.max_depth, full.scan_interval_s) == (5, 120)
    assert full.storage["secretRef"] == {"name": "creds"}


@pytest.mark.parametrize(
    ("spec", "says"),
    [
        ({"uri": "bucket/lake"}, "spec.uri"),
        ({"maxDepth": -1}, "maxDepth"),
        ({"maxDepth": True}, "maxDepth"),
        ({"scanInterval": "10 minutes"}, "scanInterval"),
        ({"scanInterval": "0s"}, "more than 0s"),
        ({"include": "sales/*"}, "spec.include"),
        ({"exclude": [""]}, "spec.exclude"),
        ({"maxdepth": 2}, "unknown field spec.maxdepth"),
        ({"tableTemplate": {"uri": "s3://x/y"}}, "tableTemplate.uri"),
        ({"tableTemplate": {"labels": {LAKE_LABEL: "other"}}}, LAKE_LABEL),
        ({"tableTemplate": {"vacuum": {"enabled": "yes"}}}, "vacuum.enabled"),
        ({"tableTemplate": {"vacum": {}}}, "unknown field spec.vacum"),
        ({"tableTemplate": {"logRetention": "30 days"}}, "logRetention"),
        ({"storage": {"secretRef": {}}}, "storage.secretRef"),
    ],
)
def test_bad_spec_is_a_clear_error(spec: dict[str, Any], says: str) -> None:
    with pytest.raises(ManifestError, match=re.escape(says)) as e:
        parse_lake(lake_doc(**spec), "lakes.yaml")
    assert str(e.value).startswith("lakes.yaml: DeltaLake data/lake")


def test_documents_that_are_not_a_deltalake_are_refused() -> None:
    with pytest.raises(ManifestError, match="not DeltaLake"):
        parse_lake({**lake_doc(), "kind": "DeltaTable"})
    with pytest.raises(ManifestError, match="apiVersion"):
        parse_lake({**lake_doc(), "apiVersion": "v1"})
    with pytest.raises(ManifestError, match="at most 63"):
        parse_lake({**lake_doc(), "metadata": {"name": "x" * 64}})
    with pytest.raises(ManifestError, match="spec is missing"):
        parse_lake({**lake_doc(), "spec": None})


def test_names_are_dns_labels_and_never_collide() -> None:
    paths = [
        "events",
        "sales/orders",
        "sales_orders",
        "sales.orders",
        "Sales/Orders",
        "sales-orders",
        "données/événements",
        "日本/表",
        ".",
        "a" * 300,
        "a" * 300 + "b",
        "x/" * 40 + "t",
        "-leading/trailing-",
    ]
    names = [table_name(p, "lake") for p in paths]
    assert len(set(names)) == len(names)
    for name in names:
        assert len(name) <= 63 and DNS_LABEL.match(name), name
    assert table_name("sales/orders", "lake").startswith("lake-sales-orders-")
    assert table_name("données/événements", "l").startswith("l-donnees-evenements-")
    assert table_name("events", "a") != table_name("events", "b")  # two lakes, one namespace
    assert table_name("events", "lake") == table_name("events", "lake")  # stable
    assert DNS_LABEL.match(table_name("日本", ""))  # nothing readable: the hash alone


def test_a_found_tables_manifest_is_a_valid_delta_table() -> None:
    lake = parse_lake(
        lake_doc(
            storage={"secretRef": {"name": "creds"}},
            tableTemplate={
                "labels": {"team": "data"},
                "policyRef": {"name": "std"},
                "vacuum": {"enabled": False},
            },
        )
    )
    body = table_manifest(lake, "sales/orders")
    assert body["metadata"]["name"] == lake.table_name("sales/orders")
    assert body["metadata"]["namespace"] == "data"
    assert body["metadata"]["labels"] == {"team": "data", LAKE_LABEL: "lake"}
    assert body["metadata"]["annotations"] == {PATH_ANNOTATION: "s3://bucket/lake/sales/orders"}
    assert body["spec"] == {
        "uri": "s3://bucket/lake/sales/orders",
        "storage": {"secretRef": {"name": "creds"}},
        "policyRef": {"name": "std"},
        "vacuum": {"enabled": False},
    }
    table = manifests.parse(body)  # what standalone mode and the API server accept
    assert isinstance(table, manifests.TableResource)
    assert table_manifest(lake, ".")["spec"]["uri"] == "s3://bucket/lake/"
    assert lake.table_template["labels"] == {"team": "data"}  # the template is not consumed


def test_a_lakes_template_gives_its_tables_data_retention() -> None:
    from deltakeeper.maintenance.policy import DAY_MS, DataRetention
    from deltakeeper.resources.spec import settings

    retention = {"column": "event_date", "keep": "90d", "maxFraction": 0.2}
    lake = parse_lake(lake_doc(tableTemplate={"dataRetention": retention}))
    body = table_manifest(lake, "events")
    assert body["spec"]["dataRetention"] == retention
    table = manifests.parse(body)
    assert isinstance(table, manifests.TableResource)
    assert settings(table, None)["data_retention"] == DataRetention(
        "event_date", 90 * DAY_MS, max_fraction=0.2
    )
