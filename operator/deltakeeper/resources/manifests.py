"""DeltaTable, DeltaMaintenancePolicy and Secret manifests: parsing, validation, policy
selection (DeltaLakes are parsed by lake.py, a folder of manifests read by folder.py).

Standalone mode reads these from a folder; the operator gets the same shapes from the API
server. Validation uses the CRDs' own OpenAPI schemas (crd.py), so a manifest standalone mode
accepts is one `kubectl apply` accepts too.
"""

from __future__ import annotations

import base64
import binascii
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import jsonschema

from deltakeeper.resources import crd

API_VERSION = crd.API_VERSION
_HINTS = {
    crd.DURATION: "use a number and d, h, m or s, e.g. 30d or 12h",
    crd.SIZE: "use bytes or a suffix, e.g. 128Mi or 1Gi",
    crd.URI: "use scheme://bucket/path (s3://, gs://, abfss://, az://, file://) or /abs/path",
    crd.CRON: "use five cron fields like '0 3 * * *' or a macro like @daily",
}


class ManifestError(ValueError):
    """A manifest that cannot be used; the message names the file, resource and field."""


@dataclass(frozen=True)
class Resource:
    """What a DeltaTable and a DeltaMaintenancePolicy both are: a named, labelled spec."""

    namespace: str
    name: str
    labels: Mapping[str, str]
    generation: int
    spec: Mapping[str, Any]


@dataclass(frozen=True)
class TableResource(Resource):
    source: str = ""  # where it was read: its manifest file, or "api"


@dataclass(frozen=True)
class PolicyResource(Resource):
    selector: Mapping[str, Any] | None
    source: str = ""


_VALIDATORS = {
    "DeltaTable": jsonschema.Draft202012Validator(
        crd.delta_table()["spec"]["versions"][0]["schema"]["openAPIV3Schema"]
    ),
    "DeltaMaintenancePolicy": jsonschema.Draft202012Validator(
        crd.maintenance_policy()["spec"]["versions"][0]["schema"]["openAPIV3Schema"]
    ),
}


KINDS = tuple(_VALIDATORS)  # what `parse` reads


def parse(doc: Any, source: str = "") -> TableResource | PolicyResource:
    """One DeltaTable or DeltaMaintenancePolicy manifest, checked; ManifestError otherwise."""
    where = source or "manifest"
    if not isinstance(doc, dict):
        raise ManifestError(f"{where}: a manifest must be a mapping, not {type(doc).__name__}")
    kind = doc.get("kind")
    if kind not in _VALIDATORS:
        raise ManifestError(f"{where}: kind {kind!r} is not DeltaTable or DeltaMaintenancePolicy")
    if doc.get("apiVersion") != API_VERSION:
        raise ManifestError(f"{where}: {kind} needs apiVersion: {API_VERSION}")
    meta: dict[str, Any] = doc["metadata"] if isinstance(doc.get("metadata"), dict) else {}
    name, namespace = meta.get("name"), meta.get("namespace") or "default"
    if not isinstance(name, str) or not name:
        raise ManifestError(f"{where}: {kind} has no metadata.name")
    errors = sorted(_VALIDATORS[kind].iter_errors(doc), key=lambda e: list(e.absolute_path))
    if errors:
        raise ManifestError(f"{where}: {kind} {namespace}/{name}: {_explain(errors[0])}")
    unknown = unknown_fields(_VALIDATORS[kind].schema, doc)
    if unknown:
        # The API server would prune these silently; a misspelt `dryRun` must not turn a
        # dry run into deletes, so standalone mode refuses like `kubectl apply --validate=strict`.
        raise ManifestError(
            f"{where}: {kind} {namespace}/{name}: unknown field {', '.join(unknown)}; "
            "check its spelling against `kubectl explain` (nothing in this manifest was applied)"
        )
    labels = meta.get("labels") or {}
    generation = int(meta.get("generation") or 1)
    spec = doc["spec"]
    if kind == "DeltaTable":
        return TableResource(namespace, name, labels, generation, spec, source)
    return PolicyResource(
        namespace, name, labels, generation, spec, spec.get("tableSelector"), source
    )


