"""The operator on a real API server: `deltakeeper operator` as a process, DeltaTables and
Secrets created through the API, tables on MinIO (S3) and local disk written by delta-rs.

The operator's scenarios: status and checkpoints while a writer runs, metrics, edits that
take effect and bump observedGeneration, semantic errors as False conditions and Warning
events with no writes, storage going away and coming back, the API server going away, a kill
mid-maintenance, two replicas (and the one operation history both append to), two replicas
with the webhook event source (only the active one acts on an event), suspend,
deletion, namespace scoping, and no secret anywhere it should not be.
"""

from __future__ import annotations

import json
import os
import re
import signal
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest
from deltalake import DeltaTable, PostCommitHookProperties, write_deltalake
from kubernetes import client
from prometheus_client.parser import text_string_to_metric_families

from deltakeeper.k8s.secrets import TTL_S as SECRET_TTL_S
from tests.support import catalog_tables, stores
from tests.support.kube import KubeCluster
from tests.support.rows import deltars_digest

pytestmark = pytest.mark.e2e
GROUP, VERSION, PLURAL = "deltakeeper.io", "v1alpha1", "deltatables"
NO_HOOKS = PostCommitHookProperties(create_checkpoint=False, cleanup_expired_logs=False)


# -- a MinIO that can be stopped and started again on the same port and data ------------------
@dataclass
class Minio:
    binary: str
    workdir: Path
    port: int
    user: str
    password: str
    process: Any = None

    @property
    def endpoint(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def start(self) -> None:
        env = {"MINIO_ROOT_USER": self.user, "MINIO_ROOT_PASSWORD": self.password}
        env |= {"MINIO_BROWSER": "off", "MINIO_UPDATE": "off"}
        cmd = [self.binary, "server", "--quiet", "--address", f"127.0.0.1:{self.port}"]
        cmd += ["--console-address", f"127.0.0.1:{stores.free_port()}", str(self.workdir / "data")]
        self.process, _ = stores._spawn(cmd, self.workdir, env)
        _until(self.ready, 60, "MinIO to start")

    def ready(self) -> bool:
        try:
            return stores._http_status(f"{self.endpoint}/minio/health/ready") == 200
        except OSError:
            return False

    def stop(self) -> None:
        self.process.terminate()
        self.process.wait(timeout=30)

    def deltars_options(self) -> dict[str, str]:
        return {
            "AWS_ENDPOINT_URL": self.endpoint,
            "AWS_ACCESS_KEY_ID": self.user,
            "AWS_SECRET_ACCESS_KEY": self.password,
            "AWS_REGION": "us-east-1",
            "AWS_ALLOW_HTTP": "true",
            "AWS_S3_ALLOW_UNSAFE_RENAME": "true",
        }

    def fs(self) -> Any:
        import s3fs

        return s3fs.S3FileSystem(
            key=self.user, secret=self.password, client_kwargs={"endpoint_url": self.endpoint}
        )


@pytest.fixture(scope="module")
def s3(store_binaries: dict[str, str], tmp_path_factory: pytest.TempPathFactory) -> Iterator[Minio]:
    workdir = tmp_path_factory.mktemp("minio-e2e")
    (workdir / "data").mkdir()
    m = Minio(
        store_binaries["MINIO"], workdir, stores.free_port(), "deltakeeper", os.urandom(12).hex()
    )
    m.start()
    m.fs().mkdir("lake")
    yield m
    if m.process.poll() is None:
        m.stop()


# -- helpers -----------------------------------------------------------------------------------
def _until(
    check: Callable[[], Any], timeout: float, what: str = "condition", every: float = 0.3
) -> Any:
    deadline = time.monotonic() + timeout
    while True:
        value = check()
        if value:
            return value
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout:.0f}s waiting for {what}")
        time.sleep(every)


def _append(uri: str, n: int, options: dict[str, str] | None = None) -> None:
    data = pa.table({"id": pa.array(range(n * 10, n * 10 + 10), pa.int64())})
    mode = "overwrite" if n == 0 else "append"
    write_deltalake(
        uri, data, mode=mode, storage_options=options, post_commithook_properties=NO_HOOKS
    )


def _minio_table(k: Api, s3: Minio, name: str, **spec: Any) -> str:
    """A one-commit table at s3://lake/NAME written by delta-rs, and a DeltaTable NAME on it
    reading its credentials from a Secret `minio`, polled every second."""
    uri = f"s3://lake/{name}"
    _append(uri, 0, s3.deltars_options())
    k.secret("minio", {"AWS_ACCESS_KEY_ID": s3.user, "AWS_SECRET_ACCESS_KEY": s3.password})
    storage = {"secretRef": {"name": "minio"}, "options": {"endpoint_url": s3.endpoint}}
    k.create(name, {"uri": uri, "storage": storage, "pollInterval": "1s", **spec})
    return uri


