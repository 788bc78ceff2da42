"""The Helm chart installed for real: `helm install` into the e2e kube-apiserver (RBAC on), the
operator run as a local process under the chart's ServiceAccount (a TokenRequest token, not the
admin's), a DeltaTable on local disk getting its status, a checkpoint and Events; what that
identity may and may not do, asked of the API server itself; a SparkApplication from the chart's
template created under it; `helm upgrade` and `helm uninstall`. No kubelet runs, so the chart's
pods never start: the operator process stands in for them."""

from __future__ import annotations

import json
import os
import re
import subprocess
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest
import yaml
from deltalake import PostCommitHookProperties, write_deltalake
from kubernetes import client
from kubernetes import config as kube_config

from tests.support import chart
from tests.support.kube import KubeCluster

pytestmark = pytest.mark.e2e
RELEASE, RELEASE_NS = "deltakeeper", "deltakeeper-system"
WATCHED = ("helm-lake", "helm-lake2")
ADDED = "helm-lake3"  # watched after the upgrade
OTHER = "helm-other"  # never watched
SA = f"system:serviceaccount:{RELEASE_NS}:{RELEASE}"
GROUP, VERSION = "deltakeeper.io", "v1alpha1"
NO_HOOKS = PostCommitHookProperties(create_checkpoint=False, cleanup_expired_logs=False)


def _until(check: Callable[[], Any], timeout: float, what: str) -> Any:
    deadline = time.monotonic() + timeout
    while True:
        value = check()
        if value:
            return value
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout:.0f}s waiting for {what}")
        time.sleep(0.3)


class Helm:
    def __init__(self, binary: str, cluster: KubeCluster, home: Path) -> None:
        self.binary = binary
        # helm keeps its cache and config under these; none of them in the user's home.
        self.env = {
            **os.environ,
            "KUBECONFIG": str(cluster.kubeconfig),
            "HELM_CACHE_HOME": str(home / "cache"),
            "HELM_CONFIG_HOME": str(home / "config"),
            "HELM_DATA_HOME": str(home / "data"),
        }

    def __call__(self, *args: str) -> str:
        done = subprocess.run(
            [self.binary, *args], env=self.env, capture_output=True, text=True, check=False
        )
        assert done.returncode == 0, f"helm {' '.join(args)}:\n{done.stdout}\n{done.stderr}"
        return done.stdout


@pytest.fixture(scope="module")
def helm(kube_cluster: KubeCluster, tmp_path_factory: pytest.TempPathFactory) -> Helm:
    return Helm(chart.install()["HELM"], kube_cluster, tmp_path_factory.mktemp("helm"))


def _sa_kubeconfig(
    cluster: KubeCluster, path: Path, name: str = RELEASE, namespace: str = RELEASE_NS
) -> Path:
    return cluster.service_account_kubeconfig(path, name, namespace)


def _can_i(api: client.ApiClient, verb: str, resource: str, namespace: str | None) -> bool:
    """What `kubectl auth can-i VERB RESOURCE -n NS` asks, by the identity of `api`."""
    group, sub = "", ""
    if "." in resource.split("/")[0]:
        resource, _, group = resource.partition(".")
        if "/" in group:
            group, _, sub = group.partition("/")
    elif "/" in resource:
        resource, _, sub = resource.partition("/")
    attrs = {"verb": verb, "group": group, "resource": resource, "subresource": sub}
    if namespace:
        attrs["namespace"] = namespace
    review = client.AuthorizationV1Api(api).create_self_subject_access_review(
        {"spec": {"resourceAttributes": attrs}}
    )
    return bool(review.status.allowed)


