"""DeltaLake manifests: a prefix whose Delta tables deltakeeper finds and maintains.

A DeltaLake names a prefix, how to reach it (`storage`, as on a DeltaTable), which tables
under it to take (`include`, `exclude`, `maxDepth`; see delta/discover.py for the rules) and
a `tableTemplate`: labels, policyRef and any DeltaTable spec field, given to every table found.
Each table found becomes the DeltaTable `table_manifest` describes: its name derived from the
lake and the path (`table_name`), labelled with the lake, the full URI in an annotation.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from deltakeeper.delta.discover import DEFAULT_MAX_DEPTH, ROOT
from deltakeeper.maintenance.policy import LAKE_SCAN_INTERVAL_MS
from deltakeeper.resources import crd, manifests, names
from deltakeeper.resources.manifests import ManifestError, TableResource
from deltakeeper.units import parse_duration_ms

KIND = "DeltaLake"
LAKE_LABEL = f"{crd.GROUP}/lake"  # on every DeltaTable a lake manages: the lake's name
PATH_ANNOTATION = f"{crd.GROUP}/path"  # the table's full URI
# The operator's digest of what it applied: a restart re-applies only what differs.
APPLIED_ANNOTATION = f"{crd.GROUP}/applied"
MAX_NAME = names.MAX_NAME  # the lake's name is a label value of every table it manages
MAX_DEPTH_LIMIT = 32
SPEC_FIELDS = ("uri", "storage", "include", "exclude", "maxDepth", "scanInterval", "tableTemplate")
_LAKE_SET = ("uri", "storage")  # spec fields of a managed table that come from the lake
_DNS_LABEL = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$")


@dataclass(frozen=True)
class LakeResource:
    """A DeltaLake, parsed and checked."""

    namespace: str
    name: str
    uri: str
    storage: Mapping[str, Any] = field(default_factory=dict)  # secretRef, options
    include: tuple[str, ...] = ()
    exclude: tuple[str, ...] = ()
    max_depth: int = DEFAULT_MAX_DEPTH
    scan_interval_s: float = LAKE_SCAN_INTERVAL_MS / 1000
    table_template: Mapping[str, Any] = field(default_factory=dict)
    labels: Mapping[str, str] = field(default_factory=dict)
    generation: int = 1
    source: str = ""  # its manifest file, or "api"

    def table_name(self, path: str) -> str:
        return table_name(path, self.name)

    def table_uri(self, path: str) -> str:
        return table_uri(self.uri, path)

    @property
    def events_source(self) -> str | None:
        """The event source its tableTemplate gives every table of the lake (None: none),
        which also tells the lake of its new tables (runtime/events.py)."""
        events = self.table_template.get("events")
        source = events.get("source") if isinstance(events, dict) else None
        return source if isinstance(source, str) and source else None

    def root_table(self) -> TableResource:
        """The lake's prefix as a DeltaTable-shaped resource: what resolves its credentials."""
        spec: dict[str, Any] = {"uri": self.uri}
        if self.storage:
            spec["storage"] = dict(self.storage)
        return TableResource(self.namespace, self.name, self.labels, self.generation, spec)


def parse_lake(doc: Any, source: str = "") -> LakeResource:
    """One DeltaLake manifest (or API object), checked; ManifestError names what is wrong."""
    where = source or "manifest"
    if not isinstance(doc, dict):
        raise ManifestError(f"{where}: a manifest must be a mapping, not {type(doc).__name__}")
    if doc.get("kind") != KIND:
        raise ManifestError(f"{where}: kind {doc.get('kind')!r} is not {KIND}")
    if doc.get("apiVersion") != crd.API_VERSION:
        raise ManifestError(f"{where}: {KIND} needs apiVersion: {crd.API_VERSION}")
    meta: dict[str, Any] = doc["metadata"] if isinstance(doc.get("metadata"), dict) else {}
    name, namespace = meta.get("name"), str(meta.get("namespace") or "default")
    if not isinstance(name, str) or not name:
        raise ManifestError(f"{where}: {KIND} has no metadata.name")
    what = f"{where}: {KIND} {namespace}/{name}"
    if len(name) > MAX_NAME or not _DNS_LABEL.match(name):
        raise ManifestError(
            f"{what}: metadata.name must be at most {MAX_NAME} lowercase letters, digits and "
            f"'-' (it is the {LAKE_LABEL} label of every table the lake manages)"
        )
    spec = doc.get("spec")
    if not isinstance(spec, dict):
        raise ManifestError(f"{what}: spec is missing; it needs at least spec.uri")
    try:
        lake = _from_spec(namespace, name, spec, meta, source)
    except (ManifestError, ValueError) as e:
        raise ManifestError(f"{what}: {e}") from None
    try:  # the template with the lake's storage must make a DeltaTable the CRD accepts
        manifests.parse(table_manifest(lake, ROOT), "its tableTemplate")
    except ManifestError as e:
        raise ManifestError(f"{what}: the DeltaTables it would create are invalid: {e}") from None
    return lake


