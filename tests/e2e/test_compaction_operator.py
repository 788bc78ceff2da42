"""The operator compacts: `deltakeeper operator` (a real process) on the real API server with
the real spark-operator CRD (read from ../shared/third-party-crds), the suite's stand-in playing
the spark-operator controller (it runs each SparkApplication's job with spark-submit, local[2]).

One operator for the module, --max-compaction-jobs 1, --compaction-retry 5s. Small-file tables
on local disk and on MinIO (the stand-in adds the s3a connector, as the image carries it) are
compacted for real; a job whose template names a job file the image does not have fails, and
is retried once after the backoff. The MinIO tables' Secret values must reach nothing but the
job's environment. Measured: 1m58s-2m47s with load average 7-10 (two cores shared), most of it
five Spark runs (the two failing ones fast); the retry adds about 4 s.
"""

from __future__ import annotations

import json
import re
import signal
import threading
import time
from collections.abc import Iterator
from datetime import datetime
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest
from deltalake import DeltaTable, QueryBuilder, write_deltalake
from kubernetes import client
from prometheus_client.parser import text_string_to_metric_families

from deltakeeper.k8s import spark_jobs
from deltakeeper.k8s.spark_application import JOB_LABEL, MAX_NAME, TABLE_LABEL
from tests.e2e.conftest import Operator, start_operator
from tests.e2e.test_operator import (  # noqa: F401 (s3: a fixture)
    GROUP,
    PLURAL,
    VERSION,
    Api,
    Minio,
    s3,
)
from tests.support.kube import KubeCluster
from tests.support.oracles import duckdb_rows, table_versions
from tests.support.rows import deltars_digest, digest, duckdb_digest
from tests.support.spark_operator import CRD, StandIn, stand_in
from tests.support.waiting import until

pytestmark = [pytest.mark.e2e, pytest.mark.spark]

NS = "compacting"
DNS_1035 = re.compile(r"^[a-z]([-a-z0-9]*[a-z0-9])?$")
COMPACTION = {"enabled": True, "minFilesPerPartition": 4, "minInterval": "1h"}
JOB_S = 600  # a Spark run on two busy cores, with room
RETRY_S = 5  # --compaction-retry: the first backoff after a failed job, doubled per failure


class Module:
    def __init__(self, cluster: KubeCluster, workdir: Path, controller: StandIn) -> None:
        self.cluster = cluster
        self.workdir = workdir
        self.controller = controller
        self.k = Api(cluster, NS)
        self.operator = self.start()

    def start(self) -> Operator:
        return start_operator(
            self.cluster,
            self.workdir,
            *("--namespace", NS, "--max-compaction-jobs", "1"),
            *("--compaction-retry", f"{RETRY_S}s"),
        )

    def apps(self, table: str | None = None) -> list[dict[str, Any]]:
        selector = f"{TABLE_LABEL}={table}" if table else None
        listed = client.CustomObjectsApi(self.k.api).list_namespaced_custom_object(
            spark_jobs.GROUP, spark_jobs.VERSION, NS, spark_jobs.PLURAL, label_selector=selector
        )
        return list(listed.get("items") or [])

    def compaction(self, table: str) -> dict[str, Any]:
        return (self.k.status(table).get("lastMaintenance") or {}).get("compaction") or {}

    def jobs_metric(self, table: str, state: str) -> float | None:
        want = {"namespace": NS, "table": table, "state": state}
        for family in text_string_to_metric_families(self.operator.metrics()):
            for sample in family.samples:
                if sample.name == "deltakeeper_compaction_jobs" and sample.labels == want:
                    return float(sample.value)
        return None


@pytest.fixture(scope="module")
def mod(kube_cluster: KubeCluster, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Module]:
    kube_cluster.apply_crds([CRD])
    kube_cluster.create_namespace(NS)
    with stand_in(kube_cluster.api_client(), NS) as controller:
        m = Module(kube_cluster, tmp_path_factory.mktemp("compacting"), controller)
        yield m
        m.operator.stop()


def small_files(uri: str, options: dict[str, str] | None = None, n: int = 6) -> None:
    """`n` appends of two rows, one file in each of two partitions per append."""
    for i in range(n):
        ids = pa.array([2 * i, 2 * i + 1], pa.int64())
        batch = pa.table({"id": ids, "p": ["a/b='c'", "é"]})
        write_deltalake(uri, batch, mode="append", partition_by=["p"], storage_options=options)