# What the operator needs, and what it must not have. (verb, resource, namespace)
ALLOWED = [
    ("get", "secrets", WATCHED[0]),
    ("get", "secrets", WATCHED[1]),
    ("list", "deltatables.deltakeeper.io", WATCHED[0]),
    ("watch", "deltatables.deltakeeper.io", WATCHED[1]),
    ("patch", "deltatables.deltakeeper.io/status", WATCHED[0]),
    ("list", "deltamaintenancepolicies.deltakeeper.io", WATCHED[0]),
    ("watch", "deltamaintenancepolicies.deltakeeper.io", WATCHED[0]),
    ("patch", "deltamaintenancepolicies.deltakeeper.io/status", WATCHED[0]),
    ("create", "events", WATCHED[0]),
    ("get", "kopfpeerings.kopf.dev", WATCHED[0]),
    ("patch", "kopfpeerings.kopf.dev", WATCHED[1]),
    # Compaction jobs run in their table's namespace.
    ("create", "sparkapplications.sparkoperator.k8s.io", WATCHED[0]),
    ("get", "sparkapplications.sparkoperator.k8s.io", WATCHED[1]),
    ("list", "sparkapplications.sparkoperator.k8s.io", WATCHED[0]),
    ("delete", "sparkapplications.sparkoperator.k8s.io", WATCHED[1]),
]
DENIED = [
    ("get", "secrets", OTHER),
    ("get", "secrets", RELEASE_NS),
    ("get", "secrets", None),
    ("list", "secrets", WATCHED[0]),
    ("watch", "secrets", WATCHED[0]),
    ("update", "secrets", WATCHED[0]),
    ("delete", "deltatables.deltakeeper.io", WATCHED[0]),
    ("create", "deltatables.deltakeeper.io", WATCHED[0]),
    ("update", "deltatables.deltakeeper.io", WATCHED[0]),
    ("delete", "deltamaintenancepolicies.deltakeeper.io", WATCHED[0]),
    ("list", "deltatables.deltakeeper.io", OTHER),
    ("list", "deltatables.deltakeeper.io", None),
    ("get", "pods", WATCHED[0]),
    ("create", "pods", WATCHED[0]),
    ("list", "pods", None),
    ("delete", "events", WATCHED[0]),
    ("create", "events", OTHER),
    ("create", "sparkapplications.sparkoperator.k8s.io", OTHER),
    ("create", "sparkapplications.sparkoperator.k8s.io", RELEASE_NS),
    ("delete", "sparkapplications.sparkoperator.k8s.io", OTHER),
    ("update", "sparkapplications.sparkoperator.k8s.io", WATCHED[0]),
    ("create", "kopfpeerings.kopf.dev", WATCHED[0]),
    ("delete", "kopfpeerings.kopf.dev", WATCHED[0]),
    ("patch", "clusterkopfpeerings.kopf.dev", None),
    ("list", "namespaces", None),
    ("list", "customresourcedefinitions.apiextensions.k8s.io", None),
    ("create", "roles.rbac.authorization.k8s.io", WATCHED[0]),
    ("create", "serviceaccounts/token", RELEASE_NS),
]


@pytest.fixture(scope="module")
def installed(kube_cluster: KubeCluster, helm: Helm) -> Iterator[None]:
    for ns in (*WATCHED, ADDED, OTHER):
        kube_cluster.create_namespace(ns)
    helm(
        *("install", RELEASE, str(chart.CHART), "-n", RELEASE_NS, "--create-namespace"),
        *("--set", f"watchNamespaces={{{','.join(WATCHED)}}}"),
    )
    yield
    subprocess.run(
        [helm.binary, "uninstall", RELEASE, "-n", RELEASE_NS],
        env=helm.env,
        capture_output=True,
        check=False,
    )


def _refusals(log: str) -> list[str]:
    """The operator's log lines that tell of a refusal (Forbidden, HTTP 403). Each line's
    timestamp is left out: its milliseconds can be 403."""
    messages = (re.sub(r"^\[[^\]]*\]", "", line) for line in log.splitlines())
    return [m for m in messages if "Forbidden" in m or re.search(r"\b403\b", m)]


def _append(path: Path, n: int) -> None:
    data = pa.table({"id": pa.array(range(n * 10, n * 10 + 10), pa.int64())})
    write_deltalake(
        str(path),
        data,
        mode="overwrite" if n == 0 else "append",
        post_commithook_properties=NO_HOOKS,
    )


