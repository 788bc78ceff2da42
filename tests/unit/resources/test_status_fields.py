"""resources/status_fields.py: the one list of status fields is the CRD's status schema, and
every count comes from a key `inspect --json` has."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from deltakeeper.cli import main
from deltakeeper.resources import crd
from deltakeeper.resources.status_fields import (
    COUNTS,
    DISCOVERY,
    SPEC_DIGEST,
    VOLATILE,
    LakeStatusField,
    PolicyStatusField,
    StatusField,
)
from tests.support.tables import make_table


@pytest.mark.parametrize(
    ("make", "fields"),
    [
        (crd.delta_table, StatusField),
        (crd.delta_lake, LakeStatusField),
        (crd.maintenance_policy, PolicyStatusField),
    ],
    ids=["DeltaTable", "DeltaLake", "DeltaMaintenancePolicy"],
)
def test_each_crds_status_schema_has_exactly_its_status_fields(make: Any, fields: Any) -> None:
    schema = make()["spec"]["versions"][0]["schema"]["openAPIV3Schema"]
    assert list(schema["properties"]["status"]["properties"]) == [str(f) for f in fields]


def test_the_status_files_own_keys_are_in_no_crd() -> None:
    """discovery and _specDigest are standalone mode's: the operator's statuses never carry
    them (a DeltaTable status patch with them would be pruned by the API server)."""
    for extra in (DISCOVERY, SPEC_DIGEST):
        assert extra not in {*StatusField, *LakeStatusField, *PolicyStatusField}
    assert SPEC_DIGEST.startswith("_")  # hidden by `deltakeeper status`


def test_every_count_is_an_inspect_key(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    table = make_table(tmp_path, "t")
    assert main(["inspect", str(table), "--json"]) == 0
    shown = json.loads(capsys.readouterr().out)
    assert set(COUNTS.values()) <= set(shown)
    assert set(COUNTS) | set(VOLATILE) <= set(StatusField)
