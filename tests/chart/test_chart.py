"""The Helm chart with the real tools: `helm lint --strict`, `helm template` with default and
non-default values checked by `kubeconform -strict` against Kubernetes' schemas, our CRDs and the
real prometheus-operator and spark-operator CRDs; the values schema refusing bad values; and
what each rendering must contain (least-privilege RBAC, the operator's flags, the pod's
security settings, dashboards and alerts)."""

from __future__ import annotations

import json
import subprocess
import sys
import tomllib
from pathlib import Path
from typing import Any

import pytest
import yaml

from tests.support import chart
from tests.support.chart import CHART, REPO

MONITORING = ("--api-versions", "monitoring.coreos.com/v1")
RULES = CHART / "alerts" / "deltakeeper-rules.yaml"
# Values documented as one block, not key by key.
LEAF_BLOCKS = ("resources", "podSecurityContext", "securityContext")


def _dashboards() -> list[Path]:
    found = sorted(CHART.glob("dashboards/*.json"))
    assert found, f"{CHART / 'dashboards'} has no dashboards: the chart is incomplete"
    return found


def _render(tools: dict[str, str], schemas: Path, *args: str) -> list[dict[str, Any]]:
    """`helm template ARGS`, validated by kubeconform; the documents."""
    text = chart.template(tools["HELM"], *args).stdout
    done = chart.kubeconform(tools["KUBECONFORM"], schemas, text)
    assert done.returncode == 0, f"kubeconform:\n{done.stdout}\n{done.stderr}"
    summary = json.loads(done.stdout)["summary"]
    docs = chart.documents(text)
    assert summary["valid"] == len(docs) and summary["invalid"] == summary["errors"] == 0
    assert summary["skipped"] == 0
    return docs


def _kinds(docs: list[dict[str, Any]], kind: str) -> list[dict[str, Any]]:
    return [d for d in docs if d["kind"] == kind]


def _one(docs: list[dict[str, Any]], kind: str) -> dict[str, Any]:
    found = _kinds(docs, kind)
    assert len(found) == 1, f"{len(found)} {kind}s"
    return found[0]


def _args(docs: list[dict[str, Any]]) -> list[str]:
    container = _one(docs, "Deployment")["spec"]["template"]["spec"]["containers"][0]
    return list(container["args"])


def _rules(docs: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return [r for d in docs if d["kind"] in ("Role", "ClusterRole") for r in d["rules"]]


def _assert_least_privilege(docs: list[dict[str, Any]]) -> None:
    for rule in _rules(docs):
        for key in ("apiGroups", "resources", "verbs", "resourceNames"):
            assert "*" not in rule.get(key, []), rule
        assert not {"delete", "deletecollection", "update"} & set(rule["verbs"]) or rule[
            "resources"
        ] == ["sparkapplications"], rule
    secrets = [r for r in _rules(docs) if "secrets" in r["resources"]]
    assert secrets and all(r["verbs"] == ["get"] for r in secrets)
    assert not any("pods" in r["resources"] for r in _rules(docs))


# -- the chart as a package ---------------------------------------------------------------------
def test_app_version_is_the_package_version() -> None:
    meta = yaml.safe_load((CHART / "Chart.yaml").read_text())
    package = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]["version"]
    assert meta["appVersion"] == package


