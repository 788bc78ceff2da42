"""A real Kubernetes API server for the e2e tests: etcd + kube-apiserver on 127.0.0.1.

Binaries come from scripts/k8s/install.sh (built from their Go modules, cached outside the
clone). No scheduler runs, and no controller-manager unless a test starts one
(`start_garbage_collector`: what deletes the objects an owner leaves behind); the rest of the
tests need CRDs, Secrets, Events, watches and the status subresource, which the API server
alone serves. Both processes die with the
test process (PDEATHSIG), and their data lives in a temporary folder.
"""

from __future__ import annotations

import contextlib
import json
import os
import secrets
import ssl
import subprocess
import time
import urllib.request
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from tests.support import waiting
from tests.support.stores import _spawn, free_port

REPO = Path(__file__).resolve().parents[2]
INSTALL = REPO / "scripts" / "k8s" / "install.sh"
CRDS = REPO / "crds"


class KubeStartError(RuntimeError):
    """etcd or kube-apiserver did not come up; the message carries the end of its log."""


def install() -> dict[str, str]:
    done = subprocess.run(["bash", str(INSTALL)], stdout=subprocess.PIPE, text=True, check=False)
    if done.returncode != 0:
        raise KubeStartError(f"{INSTALL} failed with exit code {done.returncode}")
    return dict(line.split("=", 1) for line in done.stdout.splitlines() if "=" in line)


@dataclass
class KubeCluster:
    workdir: Path
    server: str
    token: str
    kubeconfig: Path
    etcd: subprocess.Popen[bytes]
    apiserver: subprocess.Popen[bytes]

    def api_client(self) -> Any:
        from kubernetes import config

        return config.new_client_from_config(str(self.kubeconfig))

    def env(self) -> dict[str, str]:
        """Environment for a process (an operator) that should talk to this server."""
        return {**os.environ, "KUBECONFIG": str(self.kubeconfig)}

    def log_tail(self, lines: int = 40) -> str:
        out = []
        for name in ("etcd", "apiserver"):
            text = (self.workdir / name / "server.log").read_text(errors="replace").splitlines()
            out.append(f"--- {name} ---\n" + "\n".join(text[-lines:]))
        return "\n".join(out)

    def stop(self) -> None:
        for proc in (self.apiserver, self.etcd):
            waiting.stop(proc, 20)

    # -- objects ------------------------------------------------------------------------------
    def apply_crds(self, paths: Iterable[Path] | None = None, timeout: float = 60) -> list[str]:
        """Create (or replace) the CRDs in `paths` (default: every file in crds/) and wait for
        each to be Established; returns their names."""
        from kubernetes import client

        api = client.ApiextensionsV1Api(self.api_client())
        names = []
        for path in sorted(paths or CRDS.glob("*.yaml")):
            for doc in yaml.safe_load_all(path.read_text()):
                if not doc:
                    continue
                name = doc["metadata"]["name"]
                try:
                    api.create_custom_resource_definition(doc)
                except client.ApiException as e:
                    if e.status != 409:
                        raise
                    current = api.read_custom_resource_definition(name)
                    doc["metadata"]["resourceVersion"] = current.metadata.resource_version
                    api.replace_custom_resource_definition(name, doc)
                names.append(name)
        deadline = time.monotonic() + timeout
        for name in names:
            while not _established(api.read_custom_resource_definition(name)):
                if time.monotonic() > deadline:
                    raise KubeStartError(f"CRD {name} not Established after {timeout:.0f}s")
                time.sleep(0.2)
        return names

    def create_namespace(self, name: str) -> None:
        from kubernetes import client

        core = client.CoreV1Api(self.api_client())
        try:
            core.create_namespace({"metadata": {"name": name}})
        except client.ApiException as e:
            if e.status != 409:
                raise

    def get_table(self, path: str) -> Any:
        """What `kubectl get` prints for the list at `path`: the server's Table rendering."""
        return json.loads(self.get(path, "application/json;as=Table;v=v1;g=meta.k8s.io"))

    def get(self, path: str, accept: str = "*/*") -> bytes:
        """GET `path` from the API server as its admin (e.g. /metrics, its own counts)."""
        context = ssl.create_default_context()
        context.check_hostname, context.verify_mode = False, ssl.CERT_NONE
        request = urllib.request.Request(
            self.server + path,
            headers={"Authorization": f"Bearer {self.token}", "Accept": accept},
        )
        with urllib.request.urlopen(request, context=context, timeout=10) as r:
            return bytes(r.read())

    def service_account_kubeconfig(self, path: Path, name: str, namespace: str) -> Path:
        """A kubeconfig at `path` with a token the TokenRequest API issued to the
        ServiceAccount namespace/name: requests made with it get that account's rights."""
        from kubernetes import client

        core = client.CoreV1Api(self.api_client())
        request = {"spec": {"expirationSeconds": 3600}}
        token = core.create_namespaced_service_account_token(name, namespace, request)
        config = yaml.safe_load(self.kubeconfig.read_text())
        config["users"] = [{"name": "sa", "user": {"token": token.status.token}}]
        config["contexts"][0]["context"]["user"] = "sa"
        path.write_text(yaml.safe_dump(config))
        return path

    def create_secret(self, namespace: str, name: str, data: dict[str, str]) -> None:
        from kubernetes import client

        core = client.CoreV1Api(self.api_client())
        body = {"metadata": {"name": name}, "stringData": data}
        try:
            core.create_namespaced_secret(namespace, body)
        except client.ApiException as e:
            if e.status != 409:
                raise
            core.replace_namespaced_secret(name, namespace, body)