def test_installed_chart_runs_the_operator_under_its_service_account(
    kube_cluster: KubeCluster,
    installed: None,
    operator_factory: Any,
    tmp_path: Path,
) -> None:
    admin = kube_cluster.api_client()
    apps = client.AppsV1Api(admin)
    deployment = apps.read_namespaced_deployment(RELEASE, RELEASE_NS)
    assert deployment.spec.replicas == 2
    args = deployment.spec.template.spec.containers[0].args
    assert [f"--namespace={ns}" for ns in WATCHED] == [
        a for a in args if a.startswith("--namespace")
    ]
    objects = client.CustomObjectsApi(admin)
    for ns in WATCHED:  # the chart made the peering objects: the operator needs no create
        objects.get_namespaced_custom_object("kopf.dev", "v1", ns, "kopfpeerings", "deltakeeper")

    sa_config = _sa_kubeconfig(kube_cluster, tmp_path / "sa-kubeconfig")
    table = tmp_path / "events"
    _append(table, 0)
    tables = client.CustomObjectsApi(admin)

    def create(ns: str, name: str, spec: dict[str, Any]) -> None:
        body = {
            "apiVersion": f"{GROUP}/{VERSION}",
            "kind": "DeltaTable",
            "metadata": {"name": name},
            "spec": {"pollInterval": "1s", **spec},
        }
        tables.create_namespaced_custom_object(GROUP, VERSION, ns, "deltatables", body)

    def status(ns: str, name: str) -> dict[str, Any]:
        got = tables.get_namespaced_custom_object(GROUP, VERSION, ns, "deltatables", name)
        return dict(got.get("status") or {})

    def ready(ns: str, name: str) -> dict[str, Any]:
        return next(
            (c for c in status(ns, name).get("conditions") or [] if c["type"] == "Ready"), {}
        )

    policy = {
        "apiVersion": f"{GROUP}/{VERSION}",
        "kind": "DeltaMaintenancePolicy",
        "metadata": {"name": "standard"},
        "spec": {"checkpoint": {"interval": 2}},
    }
    tables.create_namespaced_custom_object(
        GROUP, VERSION, WATCHED[0], "deltamaintenancepolicies", policy
    )
    create(WATCHED[0], "events", {"uri": f"file://{table}", "policyRef": {"name": "standard"}})
    # A Secret that is not there: NotFound, not Forbidden, proves `get` is granted here.
    create(
        WATCHED[1],
        "no-secret",
        {"uri": "s3://lake/x", "storage": {"secretRef": {"name": "absent"}}},
    )

    op = operator_factory(
        *("--namespace", WATCHED[0], "--namespace", WATCHED[1], "--log-format", "json"),
        env={"KUBECONFIG": str(sa_config)},
    )
    _until(lambda: ready(WATCHED[0], "events").get("reason") == "Watching", 60, "Ready")
    for n in range(1, 4):
        _append(table, n)
    _until(
        lambda: (status(WATCHED[0], "events").get("lastCheckpointVersion") or -1) >= 2,
        60,
        "a checkpoint",
    )
    assert (table / "_delta_log" / "_last_checkpoint").exists()
    _until(lambda: status(WATCHED[0], "events").get("version") == 3, 30, "version 3")
    core = client.CoreV1Api(admin)

    def event(ns: str, name: str, reason: str) -> Any:
        items = core.list_namespaced_event(ns, field_selector=f"involvedObject.name={name}").items
        return next((e for e in items if e.reason == reason), None)

    _until(lambda: event(WATCHED[0], "events", "Checkpointed"), 30, "a Checkpointed event")
    _until(
        lambda: ready(WATCHED[1], "no-secret").get("reason") == "SecretNotFound",
        60,
        "SecretNotFound",
    )
    _until(lambda: event(WATCHED[1], "no-secret", "SecretNotFound"), 30, "a SecretNotFound event")
    # kopf writes the policy's status under the same identity.
    _until(
        lambda: (
            (
                objects.get_namespaced_custom_object(
                    GROUP, VERSION, WATCHED[0], "deltamaintenancepolicies", "standard"
                ).get("status")
                or {}
            ).get("tables")
            == 1
        ),
        60,
        "the policy's status",
    )
    # Nothing was refused: the chart grants all the operator does.
    log = op.log_text()
    assert not _refusals(log), log
    assert "Not enough permissions" not in log, log
    lines = [line for line in log.splitlines() if line.strip()]
    records = [json.loads(line) for line in lines]  # --log-format json: every line an object
    assert any("acting for" in r.get("message", "") for r in records)
    op.stop()