class Api:
    def __init__(self, cluster: KubeCluster, namespace: str) -> None:
        self.cluster = cluster
        self.ns = namespace
        self.api = cluster.api_client()
        self.objects = client.CustomObjectsApi(self.api)
        self.core = client.CoreV1Api(self.api)
        cluster.create_namespace(namespace)

    def create(self, name: str, spec: dict[str, Any], labels: dict[str, str] | None = None) -> None:
        body = {
            "apiVersion": f"{GROUP}/{VERSION}",
            "kind": "DeltaTable",
            "metadata": {"name": name, "labels": labels or {}},
            "spec": spec,
        }
        self.objects.create_namespaced_custom_object(GROUP, VERSION, self.ns, PLURAL, body)

    def patch(self, name: str, spec: dict[str, Any]) -> int:
        got = self.objects.patch_namespaced_custom_object(
            GROUP, VERSION, self.ns, PLURAL, name, {"spec": spec}
        )
        return int(got["metadata"]["generation"])

    def delete(self, name: str) -> None:
        self.objects.delete_namespaced_custom_object(GROUP, VERSION, self.ns, PLURAL, name)

    def get(self, name: str) -> dict[str, Any]:
        return self.objects.get_namespaced_custom_object(GROUP, VERSION, self.ns, PLURAL, name)

    def exists(self, name: str) -> bool:
        try:
            self.get(name)
            return True
        except client.ApiException as e:
            if e.status == 404:
                return False
            raise

    def status(self, name: str) -> dict[str, Any]:
        return self.get(name).get("status") or {}

    def condition(self, name: str, kind: str) -> dict[str, Any]:
        for c in self.status(name).get("conditions") or []:
            if c["type"] == kind:
                return c
        return {}

    def wait_condition(
        self, name: str, kind: str, status: str, reason: str | None = None, timeout: float = 60
    ) -> dict[str, Any]:
        def ok() -> dict[str, Any] | None:
            c = self.condition(name, kind)
            if c.get("status") == status and (reason is None or c.get("reason") == reason):
                return c
            return None

        before = self.status(name).get("conditions")
        return _until(ok, timeout, f"{self.ns}/{name} {kind}={status} {reason or ''} ({before})")

    def events(self, name: str) -> list[Any]:
        items = self.core.list_namespaced_event(
            self.ns, field_selector=f"involvedObject.name={name}"
        ).items
        return list(items)

    def wait_event(self, name: str, kind: str, reason: str, timeout: float = 60) -> Any:
        return _until(
            lambda: next(
                (e for e in self.events(name) if e.type == kind and e.reason == reason), None
            ),
            timeout,
            f"a {kind} event {reason} on {self.ns}/{name}",
        )

    def secret(self, name: str, data: dict[str, str]) -> None:
        self.cluster.create_secret(self.ns, name, data)


def _metric(text: str, name: str, namespace: str, table: str) -> float | None:
    pattern = rf'^{name}\{{namespace="{namespace}",table="{table}"\}} (\S+)$'
    m = re.search(pattern, text, re.M)
    return float(m.group(1)) if m else None


def _old_files(folder: Path, n: int, mtime: float) -> None:
    """`n` one-byte files part-000000.parquet... in `folder`, modified at `mtime`: the calls
    of pathlib (a path resolved per call, a file object per write) took 3x as long."""
    at = os.open(folder, os.O_RDONLY | os.O_DIRECTORY)
    try:
        for i in range(n):
            fd = os.open(f"part-{i:06d}.parquet", os.O_WRONLY | os.O_CREAT, 0o644, dir_fd=at)
            try:
                os.write(fd, b"x")
                os.utime(fd, (mtime, mtime))
            finally:
                os.close(fd)
    finally:
        os.close(at)


def _tree(path: Path) -> dict[str, bytes]:
    return {
        str(p.relative_to(path)): p.read_bytes() for p in sorted(path.rglob("*")) if p.is_file()
    }


