"""A folder of manifests, as standalone mode reads it: DeltaTables, DeltaMaintenancePolicies,
DeltaLakes and Secrets in *.yaml, *.yml and *.json files, several documents a file.

    loaded = folder.load("manifests/")
    loaded.tables, loaded.policies, loaded.lakes, loaded.secrets, loaded.errors
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from deltakeeper.resources import manifests
from deltakeeper.resources.lake import LakeResource, parse_lake
from deltakeeper.resources.manifests import ManifestError, PolicyResource, TableResource


@dataclass
class Loaded:
    tables: list[TableResource] = field(default_factory=list)
    policies: list[PolicyResource] = field(default_factory=list)
    lakes: list[LakeResource] = field(default_factory=list)
    secrets: dict[tuple[str, str], dict[str, str]] = field(default_factory=dict)
    errors: list[ManifestError] = field(default_factory=list)
    # file -> its documents, for files that loaded whole (or were kept at their last good)
    good: dict[str, list[Any]] = field(default_factory=dict)
    kept: list[str] = field(default_factory=list)  # files kept at their last good version


def load(folder: str | Path, previous: Mapping[str, list[Any]] | None = None) -> Loaded:
    """Every manifest in `folder` (*.yaml, *.yml, *.json, multi-document); a bad file or
    document is an error entry and the rest still load. A file that was good before
    (`previous`, a former `Loaded.good`) and is bad now stays at its last good version, as
    the API server keeps an object whose new manifest it rejects."""
    loaded = Loaded()
    seen: dict[tuple[str, str, str], str] = {}
    for path in sorted(Path(folder).iterdir()):
        if not path.is_file() or path.suffix not in (".yaml", ".yml", ".json"):
            continue
        items, errors, docs = _read_file(path)
        last = (previous or {}).get(str(path))
        if errors and last is not None:
            loaded.errors.extend(errors)
            loaded.kept.append(str(path))
            items, _, docs = _parse_all(path, last)
        elif errors:
            loaded.errors.extend(errors)
        if not errors or last is not None:
            loaded.good[str(path)] = docs
        for where, item in items:
            try:
                _add(loaded, item, where, seen)
            except ManifestError as e:
                loaded.errors.append(e)
    return loaded


_Item = tuple[str, Any]  # (where, a resource or a Secret's (namespace, name, data))


def _read_file(path: Path) -> tuple[list[_Item], list[ManifestError], list[Any]]:
    try:
        docs = _documents(path)
    except ManifestError as e:
        return [], [e], []
    return _parse_all(path, docs)


def _parse_all(path: Path, docs: list[Any]) -> tuple[list[_Item], list[ManifestError], list[Any]]:
    items: list[_Item] = []
    errors: list[ManifestError] = []
    for i, doc in enumerate(docs):
        where = f"{path}" if len(docs) == 1 else f"{path} (document {i + 1})"
        try:
            item = _parse_doc(doc, where)
        except ManifestError as e:
            errors.append(e)
            continue
        if item is not None:
            items.append((where, item))
    return items, errors, docs


def _documents(path: Path) -> list[Any]:
    try:
        text = path.read_text()
        if path.suffix == ".json":
            return [json.loads(text)]
        return [d for d in yaml.safe_load_all(text) if d is not None]
    except (OSError, UnicodeDecodeError, ValueError, yaml.YAMLError) as e:
        raise ManifestError(f"{path}: cannot read it as {path.suffix[1:].upper()}: {e}") from None


def _parse_doc(doc: Any, where: str) -> Any:
    if isinstance(doc, dict) and doc.get("kind") == "Secret":
        meta = doc.get("metadata") or {}
        ref = (str(meta.get("namespace") or "default"), str(meta.get("name") or ""))
        return (*ref, manifests.secret_data(doc, where))
    if isinstance(doc, dict) and doc.get("kind") == "DeltaLake":
        return parse_lake(doc, where)
    if isinstance(doc, dict) and doc.get("kind") not in (None, *manifests.KINDS):
        return None  # other kinds (ConfigMaps, ...) may share the folder
    return manifests.parse(doc, where)


def _add(loaded: Loaded, item: Any, where: str, seen: dict[tuple[str, str, str], str]) -> None:
    if isinstance(item, tuple):
        namespace, name, data = item
        loaded.secrets[(namespace, name)] = data
        return
    kind = type(item).__name__
    key = (kind, item.namespace, item.name)
    if key in seen:
        raise ManifestError(
            f"{where}: {item.namespace}/{item.name} is defined again (first in {seen[key]})"
        )
    seen[key] = where
    if isinstance(item, TableResource):
        loaded.tables.append(item)
    elif isinstance(item, PolicyResource):
        loaded.policies.append(item)
    else:
        loaded.lakes.append(item)
