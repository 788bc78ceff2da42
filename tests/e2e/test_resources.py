"""The CRDs on a real API server: every example applies, the schemas reject what they claim
to, the printer columns and the status subresource work as `kubectl` users will see them."""

from __future__ import annotations

import copy
from pathlib import Path
from typing import Any

import pytest
import yaml
from kubernetes import client

from tests.support.kube import KubeCluster

pytestmark = pytest.mark.e2e
EXAMPLES = Path(__file__).resolve().parents[2] / "examples"
GROUP, VERSION = "deltakeeper.io", "v1alpha1"
PLURALS = {
    "DeltaTable": "deltatables",
    "DeltaMaintenancePolicy": "deltamaintenancepolicies",
    "DeltaLake": "deltalakes",
}


def _create(api: client.ApiClient, doc: dict[str, Any], namespace: str) -> None:
    if doc["kind"] == "Secret":
        client.CoreV1Api(api).create_namespaced_secret(namespace, doc)
    else:
        client.CustomObjectsApi(api).create_namespaced_custom_object(
            GROUP, VERSION, namespace, PLURALS[doc["kind"]], doc
        )


@pytest.mark.parametrize("path", sorted(EXAMPLES.glob("*.yaml")), ids=lambda p: p.name)
def test_every_example_applies(kube_cluster: KubeCluster, path: Path) -> None:
    api = kube_cluster.api_client()
    namespace = f"ex-{path.stem}"[:63]
    kube_cluster.create_namespace(namespace)
    docs = [d for d in yaml.safe_load_all(path.read_text()) if d]
    for doc in docs:
        doc["metadata"]["namespace"] = namespace
        _create(api, doc, namespace)
    objects = client.CustomObjectsApi(api)
    for doc in docs:
        if doc["kind"] in PLURALS:
            got = objects.get_namespaced_custom_object(
                GROUP, VERSION, namespace, PLURALS[doc["kind"]], doc["metadata"]["name"]
            )
            assert got["spec"] == doc["spec"]


VALID = {
    "apiVersion": f"{GROUP}/{VERSION}",
    "kind": "DeltaTable",
    "metadata": {"name": "t"},
    "spec": {"uri": "s3://lake/t"},
}
REJECTED = [
    ("uri", {"uri": "lake/t"}, "spec.uri"),
    ("uri-empty", {"uri": "s3://"}, "spec.uri"),
    ("duration", {"logRetention": "30 days"}, "spec.logRetention"),
    ("duration-unit", {"deletedFileRetention": "7w"}, "spec.deletedFileRetention"),
    ("poll", {"pollInterval": "soon"}, "spec.pollInterval"),
    ("size", {"smallFileSize": "32 megabytes"}, "spec.smallFileSize"),
    ("target-size", {"compaction": {"targetFileSize": "big"}}, "spec.compaction.targetFileSize"),
    ("cron", {"vacuum": {"schedule": "every night"}}, "spec.vacuum.schedule"),
    ("vacuum-mode", {"vacuum": {"mode": "fast"}}, "spec.vacuum.mode"),
    ("full-interval", {"vacuum": {"fullInterval": "weekly"}}, "spec.vacuum.fullInterval"),
    ("inventory-uri", {"vacuum": {"inventory": {"format": "s3"}}}, "spec.vacuum.inventory.uri"),
    (
        "inventory-format",
        {"vacuum": {"inventory": {"uri": "s3://i/x", "format": "orc"}}},
        "spec.vacuum.inventory.format",
    ),
    ("interval-zero", {"checkpoint": {"interval": 0}}, "spec.checkpoint.interval"),
    ("interval-negative", {"checkpoint": {"interval": -5}}, "spec.checkpoint.interval"),
    ("part-size", {"checkpoint": {"partSize": 0}}, "spec.checkpoint.partSize"),
    ("type", {"suspend": "yes"}, "spec.suspend"),
]


@pytest.mark.parametrize(("case", "change", "field"), REJECTED, ids=[c[0] for c in REJECTED])
def test_the_schema_rejects(kube_cluster: KubeCluster, case: str, change: Any, field: str) -> None:
    kube_cluster.create_namespace("rejects")
    doc = copy.deepcopy(VALID)
    doc["metadata"]["name"] = f"t-{case}"
    doc["spec"].update(change)
    with pytest.raises(client.ApiException) as raised:
        _create(kube_cluster.api_client(), doc, "rejects")
    assert raised.value.status == 422
    assert field in raised.value.body


def test_unknown_fields_are_dropped_and_a_missing_uri_is_rejected(
    kube_cluster: KubeCluster,
) -> None:
    kube_cluster.create_namespace("rejects")
    doc = copy.deepcopy(VALID)
    doc["metadata"]["name"] = "no-uri"
    del doc["spec"]["uri"]
    with pytest.raises(client.ApiException) as raised:
        _create(kube_cluster.api_client(), doc, "rejects")
    assert raised.value.status == 422 and "spec.uri" in raised.value.body


def test_semantic_errors_pass_the_schema(kube_cluster: KubeCluster) -> None:
    """An unknown scheme is well-formed: the operator, not the schema, reports it."""
    kube_cluster.create_namespace("accepts")
    doc = copy.deepcopy(VALID)
    doc["metadata"]["name"] = "hdfs"
    doc["spec"]["uri"] = "hdfs://namenode/lake/t"
    _create(kube_cluster.api_client(), doc, "accepts")


def test_printer_columns_and_status_subresource(kube_cluster: KubeCluster) -> None:
    api = kube_cluster.api_client()
    kube_cluster.create_namespace("columns")
    doc = copy.deepcopy(VALID)
    _create(api, doc, "columns")
    objects = client.CustomObjectsApi(api)
    status = {
        "version": 7,
        "commitsSinceCheckpoint": 3,
        "files": 12,
        "smallFiles": 4,
        "health": {
            "score": 64,
            "band": "fair",
            "worst": "smallFiles",
            "components": {"smallFiles": 40, "vacuumDebt": 100},
        },
        "conditions": [{"type": "Ready", "status": "True", "reason": "Watching"}],
    }
    objects.patch_namespaced_custom_object_status(
        GROUP, VERSION, "columns", "deltatables", "t", {"status": status}
    )
    # A spec write through the main resource does not touch status, and vice versa.
    objects.patch_namespaced_custom_object(
        GROUP, VERSION, "columns", "deltatables", "t", {"status": {"version": 99}}
    )
    got = objects.get_namespaced_custom_object(GROUP, VERSION, "columns", "deltatables", "t")
    assert got["status"]["version"] == 7
    # What `kubectl get deltatables` prints: the server's Table rendering.
    table = kube_cluster.get_table(f"/apis/{GROUP}/{VERSION}/namespaces/columns/deltatables")
    names = [c["name"] for c in table["columnDefinitions"]]
    assert names[:7] == ["Name", "Version", "Behind", "Files", "Small", "Health", "Ready"]
    assert table["rows"][0]["cells"][:7] == ["t", 7, 3, 12, 4, 64, "True"]
    assert got["status"]["health"] == status["health"]  # the schema keeps every field
