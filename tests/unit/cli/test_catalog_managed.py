"""Catalog-managed tables (Delta's "Maintenance Operations on Catalog-managed Tables"): a client
may write checkpoints, log compaction files and checksums for published versions; cleanup,
vacuum, compaction, statistics commits and manifests are the catalog's, refused unless a
DeltaTable's catalog.allowedOperations stands in for its permission. Staged commits are never
read or published. The table: tests/support/catalog_tables.py."""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any

import deltalake
import pytest

from deltakeeper.cli import main
from deltakeeper.delta import cleanup, manifest
from deltakeeper.delta.errors import CatalogOwnedError
from deltakeeper.delta.table import open_table
from deltakeeper.delta.vacuum import plan as vacuum
from deltakeeper.maintenance.policy import PolicyError, effective
from deltakeeper.resources.manifests import PolicyResource, TableResource
from deltakeeper.resources.spec import from_spec, settings
from tests.support import catalog_tables
from tests.support.catalog_tables import PUBLISHED, listing
from tests.support.cli import run


@pytest.fixture
def table(tmp_path: Path) -> Path:
    return catalog_tables.build(tmp_path / "t")


def staged(root: Path) -> set[str]:
    return {k for k in listing(root) if k.startswith("_delta_log/_staged_commits/")}


def rows_at_11(root: Path) -> list[dict[str, Any]]:
    """The table as delta-rs reads it at version 11, the last before catalogManaged (delta-rs
    1.6 refuses to read a catalog-managed version without the catalog's newest version)."""
    data = deltalake.DeltaTable(str(root), version=11).to_pyarrow_table()
    return sorted(data.to_pylist(), key=lambda r: (r["id"], r["day"]))


def our_snapshot(root: Path) -> tuple[int, list[str]]:
    snap = open_table(str(root)).snapshot()
    return snap.version, sorted(snap.files.column("path").to_pylist())


def test_the_table_is_catalog_managed_and_staged_commits_are_not_read(table: Path) -> None:
    snap = open_table(str(table)).snapshot()
    assert snap.version == PUBLISHED  # 13 and 14 are only staged
    assert snap.protocol.has("catalogManaged") and snap.protocol.has("inCommitTimestamp")
    assert not [p for p in snap.files.column("path").to_pylist() if "staged" in p]
    with pytest.raises(Exception, match="catalog"):
        deltalake.DeltaTable(str(table))  # delta-rs asks for the catalog's version
    assert len(rows_at_11(table)) == 2


@pytest.mark.parametrize(
    "command",
    [
        ["cleanup"],
        ["vacuum"],
        ["vacuum", "--mode", "full"],
        ["compact"],
        ["compute-stats"],
        ["manifest"],
        ["maintain"],
        ["maintain", "--only", "compaction,stats,manifest"],
    ],
    ids=" ".join,
)
def test_every_operation_the_catalog_owns_is_refused_and_nothing_changes(
    table: Path, capsys: pytest.CaptureFixture[str], command: list[str]
) -> None:
    before, rows = listing(table), rows_at_11(table)
    code, out, err = run(capsys, *command, str(table))
    assert code == 3, out + err
    assert "catalog-managed (catalogManaged)" in out + err
    assert listing(table) == before  # nothing deleted, nothing written
    assert rows_at_11(table) == rows


def test_the_refusal_is_its_own_error_in_json(table: Path, capsys: pytest.CaptureFixture[str]):
    code, out, _ = run(capsys, "cleanup", "--json", str(table))
    assert code == 3
    error = json.loads(out)
    assert error["error"] == "CatalogOwned"
    assert "catalog.allowedOperations" in error["message"]