# ObjectMeta's fields a manifest may carry; the CRD schema leaves metadata open.
_METADATA_FIELDS = {
    "name",
    "namespace",
    "labels",
    "annotations",
    "generation",
    "uid",
    "resourceVersion",
    "creationTimestamp",
    "deletionTimestamp",
    "deletionGracePeriodSeconds",
    "finalizers",
    "ownerReferences",
    "managedFields",
    "generateName",
    "selfLink",
}


def unknown_fields(schema: Mapping[str, Any], doc: Any, path: str = "") -> list[str]:
    """Dotted paths of fields in `doc` that `schema` does not declare, as
    `kubectl apply --validate=strict` reports them."""
    if path == "metadata" and isinstance(doc, dict):
        return [f"metadata.{k}" for k in doc if k not in _METADATA_FIELDS]
    if isinstance(doc, list) and isinstance(schema.get("items"), dict):
        return [
            u
            for i, item in enumerate(doc)
            for u in unknown_fields(schema["items"], item, f"{path}[{i}]")
        ]
    if not isinstance(doc, dict) or schema.get("x-kubernetes-preserve-unknown-fields"):
        return []
    properties = schema.get("properties")
    if properties is None:  # a free-form map (labels, storage options): any key goes
        extra = schema.get("additionalProperties")
        if not isinstance(extra, dict):
            return []
        return [u for k, v in doc.items() for u in unknown_fields(extra, v, f"{path}.{k}")]
    out: list[str] = []
    for key, value in doc.items():
        where = f"{path}.{key}" if path else str(key)
        if key in properties:
            out.extend(unknown_fields(properties[key], value, where))
        else:
            out.append(where)
    return out


def _explain(error: jsonschema.ValidationError) -> str:
    path = ".".join(str(p) for p in error.absolute_path) or "(top level)"
    message = error.message
    if error.validator == "pattern" and error.validator_value in _HINTS:
        message = f"{error.instance!r} is not valid; {_HINTS[error.validator_value]}"
    elif error.validator == "additionalProperties":
        message += " (unknown field; check its spelling against `kubectl explain`)"
    return f"{path}: {message}"


def secret_data(doc: Mapping[str, Any], where: str) -> dict[str, str]:
    """A Secret manifest's data: `data` (base64) merged under `stringData`, as the API does."""
    out: dict[str, str] = {}
    for key, value in (doc.get("data") or {}).items():
        try:
            out[key] = base64.b64decode(str(value), validate=True).decode()
        except (binascii.Error, UnicodeDecodeError):
            raise ManifestError(
                f"{where}: Secret data {key!r} is not base64 of UTF-8 text"
            ) from None
    out.update({k: str(v) for k, v in (doc.get("stringData") or {}).items()})
    return out


# -- policy selection and precedence -------------------------------------------------------


def matches(selector: Mapping[str, Any] | None, labels: Mapping[str, str]) -> bool:
    """Kubernetes label-selector semantics; no selector selects nothing, {} selects all."""
    if selector is None:
        return False
    for key, value in (selector.get("matchLabels") or {}).items():
        if labels.get(key) != value:
            return False
    for expr in selector.get("matchExpressions") or []:
        key, op, values = expr["key"], expr["operator"], expr.get("values") or []
        present = key in labels
        if op == "In" and not (present and labels[key] in values):
            return False
        if op == "NotIn" and present and labels[key] in values:
            return False
        if op == "Exists" and not present:
            return False
        if op == "DoesNotExist" and present:
            return False
    return True


def select_policy(
    table: TableResource, policies: Sequence[PolicyResource]
) -> tuple[PolicyResource | None, str | None]:
    """The policy for `table` and a warning for the user, if any. policyRef wins; otherwise the
    first (by name) of the policies in its namespace whose tableSelector matches."""
    local = sorted((p for p in policies if p.namespace == table.namespace), key=lambda p: p.name)
    ref = (table.spec.get("policyRef") or {}).get("name")
    if ref:
        named = next((p for p in local if p.name == ref), None)
        warning = None if named else f"policyRef {ref!r} names no DeltaMaintenancePolicy"
        return named, warning
    chosen = [p for p in local if matches(p.selector, table.labels)]
    if len(chosen) > 1:
        names = ", ".join(p.name for p in chosen)
        return chosen[0], f"several policies select this table ({names}); {chosen[0].name} applies"
    return (chosen[0] if chosen else None), None
