"""The Helm chart's test tools: helm and kubeconform (scripts/helm/install.sh builds them),
`helm template`, and the JSON schemas kubeconform checks rendered manifests against.

kubeconform reads one standalone schema per kind, named `<kind>-<group>-<version>.json` (its
`{{ .ResourceKind }}{{ .KindSuffix }}` template). Kubernetes' own come from the PyPI package
kubernetes-validate, whose per-kind files point into a shared `_definitions.json`; each is made
standalone here by carrying along the definitions it reaches. CRDs (ours and the real
third-party ones) are converted from their OpenAPI v3 schemas the way the API server reads them.
"""

from __future__ import annotations

import copy
import json
import os
import subprocess
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import Any

import yaml

REPO = Path(__file__).resolve().parents[2]
CHART = REPO / "charts" / "deltakeeper"
INSTALL = REPO / "scripts" / "helm" / "install.sh"
THIRD_PARTY_CRDS = REPO.parent / "shared" / "third-party-crds"
# The schemas of the e2e kube-apiserver's minor version (scripts/k8s/install.sh).
KUBE_SCHEMA_VERSION = "v1.35.0"
SCHEMA_LOCATION = "{{ .ResourceKind }}{{ .KindSuffix }}.json"
DEFS_REF = "/api/_definitions.json#/$defs/"


def install() -> dict[str, str]:
    done = subprocess.run(["bash", str(INSTALL)], stdout=subprocess.PIPE, text=True, check=False)
    if done.returncode != 0:
        raise RuntimeError(f"{INSTALL} failed with exit code {done.returncode}")
    return dict(line.split("=", 1) for line in done.stdout.splitlines() if "=" in line)


def template(
    helm: str, *args: str, chart: Path = CHART, check: bool = True
) -> subprocess.CompletedProcess[str]:
    """`helm template deltakeeper CHART -n deltakeeper ARGS`."""
    cmd = [helm, "template", "deltakeeper", str(chart), "--namespace", "deltakeeper", *args]
    done = subprocess.run(cmd, capture_output=True, text=True, check=False)
    if check and done.returncode != 0:
        raise AssertionError(f"{' '.join(cmd)} failed:\n{done.stderr}")
    return done


def documents(text: str) -> list[dict[str, Any]]:
    return [d for d in yaml.safe_load_all(text) if d]


def schema_name(api_version: str, kind: str) -> str:
    """kubeconform's file name for a kind: `<kind>-<first part of the group>-<version>.json`."""
    group, _, version = api_version.rpartition("/")
    suffix = f"-{group.split('.')[0]}-{version}" if group else f"-{version}"
    return f"{kind.lower()}{suffix.lower()}.json"


# -- Kubernetes' own kinds --------------------------------------------------------------------
def _kube_schema_source() -> Path:
    import kubernetes_validate

    base = Path(kubernetes_validate.__file__).parent / "kubernetes-json-schema"
    return base / f"{KUBE_SCHEMA_VERSION}-local-strict"


def _refs(node: Any) -> Iterator[str]:
    """The definitions `node` names: `/api/_definitions.json#/$defs/X` from a kind's file,
    `#/$defs/X` from inside _definitions.json."""
    if isinstance(node, dict):
        ref = node.get("$ref")
        if isinstance(ref, str) and "#/$defs/" in ref:
            yield ref.split("#/$defs/", 1)[1]
        for value in node.values():
            yield from _refs(value)
    elif isinstance(node, list):
        for value in node:
            yield from _refs(value)


def _local_refs(node: Any) -> Any:
    if isinstance(node, dict):
        out = {k: _local_refs(v) for k, v in node.items()}
        ref = out.get("$ref")
        if isinstance(ref, str) and ref.startswith(DEFS_REF):
            out["$ref"] = "#/$defs/" + ref[len(DEFS_REF) :]
        return out
    if isinstance(node, list):
        return [_local_refs(v) for v in node]
    return node


def standalone(schema: dict[str, Any], definitions: dict[str, Any]) -> dict[str, Any]:
    """`schema` with the definitions it reaches (transitively) as its own `$defs`."""
    needed: set[str] = set()
    todo = list(_refs(schema))
    while todo:
        name = todo.pop()
        if name in needed:
            continue
        needed.add(name)
        todo.extend(_refs(definitions[name]))
    out = {k: v for k, v in schema.items() if k != "$id"}
    out["$defs"] = {name: definitions[name] for name in sorted(needed)}
    return dict(_local_refs(out))