# -- scenarios ---------------------------------------------------------------------------------
def test_status_checkpoint_metrics_and_edits_on_minio(
    kube_cluster: KubeCluster, operator_factory: Any, s3: Minio
) -> None:
    k = Api(kube_cluster, "lake")
    uri = _minio_table(k, s3, "events", checkpoint={"interval": 5})
    op = operator_factory("--namespace", "lake")
    k.wait_condition("events", "Ready", "True", "Watching")
    first = k.status("events")
    assert first["version"] == 0 and first["files"] == 1 and first["observedGeneration"] == 1
    assert k.condition("events", "StorageReachable")["status"] == "True"
    assert k.condition("events", "ProtocolSupported")["status"] == "True"

    # A writer commits while the operator watches: a checkpoint follows the interval.
    writer = threading.Thread(
        target=lambda: [_append(uri, n, s3.deltars_options()) for n in range(1, 8)]
    )
    writer.start()
    writer.join(timeout=120)
    # The interval counts commits since the last checkpoint (none: from version 0), so the
    # checkpoint lands at the version the poll that first sees 5 commits finds: 4 at the
    # earliest, when a poll falls between the writer's commits (it did in CI), else up to 7.
    _until(lambda: (k.status("events").get("lastCheckpointVersion") or -1) >= 4, 60, "a checkpoint")
    assert s3.fs().exists("lake/events/_delta_log/_last_checkpoint")
    _until(lambda: k.status("events").get("version") == 7, 30, "status at version 7")
    k.wait_event("events", "Normal", "Checkpointed")
    _until(
        lambda: _metric(op.metrics(), "deltakeeper_table_version", "lake", "events") == 7,
        30,
        "the version metric",
    )
    assert (_metric(op.metrics(), "deltakeeper_table_commits_total", "lake", "events") or 0) >= 7
    runs = {
        (s.labels["namespace"], s.labels["table"], s.labels["operation"], s.labels["result"])
        for family in text_string_to_metric_families(op.metrics())
        if family.name == "deltakeeper_maintenance_runs"
        for s in family.samples
        if s.value >= 1
    }
    assert ("lake", "events", "checkpoint", "done") in runs
    # The table reads the same in delta-rs through our checkpoint.
    dt = DeltaTable(uri, storage_options=s3.deltars_options())
    assert dt.to_pyarrow_dataset().to_table().num_rows == 80

    # An edit takes effect at the next poll and bumps observedGeneration.
    generation = k.patch("events", {"checkpoint": {"interval": 2}, "logRetention": "12h"})
    assert generation == 2
    _until(lambda: k.status("events").get("observedGeneration") == 2, 30, "observedGeneration 2")
    # Maintenance runs beside the poll that observed the edit: its checkpoint may land after.
    # Fewer than 2 commits past the newest checkpoint at version 7: at 6 or 7 (the first
    # checkpoint may be there already; then the next one, 2 commits on, shows the edit).
    _until(
        lambda: k.status("events").get("lastCheckpointVersion") in (6, 7),
        60,
        "the checkpoint the new interval makes due",
    )
    for n in range(8, 10):
        _append(uri, n, s3.deltars_options())
    _until(
        lambda: k.status("events").get("lastCheckpointVersion") in (8, 9),
        60,
        "a checkpoint 2 commits on",
    )
    _until(lambda: k.status("events").get("version") == 9, 30, "status at version 9")


def test_semantic_errors_are_conditions_and_warnings_with_no_writes(
    kube_cluster: KubeCluster, operator_factory: Any, tmp_path: Path
) -> None:
    k = Api(kube_cluster, "wrong")
    not_a_table = tmp_path / "not-a-table"
    not_a_table.mkdir()
    (not_a_table / "part-0.parquet").write_bytes(b"PAR1")
    future = tmp_path / "future"
    _append(str(future), 0)
    _append(str(future), 1)
    log = future / "_delta_log"
    (log / "00000000000000000002.json").write_text(
        '{"protocol":{"minReaderVersion":3,"minWriterVersion":7,"readerFeatures":[],'
        '"writerFeatures":["madeUpFeature"]}}\n'
        '{"commitInfo":{"operation":"UPGRADE PROTOCOL"}}\n'
    )
    before = {p: _tree(p) for p in (not_a_table, future)}
    cases = {
        "scheme": ({"uri": "hdfs://namenode/lake/t"}, "InvalidSpec"),
        "no-secret": (
            {"uri": "s3://lake/x", "storage": {"secretRef": {"name": "absent"}}},
            "SecretNotFound",
        ),
        "not-delta": ({"uri": f"file://{not_a_table}"}, "NotADeltaTable"),
        "future": ({"uri": f"file://{future}"}, "UnsupportedFeatures"),
        "no-policy": ({"uri": f"file://{future}", "policyRef": {"name": "gone"}}, "PolicyNotFound"),
    }
    for name, (spec, _) in cases.items():
        k.create(
            name,
            {
                **spec,
                "pollInterval": "1s",
                "vacuum": {"allowShortRetention": True},
                "deletedFileRetention": "0s",
            },
        )
    operator_factory("--namespace", "wrong")
    for name, (_, reason) in cases.items():
        ready = k.wait_condition(name, "Ready", "False", reason)
        assert ready["message"], name
        k.wait_event(name, "Warning", reason)
    assert k.condition("future", "ProtocolSupported")["status"] == "False"
    time.sleep(3)  # several more polls
    assert {p: _tree(p) for p in before} == before


def test_storage_going_away_and_coming_back(
    kube_cluster: KubeCluster, operator_factory: Any, s3: Minio
) -> None:
    k = Api(kube_cluster, "flaky")
    _minio_table(k, s3, "flaky")
    operator_factory("--namespace", "flaky")
    k.wait_condition("flaky", "StorageReachable", "True")
    s3.stop()
    try:
        down = k.wait_condition(
            "flaky", "StorageReachable", "False", "StorageUnreachable", timeout=90
        )
        assert "check the endpoint" in down["message"]
        assert k.condition("flaky", "Ready")["status"] == "False"
        k.wait_event("flaky", "Warning", "StorageUnreachable")
    finally:
        s3.start()
    k.wait_condition("flaky", "StorageReachable", "True", timeout=90)
    k.wait_condition("flaky", "Ready", "True", timeout=30)


