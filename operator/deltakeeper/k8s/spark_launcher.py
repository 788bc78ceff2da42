"""The operator's Launcher: each compaction job is a SparkApplication in the DeltaTable's
namespace, which the spark-operator runs; its state is read back from
`status.applicationState`, its result from the table's log (the commits tagged with its id).

The SparkApplication lives in the table's namespace because an owner reference and a Secret
reference can only point within one. A job outlives the operator that started it: a restarted
operator finds it by label (`adopt`) and follows it instead of starting another.

Blocking API calls with deadlines: called from the watch loop's thread, never the event loop.
"""

from __future__ import annotations

import json
import logging
import threading
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import Any

import yaml
from kubernetes import client
from kubernetes.client.exceptions import ApiException

from deltakeeper.compaction.launcher import Found, JobFailed, JobRequest, JobResult, JobRunning
from deltakeeper.compaction.spark_storage import spark_storage
from deltakeeper.delta.errors import DeltaError, InvalidInputError
from deltakeeper.k8s import api as k8s_api
from deltakeeper.k8s import spark_jobs
from deltakeeper.k8s.spark_application import Owner, executor_cores, spark_application
from deltakeeper.k8s.spark_jobs import SparkState
from deltakeeper.resources.spec import merge

log = logging.getLogger("deltakeeper.operator")
WAIT_EVERY_S = 2.0
# How long adopt() uses one listing of a namespace's jobs for all its tables: after a start
# every table adopts, thousands within minutes (a LIST each showed in the observers' profile
# of a 50,000-table start). A job made since is still never doubled (start() lists the table
# afresh) and is followed from the poll that finds it (JobTracker.found_running).
ADOPT_LISTING_S = 30.0


def default_template(path: str | None, required: bool) -> dict[str, Any]:
    """The operator-wide template's `spec` from a SparkApplication YAML file (the chart's
    ConfigMap); {} when the file is absent and not `required`."""
    if not path or not Path(path).is_file():
        if required:
            raise InvalidInputError(
                f"the SparkApplication template {path} does not exist; give a YAML "
                "SparkApplication (the chart mounts one) or leave the option out"
            )
        return {}
    try:
        doc = yaml.safe_load(Path(path).read_text())
    except (OSError, yaml.YAMLError) as e:
        raise InvalidInputError(f"cannot read the SparkApplication template {path}: {e}") from e
    spec = (doc or {}).get("spec") if isinstance(doc, dict) else None
    if not isinstance(spec, dict):
        raise InvalidInputError(
            f"{path}: expected a SparkApplication with a `spec` object (apiVersion "
            f"{spark_jobs.GROUP}/{spark_jobs.VERSION})"
        )
    return spec


@dataclass(frozen=True)
class TableRef:
    """What a job needs of its DeltaTable: the uid its owner reference names, and the Secret
    its credentials are referenced from."""

    uid: str
    secret: str | None


# (namespace, name) -> the DeltaTable as the operator's watch last saw it; None if unknown.
Lookup = Callable[[tuple[str, str]], TableRef | None]