def test_chart_crds_are_the_generated_ones() -> None:
    done = subprocess.run(
        [sys.executable, str(REPO / "scripts" / "gen_crds.py"), "--check"],
        capture_output=True,
        text=True,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    names = {p.name for p in (CHART / "crds").glob("*.yaml")}
    assert names == {p.name for p in (REPO / "crds").glob("*.yaml")}


def test_every_value_is_documented() -> None:
    readme = (CHART / "README.md").read_text()

    def leaves(values: dict[str, Any], prefix: str = "") -> list[str]:
        out = []
        for key, value in values.items():
            path = f"{prefix}{key}"
            if isinstance(value, dict) and value and path not in LEAF_BLOCKS:
                out += leaves(value, path + ".")
            else:
                out.append(path)
        return out

    values = yaml.safe_load((CHART / "values.yaml").read_text())
    missing = [p for p in leaves(values) if p not in readme and p.rsplit(".", 1)[0] not in readme]
    assert not missing, f"values not in charts/deltakeeper/README.md: {missing}"


@pytest.mark.parametrize(
    "args",
    [
        (),
        ("--set", "watchNamespaces={lake,lake2}"),
        ("--set", "serviceMonitor.enabled=true,prometheusRule.enabled=true"),
        ("--set", "logFormat=text,dashboards.enabled=false,rbac.create=false"),
    ],
    ids=["default", "namespaced", "monitoring", "text-no-dashboards-no-rbac"],
)
def test_helm_lint_strict(chart_tools: dict[str, str], args: tuple[str, ...]) -> None:
    cmd = [chart_tools["HELM"], "lint", "--strict", str(CHART), *args]
    done = subprocess.run(cmd, capture_output=True, text=True, check=False)
    assert done.returncode == 0, done.stdout + done.stderr
    assert "1 chart(s) linted, 0 chart(s) failed" in done.stdout


# -- renderings -----------------------------------------------------------------------------------
def test_default_values_cluster_wide(chart_tools: dict[str, str], schemas: Path) -> None:
    docs = _render(chart_tools, schemas)
    deployment = _one(docs, "Deployment")
    pod = deployment["spec"]["template"]["spec"]
    assert deployment["spec"]["replicas"] == 2
    args = _args(docs)
    assert args[0] == "operator" and "--all-namespaces" in args
    for flag in ("--metrics-bind-address=0.0.0.0", "--log-format=json", "--metrics-port=9108"):
        assert flag in args
    assert "--max-concurrent=2" in args
    assert not [a for a in args if a.startswith("--default-poll-interval")]  # unset: omitted
    container = pod["containers"][0]
    for probe in ("livenessProbe", "readinessProbe"):
        assert container[probe]["httpGet"] == {"path": "/healthz", "port": "metrics"}
    assert container["ports"] == [{"name": "metrics", "containerPort": 9108, "protocol": "TCP"}]
    security = container["securityContext"]
    assert security["runAsNonRoot"] is True and security["readOnlyRootFilesystem"] is True
    assert security["allowPrivilegeEscalation"] is False
    assert security["capabilities"] == {"drop": ["ALL"]}
    assert security["seccompProfile"] == {"type": "RuntimeDefault"}
    assert pod["securityContext"]["runAsNonRoot"] is True
    assert container["resources"]["limits"]["memory"]
    assert pod["serviceAccountName"] == _one(docs, "ServiceAccount")["metadata"]["name"]

    # Cluster-wide: one ClusterRole, bound to the ServiceAccount, and the cluster peering.
    role = _one(docs, "ClusterRole")
    binding = _one(docs, "ClusterRoleBinding")
    assert binding["roleRef"]["name"] == role["metadata"]["name"]
    assert binding["subjects"] == [
        {"kind": "ServiceAccount", "name": pod["serviceAccountName"], "namespace": "deltakeeper"}
    ]
    assert _one(docs, "ClusterKopfPeering")["metadata"]["name"] == "deltakeeper"
    assert not _kinds(docs, "KopfPeering")
    # No Role: compaction jobs run where their tables live, under the same ClusterRole.
    assert not _kinds(docs, "Role") and not _kinds(docs, "RoleBinding")
    assert {
        "apiGroups": ["sparkoperator.k8s.io"],
        "resources": ["sparkapplications"],
        "verbs": ["create", "get", "list", "delete"],
    } in role["rules"]
    _assert_least_privilege(docs)

    service = _one(docs, "Service")
    assert service["spec"]["ports"][0]["port"] == 9108
    assert service["spec"]["selector"] == deployment["spec"]["selector"]["matchLabels"]
    # No monitoring API on this "cluster": neither object.
    assert not _kinds(docs, "ServiceMonitor") and not _kinds(docs, "PrometheusRule")


def test_namespaced_mode_has_a_role_per_namespace_and_nothing_cluster_wide(
    chart_tools: dict[str, str], schemas: Path
) -> None:
    docs = _render(
        chart_tools,
        schemas,
        *("--set", "watchNamespaces={lake,lake2}"),
        *("--set", "maxConcurrent=5,metrics.port=9200,replicaCount=3"),
        *("--set", "operator.defaultPollInterval=2m,operator.memoryBudget=1536Mi"),
    )
    assert not _kinds(docs, "ClusterRole") and not _kinds(docs, "ClusterRoleBinding")
    assert not _kinds(docs, "ClusterKopfPeering")
    args = _args(docs)
    assert "--namespace=lake" in args and "--namespace=lake2" in args
    assert "--all-namespaces" not in args
    assert {"--max-concurrent=5", "--metrics-port=9200"} <= set(args)
    assert "--default-poll-interval=2m" in args and "--memory-budget=1536Mi" in args
    assert _one(docs, "Deployment")["spec"]["replicas"] == 3
    roles = {(d["metadata"]["namespace"], d["metadata"]["name"]): d for d in _kinds(docs, "Role")}
    bindings = {
        (d["metadata"]["namespace"], d["roleRef"]["name"]) for d in _kinds(docs, "RoleBinding")
    }
    assert set(roles) == bindings
    assert {ns for ns, _ in roles} == {"lake", "lake2"}
    for role in roles.values():
        resources = {res for rule in role["rules"] for res in rule["resources"]}
        # A table's compaction job is created in the table's own namespace.
        assert {"secrets", "kopfpeerings", "sparkapplications"} <= resources
    peerings = _kinds(docs, "KopfPeering")
    assert sorted(p["metadata"]["namespace"] for p in peerings) == ["lake", "lake2"]
    _assert_least_privilege(docs)


DISCOVERY_RULES = [
    {
        "apiGroups": ["deltakeeper.io"],
        "resources": ["deltalakes"],
        "verbs": ["list", "watch", "patch"],
    },
    {"apiGroups": ["deltakeeper.io"], "resources": ["deltalakes/status"], "verbs": ["patch"]},
    {"apiGroups": ["deltakeeper.io"], "resources": ["deltatables"], "verbs": ["create"]},
]


@pytest.mark.parametrize("namespaced", [False, True], ids=["cluster-wide", "namespaced"])
def test_discovery_is_off_by_default_and_adds_exactly_its_rights(
    chart_tools: dict[str, str], schemas: Path, namespaced: bool
) -> None:
    where = ("--set", "watchNamespaces={lake,lake2}") if namespaced else ()
    off = _render(chart_tools, schemas, *where)
    on = _render(chart_tools, schemas, *where, "--set", "discovery.enabled=true")
    assert "--discovery" not in _args(off) and "--discovery" in _args(on)
    table_roles = "Role" if namespaced else "ClusterRole"

    def rules(docs: list[dict[str, Any]]) -> list[list[dict[str, Any]]]:
        roles = [
            d
            for d in _kinds(docs, table_roles)
            if not d["metadata"]["name"].endswith("-compaction")
        ]
        assert len(roles) == (2 if namespaced else 1)
        return [r["rules"] for r in roles]

    for before, after in zip(rules(off), rules(on), strict=True):
        assert not [r for r in before if {"deltalakes", "deltalakes/status"} & set(r["resources"])]
        assert not [r for r in before if "create" in r["verbs"] and "deltatables" in r["resources"]]
        assert [r for r in after if r not in before] == DISCOVERY_RULES
        assert [r for r in before if r not in after] == []
    _assert_least_privilege(on)


def test_monitoring_objects_follow_the_api_and_the_values(
    chart_tools: dict[str, str], schemas: Path
) -> None:
    assert RULES.exists(), f"{RULES} is missing: the chart is incomplete"
    docs = _render(chart_tools, schemas, *MONITORING, "--set", "serviceMonitor.labels.release=kps")
    monitor = _one(docs, "ServiceMonitor")
    assert monitor["metadata"]["labels"]["release"] == "kps"
    assert monitor["spec"]["endpoints"][0]["port"] == "metrics"
    service = _one(docs, "Service")
    assert (
        monitor["spec"]["selector"]["matchLabels"].items() <= service["metadata"]["labels"].items()
    )
    rule = _one(docs, "PrometheusRule")
    groups = yaml.safe_load(RULES.read_text())["groups"]
    assert groups and rule["spec"]["groups"] == groups

    off = _render(
        chart_tools,
        schemas,
        *MONITORING,
        *("--set", "serviceMonitor.enabled=false,prometheusRule.enabled=false"),
    )
    assert not _kinds(off, "ServiceMonitor") and not _kinds(off, "PrometheusRule")
    # Asked for explicitly, they render without the API too.
    forced = _render(chart_tools, schemas, "--set", "serviceMonitor.enabled=true")
    assert _kinds(forced, "ServiceMonitor") and not _kinds(forced, "PrometheusRule")


def test_one_configmap_per_dashboard_for_the_grafana_sidecar(
    chart_tools: dict[str, str], schemas: Path
) -> None:
    files = _dashboards()
    docs = _render(
        chart_tools,
        schemas,
        *("--set", "dashboards.label=grafana_dash,dashboards.labelValue=yes"),
        *("--set", "dashboards.folderAnnotation=k8s-sidecar-target-directory"),
        *("--set", "dashboards.folder=/tmp/dashboards/lake"),
    )
    maps = [d for d in _kinds(docs, "ConfigMap") if "grafana_dash" in d["metadata"]["labels"]]
    assert len(maps) == len(files)
    by_file = {name: m for m in maps for name in m["data"]}
    assert set(by_file) == {f.name for f in files}
    for f in files:
        m = by_file[f.name]
        assert m["metadata"]["labels"]["grafana_dash"] == "yes"
        assert m["metadata"]["annotations"] == {
            "k8s-sidecar-target-directory": "/tmp/dashboards/lake"
        }
        assert json.loads(m["data"][f.name]) == json.loads(f.read_text())

    off = _render(chart_tools, schemas, "--set", "dashboards.enabled=false")
    assert not [
        d for d in _kinds(off, "ConfigMap") if "grafana_dashboard" in d["metadata"]["labels"]
    ]


def test_spark_application_template_is_a_valid_spark_application(
    chart_tools: dict[str, str], schemas: Path
) -> None:
    docs = _render(
        chart_tools,
        schemas,
        *("--set", "compaction.sparkApplication.image=registry.local/dk-spark:9"),
        *("--set", "compaction.sparkApplication.executor.instances=4"),
        *(
            "--set-string",
            "compaction.sparkApplication.sparkConf.spark\\.sql\\.shuffle\\.partitions=8",
        ),
    )
    (config,) = [
        d for d in _kinds(docs, "ConfigMap") if d["metadata"]["name"].endswith("-spark-application")
    ]
    app = yaml.safe_load(config["data"]["spark-application.yaml"])
    assert "namespace" not in app.get("metadata", {})  # each job goes to its table's namespace
    assert app["spec"]["image"] == "registry.local/dk-spark:9"
    assert app["spec"]["executor"]["instances"] == 4
    assert app["spec"]["sparkConf"] == {"spark.sql.shuffle.partitions": "8"}
    # The operator fills in the name; the rest must satisfy spark-operator's real CRD.
    app["metadata"] = {"name": "compact-events-1", "namespace": "lake"}
    done = chart.kubeconform(chart_tools["KUBECONFORM"], schemas, yaml.safe_dump(app))
    assert done.returncode == 0, done.stdout
    assert json.loads(done.stdout)["summary"]["valid"] == 1
    # The operator reads it from the mounted ConfigMap.
    pod = _one(docs, "Deployment")["spec"]["template"]["spec"]
    (volume,) = [v for v in pod["volumes"] if "configMap" in v]
    assert volume["configMap"]["name"] == config["metadata"]["name"]


def test_kubeconform_rejects_what_the_api_server_would(
    chart_tools: dict[str, str], schemas: Path
) -> None:
    """The schemas bite: a misspelt field, a wrong type, a bad DeltaTable."""
    bad = [
        {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "x"}, "dataa": {}},
        {
            "apiVersion": "apps/v1",
            "kind": "Deployment",
            "metadata": {"name": "x"},
            "spec": {"replicas": "two"},
        },
        {
            "apiVersion": "deltakeeper.io/v1alpha1",
            "kind": "DeltaTable",
            "metadata": {"name": "x"},
            "spec": {"uri": "s3://lake/t", "pollIntervall": "30s"},
        },
        {
            "apiVersion": "monitoring.coreos.com/v1",
            "kind": "ServiceMonitor",
            "metadata": {"name": "x"},
            "spec": {"endpoints": [{"port": "metrics", "intervall": "30s"}]},
        },
    ]
    for doc in bad:
        done = chart.kubeconform(chart_tools["KUBECONFORM"], schemas, yaml.safe_dump(doc))
        assert done.returncode != 0, doc
        assert json.loads(done.stdout)["summary"]["invalid"] == 1, done.stdout