def test_api_server_away_maintenance_goes_on(
    kube_cluster: KubeCluster, operator_factory: Any, s3: Minio
) -> None:
    """The API server stops answering (SIGSTOP: requests hang, as with a hung server) for
    longer than the Secret cache keeps a read: the table is still polled and checkpointed with
    the last Secret read, and its status is written once the server answers again."""
    k = Api(kube_cluster, "apiaway")
    uri = _minio_table(k, s3, "apiaway", checkpoint={"interval": 3})
    op = operator_factory("--namespace", "apiaway")
    k.wait_condition("apiaway", "Ready", "True", "Watching")
    checkpoint = "lake/apiaway/_delta_log/00000000000000000003.checkpoint.parquet"

    def version() -> float | None:
        return _metric(op.metrics(), "deltakeeper_table_version", "apiaway", "apiaway")

    paused = time.monotonic()
    kube_cluster.apiserver.send_signal(signal.SIGSTOP)
    try:
        for n in range(1, 4):
            _append(uri, n, s3.deltars_options())
        _until(lambda: version() == 3, 60, "version 3 in the metrics, the API server away")
        _until(lambda: s3.fs().exists(checkpoint), 60, "a checkpoint, the API server away")
        # Past the Secret cache's time: the next read hangs, and the last one is used.
        time.sleep(max(0.0, paused + SECRET_TTL_S + 2 - time.monotonic()))
        _append(uri, 4, s3.deltars_options())
        _until(lambda: version() == 4, 60, "version 4 in the metrics after the Secret expired")
        # The Secret is read again past its time (a quiet table's polls start that read and go
        # on meanwhile); it hangs, and the last read is kept.
        _until(lambda: "using the last read" in op.log_text(), 60, "the last Secret read kept")
        assert op.alive()
    finally:
        kube_cluster.apiserver.send_signal(signal.SIGCONT)

    def settled() -> bool:  # a write sent while the server hung may land late, then be redone
        s = k.status("apiaway")
        return s.get("version") == 4 and s.get("lastCheckpointVersion") == 3

    try:
        _until(settled, 90, "the status at version 4 with its checkpoint, API server back")
    except AssertionError as e:  # say what the operator did
        lines = [line for line in op.log_text().splitlines() if "DEBUG" not in line]
        raise AssertionError(
            f"{e}; status {k.status('apiaway')}; log:\n" + "\n".join(lines[-40:])
        ) from None
    k.wait_condition("apiaway", "Ready", "True", "Watching")
    log = op.log_text()
    assert "using the last read" in log
    assert "cannot write DeltaTable status" in log and "status writes work again" in log
    assert "poll failed" not in log
    dt = DeltaTable(uri, storage_options=s3.deltars_options())
    assert dt.version() == 4 and dt.to_pyarrow_dataset().to_table().num_rows == 50


@pytest.mark.parametrize("sig", [signal.SIGKILL, signal.SIGTERM], ids=["kill", "term"])
def test_kill_mid_maintenance_then_restart_finishes(
    kube_cluster: KubeCluster, operator_factory: Any, tmp_path: Path, sig: int
) -> None:
    """SIGKILL in the middle of a vacuum, or SIGTERM (which ends it after its current batch of
    deletes, within a pod's default grace period of 30 s): either way the table reads the
    same, and a restarted operator finishes the work."""
    k = Api(kube_cluster, f"crash-{signal.Signals(sig).name.lower()}")
    table = tmp_path / "big"
    for n in range(3):
        _append(str(table), n)
    rows = deltars_digest(str(table))
    stray = table / "stray"
    stray.mkdir()
    old = time.time() - 30 * 86400
    # Vacuum deletes in key order, so the first file going is the start, watched by a stat a
    # millisecond: the signal lands a few files in, with batches of 4,000 left to cut. Listing
    # the folder to watch took long enough that 20,000 files once went between two looks; but
    # more files make the restart's deletes outlast its wait on a loaded machine (100,000 took
    # over 120 s on CI, 7 s idle).
    files = 30_000
    _old_files(stray, files, old)
    first, last = stray / "part-000000.parquet", stray / f"part-{files - 1:06d}.parquet"
    k.create(
        "big",
        {
            "uri": f"file://{table}",
            "pollInterval": "1s",
            "deletedFileRetention": "1d",
            "vacuum": {"allowShortRetention": True},
        },
    )
    op = operator_factory("--namespace", k.ns)
    _until(lambda: not first.exists(), 60, "vacuum to start deleting", every=0.001)
    code = op.stop(sig, timeout=30)
    assert deltars_digest(str(table)) == rows
    left = len(os.listdir(stray))
    assert left > 0 and last.exists(), "the signal came after vacuum finished"
    if sig == signal.SIGTERM:
        assert code == 0, op.log_text()[-3000:]
        assert "vacuum stopped after deleting" in op.log_text()
    operator_factory("--namespace", k.ns)
    # Started later, it outranks the killed one's peering entry (alive for another minute) and
    # acts at once: well inside this wait even on a loaded machine.
    _until(lambda: not last.exists(), 120, "the restarted operator to finish vacuum")
    assert not os.listdir(stray)
    _until(
        lambda: (
            (k.status("big").get("lastMaintenance") or {}).get("vacuum", {}).get("result") == "done"
        ),
        60,
        "vacuum done in status",
    )
    assert deltars_digest(str(table)) == rows