def test_checkpoints_are_still_written_for_the_newest_published_version_only(
    table: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    before = listing(table)
    code, _, err = run(capsys, "checkpoint", str(table))
    assert code == 0, err
    added = set(listing(table)) - set(before)
    assert added == {f"_delta_log/{PUBLISHED:020d}.checkpoint.parquet"}
    assert all(listing(table)[k] == size for k, size in before.items() if k != LAST_CHECKPOINT)
    code, _, err = run(capsys, "compact-log", str(table), "--from", "6", "--to", str(PUBLISHED))
    assert code == 0, err
    assert f"_delta_log/{6:020d}.{PUBLISHED:020d}.compacted.json" in listing(table)
    code, _, err = run(capsys, "compact-log", str(table), "--from", "6", "--to", "13")
    assert code == 2 and "commit 13 is not published" in err  # 13 is only staged
    assert our_snapshot(table)[0] == PUBLISHED


LAST_CHECKPOINT = "_delta_log/_last_checkpoint"


def test_inspect_says_the_version_is_the_newest_published_and_counts_staged_commits(
    table: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    code, out, _ = run(capsys, "inspect", "--json", str(table))
    assert code == 0
    report = json.loads(out)
    assert report["version"] == PUBLISHED
    assert report["catalogManaged"] == "catalogManaged"
    assert report["unpublishedCommits"] == 3  # two attempts at 13, one at 14
    code, out, _ = run(capsys, "inspect", str(table))
    assert "newest published" in out and "the catalog may be ahead" in out
    assert "3 staged commits newer (not read)" in out


# -- standalone mode: run --once ------------------------------------------------------------------


def manifests(tmp_path: Path, table: Path, **spec: Any) -> Path:
    folder = tmp_path / "m"
    folder.mkdir(exist_ok=True)
    doc = {
        "apiVersion": "deltakeeper.io/v1alpha1",
        "kind": "DeltaTable",
        "metadata": {"name": "t"},
        "spec": {"uri": f"file://{table}", "stats": {"enabled": True}, **spec},
    }
    (folder / "t.json").write_text(json.dumps(doc))
    return folder


def run_once(folder: Path, capsys: pytest.CaptureFixture[str]) -> tuple[int, dict[str, Any]]:
    code = main(["run", "--manifests", str(folder), "--once"])
    capsys.readouterr()
    status = json.loads((folder / ".deltakeeper" / "status.json").read_text())
    return code, status["tables"]["default/t"]


def conditions(status: dict[str, Any]) -> dict[str, dict[str, Any]]:
    return {c["type"]: c for c in status["conditions"]}


def test_run_once_refuses_with_reason_catalog_owned_and_is_not_degraded(
    tmp_path: Path, table: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    folder = manifests(tmp_path, table)
    before, rows = listing(table), rows_at_11(table)
    code, status = run_once(folder, capsys)
    assert code == 0  # Ready: the table is as it should be
    assert listing(table) == before
    assert rows_at_11(table) == rows
    done = status["lastMaintenance"]
    for op in ("cleanup", "vacuum", "stats"):
        assert done[op]["result"] == "refused", op
        assert done[op]["reason"] == "CatalogOwned", op
        assert "catalog-managed (catalogManaged)" in done[op]["message"]
    found = conditions(status)
    degraded = found["Degraded"]
    assert (degraded["status"], degraded["reason"]) == ("False", "CatalogOwned")
    assert "cleanup" in degraded["message"] and "catalog.allowedOperations" in degraded["message"]
    ready = found["Ready"]
    assert ready["status"] == "True"
    assert f"watching version {PUBLISHED}, the newest published commit" in ready["message"]
    assert "3 staged commits are newer" in ready["message"]
    # A second pass: still refused, still not Degraded (no flapping).
    code, status = run_once(folder, capsys)
    assert code == 0 and listing(table) == before
    assert conditions(status)["Degraded"]["reason"] == "CatalogOwned"


def test_catalog_allowed_operations_lets_the_named_operation_run(
    tmp_path: Path, table: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    folder = manifests(tmp_path, table, catalog={"allowedOperations": ["cleanup"]})
    rows, snapshot, kept = rows_at_11(table), our_snapshot(table), staged(table)
    code, status = run_once(folder, capsys)
    assert code == 0
    done = status["lastMaintenance"]
    assert done["cleanup"]["result"] == "done" and done["cleanup"]["deletedFiles"] == 5
    assert catalog_tables.commits(table) == list(range(5, PUBLISHED + 1))
    assert staged(table) == kept  # newer than every published commit: never touched
    assert done["vacuum"]["reason"] == "CatalogOwned"  # not named: still refused
    assert rows_at_11(table) == rows  # delta-rs reads it from the checkpoint at 5 now
    assert our_snapshot(table) == snapshot


@pytest.mark.parametrize(
    ("names", "error"),
    [
        (["cleanup", "vacum"], "unknown operation 'vacum'; the catalog can permit cleanup"),
        (["stats"], "stats commits, and commits to a catalog-managed table go through"),
        (["compaction"], "compaction commits"),
        (["checkpoint"], "checkpoint runs on catalog-managed tables without permission"),
        ("cleanup", "expected a list of operation names"),
    ],
)
def test_allowed_operations_names_only_what_a_catalog_can_permit(names: Any, error: str) -> None:
    with pytest.raises(PolicyError, match=error):
        from_spec({"catalog": {"allowedOperations": names}})


def test_allowed_operations_is_off_by_default() -> None:
    assert "catalog_allowed" not in from_spec({})
    allowed = from_spec({"catalog": {"allowedOperations": ["vacuum", "manifest"]}})
    assert allowed["catalog_allowed"] == {"vacuum", "manifest"}


def test_the_library_refuses_too_unless_told_the_catalog_permits(table: Path) -> None:
    """delta/ refuses on its own (defence in depth): a caller that skips the planner still
    deletes nothing without `catalog_allows`."""
    t = open_table(str(table))
    snap = t.snapshot()
    now, month = int(time.time() * 1000), 30 * catalog_tables.DAY_MS
    with pytest.raises(CatalogOwnedError, match="log cleanup is its catalog's"):
        cleanup.plan_table_cleanup(t, snap, month, now)
    with pytest.raises(CatalogOwnedError, match="vacuum is its catalog's"):
        vacuum.plan_table_vacuum(t, vacuum.load_for_vacuum(t), 7 * catalog_tables.DAY_MS, now)
    with pytest.raises(CatalogOwnedError, match="symlink manifests are its catalog's"):
        manifest.generate(t, dry_run=True)
    planned = cleanup.plan_table_cleanup(t, snap, month, now, catalog_allows=True)
    assert sorted(f.key for f in planned.delete) == [
        f"_delta_log/{v:020d}.json" for v in range(5)
    ]  # published commits only; the staged ones are newer than the cut-off


def test_a_policy_can_allow_for_its_tables_and_a_tables_own_list_wins() -> None:
    allows = {"catalog": {"allowedOperations": ["vacuum"]}}
    policy = PolicyResource("ns", "p", {}, 1, allows, selector={})
    plain = TableResource("ns", "t", {}, 1, {"uri": "file:///t"})
    assert effective({}, **settings(plain, policy)).catalog_allowed == {"vacuum"}
    own = {"uri": "file:///t", "catalog": {"allowedOperations": ["cleanup"]}}
    table = TableResource("ns", "t", {}, 1, own)
    assert effective({}, **settings(table, policy)).catalog_allowed == {"cleanup"}
    assert effective({}).catalog_allowed == frozenset()  # off by default


def test_catalog_allows_on_the_command_line_lets_cleanup_run_and_nothing_else(
    table: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """--catalog-allows is catalog.allowedOperations for one command: cleanup named, cleanup
    runs (commits 0-4, before the checkpoint at 5 and past the retention); vacuum still not."""
    code, out, err = run(capsys, "vacuum", "--catalog-allows", "cleanup", str(table))
    assert code == 3 and "catalog-managed" in out + err
    kept = staged(table)
    code, out, err = run(capsys, "cleanup", "--catalog-allows", "cleanup", str(table))
    assert code == 0, out + err
    assert catalog_tables.commits(table) == list(range(5, PUBLISHED + 1))
    assert staged(table) == kept


@pytest.mark.parametrize(
    ("allows", "error"),
    [("compaction", "no setting allows it"), ("nope", "unknown operation 'nope'")],
)
def test_catalog_allows_names_only_what_a_catalog_can_permit(
    table: Path, capsys: pytest.CaptureFixture[str], allows: str, error: str
) -> None:
    before = listing(table)
    code, _, err = run(capsys, "maintain", "--catalog-allows", allows, str(table))
    assert code == 2 and "--catalog-allows" in err and error in err, err
    assert listing(table) == before