@pytest.mark.parametrize(
    ("values", "field"),
    [
        ({"replicaCount": "two"}, "replicaCount"),
        ({"watchNamespaces": "lake"}, "watchNamespaces"),
        ({"watchNamespaces": ["Not_A_Namespace"]}, "watchNamespaces"),
        ({"maxConcurrent": 0}, "maxConcurrent"),
        ({"operator": {"defaultPollInterval": "0s"}}, "defaultPollInterval"),
        ({"operator": {"defaultPollInterval": "30"}}, "defaultPollInterval"),
        ({"operator": {"defaultPollInterval": "1m30s"}}, "defaultPollInterval"),
        ({"operator": {"defaultPollInterval": 30}}, "defaultPollInterval"),
        ({"operator": {"pollInterval": "1m"}}, "pollInterval"),
        ({"operator": {"memoryBudget": "lots"}}, "memoryBudget"),
        ({"operator": {"memoryBudget": 512}}, "memoryBudget"),
        ({"logFormat": "yaml"}, "logFormat"),
        ({"metrics": {"port": 70000}}, "port"),
        ({"serviceMonitor": {"enabled": "yes"}}, "enabled"),
        ({"dashboards": {"labelValue": 1}}, "labelValue"),
        ({"image": {"pullPolicy": "Sometimes"}}, "pullPolicy"),
        ({"compaction": {"sparkApplication": {"executor": {"instances": "4"}}}}, "instances"),
        ({"replicas": 3}, "replicas"),
        ({"events": {"webhook": {"enabled": True}}}, "tokenSecret"),  # no token: refused
        ({"events": {"webhook": {"port": 0}}}, "port"),
        ({"events": {"webhook": {"tokenFile": "/x"}}}, "tokenFile"),
        ({"events": {"queues": {"args": [1]}}}, "args"),
    ],
)
def test_bad_values_are_rejected_by_the_schema(
    chart_tools: dict[str, str], tmp_path: Path, values: dict[str, Any], field: str
) -> None:
    path = tmp_path / "values.yaml"
    path.write_text(yaml.safe_dump(values))
    done = chart.template(chart_tools["HELM"], "--values", str(path), check=False)
    assert done.returncode != 0, done.stdout
    assert "values don't meet the specifications of the schema" in done.stderr
    assert field in done.stderr
    lint = subprocess.run(
        [chart_tools["HELM"], "lint", "--strict", str(CHART), "--values", str(path)],
        capture_output=True,
        text=True,
        check=False,
    )
    assert lint.returncode != 0


