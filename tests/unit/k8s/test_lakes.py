"""k8s/lakes.py, the parts that need no API server (the rest: tests/e2e/test_lake_operator.py)."""

from __future__ import annotations

from typing import Any

import pytest

from deltakeeper.k8s import lakes as k8s_lakes
from deltakeeper.k8s.lakes import ClusterLake, Lakes
from deltakeeper.runtime import credentials
from deltakeeper.runtime.discovery import LakeScan, ScanResult


def test_a_failing_scan_is_one_warning_though_a_secret_learned_since_masks_more_of_it(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A Secret read between two scans (another resource's) masks a word of the same message
    in the second: still the same failure, not a new Warning each retry."""
    posted: list[dict[str, Any]] = []
    monkeypatch.setattr(k8s_lakes.kopf, "event", lambda ref, **kw: posted.append(kw))
    scrubber = credentials.Scrubber()
    monkeypatch.setattr(k8s_lakes, "SCRUBBER", scrubber)
    ref = {"apiVersion": "v", "kind": "DeltaLake", "metadata": {"uid": "u"}}
    entry = ClusterLake(ref, 1, None)  # type: ignore[arg-type]
    lakes = Lakes.__new__(Lakes)  # _announce needs none of its clients

    def scan() -> LakeScan:
        message = scrubber.scrub("cannot scan x://l: deltakeeper opens file:// itself")
        return LakeScan(ScanResult.INVALID, 0, message=message)

    lakes._announce(entry, scan())
    scrubber.register(["deltakeeper"])
    lakes._announce(entry, scan())
    lakes._announce(entry, scan())
    assert [e["reason"] for e in posted] == ["ScanFailed"]
    lakes._announce(entry, LakeScan(ScanResult.INVALID, 0, message="another reason"))
    assert [e["reason"] for e in posted] == ["ScanFailed", "ScanFailed"]