def start_garbage_collector(
    binaries: dict[str, str], cluster: KubeCluster, workdir: Path
) -> subprocess.Popen[bytes]:
    """kube-controller-manager running only its garbage collector, against `cluster`: it
    deletes objects whose owners (ownerReferences) are gone. The caller terminates it."""
    workdir.mkdir(parents=True, exist_ok=True)
    proc, _ = _spawn(
        [
            binaries["KUBE_CONTROLLER_MANAGER"],
            "--kubeconfig", str(cluster.kubeconfig),
            "--controllers", "garbagecollector",
            "--leader-elect=false",
            "--secure-port", "0",  # no health endpoint needed; nothing else to serve
        ],
        workdir,
        {},
    )  # fmt: skip
    time.sleep(0.5)
    if proc.poll() is not None:
        log = (workdir / "server.log").read_text(errors="replace")
        raise KubeStartError(f"kube-controller-manager exited with {proc.returncode}:\n{log}")
    return proc


def _established(crd: Any) -> bool:
    return any(
        c.type == "Established" and c.status == "True" for c in (crd.status.conditions or [])
    )


def _service_account_key(path: Path) -> None:
    subprocess.run(
        ["openssl", "genrsa", "-out", str(path), "2048"],
        check=True,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )


def start(binaries: dict[str, str], workdir: Path, timeout: float = 120) -> KubeCluster:
    etcd_dir, api_dir = workdir / "etcd", workdir / "apiserver"
    etcd_dir.mkdir(parents=True)
    api_dir.mkdir(parents=True)
    client_port, peer_port, api_port = free_port(), free_port(), free_port()
    etcd_url = f"http://127.0.0.1:{client_port}"
    etcd, _ = _spawn(
        [
            binaries["ETCD"],
            "--data-dir", str(etcd_dir / "data"),
            "--listen-client-urls", etcd_url,
            "--advertise-client-urls", etcd_url,
            "--listen-peer-urls", f"http://127.0.0.1:{peer_port}",
            "--initial-advertise-peer-urls", f"http://127.0.0.1:{peer_port}",
            "--initial-cluster", f"default=http://127.0.0.1:{peer_port}",
            "--unsafe-no-fsync",  # test data; fsync would make every write wait for the disk
            "--quota-backend-bytes", str(4 * 2**30),
        ],
        etcd_dir,
        {},
    )  # fmt: skip
    token = secrets.token_hex(16)
    (api_dir / "tokens.csv").write_text(f'{token},admin,admin,"system:masters"\n')
    key = api_dir / "sa.key"
    _service_account_key(key)
    apiserver, _ = _spawn(
        [
            binaries["KUBE_APISERVER"],
            "--etcd-servers", etcd_url,
            "--bind-address", "127.0.0.1",
            "--secure-port", str(api_port),
            "--cert-dir", str(api_dir / "certs"),
            "--token-auth-file", str(api_dir / "tokens.csv"),
            "--authorization-mode", "RBAC",
            "--service-account-issuer", "https://kubernetes.default.svc",
            "--service-account-key-file", str(key),
            "--service-account-signing-key-file", str(key),
            "--service-cluster-ip-range", "10.0.0.0/24",
            # Admission that needs controllers (ServiceAccount tokens, ...) is off; the tests
            # create no pods.
            "--disable-admission-plugins", "ServiceAccount,DefaultStorageClass,"
            "DefaultTolerationSeconds,MutatingAdmissionWebhook,ValidatingAdmissionWebhook,"
            "ResourceQuota,Priority,StorageObjectInUseProtection,PersistentVolumeClaimResize,"
            "RuntimeClass,CertificateApproval,CertificateSigning,ClusterTrustBundleAttest,"
            "CertificateSubjectRestriction,DefaultIngressClass,PodSecurity,TaintNodesByCondition",
        ],
        api_dir,
        {},
    )  # fmt: skip
    server = f"https://127.0.0.1:{api_port}"
    kubeconfig = workdir / "kubeconfig"
    cluster = KubeCluster(workdir, server, token, kubeconfig, etcd, apiserver)
    _wait_ready(cluster, timeout)
    # The server's self-signed certificate (for 127.0.0.1) is its own CA: clients verify TLS.
    ca = api_dir / "certs" / "apiserver.crt"
    kubeconfig.write_text(
        yaml.safe_dump(
            {
                "apiVersion": "v1",
                "kind": "Config",
                "clusters": [
                    {"name": "e2e", "cluster": {"server": server, "certificate-authority": str(ca)}}
                ],
                "users": [{"name": "admin", "user": {"token": token}}],
                "contexts": [{"name": "e2e", "context": {"cluster": "e2e", "user": "admin"}}],
                "current-context": "e2e",
            }
        )
    )
    return cluster


def _wait_ready(cluster: KubeCluster, timeout: float) -> None:
    context = ssl.create_default_context()
    context.check_hostname = False
    context.verify_mode = ssl.CERT_NONE
    request = urllib.request.Request(
        f"{cluster.server}/readyz", headers={"Authorization": f"Bearer {cluster.token}"}
    )
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        for proc in (cluster.etcd, cluster.apiserver):
            if proc.poll() is not None:
                tail = cluster.log_tail()
                cluster.stop()
                raise KubeStartError(f"exited with code {proc.returncode}:\n{tail}")
        with (
            contextlib.suppress(OSError),
            urllib.request.urlopen(request, timeout=5, context=context) as r,
        ):
            if r.status == 200:
                return
        time.sleep(0.5)
    tail = cluster.log_tail()
    cluster.stop()
    raise KubeStartError(f"kube-apiserver not ready after {timeout:.0f}s:\n{tail}")
