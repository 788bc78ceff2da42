"""runtime/discovery.py: LakeScanner says which tables appeared and disappeared, and its metrics."""

from __future__ import annotations

from pathlib import Path

from deltakeeper.resources.lake import LakeResource, parse_lake
from deltakeeper.runtime import metrics
from deltakeeper.runtime.discovery import LakeScanner, ScanResult, lake_status
from tests.support.manifests import lake_doc
from tests.support.tables import make_table


def lake_at(path: Path) -> LakeResource:
    return parse_lake(lake_doc(uri=f"file://{path}"))


def test_scanner_reports_appeared_and_disappeared(tmp_path: Path) -> None:
    make_table(tmp_path, "a")
    make_table(tmp_path, "b/c")
    registry = metrics.Metrics()
    scanner = LakeScanner(lake_at(tmp_path), registry, clock_ms=lambda: 1_700_000_000_000)
    first = scanner.scan()
    assert first.ok and first.appeared == ("a", "b/c") and first.disappeared == ()
    make_table(tmp_path, "d")
    (tmp_path / "a" / "_delta_log" / "00000000000000000000.json").unlink()
    second = scanner.scan()
    assert second.appeared == ("d",) and second.disappeared == ("a",)
    assert second.tables == ("b/c", "d")
    assert [e.reason for e in second.events()] == ["TableFound", "TableGone"]
    assert (
        registry.registry.get_sample_value(
            "deltakeeper_lake_tables", {"namespace": "data", "lake": "lake"}
        )
        == 2
    )
    requests = registry.registry.get_sample_value(
        "deltakeeper_lake_scan_requests_total", {"namespace": "data", "lake": "lake"}
    )
    assert requests == first.scan.requests + second.scan.requests  # type: ignore[union-attr]
    text = "".join(registry.exposition())
    assert 'deltakeeper_lake_tables{namespace="data",lake="lake"} 2.0' in text
    assert 'deltakeeper_lake_scans_total{namespace="data",lake="lake",result="ok"} 2.0' in text
    for result in ("unreachable", "invalid"):  # at 0 before the first: increase() counts it
        assert (
            f'deltakeeper_lake_scans_total{{namespace="data",lake="lake",result="{result}"}} 0.0'
            in text
        )
    managed = {"a": {"health": {"score": 40, "worst": "smallFiles"}}, "b": None}
    status = lake_status(second, managed=managed, previous=None, generation=1)
    assert status["tables"] == 2 and status["managedTables"] == 2
    assert status["health"] == {
        "bands": {"healthy": 0, "fair": 0, "poor": 1, "unknown": 1},
        "worst": [{"table": "a", "score": 40, "worst": "smallFiles"}],
    }
    assert status["lastScan"]["result"] == "ok"
    assert {c["type"]: c["status"] for c in status["conditions"]} == {
        "Ready": "True",
        "StorageReachable": "True",
    }


def test_a_failed_scan_changes_nothing() -> None:
    # An unknown scheme fails before any request; an unreachable store is in
    # tests/integration/test_lake_discovery.py.
    scanner = LakeScanner(parse_lake(lake_doc(uri="nosuch://host/lake")), known=("a",))
    result = scanner.scan()
    assert result.result is ScanResult.INVALID
    assert result.disappeared == () and result.tables == ("a",)
    assert "cannot scan nosuch://host/lake" in result.message and "scheme" in result.message
    conditions = {c.type: c.status for c in result.conditions()}
    assert conditions == {"Ready": "False", "StorageReachable": "Unknown"}
    assert [e.reason for e in result.events()] == ["ScanFailed"]
    assert scanner.known == ("a",)


def test_a_lake_reports_each_real_table_once_and_none_outside(tmp_path: Path) -> None:
    """Issue 49, section 2, item 7: one table under two paths became two DeltaTables, and a
    link out of the prefix a third."""
    make_table(tmp_path, "lake/t0")
    make_table(tmp_path, "elsewhere/t9")
    (tmp_path / "lake" / "t0-again").symlink_to(tmp_path / "lake" / "t0")
    (tmp_path / "lake" / "t9").symlink_to(tmp_path / "elsewhere" / "t9")
    (tmp_path / "lake" / "loop").symlink_to(tmp_path / "lake")
    scan = LakeScanner(lake_at(tmp_path / "lake")).scan()
    assert scan.ok and scan.tables == ("t0",)