def test_the_service_account_may_do_exactly_what_the_operator_needs(
    kube_cluster: KubeCluster, installed: None, tmp_path: Path
) -> None:
    sa = kube_config.new_client_from_config(str(_sa_kubeconfig(kube_cluster, tmp_path / "sa")))
    assert (
        client.AuthenticationV1Api(sa).create_self_subject_review({}).status.user_info.username
        == SA
    )
    wrong_yes = [c for c in DENIED if _can_i(sa, *c)]
    wrong_no = [c for c in ALLOWED if not _can_i(sa, *c)]
    assert not wrong_yes, f"allowed but must not be: {wrong_yes}"
    assert not wrong_no, f"needed but refused: {wrong_no}"

    # A SparkApplication from the chart's template, under spark-operator's real CRD.
    kube_cluster.apply_crds(
        [chart.THIRD_PARTY_CRDS / "sparkoperator.k8s.io_sparkapplications.yaml"]
    )
    admin = client.CoreV1Api(kube_cluster.api_client())
    template = admin.read_namespaced_config_map(f"{RELEASE}-spark-application", RELEASE_NS)
    app = yaml.safe_load(template.data["spark-application.yaml"])
    app["metadata"] = {
        "name": "compact-events-1"
    }  # the operator names it, in the table's namespace
    spark = client.CustomObjectsApi(sa)
    args = ("sparkoperator.k8s.io", "v1beta2")
    jobs = WATCHED[0]
    spark.create_namespaced_custom_object(*args, jobs, "sparkapplications", app)
    got = spark.get_namespaced_custom_object(*args, jobs, "sparkapplications", "compact-events-1")
    assert got["spec"]["image"] == app["spec"]["image"]
    listed = spark.list_namespaced_custom_object(*args, jobs, "sparkapplications")["items"]
    assert [a["metadata"]["name"] for a in listed] == ["compact-events-1"]
    spark.delete_namespaced_custom_object(*args, jobs, "sparkapplications", "compact-events-1")
    with pytest.raises(client.ApiException) as refused:
        spark.create_namespaced_custom_object(*args, OTHER, "sparkapplications", app)
    assert refused.value.status == 403
    with pytest.raises(client.ApiException) as refused:
        client.CoreV1Api(sa).read_namespaced_secret("anything", OTHER)
    assert refused.value.status == 403


def test_upgrade_then_uninstall_keeps_tables_and_crds(
    kube_cluster: KubeCluster, installed: None, helm: Helm, tmp_path: Path
) -> None:
    admin = kube_cluster.api_client()
    objects = client.CustomObjectsApi(admin)
    table = {
        "apiVersion": f"{GROUP}/{VERSION}",
        "kind": "DeltaTable",
        "metadata": {"name": "kept"},
        "spec": {"uri": f"file://{tmp_path}/kept"},
    }
    objects.create_namespaced_custom_object(GROUP, VERSION, ADDED, "deltatables", table)
    sa = _sa_kubeconfig(kube_cluster, tmp_path / "sa")
    before = kube_config.new_client_from_config(str(sa))
    assert not _can_i(before, "get", "secrets", ADDED)
    assert not _can_i(before, "create", "sparkapplications.sparkoperator.k8s.io", ADDED)

    helm(
        *("upgrade", RELEASE, str(chart.CHART), "-n", RELEASE_NS, "--reuse-values"),
        *("--set", f"watchNamespaces={{{','.join((*WATCHED, ADDED))}}}"),
        *("--set", "maxConcurrent=4,replicaCount=3,logFormat=text"),
    )
    apps = client.AppsV1Api(admin)
    deployment = apps.read_namespaced_deployment(RELEASE, RELEASE_NS)
    args = deployment.spec.template.spec.containers[0].args
    assert deployment.spec.replicas == 3
    assert {f"--namespace={ADDED}", "--max-concurrent=4", "--log-format=text"} <= set(args)
    assert f"--namespace={WATCHED[0]}" in args
    assert _can_i(before, "get", "secrets", ADDED)
    assert _can_i(before, "create", "sparkapplications.sparkoperator.k8s.io", ADDED)
    objects.get_namespaced_custom_object("kopf.dev", "v1", ADDED, "kopfpeerings", "deltakeeper")
    history = json.loads(helm("history", RELEASE, "-n", RELEASE_NS, "-o", "json"))
    assert [h["revision"] for h in history] == [1, 2] and history[-1]["status"] == "deployed"

    helm("uninstall", RELEASE, "-n", RELEASE_NS)
    with pytest.raises(client.ApiException) as gone:
        apps.read_namespaced_deployment(RELEASE, RELEASE_NS)
    assert gone.value.status == 404
    rbac = client.RbacAuthorizationV1Api(admin)
    for ns in (*WATCHED, ADDED):
        assert not [
            r for r in rbac.list_namespaced_role(ns).items if r.metadata.name.startswith(RELEASE)
        ]
    core = client.CoreV1Api(admin)
    assert RELEASE not in [
        s.metadata.name for s in core.list_namespaced_service_account(RELEASE_NS).items
    ]
    # What users made, and the CRDs, stay.
    assert objects.get_namespaced_custom_object(GROUP, VERSION, ADDED, "deltatables", "kept")
    ext = client.ApiextensionsV1Api(admin)
    for name in ("deltatables.deltakeeper.io", "deltamaintenancepolicies.deltakeeper.io"):
        assert ext.read_custom_resource_definition(name).metadata.name == name
    # Its tokens are worth nothing now: refused (403, no binding left) or, once the API server
    # notices the ServiceAccount is gone, not even authenticated (401).
    with pytest.raises(client.ApiException) as refused:
        client.CustomObjectsApi(before).list_namespaced_custom_object(
            GROUP, VERSION, WATCHED[0], "deltatables"
        )
    assert refused.value.status in (401, 403)