class SparkApplicationLauncher:
    def __init__(
        self,
        api: client.ApiClient,
        template: Mapping[str, Any],
        lookup: Lookup,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.api = api
        self.template = dict(template)
        self.lookup = lookup
        self.clock = clock
        # namespace -> (when listed, its jobs by table), for adopt()
        self._listings: dict[str, tuple[float, dict[str, list[spark_jobs.Job]]]] = {}
        self._listing = threading.Lock()  # one LIST at a time: the others wait and share it

    def forget(self) -> None:
        """Drop the listings adopt() shares: a replica that resumes acting lists afresh."""
        with self._listing:
            self._listings.clear()

    def cores(self, request: JobRequest) -> int:
        return executor_cores(merge(self.template, request.template))

    def start(self, request: JobRequest) -> SparkApplicationJob:
        """A failed API call is a failed job (Degraded, a Warning, a retry after a backoff)."""
        try:
            return self._start(request)
        except DeltaError:
            raise
        except Exception as e:
            raise JobFailed(f"cannot create the SparkApplication: {_api_error(e)}") from e

    def _start(self, request: JobRequest) -> SparkApplicationJob:
        if request.owner is None:
            raise InvalidInputError("a SparkApplication job needs the DeltaTable it belongs to")
        namespace, name = request.owner
        running = [j for j in spark_jobs.for_table(self.api, namespace, name) if _runs(j)]
        if running:
            with self._listing:  # it was not in the shared listing: newer than it
                self._listings.pop(namespace, None)
            raise JobRunning(f"SparkApplication {namespace}/{running[-1].name} still runs")
        table = self.lookup(request.owner)
        if table is None:
            raise InvalidInputError(f"DeltaTable {namespace}/{name} is no longer watched here")
        secret = table.secret
        keys = sorted(k8s_api.read_secret(self.api, namespace, secret) or {}) if secret else []
        storage = spark_storage(request.uri, request.storage_options)
        owner = Owner(name, namespace, table.uid)
        app = spark_application(
            owner,
            request.job_id,
            {**request.spec, "table": storage.uri},
            merge(self.template, request.template),
            storage.conf,  # no secrets: those go as Secret references only
            secret_name=secret,
            secret_keys=keys,
            planned=request.planned,
        )
        job = spark_jobs.create(self.api, app)
        log.info("%s/%s: created SparkApplication %s", namespace, name, job.name)
        return SparkApplicationJob(self.api, job, request.spec, time.time(), request.deadline_s)

    def adopt(
        self, owner: tuple[str, str], deadline_s: float, since_ms: int | None
    ) -> Found | None:
        namespace, name = owner
        jobs = self._jobs(namespace, name)  # oldest first
        running = [j for j in jobs if _runs(j)]
        unseen = [j for j in jobs if not _runs(j) and _after(j, since_ms)]
        if not running and not unseen:
            return None
        job = (running or unseen)[-1]
        started = _epoch_s(job.created) or time.time()
        log.info("%s/%s: following SparkApplication %s (%s)", *owner, job.name, job.state or "NEW")
        found = SparkApplicationJob(self.api, job, job.job_spec, started, deadline_s)
        return Found(found, job.job_spec, int(started * 1000), job.planned)

    def _jobs(self, namespace: str, table: str) -> list[spark_jobs.Job]:
        """The table's jobs from a listing of its namespace at most ADOPT_LISTING_S old."""
        with self._listing:
            listed = self._listings.get(namespace)
            now = self.clock()
            if listed is None or now - listed[0] > ADOPT_LISTING_S:
                listed = (now, spark_jobs.by_table(self.api, namespace))
                self._listings[namespace] = listed
        return listed[1].get(table, [])


class SparkApplicationJob:
    """One SparkApplication, looked at once per poll."""

    def __init__(
        self,
        api: client.ApiClient,
        job: spark_jobs.Job,
        spec: Mapping[str, Any],
        started_s: float,
        deadline_s: float,
    ) -> None:
        self.api = api
        self.name, self.namespace = job.name, job.namespace
        self.job_id = job.job_id or str(spec.get("jobId", ""))
        self.planned_version = int(spec.get("plannedVersion") or 0)
        self.deadline = started_s + deadline_s
        self.deadline_s = deadline_s
        self._result: JobResult | None = None

    def poll(self) -> JobResult | None:
        if self._result is not None:
            return self._result
        try:
            job = spark_jobs.read(self.api, self.namespace, self.name)
        except Exception as e:  # the API server away: the job runs on, look again next poll
            log.warning("cannot read SparkApplication %s (%s)", self.name, k8s_api.short_error(e))
            return None
        if job is None:
            self._result = self._failed("Gone", "the SparkApplication was deleted before it ended")
        elif job.state.finished:
            self._result = self._ended(job)
        elif time.time() > self.deadline:
            self.stop()
            self._result = self._failed(
                "DeadlineExceeded",
                f"the job ran longer than its deadline ({self.deadline_s:.0f}s); its "
                "SparkApplication was deleted",
            )
        return self._result

    def wait(self) -> JobResult:
        while (result := self.poll()) is None:
            time.sleep(WAIT_EVERY_S)
        return result

    def stop(self) -> None:
        """Delete the SparkApplication (the spark-operator then stops its pods)."""
        spark_jobs.delete(self.api, self.namespace, self.name)

    def _ended(self, job: spark_jobs.Job) -> JobResult:
        if job.state is SparkState.COMPLETED:
            # No stdout to read here: job_outcome finds the commits tagged with the job id.
            done = {"result": "done", "startVersion": self.planned_version, "state": job.state}
            return JobResult(0, done, "")
        message = job.error_message or f"the SparkApplication ended {job.state} without a message"
        return self._failed(f"SparkApplication{job.state.title().replace('_', '')}", message)

    def _failed(self, error: str, message: str) -> JobResult:
        result = {"result": "failed", "error": error, "message": message}
        return JobResult(1, result, "")


def _api_error(e: Exception) -> str:
    """A refusal by the CRD's schema in the API server's words (which field, and why: what
    to fix in spec.compaction.sparkApplication); any other error by its status only."""
    if isinstance(e, ApiException) and e.status == 422:
        try:
            return f"the API server refused it: {json.loads(e.body or '')['message']}"
        except (TypeError, ValueError, KeyError):
            pass
    return k8s_api.short_error(e)


def _after(job: spark_jobs.Job, since_ms: int | None) -> bool:
    """Created after the last result recorded (`since_ms`; None: none ever was)."""
    created = _epoch_s(job.created)
    return since_ms is None or (created is not None and created * 1000 > since_ms)


def _runs(job: spark_jobs.Job) -> bool:
    return not job.state.finished


def _epoch_s(rfc3339: str) -> float | None:
    try:
        return datetime.fromisoformat(rfc3339.replace("Z", "+00:00")).timestamp()
    except ValueError:
        return None
