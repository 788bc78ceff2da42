"""A SparkApplication built as the operator builds one for a compaction job, and the
spark-operator's own CRD (../shared/third-party-crds, read in place) to check one against."""

from __future__ import annotations

import functools
from pathlib import Path
from typing import Any

import jsonschema
import yaml

from deltakeeper.k8s.spark_application import Owner, spark_application

CRD = (
    Path(__file__).resolve().parents[2].parent
    / "shared"
    / "third-party-crds"
    / "sparkoperator.k8s.io_sparkapplications.yaml"
)
OWNER = Owner(name="events", namespace="lake", uid="5f0c7c1e-0000-4000-8000-000000000001")


@functools.cache
def crd_validator() -> Any:
    """Read once: the CRD is large, and checking the schema itself each time costs seconds."""
    crd = yaml.safe_load(CRD.read_text())
    [version] = [v for v in crd["spec"]["versions"] if v["name"] == "v1beta2"]
    schema = version["schema"]["openAPIV3Schema"]
    return jsonschema.validators.validator_for(schema)(schema)


def check_against_the_crd(app: dict[str, Any]) -> None:
    crd_validator().validate(app)


def build(**kw: Any) -> dict[str, Any]:
    """The SparkApplication of one job on lake/events; `kw` replaces spark_application's
    arguments (template, secret_keys, planned, ...)."""
    args: dict[str, Any] = {
        "owner": OWNER,
        "job_id": "deltakeeper-0001-1700000000000",
        "job_spec": {"jobId": "deltakeeper-0001-1700000000000", "table": "s3a://lake/events"},
        "template": {"image": "registry.local/deltakeeper-spark:0.1.0", "sparkVersion": "4.2.0"},
        "storage_conf": {"spark.hadoop.fs.s3a.endpoint": "http://minio.lake:9000"},
        "secret_name": "lake-credentials",
        "secret_keys": ["AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "SOMETHING_ELSE"],
    }
    args.update(kw)
    return spark_application(**args)