def kube_schemas(names: Iterable[str], dest: Path) -> None:
    """Write the standalone schema of each Kubernetes kind file `names` into `dest`, from a
    cache kept by version (converting one takes a second)."""
    import kubernetes_validate

    cache_root = Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache")
    cache = (
        cache_root
        / "deltakeeper"
        / f"kube-schemas-{KUBE_SCHEMA_VERSION}-kv{kubernetes_validate.__version__}"
    )
    cache.mkdir(parents=True, exist_ok=True)
    source = _kube_schema_source()
    definitions: dict[str, Any] | None = None
    for name in names:
        cached = cache / name
        if not cached.exists():
            if not (source / name).exists():
                continue  # not a Kubernetes kind: kubeconform says so if nothing else has it
            if definitions is None:
                definitions = json.loads((source / "_definitions.json").read_text())["$defs"]
            schema = json.loads((source / name).read_text())
            tmp = cached.with_suffix(".tmp")
            tmp.write_text(json.dumps(standalone(schema, definitions)))
            tmp.replace(cached)
        (dest / name).write_text(cached.read_text())


# -- CRDs ---------------------------------------------------------------------------------------
def json_schema(node: Any) -> Any:
    """An OpenAPI v3 schema of a CRD as the JSON Schema kubeconform validates with, strict as
    the API server's pruning is: no field that is not declared, unless it preserves unknowns."""
    if isinstance(node, list):
        return [json_schema(v) for v in node]
    if not isinstance(node, dict):
        return node
    out = {k: json_schema(v) for k, v in node.items() if not k.startswith("x-kubernetes-")}
    for key in ("properties", "patternProperties", "$defs"):
        if isinstance(node.get(key), dict):
            out[key] = {k: json_schema(v) for k, v in node[key].items()}
    if node.get("x-kubernetes-int-or-string"):
        out.pop("type", None)
        out["anyOf"] = [{"type": "integer"}, {"type": "string"}]
    if out.pop("nullable", False) and "type" in out:
        out["type"] = [out["type"], "null"]
    preserve = node.get("x-kubernetes-preserve-unknown-fields")
    if "properties" in node and "additionalProperties" not in node and not preserve:
        out["additionalProperties"] = False
    return out


def crd_schemas(crd: dict[str, Any]) -> dict[str, dict[str, Any]]:
    """kubeconform file name -> JSON schema, one per served version of `crd`."""
    group, kind = crd["spec"]["group"], crd["spec"]["names"]["kind"]
    out = {}
    for version in crd["spec"]["versions"]:
        if not version.get("served", True):
            continue
        api_version = f"{group}/{version['name']}"
        schema = json_schema(copy.deepcopy(version["schema"]["openAPIV3Schema"]))
        props = schema.setdefault("properties", {})
        # What the API server adds to every custom resource's schema.
        props["apiVersion"] = {"type": "string", "enum": [api_version]}
        props["kind"] = {"type": "string", "enum": [kind]}
        props.setdefault("metadata", {"type": "object"})
        schema["additionalProperties"] = False
        schema["$schema"] = "https://json-schema.org/draft/2020-12/schema"
        out[schema_name(api_version, kind)] = schema
    return out


def crd_files() -> list[Path]:
    """Our CRDs (the chart's copy) and the real third-party ones the chart's objects use."""
    ours = sorted((CHART / "crds").glob("*.yaml"))
    theirs = sorted(THIRD_PARTY_CRDS.glob("*.yaml"))
    if not theirs:
        raise FileNotFoundError(f"no third-party CRDs in {THIRD_PARTY_CRDS}")
    return ours + theirs


def schema_dir(dest: Path) -> Path:
    """A folder with the schema of every kind the chart can render: Kubernetes' own kinds that
    appear in it, our CRDs and the third-party ones."""
    dest.mkdir(parents=True, exist_ok=True)
    for path in crd_files():
        for crd in documents(path.read_text()):
            for name, schema in crd_schemas(crd).items():
                (dest / name).write_text(json.dumps(schema))
    kinds = {
        "configmap-v1.json",
        "service-v1.json",
        "serviceaccount-v1.json",
        "deployment-apps-v1.json",
        "role-rbac-v1.json",
        "rolebinding-rbac-v1.json",
        "clusterrole-rbac-v1.json",
        "clusterrolebinding-rbac-v1.json",
        "networkpolicy-networking-v1.json",
    }
    kube_schemas(sorted(kinds), dest)
    return dest


def kubeconform(binary: str, schemas: Path, manifests: str) -> subprocess.CompletedProcess[str]:
    """`kubeconform -strict` on `manifests` (YAML text) against the schemas in `schemas` only;
    a kind without a schema there is an error."""
    cmd = [
        binary,
        "-strict",
        "-summary",
        "-output",
        "json",
        "-schema-location",
        str(schemas / SCHEMA_LOCATION),
        "-",
    ]
    return subprocess.run(cmd, input=manifests, capture_output=True, text=True, check=False)