def test_two_replicas_only_one_acts(
    kube_cluster: KubeCluster, operator_factory: Any, tmp_path: Path
) -> None:
    k = Api(kube_cluster, "pair")
    table = tmp_path / "pair"
    _append(str(table), 0)
    k.create(
        "pair", {"uri": f"file://{table}", "pollInterval": "1s", "checkpoint": {"interval": 1}}
    )
    history = tmp_path / "history"  # both replicas append to it: only the acting one may
    args = ("--namespace", "pair", "--history-uri", f"file://{history}")
    a = operator_factory(*args)
    _until(lambda: k.status("pair").get("version") == 0, 60, "a status")
    b = operator_factory(*args)
    # The peering settles: the newer replica (the higher priority) acts, the older one pauses.
    # Waited for, not slept on: on a loaded machine a replica can take longer to see its peer.
    _until(
        lambda: (
            "pausing: another replica acts" in a.log_text()
            and "acting for" in b.log_text()
            and _metric(b.metrics(), "deltakeeper_table_version", "pair", "pair") == 0
        ),
        60,
        "the older replica to pause and the newer to act",
    )
    for n in range(1, 4):
        _append(str(table), n)
    _until(lambda: k.status("pair").get("lastCheckpointVersion") == 3, 60, "checkpoint at 3")
    acting = [
        op
        for op in (a, b)
        if _metric(op.metrics(), "deltakeeper_table_version", "pair", "pair") is not None
    ]
    assert len(acting) == 1, "exactly one replica watches the table"
    idle = b if acting[0] is a else a
    wrote = [op for op in (a, b) if "checkpoint at version 3" in op.log_text()]
    assert wrote == acting, "the checkpoint at 3 was written once, by the acting replica"
    # When the active one leaves, the other takes over.
    acting[0].stop(signal.SIGTERM)
    _append(str(table), 4)
    _until(
        lambda: _metric(idle.metrics(), "deltakeeper_table_version", "pair", "pair") == 4,
        90,
        "the other replica to take over",
    )
    _until(lambda: k.status("pair").get("lastCheckpointVersion") == 4, 60, "its checkpoint")
    # Its loops started on the peering change, outside any kopf handler: Events still post.
    _until(
        lambda: any(
            e.reason == "Checkpointed" and "version 4" in (e.message or "")
            for e in k.events("pair")
        ),
        30,
        "the Checkpointed event of the replica that took over",
    )
    assert "poll failed" not in idle.log_text() and "cannot post" not in idle.log_text()
    idle.stop(signal.SIGTERM)  # flushes its last rows
    rows = DeltaTable(str(history)).to_pyarrow_table().to_pylist()
    checkpoints = [
        r["table_version"]
        for r in rows
        if r["operation"] == "checkpoint" and r["status"] == "succeeded"
    ]
    assert {3, 4} <= set(checkpoints), rows
    assert len(checkpoints) == len(set(checkpoints)), f"a checkpoint recorded twice: {checkpoints}"
    keys = [(r["operation"], r["status"], r["table_version"], r["start_time"]) for r in rows]
    assert len(keys) == len(set(keys)), "no row written by both replicas"


def _post_event(port: int, token: str, bucket: str, key: str) -> dict[str, Any]:
    """POST /events to a replica's listener, as MinIO sends an S3 event notification."""
    import urllib.request

    body = {"Records": [{"s3": {"bucket": {"name": bucket}, "object": {"key": key}}}]}
    request = urllib.request.Request(
        f"http://127.0.0.1:{port}/events",
        data=json.dumps(body).encode(),
        headers={"Authorization": f"Bearer {token}"},
    )
    with urllib.request.urlopen(request, timeout=10) as r:
        return dict(json.loads(r.read()))


def _events_total(text: str, result: str) -> float:
    m = re.search(
        rf'^deltakeeper_events_total{{source="webhook",result="{result}"}} (\S+)$', text, re.M
    )
    return float(m.group(1)) if m else -1.0


