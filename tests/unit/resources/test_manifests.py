"""resources/manifests.py: a manifest checked against its CRD's schema, and policy selection.

Selection follows Kubernetes' label-selector rules; a policyRef wins over selectors."""

from __future__ import annotations

import copy
from typing import Any

import pytest

from deltakeeper.resources import manifests
from deltakeeper.resources.manifests import ManifestError, PolicyResource, TableResource

TABLE = {
    "apiVersion": "deltakeeper.io/v1alpha1",
    "kind": "DeltaTable",
    "metadata": {"name": "t", "namespace": "lake"},
    "spec": {"uri": "s3://lake/t"},
}


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


def test_good_cron_schedules_sizes_and_intervals_pass() -> None:
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


def _table(labels: dict[str, str], **spec: Any) -> TableResource:
    return TableResource("lake", "t", labels, 1, {"uri": "s3://lake/t", **spec})


def _policy(name: str, selector: Any, **spec: Any) -> PolicyResource:
    return PolicyResource("lake", name, {}, 1, {"tableSelector": selector, **spec}, selector)


def test_selectors_match_as_kubernetes_label_selectors_do() -> None:
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