def test_cluster_wide_install_grants_a_cluster_role_and_nothing_more(
    kube_cluster: KubeCluster, helm: Helm, operator_factory: Any, tmp_path: Path
) -> None:
    release, ns = "dk-cluster", "deltakeeper-cluster"
    admin = kube_cluster.api_client()
    objects = client.CustomObjectsApi(admin)
    # The chart owns the cluster peering object; one an earlier operator made would clash.
    try:
        objects.delete_cluster_custom_object("kopf.dev", "v1", "clusterkopfpeerings", "deltakeeper")
    except client.ApiException as e:
        if e.status != 404:
            raise
    kube_cluster.create_namespace("helm-anywhere")
    helm("install", release, str(chart.CHART), "-n", ns, "--create-namespace")
    try:
        path = _sa_kubeconfig(kube_cluster, tmp_path / "sa", f"{release}-deltakeeper", ns)
        sa = kube_config.new_client_from_config(str(path))
        for verb, resource, where in [
            ("get", "secrets", "helm-anywhere"),
            ("list", "deltatables.deltakeeper.io", None),
            ("patch", "clusterkopfpeerings.kopf.dev", None),
            ("create", "sparkapplications.sparkoperator.k8s.io", "helm-anywhere"),
        ]:
            assert _can_i(sa, verb, resource, where), (verb, resource, where)
        for verb, resource, where in [
            ("list", "secrets", "helm-anywhere"),
            ("delete", "deltatables.deltakeeper.io", "helm-anywhere"),
            ("get", "pods", "helm-anywhere"),
            ("update", "sparkapplications.sparkoperator.k8s.io", "helm-anywhere"),
            ("list", "namespaces", None),
            ("create", "clusterkopfpeerings.kopf.dev", None),
        ]:
            assert not _can_i(sa, verb, resource, where), (verb, resource, where)

        table = tmp_path / "anywhere"
        _append(table, 0)
        body = {
            "apiVersion": f"{GROUP}/{VERSION}",
            "kind": "DeltaTable",
            "metadata": {"name": "anywhere"},
            "spec": {"uri": f"file://{table}", "pollInterval": "1s"},
        }
        objects.create_namespaced_custom_object(
            GROUP, VERSION, "helm-anywhere", "deltatables", body
        )
        op = operator_factory("--all-namespaces", env={"KUBECONFIG": str(path)})

        def version() -> Any:
            got = objects.get_namespaced_custom_object(
                GROUP, VERSION, "helm-anywhere", "deltatables", "anywhere"
            )
            return (got.get("status") or {}).get("version") == 0

        _until(version, 60, "the cluster-wide operator's status")
        log = op.log_text()
        assert not _refusals(log), log
        op.stop()
    finally:
        helm("uninstall", release, "-n", ns)