def test_two_replicas_with_the_webhook_only_the_active_one_acts_on_events(
    kube_cluster: KubeCluster, operator_factory: Any, s3: Minio, tmp_path: Path
) -> None:
    """Both replicas listen; an event posted to the standby is answered 200 and counted
    unknown_table, and nothing polls; the same event posted to the active one polls the table
    at once, though its resyncInterval is an hour and its pollInterval 30 s."""
    k = Api(kube_cluster, "evpair")
    events = {"source": "webhook", "resyncInterval": "1h"}
    uri = _minio_table(k, s3, "evpair", pollInterval="30s", events=events)
    token = "two-replicas-events-token-0123456789"
    (tmp_path / "token").write_text(token)
    ports = [stores.free_port(), stores.free_port()]

    def replica(port: int) -> Any:
        listen = ["--events-listen", f"127.0.0.1:{port}", "--events-token-file"]
        return operator_factory("--namespace", "evpair", *listen, str(tmp_path / "token"))

    a = replica(ports[0])
    _until(lambda: k.status("evpair").get("version") == 0, 60, "a status")
    b = replica(ports[1])
    _until(
        lambda: (
            "pausing: another replica acts" in a.log_text()
            and "acting for" in b.log_text()
            and _metric(b.metrics(), "deltakeeper_table_version", "evpair", "evpair") == 0
        ),
        60,
        "the older replica to pause and the newer to act",
    )
    assert k.status("evpair")["events"]["live"] is True
    _append(uri, 1, s3.deltars_options())
    key = "evpair/_delta_log/00000000000000000001.json"
    unknown = _events_total(a.metrics(), "unknown_table")
    assert _post_event(ports[0], token, "lake", key) == {"records": 1}  # the standby
    _until(
        lambda: _events_total(a.metrics(), "unknown_table") == unknown + 1,
        10,
        "the standby to count it unknown_table",
    )
    assert _events_total(a.metrics(), "woke") == 0
    time.sleep(3)
    assert k.status("evpair").get("version") == 0  # nobody polled: the standby has no loops
    assert _metric(b.metrics(), "deltakeeper_table_version", "evpair", "evpair") == 0
    woke = _events_total(b.metrics(), "woke")
    assert _post_event(ports[1], token, "lake", key) == {"records": 1}  # the active
    posted = time.monotonic()
    _until(
        lambda: _metric(b.metrics(), "deltakeeper_table_version", "evpair", "evpair") == 1,
        10,
        "the event's poll",
    )
    assert time.monotonic() - posted < 5
    assert _events_total(b.metrics(), "woke") == woke + 1
    _until(lambda: k.status("evpair").get("version") == 1, 10, "the status at version 1")
    assert _metric(a.metrics(), "deltakeeper_table_version", "evpair", "evpair") is None
    assert token not in a.log_text() + b.log_text()


def test_suspend_delete_and_namespace_scope(
    kube_cluster: KubeCluster, operator_factory: Any, tmp_path: Path
) -> None:
    k = Api(kube_cluster, "scoped")
    other = Api(kube_cluster, "elsewhere")
    table = tmp_path / "t"
    _append(str(table), 0)
    k.create(
        "t",
        {
            "uri": f"file://{table}",
            "pollInterval": "1s",
            "checkpoint": {"interval": 1},
            "suspend": True,
        },
    )
    other.create("t", {"uri": f"file://{table}", "pollInterval": "1s"})
    op = operator_factory("--namespace", "scoped")
    k.wait_condition("t", "Ready", "True", "Suspended")
    for n in range(1, 3):
        _append(str(table), n)
    _until(lambda: k.status("t").get("version") == 2, 30, "status at version 2")
    assert not list((table / "_delta_log").glob("*.checkpoint.parquet"))
    assert k.status("t").get("lastCheckpointVersion") is None
    # Resumed: maintenance runs.
    k.patch("t", {"suspend": False})
    _until(lambda: k.status("t").get("lastCheckpointVersion") == 2, 30, "a checkpoint after resume")
    # The other namespace is not ours.
    assert other.status("t") == {}
    # Deleting the resource stops watching and leaves every byte of the table.
    before = _tree(table)
    k.delete("t")
    _until(lambda: not k.exists("t"), 30, "the DeltaTable to go")
    _until(
        lambda: _metric(op.metrics(), "deltakeeper_table_version", "scoped", "t") is None,
        30,
        "its metrics to go",
    )
    time.sleep(2)
    assert _tree(table) == before


def test_two_tables_naming_one_uri_are_degraded_until_one_goes(
    kube_cluster: KubeCluster, operator_factory: Any, tmp_path: Path
) -> None:
    """Two DeltaTables on one table (spelt two ways) each name the other in a Degraded
    condition, and are both still watched; deleting one clears it on the other."""
    k = Api(kube_cluster, "dupes")
    table = tmp_path / "t"
    _append(str(table), 0)
    k.create("a", {"uri": f"file://{table}", "pollInterval": "1s"})
    k.create("b", {"uri": f"file:{table}/", "pollInterval": "1s"})  # the same table, spelt anew
    operator_factory("--namespace", "dupes")
    for name, other in (("a", "dupes/b"), ("b", "dupes/a")):
        degraded = k.wait_condition(name, "Degraded", "True", "DuplicateUri")
        assert other in degraded["message"]
        assert k.condition(name, "Ready")["status"] == "True"  # both still watched
    k.delete("b")
    k.wait_condition("a", "Degraded", "False", "AsExpected")


