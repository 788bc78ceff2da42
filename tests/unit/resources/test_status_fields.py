"""resources/status_fields.py: the one list of status fields is the CRD's status schema, and
every count comes from a key `inspect --json` has."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from deltakeeper.cli import main
from deltakeeper.resources import crd
from deltakeeper.resources.status_fields import COUNTS, VOLATILE, StatusField
from tests.support.tables import make_table


def test_the_crds_status_schema_has_exactly_the_status_fields() -> None:
    schema = crd.delta_table()["spec"]["versions"][0]["schema"]["openAPIV3Schema"]
    assert list(schema["properties"]["status"]["properties"]) == [str(f) for f in StatusField]


def test_every_count_is_an_inspect_key(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    table = make_table(tmp_path, "t")
    assert main(["inspect", str(table), "--json"]) == 0
    shown = json.loads(capsys.readouterr().out)
    assert set(COUNTS.values()) <= set(shown)
    assert set(COUNTS) | set(VOLATILE) <= set(StatusField)
