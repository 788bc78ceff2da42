"""SparkApplications on the API server: create one for a compaction job, find a table's jobs
again by label (so a restarted operator adopts a running job instead of launching a second),
read their state as the spark-operator reports it, and delete them.

Blocking calls with deadlines, like the rest of k8s/api.py; run them off the event loop.
"""

from __future__ import annotations

import enum
import itertools
import json
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from kubernetes import client
from kubernetes.client.exceptions import ApiException

from deltakeeper.compaction.launcher import Planned
from deltakeeper.k8s.spark_application import (
    JOB_LABEL,
    OWNER_KIND,
    PLANNED_BYTES,
    PLANNED_FILES,
    TABLE_LABEL,
)

GROUP, VERSION, PLURAL = "sparkoperator.k8s.io", "v1beta2", "sparkapplications"
TIMEOUT = (5.0, 15.0)


class SparkState(enum.StrEnum):
    """`status.applicationState.state` of spark-operator v1beta2; NEW before it says anything."""

    NEW = ""
    SUBMITTED = "SUBMITTED"
    RUNNING = "RUNNING"
    SUCCEEDING = "SUCCEEDING"
    COMPLETED = "COMPLETED"
    FAILING = "FAILING"
    FAILED = "FAILED"
    SUBMISSION_FAILED = "SUBMISSION_FAILED"
    PENDING_RERUN = "PENDING_RERUN"
    INVALIDATING = "INVALIDATING"
    UNKNOWN = "UNKNOWN"

    @property
    def finished(self) -> bool:
        return self in (SparkState.COMPLETED, SparkState.FAILED, SparkState.SUBMISSION_FAILED)

    @property
    def failed(self) -> bool:
        return self in (SparkState.FAILED, SparkState.SUBMISSION_FAILED)


@dataclass(frozen=True)
class Job:
    name: str
    namespace: str
    job_id: str
    state: SparkState
    error_message: str
    created: str  # creationTimestamp, RFC 3339
    job_spec: Mapping[str, Any] = field(default_factory=dict)  # the job's input (--spec-json)
    planned: Planned | None = None  # from its annotations; None if it has none
    table: str = ""  # the DeltaTable it belongs to

    @classmethod
    def from_object(cls, obj: Mapping[str, Any]) -> Job:
        meta, status = obj.get("metadata") or {}, obj.get("status") or {}
        app_state = status.get("applicationState") or {}
        raw = str(app_state.get("state") or "")
        state = SparkState(raw) if raw in SparkState._value2member_map_ else SparkState.UNKNOWN
        return cls(
            name=meta.get("name", ""),
            namespace=meta.get("namespace", ""),
            job_id=(meta.get("labels") or {}).get(JOB_LABEL, ""),
            state=state,
            error_message=str(app_state.get("errorMessage") or ""),
            created=str(meta.get("creationTimestamp") or ""),
            job_spec=_job_spec((obj.get("spec") or {}).get("arguments") or []),
            planned=_planned(meta.get("annotations") or {}),
            table=_table_of(meta),
        )


def _table_of(meta: Mapping[str, Any]) -> str:
    """The DeltaTable its owner reference names; else its label's (a name cut to 63
    characters, so two long names may share it)."""
    for ref in meta.get("ownerReferences") or []:
        if isinstance(ref, Mapping) and ref.get("kind") == OWNER_KIND:
            return str(ref.get("name") or "")
    return str((meta.get("labels") or {}).get(TABLE_LABEL) or "")


def _planned(annotations: Mapping[str, Any]) -> Planned | None:
    """The planned files and bytes deltakeeper wrote at creation; None if either is missing
    or not a count (edited by hand)."""
    try:
        files, size = int(annotations[PLANNED_FILES]), int(annotations[PLANNED_BYTES])
    except (KeyError, TypeError, ValueError):
        return None
    return Planned(files, size) if files >= 0 and size >= 0 else None


def _job_spec(arguments: list[Any]) -> dict[str, Any]:
    """The JSON after `--spec-json` in the arguments deltakeeper gave the job; {} if none."""
    for flag, value in itertools.pairwise(arguments):
        if flag == "--spec-json":
            try:
                spec = json.loads(str(value))
            except ValueError:
                return {}
            return spec if isinstance(spec, dict) else {}
    return {}


def create(api: client.ApiClient, app: Mapping[str, Any]) -> Job:
    """Create the SparkApplication; if one of that name exists (a retried create), it is
    returned as it is."""
    meta = app["metadata"]
    custom = client.CustomObjectsApi(api)
    obj: Any
    try:
        obj = custom.create_namespaced_custom_object(
            GROUP, VERSION, meta["namespace"], PLURAL, dict(app), _request_timeout=TIMEOUT
        )
    except ApiException as e:
        if e.status != 409:
            raise
        obj = custom.get_namespaced_custom_object(
            GROUP, VERSION, meta["namespace"], PLURAL, meta["name"], _request_timeout=TIMEOUT
        )
    return Job.from_object(obj)


def read(api: client.ApiClient, namespace: str, name: str) -> Job | None:
    """None when it is gone (deleted, or collected after its timeToLiveSeconds)."""
    try:
        obj: Any = client.CustomObjectsApi(api).get_namespaced_custom_object(
            GROUP, VERSION, namespace, PLURAL, name, _request_timeout=TIMEOUT
        )
    except ApiException as e:
        if e.status == 404:
            return None
        raise
    return Job.from_object(obj)


def for_table(api: client.ApiClient, namespace: str, table: str) -> list[Job]:
    """The table's jobs, oldest first."""
    return by_table(api, namespace, table).get(table, [])


def by_table(
    api: client.ApiClient, namespace: str, table: str | None = None
) -> dict[str, list[Job]]:
    """The namespace's jobs by DeltaTable, each table's oldest first (`table`: its only);
    none where the SparkApplication CRD is not installed (a list answers 404 only then), so a
    cluster without spark-operator is not asked again and warned about on every poll.
    Starting a job there fails, with the reason, instead."""
    selector = TABLE_LABEL if table is None else f"{TABLE_LABEL}={table[:63]}"
    try:
        listed: Any = client.CustomObjectsApi(api).list_namespaced_custom_object(
            GROUP, VERSION, namespace, PLURAL, label_selector=selector, _request_timeout=TIMEOUT
        )
    except ApiException as e:
        if e.status == 404:
            return {}
        raise
    jobs = sorted(
        (Job.from_object(o) for o in listed.get("items") or []), key=lambda j: (j.created, j.name)
    )
    grouped: dict[str, list[Job]] = {}
    for job in jobs:
        grouped.setdefault(job.table, []).append(job)
    return grouped


def delete(api: client.ApiClient, namespace: str, name: str) -> bool:
    """False when it was gone already."""
    try:
        client.CustomObjectsApi(api).delete_namespaced_custom_object(
            GROUP, VERSION, namespace, PLURAL, name, _request_timeout=TIMEOUT
        )
    except ApiException as e:
        if e.status == 404:
            return False
        raise
    return True
