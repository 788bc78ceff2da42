"""The e2e layer: a real etcd + kube-apiserver (scripts/k8s/install.sh builds them, cached
outside the clone) with deltakeeper's CRDs applied, MinIO for the tables, and the operator
started as a real process (`deltakeeper operator`) by the tests that need it."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
import urllib.request
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from tests.integration.conftest import minio, store_binaries  # noqa: F401 (fixtures)
from tests.support import kube
from tests.support.stores import _die_with_parent, free_port

pytestmark = pytest.mark.e2e
DELTAKEEPER = Path(sys.executable).parent / "deltakeeper"


@pytest.fixture(scope="session")
def kube_cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[kube.KubeCluster]:
    cluster = kube.start(kube.install(), tmp_path_factory.mktemp("kube"))
    print(f"\nkube-apiserver at {cluster.server}; KUBECONFIG={cluster.kubeconfig}")
    cluster.apply_crds()
    yield cluster
    cluster.stop()


@dataclass
class Operator:
    process: subprocess.Popen[bytes]
    log: Path
    metrics_port: int

    def metrics(self) -> str:
        url = f"http://127.0.0.1:{self.metrics_port}/metrics"
        with urllib.request.urlopen(url, timeout=5) as r:
            return r.read().decode()

    def log_text(self) -> str:
        return self.log.read_text(errors="replace")

    def alive(self) -> bool:
        return self.process.poll() is None

    def stop(self, sig: int = signal.SIGTERM, timeout: float = 60) -> int:
        if self.process.poll() is None:
            self.process.send_signal(sig)
            try:
                self.process.wait(timeout=timeout)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait(timeout=10)
        return int(self.process.returncode)


def start_operator(
    cluster: kube.KubeCluster,
    workdir: Path,
    *args: str,
    env: dict[str, str] | None = None,
    kopf_run: bool = False,
) -> Operator:
    """`deltakeeper operator ARGS` against `cluster` (or, with `kopf_run`, `kopf run -m
    deltakeeper.k8s ARGS` configured by the environment), logging to workdir/operator-N.log;
    waits until its metrics endpoint answers."""
    port = free_port()
    workdir.mkdir(parents=True, exist_ok=True)
    log = workdir / f"operator-{port}.log"
    if kopf_run:
        cmd = [sys.executable, "-m", "kopf", "run", "-m", "deltakeeper.k8s", *args]
        env = {"DELTAKEEPER_METRICS_PORT": str(port), **(env or {})}
    else:
        cmd = [str(DELTAKEEPER), "operator", "--metrics-port", str(port), *args]
    with open(log, "wb") as out:
        proc = subprocess.Popen(
            cmd,
            env={**cluster.env(), **(env or {})},
            stdin=subprocess.DEVNULL,
            stdout=out,
            stderr=subprocess.STDOUT,
            preexec_fn=_die_with_parent,
        )
    op = Operator(proc, log, port)
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        if not op.alive():
            raise RuntimeError(f"the operator exited with {proc.returncode}:\n{op.log_text()}")
        try:
            op.metrics()
            return op
        except OSError:
            time.sleep(0.3)
    op.stop()
    raise RuntimeError(f"the operator's metrics never answered:\n{op.log_text()}")


# Lines of each operator's log shown with a failed test (all with DELTAKEEPER_E2E_SHOW_LOGS):
# a failure in CI is diagnosed from its report alone.
LOG_LINES_ON_FAILURE = 120
STARTED = pytest.StashKey[list["Operator"]]()


@pytest.hookimpl(wrapper=True, tryfirst=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo[None]) -> object:
    """A failed test's report carries the end of each operator's log it started."""
    report = yield
    if report.when == "call" and report.failed:
        for n, op in enumerate(item.stash.get(STARTED, [])):
            lines = op.log_text().splitlines()[-LOG_LINES_ON_FAILURE:]
            report.sections.append(
                (f"operator {n} log (last {len(lines)} lines)", "\n".join(lines))
            )
    return report


@pytest.fixture
def operator_factory(
    kube_cluster: kube.KubeCluster, tmp_path: Path, request: pytest.FixtureRequest
) -> Iterator[object]:
    started = request.node.stash.setdefault(STARTED, [])

    def make(*args: str, env: dict[str, str] | None = None, kopf_run: bool = False) -> Operator:
        op = start_operator(kube_cluster, tmp_path, *args, env=env, kopf_run=kopf_run)
        started.append(op)
        return op

    yield make
    for op in started:
        op.stop()
    if os.environ.get("DELTAKEEPER_E2E_SHOW_LOGS"):
        for op in started:
            print(op.log_text())