def rows_by_version(uri: str, options: dict[str, str] | None = None) -> dict[int, Any]:
    """delta-rs's sorted-row digest of every version."""
    if options is None:
        return {v: deltars_digest(uri, v) for v in table_versions(uri)}
    latest = DeltaTable(uri, storage_options=options).version()
    out = {}
    for v in range(latest + 1):
        table = DeltaTable(uri, version=v, storage_options=options)
        query = QueryBuilder().register("t", table).execute("SELECT * FROM t")
        out[v] = digest(pa.table(query.read_all()).to_pylist())
    return out


class Concurrency:
    """Samples how many SparkApplications have not finished, the whole time a test runs."""

    def __init__(self, mod: Module) -> None:
        self.mod = mod
        self.most = 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()

    def _run(self) -> None:
        while not self._stop.is_set():
            jobs = [spark_jobs.Job.from_object(a) for a in self.mod.apps()]
            self.most = max(self.most, sum(1 for j in jobs if not j.state.finished))
            time.sleep(0.2)

    def stop(self) -> int:
        self._stop.set()
        self._thread.join(timeout=10)
        return self.most


def test_two_tables_are_compacted_one_job_at_a_time_and_suspend_launches_none(
    mod: Module,
    tmp_path: Path,
    s3: Minio,  # noqa: F811 (the fixture imported above)
) -> None:
    """`events` on local disk, `clicks` on MinIO (credentials from a Secret), `resting`
    suspended; the global limit is one job.

    Slow: two spark-submit jobs one after the other (that they never overlap is the point)."""
    k = mod.k
    k.secret("minio", {"AWS_ACCESS_KEY_ID": s3.user, "AWS_SECRET_ACCESS_KEY": s3.password})
    minio = {"secretRef": {"name": "minio"}, "options": {"endpoint_url": s3.endpoint}}
    tables = {
        "events": (f"file://{tmp_path / 'events'}", str(tmp_path / "events"), None),
        "clicks": ("s3://lake/clicks", "s3://lake/clicks", s3.deltars_options()),
        "resting": (f"file://{tmp_path / 'resting'}", str(tmp_path / "resting"), None),
    }
    for _, path, options in tables.values():
        small_files(path, options)
    before = {name: rows_by_version(path, options) for name, (_, path, options) in tables.items()}
    sampler = Concurrency(mod)
    for name, (uri, _, options) in tables.items():
        spec = {"uri": uri, "pollInterval": "1s", "compaction": COMPACTION}
        if options:
            spec["storage"] = minio
        k.create(name, {**spec, "suspend": name == "resting"})

    for name in ("events", "clicks"):
        ended = until(lambda n=name: mod.compaction(n).get("result"), JOB_S, f"{name}'s job")
        assert ended == "done", mod.compaction(name)
    assert sampler.stop() == 1  # both ran, never at once (--max-compaction-jobs 1)

    for name in ("events", "clicks"):
        [app] = mod.apps(name)
        check_application(mod, name, app)
        status = k.status(name)
        # A merge-patched status drops a key set to null: no `running` means none runs.
        assert status["files"] == 2 and status["compaction"].get("running") is None
        assert status["compaction"]["last"]["result"] == "COMPLETED"
        done = mod.compaction(name)
        assert (done["filesRemoved"], done["filesAdded"]) == (12, 2), done
        assert done["jobId"] == app["metadata"]["labels"][JOB_LABEL]
        event = k.wait_event(name, "Normal", "Compacted")
        assert "rewrote 12 files" in event.message and done["jobId"] in event.message
        until(lambda n=name: mod.jobs_metric(n, "COMPLETED") == 1, 30, f"{name}'s job metric")
        assert mod.jobs_metric(name, "RUNNING") == 0 and mod.jobs_metric(name, "FAILED") == 0
        # Every version reads the same in delta-rs, the compacted one too.
        _, path, options = tables[name]
        after = rows_by_version(path, options)
        assert {v: after[v] for v in before[name]} == before[name]
        assert max(after) == max(before[name]) + 1
        assert after[max(after)] == before[name][max(before[name])]
    assert duckdb_rows(tables["events"][1]) == 12
    clicks = mod.apps("clicks")[0]["spec"]
    assert clicks["sparkConf"]["spark.hadoop.fs.s3a.endpoint"] == s3.endpoint
    assert json.loads(clicks["arguments"][1])["table"] == "s3a://lake/clicks"

    # Suspended: watched, never a job.
    assert k.condition("resting", "Ready")["reason"] == "Suspended"
    assert mod.apps("resting") == [] and "compaction" not in k.status("resting")
    assert sorted(r["name"] for r in mod.controller.runs) == sorted(
        a["metadata"]["name"] for a in mod.apps()
    )