def test_no_secret_in_logs_events_status_or_metrics(
    kube_cluster: KubeCluster, operator_factory: Any, s3: Minio, tmp_path: Path
) -> None:
    k = Api(kube_cluster, "secrets")
    secret_key = "s3cr3t-" + os.urandom(8).hex()
    k.secret(
        "bad-keys",
        {"AWS_ACCESS_KEY_ID": "AKIA" + os.urandom(6).hex(), "AWS_SECRET_ACCESS_KEY": secret_key},
    )
    k.secret("good", {"AWS_ACCESS_KEY_ID": s3.user, "AWS_SECRET_ACCESS_KEY": s3.password})
    k.secret("unknown-key", {"AWS_SECRET_ACCESS_KEY": secret_key, "PASSWORD": secret_key})
    base = {"pollInterval": "1s", "storage": {"options": {"endpoint_url": s3.endpoint}}}
    _append("s3://lake/sec", 0, s3.deltars_options())
    k.create(
        "wrong-keys",
        {
            **base,
            "uri": "s3://lake/sec",
            "storage": {**base["storage"], "secretRef": {"name": "bad-keys"}},
        },
    )
    k.create(
        "good",
        {
            **base,
            "uri": "s3://lake/sec",
            "storage": {**base["storage"], "secretRef": {"name": "good"}},
        },
    )
    k.create(
        "unknown",
        {
            **base,
            "uri": "s3://lake/sec",
            "storage": {**base["storage"], "secretRef": {"name": "unknown-key"}},
        },
    )
    k.create(
        "down",
        {
            "uri": "s3://lake/sec",
            "pollInterval": "1s",
            "storage": {
                "secretRef": {"name": "bad-keys"},
                "options": {"endpoint_url": "http://127.0.0.1:1"},
            },
        },
    )
    op = operator_factory("--namespace", "secrets", "--verbose")
    k.wait_condition("good", "Ready", "True")
    k.wait_condition("wrong-keys", "Ready", "False")
    k.wait_condition("unknown", "Ready", "False", "InvalidSecret")
    k.wait_condition("down", "StorageReachable", "False")
    time.sleep(3)
    texts = [op.log_text(), op.metrics()]
    for name in ("wrong-keys", "good", "unknown", "down"):
        texts.append(repr(k.get(name)))
        texts += [f"{e.reason} {e.message}" for e in k.events(name)]
    blob = "\n".join(texts)
    for value in (secret_key, s3.password):
        assert value not in blob
    assert "PASSWORD" in k.condition("unknown", "Ready")["message"]  # the key's name is fine


def test_policy_selection_secret_rotation_cluster_wide(
    kube_cluster: KubeCluster, operator_factory: Any, s3: Minio, tmp_path: Path
) -> None:
    """A cluster-wide operator (no --namespace): a labelled table takes its policy's interval,
    the policy counts it, and a rotated Secret is picked up without a restart."""
    k = Api(kube_cluster, "policy")
    k.objects.create_namespaced_custom_object(
        GROUP,
        VERSION,
        "policy",
        "deltamaintenancepolicies",
        {
            "apiVersion": f"{GROUP}/{VERSION}",
            "kind": "DeltaMaintenancePolicy",
            "metadata": {"name": "standard"},
            "spec": {
                "tableSelector": {"matchLabels": {"tier": "gold"}},
                "checkpoint": {"interval": 2},
            },
        },
    )
    table = tmp_path / "gold"
    _append(str(table), 0)
    k.create("gold", {"uri": f"file://{table}", "pollInterval": "1s"}, labels={"tier": "gold"})
    k.secret("rot", {"AWS_ACCESS_KEY_ID": s3.user, "AWS_SECRET_ACCESS_KEY": "not-the-password"})
    _append("s3://lake/rot", 0, s3.deltars_options())
    k.create(
        "rot",
        {
            "uri": "s3://lake/rot",
            "pollInterval": "1s",
            "storage": {"secretRef": {"name": "rot"}, "options": {"endpoint_url": s3.endpoint}},
        },
    )
    operator_factory()  # cluster-wide
    _until(lambda: k.status("gold").get("policy") == "standard", 60, "the policy in status")
    _append(str(table), 1)
    _until(
        lambda: k.status("gold").get("lastCheckpointVersion") == 1,
        60,
        "a checkpoint after 2 commits",
    )
    _until(
        lambda: (
            k.objects.get_namespaced_custom_object(
                GROUP, VERSION, "policy", "deltamaintenancepolicies", "standard"
            )
            .get("status", {})
            .get("tables")
            == 1
        ),
        90,
        "the policy to count its table",
    )
    k.wait_condition("rot", "Ready", "False")
    k.secret("rot", {"AWS_ACCESS_KEY_ID": s3.user, "AWS_SECRET_ACCESS_KEY": s3.password})
    k.wait_condition("rot", "Ready", "True", timeout=90)