def test_history_is_off_by_default_and_its_options_come_from_a_secret(
    chart_tools: dict[str, str], schemas: Path
) -> None:
    off = _render(chart_tools, schemas)
    assert not [a for a in _args(off) if a.startswith("--history")]
    history = ("--set", "history.uri=s3://lake/_deltakeeper/history")
    secret = ("--set", "history.storageOptionsSecret=history-store")
    on = _render(chart_tools, schemas, *history, *secret)
    assert "--history-uri=s3://lake/_deltakeeper/history" in _args(on)
    container = _one(on, "Deployment")["spec"]["template"]["spec"]["containers"][0]
    (env,) = [e for e in container["env"] if e["name"] == "DELTAKEEPER_HISTORY_OPTIONS"]
    assert env["valueFrom"] == {"secretKeyRef": {"name": "history-store", "key": "storageOptions"}}
    assert _rules(on) == _rules(off)  # the kubelet reads the Secret, not the operator


def test_the_webhook_is_off_by_default_and_on_gets_its_port_token_file_and_policy(
    chart_tools: dict[str, str], schemas: Path
) -> None:
    off = _render(chart_tools, schemas)
    assert not [a for a in _args(off) if a.startswith("--events")]
    assert not _kinds(off, "NetworkPolicy")
    assert [s["metadata"]["name"] for s in _kinds(off, "Service")] == ["deltakeeper-metrics"]
    store = "{namespaceSelector: {matchLabels: {kubernetes.io/metadata.name: minio}}}"
    on = _render(
        chart_tools,
        schemas,
        "--set",
        "events.webhook.enabled=true,events.webhook.tokenSecret=events-token",
        "--set",
        "events.webhook.tlsSecret=events-tls,events.webhook.networkPolicy.enabled=true",
        "--set-json",
        f"events.webhook.networkPolicy.from=[{_json_of(store)}]",
        "--set-json",
        'events.queues.env=[{"name": "AWS_REGION", "value": "eu-west-1"}]',
        "--set",
        "events.queues.args={--events-consumers=2}",
    )
    args = _args(on)
    assert "--events-listen=0.0.0.0:9443" in args
    assert "--events-token-file=/var/run/deltakeeper/events-token/token" in args
    assert "--events-tls-cert=/var/run/deltakeeper/events-tls/tls.crt" in args
    assert "--events-tls-key=/var/run/deltakeeper/events-tls/tls.key" in args
    assert "--events-consumers=2" in args
    pod = _one(on, "Deployment")["spec"]["template"]["spec"]
    container = pod["containers"][0]
    assert {"name": "events", "containerPort": 9443, "protocol": "TCP"} in container["ports"]
    assert {"name": "AWS_REGION", "value": "eu-west-1"} in container["env"]
    assert not [e for e in container["env"] if "TOKEN" in e["name"]]  # a file, not the env
    volumes = {v["name"]: v for v in pod["volumes"]}
    assert volumes["events-token"]["secret"] == {
        "secretName": "events-token",
        "items": [{"key": "token", "path": "token"}],
    }
    assert volumes["events-tls"]["secret"] == {"secretName": "events-tls"}
    mounts = {m["name"]: m for m in container["volumeMounts"]}
    assert mounts["events-token"]["readOnly"] is True
    (service,) = [s for s in _kinds(on, "Service") if s["metadata"]["name"].endswith("-events")]
    assert service["spec"]["ports"] == [
        {"name": "events", "port": 9443, "targetPort": "events", "protocol": "TCP"}
    ]
    selector = _one(on, "Deployment")["spec"]["selector"]["matchLabels"]
    assert service["spec"]["selector"] == selector
    policy = _one(on, "NetworkPolicy")["spec"]
    assert policy["podSelector"] == {"matchLabels": selector}
    metrics_rule, events_rule = policy["ingress"]
    assert metrics_rule == {"ports": [{"port": "metrics", "protocol": "TCP"}]}  # from anyone
    assert events_rule["ports"] == [{"port": "events", "protocol": "TCP"}]
    assert events_rule["from"] == [
        {"namespaceSelector": {"matchLabels": {"kubernetes.io/metadata.name": "minio"}}}
    ]
    assert _rules(on) == _rules(off)  # the kubelet mounts the Secret, not the operator
    # No peer given: the policy closes the events port to everyone.
    closed = _render(
        chart_tools,
        schemas,
        "--set",
        "events.webhook.enabled=true,events.webhook.tokenSecret=t",
        "--set",
        "events.webhook.networkPolicy.enabled=true",
    )
    assert _one(closed, "NetworkPolicy")["spec"]["ingress"] == [metrics_rule]


def _json_of(flow: str) -> str:
    return json.dumps(yaml.safe_load(flow))
