"""resources/crd.py: crds/ is generated from it; the DeltaLake CRD's columns, schema and template.

The DeltaLake schema takes a whole lake and refuses what it claims to, and its tableTemplate is
the DeltaTable spec's own schema (less what the lake sets per table)."""

from __future__ import annotations

import copy
import re
import subprocess
import sys
from pathlib import Path
from typing import Any

import jsonschema
import pytest

from deltakeeper.resources import crd

REPO = Path(__file__).resolve().parents[3]


def test_crds_folder_is_generated_from_crd_py() -> None:
    done = subprocess.run(
        [sys.executable, str(REPO / "scripts" / "gen_crds.py"), "--check"], capture_output=True
    )
    assert done.returncode == 0, done.stderr.decode()


LAKE: dict[str, Any] = {
    "apiVersion": "deltakeeper.io/v1alpha1",
    "kind": "DeltaLake",
    "metadata": {"name": "sales", "namespace": "lake"},
    "spec": {
        "uri": "s3://lake/sales",
        "storage": {"secretRef": {"name": "creds"}, "options": {"endpoint_url": "http://m:9000"}},
        "include": ["eu/*", "us/*"],
        "exclude": ["*/tmp"],
        "maxDepth": 4,
        "scanInterval": "10m",
        "tableTemplate": {
            "labels": {"tier": "gold"},
            "policyRef": {"name": "standard"},
            "pollInterval": "1m",
            "checkpoint": {"interval": 20},
            "vacuum": {"enabled": False},
            "compaction": {"enabled": True, "targetFileSize": "256Mi"},
            "suspend": False,
        },
    },
}


def _version() -> dict[str, Any]:
    return crd.delta_lake()["spec"]["versions"][0]


def _errors(doc: dict[str, Any]) -> list[str]:
    validator = jsonschema.Draft202012Validator(_version()["schema"]["openAPIV3Schema"])
    return [".".join(map(str, e.absolute_path)) for e in validator.iter_errors(doc)]


def test_the_lake_crd_is_generated_with_the_others() -> None:
    assert crd.all_crds()["deltalake.yaml"] == crd.delta_lake()
    lake = crd.delta_lake()
    assert lake["metadata"]["name"] == "deltalakes.deltakeeper.io"
    assert lake["spec"]["scope"] == "Namespaced"
    assert lake["spec"]["names"]["kind"] == "DeltaLake"
    assert _version()["name"] == crd.VERSION
    assert _version()["subresources"] == {"status": {}}


def test_the_lake_printer_columns_are_prefix_tables_poor_ready_age() -> None:
    shown = [c["name"] for c in _version()["additionalPrinterColumns"] if not c.get("priority")]
    assert shown == ["Prefix", "Tables", "Poor", "Ready", "Age"]
    paths = {c["name"]: c["jsonPath"] for c in _version()["additionalPrinterColumns"]}
    assert paths["Prefix"] == ".spec.uri" and paths["Tables"] == ".status.tables"
    assert paths["Poor"] == ".status.health.bands.poor"


@pytest.mark.parametrize("doc", ["README.md", "docs/operator.md", "docs/runbook.md"])
def test_the_docs_list_the_delta_table_columns_kubectl_shows(doc: str) -> None:
    # `kubectl get deltatables -A  # VERSION, ... AGE; -o wide adds REASON, URI`: the CRD's
    # columns in order, those of -o wide (priority 1) last.
    version = crd.delta_table()["spec"]["versions"][0]
    columns = sorted(version["additionalPrinterColumns"], key=lambda c: c.get("priority", 0))
    lines = (REPO / doc).read_text().splitlines()
    [line] = [x for x in lines if "kubectl get deltatables" in x and "# VERSION" in x]
    listed = re.findall(r"\b[A-Z][A-Z-]+\b", line.partition("#")[2])
    assert listed == [c["name"].upper() for c in columns]


def test_a_whole_lake_validates_and_uri_is_required() -> None:
    assert _errors(LAKE) == []
    doc = copy.deepcopy(LAKE)
    doc["spec"] = {"uri": "gs://lake/all"}
    assert _errors(doc) == []
    del doc["spec"]["uri"]
    assert _errors(doc) == ["spec"]


@pytest.mark.parametrize(
    ("change", "where"),
    [
        ({"uri": "lake/sales"}, "spec.uri"),
        ({"scanInterval": "10 minutes"}, "spec.scanInterval"),
        ({"maxDepth": -1}, "spec.maxDepth"),
        ({"maxDepth": "3"}, "spec.maxDepth"),
        ({"include": "eu/*"}, "spec.include"),
        ({"exclude": [""]}, "spec.exclude.0"),
        ({"storage": {"secretRef": {}}}, "spec.storage.secretRef"),
        ({"tableTemplate": {"logRetention": "a month"}}, "spec.tableTemplate.logRetention"),
        ({"tableTemplate": {"labels": {"tier": 1}}}, "spec.tableTemplate.labels.tier"),
        (
            {"tableTemplate": {"checkpoint": {"interval": 0}}},
            "spec.tableTemplate.checkpoint.interval",
        ),
    ],
)
def test_bad_lake_fields_are_refused_at_their_path(change: dict[str, Any], where: str) -> None:
    doc = copy.deepcopy(LAKE)
    doc["spec"].update(change)
    assert where in _errors(doc)


def test_the_template_is_the_delta_table_spec_less_uri_and_storage() -> None:
    table = crd.delta_table()["spec"]["versions"][0]["schema"]["openAPIV3Schema"]
    table_spec = table["properties"]["spec"]["properties"]
    lake_spec = _version()["schema"]["openAPIV3Schema"]["properties"]["spec"]["properties"]
    template = lake_spec["tableTemplate"]["properties"]
    assert set(template) == (set(table_spec) - {"uri", "storage"}) | {"labels"}
    for name, schema in table_spec.items():
        if name not in ("uri", "storage"):
            assert template[name] == schema, name
    assert lake_spec["storage"] == table_spec["storage"]


def test_the_status_has_what_kubectl_and_the_operator_read() -> None:
    status = _version()["schema"]["openAPIV3Schema"]["properties"]["status"]["properties"]
    assert {"tables", "managedTables", "missingTables", "lastScan", "conditions"} <= set(status)
    assert set(status["lastScan"]["properties"]) == {"time", "result", "requests", "seconds"}
    assert status["conditions"]["x-kubernetes-list-map-keys"] == ["type"]


@pytest.mark.parametrize("make", [crd.delta_table, crd.delta_lake])
def test_ready_and_reason_columns_read_the_ready_condition(make: Any) -> None:
    columns = make()["spec"]["versions"][0]["additionalPrinterColumns"]
    paths = {c["name"]: c["jsonPath"] for c in columns}
    assert paths["Ready"] == '.status.conditions[?(@.type=="Ready")].status'
    assert paths["Reason"] == '.status.conditions[?(@.type=="Ready")].reason'