def test_kopf_run_module_is_the_same_operator(
    kube_cluster: KubeCluster, operator_factory: Any, tmp_path: Path
) -> None:
    """`kopf run -m deltakeeper.k8s`, configured by DELTAKEEPER_* variables, watches, writes
    status, checkpoints and serves metrics like `deltakeeper operator`."""
    k = Api(kube_cluster, "kopfrun")
    table = tmp_path / "t"
    _append(str(table), 0)
    k.create("t", {"uri": f"file://{table}", "pollInterval": "1s", "checkpoint": {"interval": 2}})
    op = operator_factory(
        "--namespace", "kopfrun", env={"DELTAKEEPER_NAMESPACE": "kopfrun"}, kopf_run=True
    )
    k.wait_condition("t", "Ready", "True")
    for n in range(1, 3):
        _append(str(table), n)
    # The interval (2) is reached at version 1 (two commits, 0 and 1) if a poll comes between
    # the writes, else at 2.
    _until(lambda: k.status("t").get("lastCheckpointVersion") in (1, 2), 60, "a checkpoint")
    checkpointed = k.status("t")["lastCheckpointVersion"]
    assert (table / "_delta_log" / f"{checkpointed:020d}.checkpoint.parquet").exists()
    _until(lambda: k.status("t").get("version") == 2, 60, "version 2 in the status")
    assert _metric(op.metrics(), "deltakeeper_table_version", "kopfrun", "t") == 2
    assert k.status("t")["observedGeneration"] == 1
    k.wait_event("t", "Normal", "Checkpointed")


def test_the_finalizer_of_earlier_versions_is_removed(
    kube_cluster: KubeCluster, operator_factory: Any, tmp_path: Path
) -> None:
    """Earlier versions ran a kopf daemon per table, which put a finalizer on every DeltaTable;
    this one needs none and lets kopf remove it, so deleting a table does not hang."""
    k = Api(kube_cluster, "upgrade")
    table = tmp_path / "t"
    _append(str(table), 0)
    body = {
        "apiVersion": f"{GROUP}/{VERSION}",
        "kind": "DeltaTable",
        "metadata": {"name": "t", "finalizers": ["deltakeeper.io/finalizer"]},
        "spec": {"uri": f"file://{table}", "pollInterval": "1s"},
    }
    k.objects.create_namespaced_custom_object(GROUP, VERSION, k.ns, PLURAL, body)
    operator_factory("--namespace", "upgrade")
    _until(lambda: k.status("t").get("version") == 0, 60, "a status")
    _until(lambda: not k.get("t")["metadata"].get("finalizers"), 60, "the old finalizer to go")
    k.delete("t")
    _until(lambda: not k.exists("t"), 30, "the DeltaTable to go")


def _objects(s3: Minio, prefix: str) -> dict[str, int]:
    """Every object under `prefix` (bucket/path), by key relative to it, and its size."""
    found = s3.fs().find(prefix, detail=True)
    return {k[len(prefix) + 1 :]: int(v["size"]) for k, v in found.items()}


def test_a_catalog_managed_table_on_minio_is_left_to_its_catalog(
    kube_cluster: KubeCluster, operator_factory: Any, s3: Minio, tmp_path: Path
) -> None:
    """The operator on a catalog-managed table (tests/support/catalog_tables.py) on MinIO:
    the checkpoint Delta lets any client write lands at the newest published version; cleanup
    and statistics, the catalog's, are refused with reason CatalogOwned and Degraded stays
    False; no object is deleted or rewritten, staged commits included."""
    local = catalog_tables.build(tmp_path / "cm")
    fs = s3.fs()
    for path in sorted(p for p in local.rglob("*") if p.is_file()):
        fs.put_file(str(path), f"lake/cm/{path.relative_to(local)}")
    before = _objects(s3, "lake/cm")
    assert sum("_staged_commits/" in key for key in before) == len(catalog_tables.STAGED)
    k = Api(kube_cluster, "catalog")
    k.secret("minio", {"AWS_ACCESS_KEY_ID": s3.user, "AWS_SECRET_ACCESS_KEY": s3.password})
    storage = {"secretRef": {"name": "minio"}, "options": {"endpoint_url": s3.endpoint}}
    spec = {"checkpoint": {"interval": 3}, "stats": {"enabled": True}}
    k.create("cm", {"uri": "s3://lake/cm", "storage": storage, "pollInterval": "1s", **spec})
    operator_factory("--namespace", "catalog")

    published = catalog_tables.PUBLISHED
    _until(lambda: k.status("cm").get("lastCheckpointVersion") == published, 90, "a checkpoint")
    k.wait_condition("cm", "Degraded", "False", "CatalogOwned")

    def refused() -> dict[str, Any] | None:
        done = k.status("cm").get("lastMaintenance") or {}
        return done if all(op in done for op in ("cleanup", "stats")) else None

    done = _until(refused, 60, "cleanup and stats refused")
    for op in ("cleanup", "stats"):
        assert (done[op]["result"], done[op]["reason"]) == ("refused", "CatalogOwned"), done[op]
    ready = k.condition("cm", "Ready")
    assert ready["status"] == "True" and "newest published commit" in ready["message"], ready
    assert k.status("cm")["version"] == published

    after = _objects(s3, "lake/cm")
    hint = "_delta_log/_last_checkpoint"
    kept = {key: size for key, size in before.items() if key != hint}
    assert {key: after.get(key) for key in kept} == kept  # nothing deleted or rewritten
    checkpoint = f"_delta_log/{published:020d}.checkpoint.parquet"
    assert set(after) - set(before) == {checkpoint}
    assert json.loads(fs.cat_file(f"lake/cm/{hint}"))["version"] == published