def check_application(mod: Module, table: str, app: dict[str, Any]) -> None:
    """What the operator put in the SparkApplication (the API server accepted it against the
    real CRD's schema when it was created)."""
    meta, spec = app["metadata"], app["spec"]
    assert len(meta["name"]) <= MAX_NAME and DNS_1035.match(meta["name"])
    assert meta["labels"][TABLE_LABEL] == table and meta["labels"][JOB_LABEL]
    [owner] = meta["ownerReferences"]
    table_obj = mod.k.get(table)
    assert (owner["kind"], owner["name"], owner["uid"]) == (
        "DeltaTable",
        table,
        table_obj["metadata"]["uid"],
    )
    assert spec["type"] == "Python" and spec["timeToLiveSeconds"] > 0
    assert spec["mainApplicationFile"] == "local:///opt/deltakeeper/job.py"
    assert app["status"]["applicationState"]["state"] == "COMPLETED"
    job = json.loads(spec["arguments"][1])
    assert job["jobId"] == meta["labels"][JOB_LABEL] and job["minFileSize"] > 0


def test_a_failing_job_on_minio_degrades_warns_backs_off_and_leaks_no_secret(
    mod: Module,
    s3: Minio,  # noqa: F811 (the fixture imported above)
) -> None:
    k = mod.k
    uri = "s3://lake/broken"
    for i in range(5):
        batch = pa.table({"id": pa.array([i], pa.int64())})
        write_deltalake(uri, batch, mode="append", storage_options=s3.deltars_options())
    k.secret("minio", {"AWS_ACCESS_KEY_ID": s3.user, "AWS_SECRET_ACCESS_KEY": s3.password})
    storage = {"secretRef": {"name": "minio"}, "options": {"endpoint_url": s3.endpoint}}
    template = {"mainApplicationFile": "local:///opt/deltakeeper/missing.py"}
    # minInterval (1h) follows successes only: the retry comes after the backoff.
    compaction = {**COMPACTION, "sparkApplication": template}
    k.create(
        "broken", {"uri": uri, "storage": storage, "pollInterval": "1s", "compaction": compaction}
    )

    degraded = k.wait_condition("broken", "Degraded", "True", "MaintenanceFailed", timeout=JOB_S)
    assert degraded["message"].startswith("compaction failed: SparkApplicationFailed:")
    warning = k.wait_event("broken", "Warning", "MaintenanceFailed")
    assert "compaction" in warning.message
    first = k.status("broken")["compaction"]
    assert first["failures"] == 1 and first["last"]["result"] == "FAILED"
    assert backoff_s(first) == RETRY_S
    until(lambda: mod.jobs_metric("broken", "FAILED") == 1, 30, "the FAILED job metric")
    # The retry: a second job after the backoff, failing the same way; the next wait doubles.
    second = until(
        lambda: (c := k.status("broken")["compaction"])["failures"] == 2 and c, JOB_S, "a retry"
    )
    k.patch("broken", {"suspend": True})  # no third job (the next is 10 s away)
    assert backoff_s(second) == 2 * RETRY_S and second["last"]["jobId"] != first["last"]["jobId"]
    apps = sorted(mod.apps("broken"), key=lambda a: a["metadata"]["creationTimestamp"])
    assert [a["metadata"]["labels"][JOB_LABEL] for a in apps] == [
        first["last"]["jobId"],
        second["last"]["jobId"],
    ]
    # Not before the backoff (creationTimestamp has whole seconds).
    retried_s = rfc3339_s(apps[1]["metadata"]["creationTimestamp"])
    assert retried_s >= int(rfc3339_s(first["nextAttempt"])), (apps[1]["metadata"], first)
    for app in apps:
        assert app["spec"]["mainApplicationFile"] == template["mainApplicationFile"]
        env = {e["name"]: e for e in app["spec"]["driver"]["env"]}
        ref = env["AWS_SECRET_ACCESS_KEY"]["valueFrom"]["secretKeyRef"]
        assert ref == {"name": "minio", "key": "AWS_SECRET_ACCESS_KEY"}
        assert app["spec"]["sparkConf"]["spark.hadoop.fs.s3a.endpoint"] == s3.endpoint
        [run] = [r for r in mod.controller.runs if r["name"] == app["metadata"]["name"]]
        assert "AWS_SECRET_ACCESS_KEY" in run["env"]  # the job got it, from the Secret

    events = " ".join(f"{e.reason} {e.message}" for e in k.events("broken"))
    shown = {
        "SparkApplications": json.dumps(mod.apps()),
        "status": json.dumps(k.status("broken")),
        "events": events,
        "log": mod.operator.log_text(),
        "metrics": mod.operator.metrics(),
    }
    assert {where: s3.password in text for where, text in shown.items()} == dict.fromkeys(
        shown, False
    )


