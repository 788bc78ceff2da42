"""The few API-server calls the operator makes itself (kopf makes the rest): reading Secrets,
writing a DeltaTable's status subresource. Blocking; called off the event loop."""

from __future__ import annotations

import base64
import functools
from collections.abc import Callable, Mapping
from typing import Any

import orjson
from kubernetes import client, config
from kubernetes.client.exceptions import ApiException

from deltakeeper.resources.crd import GROUP, TABLES, VERSION
from deltakeeper.resources.lake import APPLIED_ANNOTATION
from deltakeeper.resources.manifests import PolicyResource, TableResource
from deltakeeper.runtime.targets import SecretUnreadable

# Server-side apply's owner of what a DeltaLake sets on its DeltaTables: fields a user set that
# the lake's template does not are another manager's, and an apply leaves them alone.
LAKE_MANAGER = "deltakeeper-lake"
# Every call here has a deadline (connect, read): a hung API server must not hold a thread,
# and what waits on it, for ever.
TIMEOUT = (5.0, 15.0)


def api_client() -> client.ApiClient:
    """In the cluster: the pod's service account; outside: $KUBECONFIG or ~/.kube/config."""
    try:
        config.load_incluster_config()
    except config.ConfigException:
        config.load_kube_config()
    return client.ApiClient()


def read_secret(api: client.ApiClient, namespace: str, name: str) -> dict[str, str] | None:
    """A Secret's decoded data, None when there is no such Secret.

    Raises SecretUnreadable for an answer that is not the Secret (forbidden, not text); a
    connection failure or timeout raises urllib3's error or OSError as it is.
    """
    try:
        secret = client.CoreV1Api(api).read_namespaced_secret(
            name, namespace, _request_timeout=TIMEOUT
        )
        return {k: base64.b64decode(v).decode() for k, v in (secret.data or {}).items()}
    except ApiException as e:
        if e.status == 404:
            return None
        raise SecretUnreadable(short_error(e)) from None
    except (UnicodeDecodeError, ValueError):
        raise SecretUnreadable("its data is not UTF-8 text") from None


def write_status(
    api: client.ApiClient,
    namespace: str,
    name: str,
    status: Mapping[str, Any],
    plural: str = TABLES,
) -> bool:
    """Merge-patch the status subresource of a DeltaTable (or of `plural`); False when the
    object is gone."""
    try:
        # The reply (the whole object) is read but not parsed: nothing here needs it.
        reply: Any = client.CustomObjectsApi(api).patch_namespaced_custom_object_status(
            GROUP,
            VERSION,
            namespace,
            plural,
            name,
            {"status": dict(status)},
            _preload_content=False,
            _request_timeout=TIMEOUT,
        )
        reply.read()
        reply.release_conn()
    except ApiException as e:
        if e.status != 404:
            raise
        return False
    return True


def apply_table(api: client.ApiClient, body: Mapping[str, Any]) -> None:
    """Create or update a DeltaTable by server-side apply as LAKE_MANAGER: the fields in `body`
    are set (taken back from anyone who changed them), fields it leaves out that were LAKE_MANAGER's
    are removed, and every other manager's fields stay."""
    meta = body["metadata"]
    reply: Any = client.CustomObjectsApi(api).patch_namespaced_custom_object(
        GROUP,
        VERSION,
        meta["namespace"],
        TABLES,
        meta["name"],
        dict(body),
        field_manager=LAKE_MANAGER,
        force=True,
        _content_type="application/apply-patch+yaml",
        _preload_content=False,
        _request_timeout=TIMEOUT,
    )
    reply.read()
    reply.release_conn()


def short_error(e: Exception) -> str:
    """What went wrong, for a log line: an ApiException's body echoes the request, so only
    its status and reason."""
    if isinstance(e, ApiException):
        return f"HTTP {e.status} {e.reason}"
    return type(e).__name__


def controller_uid(meta: Mapping[str, Any]) -> str:
    """The uid of the object's controlling owner ("" when it has none)."""
    for ref in meta.get("ownerReferences") or []:
        if ref.get("controller"):
            return str(ref.get("uid") or "")
    return ""


def applied_digest(meta: Mapping[str, Any]) -> str:
    """The digest of the manifest a DeltaLake last applied to this DeltaTable ("" when none)."""
    return str((meta.get("annotations") or {}).get(APPLIED_ANNOTATION) or "")


def table_resource(body: Mapping[str, Any]) -> TableResource:
    meta = body.get("metadata") or {}
    return TableResource(
        namespace=meta.get("namespace") or "default",
        name=meta["name"],
        labels=dict(meta.get("labels") or {}),
        generation=int(meta.get("generation") or 1),
        spec=shared_values(body.get("spec") or {}),
        source="api",
    )


# A spec's object values (storage, events, ...) are mostly the same for many tables (one
# store's, one lake's template), and a parsed copy is most of a kilobyte a table: tables with
# equal ones share one, among the last SHARED_VALUES distinct values seen. Specs are read only.
SHARED_VALUES = 4096
_shared: dict[bytes, Any] = {}


def shared_values(spec: Mapping[str, Any]) -> dict[str, Any]:
    """A copy of `spec` whose dict and list values are shared with equal ones of other specs."""
    out = {}
    for key, value in spec.items():
        if isinstance(value, (dict, list)) and value:
            value = _shared.setdefault(orjson.dumps(value, option=orjson.OPT_SORT_KEYS), value)
            if len(_shared) > SHARED_VALUES:
                del _shared[next(iter(_shared))]  # the oldest
        out[key] = value
    return out


def policy_resource(body: Mapping[str, Any]) -> PolicyResource:
    meta = body.get("metadata") or {}
    spec = dict(body.get("spec") or {})
    return PolicyResource(
        namespace=meta.get("namespace") or "default",
        name=meta["name"],
        labels=dict(meta.get("labels") or {}),
        generation=int(meta.get("generation") or 1),
        spec=spec,
        selector=spec.get("tableSelector"),
        source="api",
    )


def ensure_peering(api: client.ApiClient, name: str, namespaces: list[str]) -> None:
    """Create the kopf peering object(s) replicas meet in, if missing (the CRDs must exist):
    ClusterKopfPeering cluster-wide, else a KopfPeering in each watched namespace. Each is read
    first: where the Helm chart made them, the operator needs no right to create them."""
    objects = client.CustomObjectsApi(api)
    body: dict[str, Any] = {"apiVersion": "kopf.dev/v1", "metadata": {"name": name}}

    def cluster() -> None:
        if not _exists(objects.get_cluster_custom_object, "clusterkopfpeerings", name):
            objects.create_cluster_custom_object(
                "kopf.dev", "v1", "clusterkopfpeerings", {**body, "kind": "ClusterKopfPeering"}
            )

    def namespaced(ns: str) -> None:
        if not _exists(objects.get_namespaced_custom_object, ns, "kopfpeerings", name):
            objects.create_namespaced_custom_object(
                "kopf.dev", "v1", ns, "kopfpeerings", {**body, "kind": "KopfPeering"}
            )

    creates: list[Callable[[], None]] = [functools.partial(namespaced, ns) for ns in namespaces]
    creates = creates or [cluster]
    for create in creates:
        try:
            create()
        except ApiException as e:
            if e.status != 409:  # 409: another replica made it meanwhile
                raise


def _exists(get: Callable[..., Any], *where: str) -> bool:
    try:
        get("kopf.dev", "v1", *where, _request_timeout=TIMEOUT)
    except ApiException as e:
        if e.status == 404:
            return False
        raise
    return True
