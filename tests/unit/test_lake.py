"""DeltaLake manifests: parsing, managed-table names and manifests, and LakeScanner."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import pytest

from deltakeeper.resources import manifests
from deltakeeper.resources.lake import (
    LAKE_LABEL,
    PATH_ANNOTATION,
    LakeResource,
    parse_lake,
    table_manifest,
    table_name,
)
from deltakeeper.resources.manifests import ManifestError
from deltakeeper.runtime import metrics
from deltakeeper.runtime.discovery import LakeScanner, ScanResult, lake_status
from tests.unit.test_discover import make_table

DNS_LABEL = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$")


def doc(**spec: Any) -> dict[str, Any]:
    return {
        "apiVersion": "deltakeeper.io/v1alpha1",
        "kind": "DeltaLake",
        "metadata": {"name": "lake", "namespace": "data"},
        "spec": {"uri": "s3://bucket/lake/", **spec},
    }


def test_parse_defaults_and_fields() -> None:
    lake = parse_lake(doc())
    assert (lake.namespace, lake.name, lake.uri) == ("data", "lake", "s3://bucket/lake/")
    assert (lake.max_depth, lake.scan_interval_s) == (3, 600)
    full = parse_lake(
        doc(
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
        parse_lake(doc(**spec), "lakes.yaml")
    assert str(e.value).startswith("lakes.yaml: DeltaLake data/lake")


def test_bad_documents() -> None:
    with pytest.raises(ManifestError, match="not DeltaLake"):
        parse_lake({**doc(), "kind": "DeltaTable"})
    with pytest.raises(ManifestError, match="apiVersion"):
        parse_lake({**doc(), "apiVersion": "v1"})
    with pytest.raises(ManifestError, match="at most 63"):
        parse_lake({**doc(), "metadata": {"name": "x" * 64}})
    with pytest.raises(ManifestError, match="spec is missing"):
        parse_lake({**doc(), "spec": None})


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


def test_manifest_is_a_valid_delta_table() -> None:
    lake = parse_lake(
        doc(
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


def lake_at(path: Path) -> LakeResource:
    return parse_lake(doc(uri=f"file://{path}"))


def test_scanner_reports_appeared_and_disappeared(tmp_path: Path) -> None:
    make_table(tmp_path, "a")
    make_table(tmp_path, "b/c")
    registry = metrics.Metrics()
    scanner = LakeScanner(lake_at(tmp_path), registry, clock_ms=lambda: 1_700_000_000_000)
    first = scanner.scan()
    assert first.ok and first.appeared == ("a", "b/c") and first.disappeared == ()
    make_table(tmp_path, "d")
    (tmp_path / "a" / "_delta_log" / "00000000000000000000.json").unlink()
    second = scanner.scan()
    assert second.appeared == ("d",) and second.disappeared == ("a",)
    assert second.tables == ("b/c", "d")
    assert [e.reason for e in second.events()] == ["TableFound", "TableGone"]
    assert (
        registry.registry.get_sample_value(
            "deltakeeper_lake_tables", {"namespace": "data", "lake": "lake"}
        )
        == 2
    )
    requests = registry.registry.get_sample_value(
        "deltakeeper_lake_scan_requests_total", {"namespace": "data", "lake": "lake"}
    )
    assert requests == first.scan.requests + second.scan.requests  # type: ignore[union-attr]
    text = "".join(registry.exposition())
    assert 'deltakeeper_lake_tables{namespace="data",lake="lake"} 2.0' in text
    assert 'deltakeeper_lake_scans_total{namespace="data",lake="lake",result="ok"} 2.0' in text
    status = lake_status(second, managed=2, previous=None, generation=1)
    assert status["tables"] == 2 and status["managedTables"] == 2
    assert status["lastScan"]["result"] == "ok"
    assert {c["type"]: c["status"] for c in status["conditions"]} == {
        "Ready": "True",
        "StorageReachable": "True",
    }


def test_failed_scan_changes_nothing() -> None:
    # An unknown scheme fails before any request; an unreachable store is in
    # tests/integration/test_lake_discovery.py.
    scanner = LakeScanner(parse_lake(doc(uri="ftp://host/lake")), known=("a",))
    result = scanner.scan()
    assert result.result is ScanResult.INVALID
    assert result.disappeared == () and result.tables == ("a",)
    assert "cannot scan ftp://host/lake" in result.message and "scheme" in result.message
    conditions = {c.type: c.status for c in result.conditions()}
    assert conditions == {"Ready": "False", "StorageReachable": "Unknown"}
    assert [e.reason for e in result.events()] == ["ScanFailed"]
    assert scanner.known == ("a",)