def rfc3339_s(text: str) -> float:
    return datetime.fromisoformat(text.replace("Z", "+00:00")).timestamp()


def backoff_s(compaction: dict[str, Any]) -> float:
    """The wait the status shows after the last failed job: its end to the next attempt."""
    return rfc3339_s(compaction["nextAttempt"]) - rfc3339_s(compaction["last"]["time"])


def test_a_restarted_operator_adopts_the_running_job_and_launches_no_second(
    mod: Module, tmp_path: Path
) -> None:
    k = mod.k
    path = tmp_path / "adopted"
    small_files(str(path))
    planned_bytes = sum(pa.table(DeltaTable(str(path)).get_add_actions())["size_bytes"].to_pylist())
    mod.controller.go.clear()  # its job stays RUNNING, unstarted, until the adoption is seen
    k.create("adopted", {"uri": f"file://{path}", "pollInterval": "1s", "compaction": COMPACTION})

    def running() -> bool:
        jobs = [spark_jobs.Job.from_object(a) for a in mod.apps("adopted")]
        return any(j.state is spark_jobs.SparkState.RUNNING for j in jobs)

    try:
        until(running, JOB_S, "the job to run")
        assert mod.operator.stop(signal.SIGKILL) == -signal.SIGKILL
        # What the killed operator showed goes: only the restarted one's adoption sets it again.
        k.objects.patch_namespaced_custom_object_status(
            GROUP, VERSION, NS, PLURAL, "adopted", {"status": {"compaction": {"running": None}}}
        )
        assert (k.status("adopted").get("compaction") or {}).get("running") is None
        mod.operator = mod.start()
        shown = until(
            lambda: (k.status("adopted").get("compaction") or {}).get("running"),
            JOB_S,
            "the adopted job shown",
        )
    finally:
        mod.controller.go.set()
    # The plan's size, carried on the SparkApplication: all 12 files, every byte of them.
    assert (shown["files"], shown["bytes"]) == (12, planned_bytes), shown

    ended = until(lambda: mod.compaction("adopted").get("result"), JOB_S, "the adopted job")
    assert ended == "done", mod.compaction("adopted")
    [app] = mod.apps("adopted")
    assert len([r for r in mod.controller.runs if r["name"] == app["metadata"]["name"]]) == 1
    log = mod.operator.log_text()
    assert f"following SparkApplication {app['metadata']['name']} (" in log
    # Jobs whose end the status recorded before the restart are not read back again.
    assert log.count("following SparkApplication") == 1, log
    done = mod.compaction("adopted")
    assert done["jobId"] == app["metadata"]["labels"][JOB_LABEL]
    assert (done["filesRemoved"], done["filesAdded"]) == (12, 2)
    k.wait_event("adopted", "Normal", "Compacted")
    assert k.status("adopted")["files"] == 2