def _from_spec(
    namespace: str, name: str, spec: Mapping[str, Any], meta: Mapping[str, Any], source: str
) -> LakeResource:
    unknown = [f"spec.{k}" for k in spec if k not in SPEC_FIELDS]
    if unknown:
        raise ManifestError(
            f"unknown field {', '.join(unknown)}; a DeltaLake's spec has {', '.join(SPEC_FIELDS)}"
        )
    uri = spec.get("uri")
    if not isinstance(uri, str) or not re.match(crd.URI, uri):
        raise ManifestError(
            f"spec.uri {uri!r} is not a prefix URI; use s3://bucket/path, gs://, abfss://, az://, "
            "file:// or an absolute path"
        )
    storage = spec.get("storage") or {}
    if not isinstance(storage, dict):
        raise ManifestError("spec.storage must be a mapping (secretRef, options)")
    return LakeResource(
        namespace=namespace,
        name=name,
        uri=uri,
        storage=storage,
        include=_patterns(spec, "include"),
        exclude=_patterns(spec, "exclude"),
        max_depth=_max_depth(spec.get("maxDepth", DEFAULT_MAX_DEPTH)),
        scan_interval_s=_interval_s(spec.get("scanInterval")),
        table_template=_template(spec.get("tableTemplate") or {}),
        labels=dict(meta.get("labels") or {}),
        generation=int(meta.get("generation") or 1),
        source=source,
    )


def _patterns(spec: Mapping[str, Any], key: str) -> tuple[str, ...]:
    value = spec.get(key) or []
    if not isinstance(value, list) or not all(isinstance(p, str) and p for p in value):
        raise ManifestError(f"spec.{key} must be a list of glob patterns like 'sales/*'")
    return tuple(value)


def _max_depth(value: Any) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or not 0 <= value <= MAX_DEPTH_LIMIT:
        raise ManifestError(
            f"spec.maxDepth must be a whole number from 0 (the prefix is the table) to "
            f"{MAX_DEPTH_LIMIT}, got {value!r}"
        )
    return value


def _interval_s(value: Any) -> float:
    if value is None:
        return LAKE_SCAN_INTERVAL_MS / 1000
    try:
        ms = parse_duration_ms(str(value))
    except ValueError as e:
        raise ManifestError(f"spec.scanInterval: {e}") from None
    if ms <= 0:
        raise ManifestError(f"spec.scanInterval {value!r} must be more than 0s")
    return ms / 1000


def _template(template: Any) -> dict[str, Any]:
    if not isinstance(template, dict):
        raise ManifestError("spec.tableTemplate must be a mapping of DeltaTable spec fields")
    taken = [k for k in _LAKE_SET if k in template]
    if taken:
        raise ManifestError(
            f"spec.tableTemplate.{taken[0]} is set by the lake for each table; set "
            f"spec.{taken[0]} on the DeltaLake instead"
        )
    labels = template.get("labels") or {}
    if not isinstance(labels, dict) or not all(isinstance(v, str) for v in labels.values()):
        raise ManifestError("spec.tableTemplate.labels must map label names to strings")
    if LAKE_LABEL in labels:
        raise ManifestError(f"spec.tableTemplate.labels: {LAKE_LABEL} is set by the lake")
    return dict(template)


def table_name(path: str, lake: str = "") -> str:
    """A stable DNS-1123 name of at most 63 characters for the table at `path` (relative to
    the lake's prefix): a readable slug of lake and path, then a hash of both, so paths that
    slug alike ("a_b", "a.b", "A-B") or are cut short still get different names."""
    readable = path if path != ROOT else ""
    return names.dns_label(f"{lake}-{readable}" if lake else readable, f"{lake}\0{path}")


def table_uri(prefix: str, path: str) -> str:
    """The full URI of the table at `path` under `prefix`."""
    if path == ROOT:
        return prefix
    return f"{prefix.rstrip('/')}/{path}"


def table_manifest(lake: LakeResource, path: str) -> dict[str, Any]:
    """The DeltaTable the lake manages for its table at `path` (ownerReferences are the
    operator's to add): template labels and spec fields, the lake's URI and storage."""
    template = dict(lake.table_template)
    labels = {**(template.pop("labels", None) or {}), LAKE_LABEL: lake.name}
    uri = lake.table_uri(path)
    spec: dict[str, Any] = {**template, "uri": uri}
    if lake.storage:
        spec["storage"] = dict(lake.storage)
    return {
        "apiVersion": crd.API_VERSION,
        "kind": "DeltaTable",
        "metadata": {
            "name": lake.table_name(path),
            "namespace": lake.namespace,
            "labels": labels,
            "annotations": {PATH_ANNOTATION: uri},
        },
        "spec": spec,
    }
