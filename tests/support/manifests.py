"""Manifests as documents, for the tests of parsing them and of the daemons that read them."""

from __future__ import annotations

from typing import Any


def lake_doc(name: str = "lake", uri: str = "s3://bucket/lake/", **spec: Any) -> dict[str, Any]:
    """A DeltaLake in namespace "data" over `uri`; `spec` adds to (or replaces) its fields."""
    return {
        "apiVersion": "deltakeeper.io/v1alpha1",
        "kind": "DeltaLake",
        "metadata": {"name": name, "namespace": "data"},
        "spec": {"uri": uri, **spec},
    }


def table_doc(name: str, uri: str, namespace: str = "lake", **spec: Any) -> dict[str, Any]:
    """A DeltaTable over `uri`; `spec` adds to (or replaces) its fields."""
    return {
        "apiVersion": "deltakeeper.io/v1alpha1",
        "kind": "DeltaTable",
        "metadata": {"name": name, "namespace": namespace},
        "spec": {"uri": uri, **spec},
    }