def test_a_checkpoint_whose_engine_is_spark_runs_as_a_spark_application(
    mod: Module, tmp_path: Path
) -> None:
    """Issue 26: the operator hands the checkpoint to Delta Spark as a SparkApplication (the
    path a table too big for its memory budget takes), and reads the result back from the log."""
    from deltalake import DeltaTable, write_deltalake

    path = tmp_path / "wide"
    for i in range(12):  # versions 0..11, no checkpoint: one is due at interval 10
        write_deltalake(str(path), pa.table({"id": pa.array([i], pa.int64())}), mode="append")
    spec = {
        "uri": f"file://{path}",
        "pollInterval": "1s",
        "checkpoint": {"interval": 10, "engine": "spark"},
        "vacuum": {"enabled": False},
    }
    mod.k.create("wide", spec)

    def checkpointed() -> dict[str, Any] | None:
        entry = (mod.k.status("wide").get("lastMaintenance") or {}).get("checkpoint")
        return entry if entry and entry.get("result") in ("done", "failed") else None

    entry = until(checkpointed, JOB_S, "wide's Spark checkpoint")
    assert (entry["result"], entry.get("engine"), entry["version"]) == ("done", "spark", 11), entry
    assert "Delta Spark wrote the checkpoint at version 11" in entry["message"]
    running = mod.k.status("wide").get("compaction") or {}
    assert running.get("running") is None  # the job ended
    [app] = mod.apps("wide")
    assert json.loads(app["spec"]["arguments"][1])["operation"] == "checkpoint"
    assert entry["jobId"] == app["metadata"]["labels"][JOB_LABEL]
    started = mod.k.wait_event("wide", "Normal", "SparkJobStarted")
    assert "checkpoint.engine is spark" in started.message
    assert (path / "_delta_log" / "00000000000000000011.checkpoint.parquet").exists()
    assert DeltaTable(str(path)).version() == 11 and deltars_digest(str(path))[0] == 12


def test_an_expiry_with_rewrite_spark_runs_its_delete_as_a_spark_application(
    mod: Module, tmp_path: Path
) -> None:
    """Issue 48: dataRetention.rewrite spark under the operator. The expiry commits the file
    wholly older than the cutoff, then hands the straddling one to Delta Spark's DELETE as a
    SparkApplication, follows it, and reads its commit back from the log."""
    cutoff = datetime.fromisoformat("2026-01-05T12:00:00+00:00")
    hour = 3_600_000_000  # in microseconds, as the column holds them
    at = int(cutoff.timestamp() * 1_000_000)
    path = tmp_path / "aging"
    for ids, times in (([1, 2], [at - 72 * hour, at - 70 * hour]),  # wholly older
                       ([3, 4], [at - 2 * hour, at + 2 * hour]),  # straddles
                       ([5, 6], [at + 24 * hour, at + 26 * hour])):  # fmt: skip
        rows = pa.table(
            {"id": pa.array(ids, pa.int64()), "ts": pa.array(times, pa.timestamp("us", "UTC"))}
        )
        write_deltalake(str(path), rows, mode="append")
    # The operator's clock is the real one: keep puts its cutoff seconds past `cutoff`, hours
    # from any row.
    keep_s = int(time.time() - cutoff.timestamp())
    retention = {"column": "ts", "keep": f"{keep_s}s", "maxFraction": 1, "rewrite": "spark"}
    spec = {"uri": f"file://{path}", "pollInterval": "1s", "dataRetention": retention}
    mod.k.create("aging", {**spec, "vacuum": {"enabled": False}})

    def expired() -> dict[str, Any] | None:
        entry = (mod.k.status("aging").get("lastMaintenance") or {}).get("expire")
        return entry if entry and entry.get("rewrite", {}).get("rowsDeleted") is not None else None

    entry = until(expired, JOB_S, "aging's expiry and its Spark DELETE")
    assert (entry["result"], entry["engine"], entry["removedFiles"]) == ("done", "spark", 1)
    rewrite = entry["rewrite"]
    assert (rewrite["rowsDeleted"], rewrite["filesRemoved"], rewrite["filesAdded"]) == (1, 1, 1)
    [app] = mod.apps("aging")
    assert json.loads(app["spec"]["arguments"][1])["operation"] == "expire"
    assert rewrite["jobId"] == app["metadata"]["labels"][JOB_LABEL]
    assert DeltaTable(str(path)).version() == entry["version"] == 4  # ours, then the job's
    history = DeltaTable(str(path)).history(2)
    assert [h["operation"] for h in history] == ["DELETE", "DELETE"]
    assert sorted(DeltaTable(str(path)).to_pyarrow_table().column("id").to_pylist()) == [4, 5, 6]
    assert deltars_digest(str(path))[0] == 3
    assert duckdb_digest(str(path)) == deltars_digest(str(path))
