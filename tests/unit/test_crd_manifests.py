"""CRDs and manifests: crds/ is generated from resources/crd.py, every example validates, the
schema rejects what it claims to, a bad file does not stop the others, and policy selection
follows Kubernetes label-selector rules and DESIGN.md's precedence."""

from __future__ import annotations

import copy
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from deltakeeper.maintenance import policy
from deltakeeper.resources import folder, manifests, spec
from deltakeeper.resources.manifests import ManifestError, PolicyResource, TableResource

REPO = Path(__file__).resolve().parents[2]
TABLE = {
    "apiVersion": "deltakeeper.io/v1alpha1",
    "kind": "DeltaTable",
    "metadata": {"name": "t", "namespace": "lake"},
    "spec": {"uri": "s3://lake/t"},
}


def test_crds_folder_is_generated_from_crd_py() -> None:
    done = subprocess.run(
        [sys.executable, str(REPO / "scripts" / "gen_crds.py"), "--check"], capture_output=True
    )
    assert done.returncode == 0, done.stderr.decode()


def test_every_example_validates() -> None:
    loaded = folder.load(REPO / "examples")
    assert loaded.errors == []
    assert {t.name for t in loaded.tables} == {"events", "orders", "clicks", "sessions", "ledger"}
    assert [p.name for p in loaded.policies] == ["standard"]
    assert [(lake.namespace, lake.name) for lake in loaded.lakes] == [("lake", "warehouse")]
    assert loaded.secrets[("lake", "lake-credentials")]["AWS_ACCESS_KEY_ID"] == "deltakeeper"


@pytest.mark.parametrize(
    ("change", "field"),
    [
        ({"uri": "lake/t"}, "spec.uri"),
        ({"logRetention": "30 days"}, "spec.logRetention: '30 days' is not valid; use a number"),
        ({"pollInterval": "5ms"}, "spec.pollInterval"),
        ({"smallFileSize": "32 MB"}, "spec.smallFileSize: '32 MB' is not valid; use bytes"),
        ({"vacuum": {"schedule": "nightly"}}, "spec.vacuum.schedule"),
        ({"checkpoint": {"interval": 0}}, "spec.checkpoint.interval"),
        ({"suspend": "yes"}, "spec.suspend"),
    ],
)
def test_bad_fields_are_rejected_with_their_path(change: dict[str, Any], field: str) -> None:
    doc = copy.deepcopy(TABLE)
    doc["spec"].update(change)
    with pytest.raises(ManifestError) as raised:
        manifests.parse(doc, "f.yaml")
    assert str(raised.value).startswith("f.yaml: DeltaTable lake/t: ")
    assert field in str(raised.value)


def test_good_cron_and_sizes_pass() -> None:
    doc = copy.deepcopy(TABLE)
    doc["spec"].update(
        {
            "vacuum": {"schedule": "*/15 3-5 * * MON-FRI"},
            "smallFileSize": "16Mi",
            "pollInterval": "45s",
        }
    )
    assert isinstance(manifests.parse(doc), TableResource)
    doc["spec"]["vacuum"]["schedule"] = "@daily"
    assert isinstance(manifests.parse(doc), TableResource)


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


def _table(labels: dict[str, str], **spec: Any) -> TableResource:
    return TableResource("lake", "t", labels, 1, {"uri": "s3://lake/t", **spec})


def _policy(name: str, selector: Any, **spec: Any) -> PolicyResource:
    return PolicyResource("lake", name, {}, 1, {"tableSelector": selector, **spec}, selector)


def test_selector_semantics() -> None:
    labels = {"tier": "gold", "team": "ads"}
    assert manifests.matches({}, labels)
    assert not manifests.matches(None, labels)
    assert manifests.matches({"matchLabels": {"tier": "gold"}}, labels)
    assert not manifests.matches({"matchLabels": {"tier": "silver"}}, labels)

    def expr(op: str, *values: str) -> dict[str, Any]:
        return {"matchExpressions": [{"key": "tier", "operator": op, "values": list(values)}]}

    assert manifests.matches(expr("In", "gold", "silver"), labels)
    assert not manifests.matches(expr("NotIn", "gold"), labels)
    assert manifests.matches(expr("Exists"), labels)
    assert not manifests.matches(expr("DoesNotExist"), labels)
    assert manifests.matches(expr("NotIn", "x"), {})


def test_policy_ref_wins_and_several_matches_warn() -> None:
    a, b = _policy("a", {}), _policy("b", {"matchLabels": {"tier": "gold"}})
    chosen, warning = manifests.select_policy(
        _table({"tier": "gold"}, policyRef={"name": "b"}), [a, b]
    )
    assert chosen is b and warning is None
    chosen, warning = manifests.select_policy(_table({"tier": "gold"}), [b, a])
    assert chosen is a and warning is not None and "a, b" in warning
    chosen, warning = manifests.select_policy(_table({}, policyRef={"name": "gone"}), [a])
    assert chosen is None and "gone" in str(warning)
    elsewhere = PolicyResource("other", "x", {}, 1, {}, {})
    assert manifests.select_policy(_table({}), [elsewhere]) == (None, None)


def test_table_settings_win_over_the_policy_over_defaults() -> None:
    p = _policy("p", {}, logRetention="60d", deletedFileRetention="14d", pollInterval="1m")
    t = _table({}, logRetention="10d", checkpoint={"interval": 5})
    settings = spec.settings(t, p)
    assert settings["log_retention_ms"] == 10 * policy.DAY_MS
    assert settings["deleted_file_retention_ms"] == 14 * policy.DAY_MS
    assert settings["checkpoint_interval"] == 5
    assert settings["sources"] == {
        "log_retention_ms": "spec",
        "deleted_file_retention_ms": "policy",
    }
    assert spec.poll_interval_ms(t, p) == 60_000
    assert spec.poll_interval_ms(t, None) == policy.POLL_INTERVAL_MS
    assert spec.small_file_bytes(t, None) == policy.SMALL_FILE_BYTES


def test_poll_interval_spec_then_policy_then_the_daemons_default() -> None:
    bare, own = _table({}), _table({}, pollInterval="10s")
    p = _policy("p", {}, pollInterval="1m")
    assert spec.poll_interval_ms(own, p, default_ms=120_000) == 10_000
    assert spec.poll_interval_ms(bare, p, default_ms=120_000) == 60_000
    assert spec.poll_interval_ms(bare, None, default_ms=120_000) == 120_000
    assert spec.poll_interval_ms(bare, None) == policy.POLL_INTERVAL_MS
    settings = spec.watch_settings(bare, None, default_poll_ms=120_000)
    assert settings["poll_interval_s"] == 120
    with pytest.raises(ValueError, match="more than 0s"):
        spec.poll_interval_ms(_table({}, pollInterval="0s"), None, default_ms=120_000)
