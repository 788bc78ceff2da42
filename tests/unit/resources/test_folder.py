"""resources/folder.py: a folder of manifests: the examples load; a bad file stops no other."""

from __future__ import annotations

import copy
from pathlib import Path
from typing import Any

from deltakeeper.resources import folder

REPO = Path(__file__).resolve().parents[3]


TABLE = {
    "apiVersion": "deltakeeper.io/v1alpha1",
    "kind": "DeltaTable",
    "metadata": {"name": "t", "namespace": "lake"},
    "spec": {"uri": "s3://lake/t"},
}


def test_every_example_validates() -> None:
    loaded = folder.load(REPO / "examples")
    assert loaded.errors == []
    tables = {"events", "orders", "clicks", "sessions", "ledger", "pageviews"}
    assert {t.name for t in loaded.tables} == tables
    assert [p.name for p in loaded.policies] == ["standard"]
    assert [(lake.namespace, lake.name) for lake in loaded.lakes] == [("lake", "warehouse")]
    assert loaded.secrets[("lake", "lake-credentials")]["AWS_ACCESS_KEY_ID"] == "deltakeeper"


def test_a_bad_file_does_not_stop_the_others(tmp_path: Path) -> None:
    (tmp_path / "a.yaml").write_text(_yaml(TABLE))
    (tmp_path / "b.yaml").write_text("kind: DeltaTable\n  bad: [indent\n")
    other = copy.deepcopy(TABLE)
    other["metadata"]["name"] = "u"
    other["spec"]["logRetention"] = "forever"
    (tmp_path / "c.yaml").write_text(_yaml(other))
    (tmp_path / "notes.txt").write_text("ignored")
    loaded = folder.load(tmp_path)
    assert [t.name for t in loaded.tables] == ["t"]
    messages = [str(e) for e in loaded.errors]
    assert len(messages) == 2
    assert messages[0].startswith(f"{tmp_path / 'b.yaml'}: cannot read it as YAML")
    assert "spec.logRetention" in messages[1]


def test_duplicates_name_both_files(tmp_path: Path) -> None:
    (tmp_path / "a.yaml").write_text(_yaml(TABLE))
    (tmp_path / "b.yaml").write_text(_yaml(TABLE))
    loaded = folder.load(tmp_path)
    assert len(loaded.tables) == 1
    assert "defined again (first in" in str(loaded.errors[0])


def _yaml(doc: dict[str, Any]) -> str:
    import yaml

    return yaml.safe_dump(doc)
