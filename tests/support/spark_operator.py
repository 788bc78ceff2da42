"""A stand-in for the spark-operator controller and the kubelet, for e2e tests.

Pods cannot run here, so this plays both parts against the real API server: it polls
SparkApplications, and for each new one runs its `mainApplicationFile` with spark-submit on this
machine, with the spec's arguments and sparkConf and the environment its driver's `env` names
(Secret references resolved by reading the Secret, as the kubelet would). It moves
`status.applicationState` as the spark-operator does: SUBMITTED, RUNNING, SUCCEEDING and
COMPLETED, or FAILING and FAILED with `errorMessage`. The compaction image holds the job at
/opt/deltakeeper/job.py; here that path maps to the package's job file. Spark runs local[2] with
the suite's Delta jars, and the s3a connector for jobs on s3a:// tables, as the image carries
them.
"""

from __future__ import annotations

import base64
import os
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import UTC, datetime
from typing import Any

from kubernetes import client

from deltakeeper.compaction import submit
from deltakeeper.k8s.spark_jobs import GROUP, PLURAL, VERSION
from tests.support.chart import THIRD_PARTY_CRDS
from tests.support.compaction import s3a_jars
from tests.support.spark import SUBMIT_CONF, ensure_spark

# The real spark-operator CRD, read in place (tests never copy it).
CRD = THIRD_PARTY_CRDS / "sparkoperator.k8s.io_sparkapplications.yaml"
IMAGE_FILES = {"local:///opt/deltakeeper/job.py": str(submit.JOB_FILE)}


class StandIn:
    def __init__(self, api: client.ApiClient, namespace: str) -> None:
        self.custom = client.CustomObjectsApi(api)
        self.core = client.CoreV1Api(api)
        self.namespace = namespace
        self.seen: set[str] = set()
        self.runs: list[dict[str, Any]] = []  # what it ran: name, command, env names, exit code
        # Cleared by a test: jobs stay RUNNING, their spark-submit not started, until it is set.
        self.go = threading.Event()
        self.go.set()
        self._stop = threading.Event()
        self._threads: list[threading.Thread] = []

    def loop(self) -> None:
        while not self._stop.is_set():
            listed = self.custom.list_namespaced_custom_object(
                GROUP, VERSION, self.namespace, PLURAL
            )
            for app in listed.get("items") or []:
                name = app["metadata"]["name"]
                if name not in self.seen:
                    self.seen.add(name)
                    t = threading.Thread(target=self.run, args=(app,), daemon=True)
                    t.start()
                    self._threads.append(t)
            time.sleep(0.5)

    def stop(self) -> None:
        self._stop.set()
        self.go.set()
        for t in self._threads:
            t.join(timeout=600)

    def _state(self, name: str, state: str, error: str = "") -> None:
        status: dict[str, Any] = {"applicationState": {"state": state}}
        if error:
            status["applicationState"]["errorMessage"] = error
        if state in ("COMPLETED", "FAILED"):
            status["terminationTime"] = datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
        status["driverInfo"] = {"podName": f"{name}-driver"}
        self.custom.patch_namespaced_custom_object_status(
            GROUP, VERSION, self.namespace, PLURAL, name, {"status": status}
        )

    def _env(self, entries: list[dict[str, Any]]) -> dict[str, str]:
        env: dict[str, str] = {}
        for e in entries:
            ref = ((e.get("valueFrom") or {}).get("secretKeyRef")) or None
            if ref:
                secret = self.core.read_namespaced_secret(ref["name"], self.namespace)
                env[e["name"]] = base64.b64decode(secret.data[ref["key"]]).decode()
            elif "value" in e:
                env[e["name"]] = str(e["value"])
        return env

    def run(self, app: dict[str, Any]) -> None:
        name, spec = app["metadata"]["name"], app["spec"]
        self._state(name, "SUBMITTED")
        conf = {**SUBMIT_CONF, **(spec.get("sparkConf") or {})}
        # The s3a connector for jobs on s3a:// tables, as the compaction image carries it.
        s3a = any(k.startswith("spark.hadoop.fs.s3a.") for k in conf)
        jdir = s3a_jars() if s3a else ensure_spark()
        jars = [str(jdir / n) for n in (jdir / "jars.txt").read_text().split() if n]
        main_file = IMAGE_FILES.get(spec["mainApplicationFile"], spec["mainApplicationFile"])
        cmd = [submit.spark_submit_path(), "--master", "local[2]", "--jars", ",".join(jars)]
        for key in sorted(conf):
            cmd += ["--conf", f"{key}={conf[key]}"]
        cmd += [main_file, *(spec.get("arguments") or [])]
        env = self._env((spec.get("driver") or {}).get("env") or [])
        run_env = {**os.environ, **env, "PYSPARK_PYTHON": sys.executable}
        run_env["SPARK_LOCAL_IP"] = "127.0.0.1"
        self._state(name, "RUNNING")
        self.go.wait(timeout=600)
        done = subprocess.run(cmd, capture_output=True, text=True, env=run_env, check=False)
        record = {"name": name, "cmd": cmd, "env": sorted(env), "exit": done.returncode}
        record["stdout"] = done.stdout
        self.runs.append(record)
        if done.returncode == 0:
            self._state(name, "SUCCEEDING")
            self._state(name, "COMPLETED")
        else:
            result = submit.parse_result(done.stdout)
            message = f"{result.get('error')}: {result.get('message')}"
            self._state(name, "FAILING", message)
            self._state(name, "FAILED", message)


@contextmanager
def stand_in(api: client.ApiClient, namespace: str) -> Iterator[StandIn]:
    controller = StandIn(api, namespace)
    thread = threading.Thread(target=controller.loop, daemon=True)
    thread.start()
    try:
        yield controller
    finally:
        controller.stop()
