"""delta/features.py: the one refusal of features this build does not know or the catalog owns."""

import pytest

from deltakeeper.delta import features
from deltakeeper.delta.errors import CatalogOwnedError, UnsupportedProtocolError
from deltakeeper.delta.features import Protocol
from deltakeeper.delta.table import open_table
from tests.support.logbuilder import LogBuilder, metadata, protocol

UNKNOWN = Protocol(1, 7, writer_features=("appendOnly", "someFutureFeature"))
CATALOG = Protocol(3, 7, ("catalogManaged",), ("catalogManaged",))


@pytest.mark.parametrize("operation", features.OPERATIONS)
def test_every_operation_refuses_an_unknown_feature(operation):
    refusal = features.refusal(UNKNOWN, operation)
    assert refusal is not None and "someFutureFeature" in refusal
    assert "appendOnly" not in refusal


PREVIEW = Protocol(3, 7, ("catalogOwned-preview",), ("catalogOwned-preview",))


@pytest.mark.parametrize("managed", [CATALOG, PREVIEW], ids=["catalogManaged", "preview"])
def test_only_checkpoints_log_compaction_and_checksums_run_on_catalog_managed_tables(managed):
    refused = {op for op in features.OPERATIONS if features.refusal(managed, op)}
    # Delta's exceptions are checkpoints, log compaction (written as a checkpoint is) and
    # checksums; maintenance and status are no write of their own.
    assert refused == {"cleanup", "vacuum", "compaction", "commit", "manifest", "expire"}
    feature = managed.reader_features[0]  # type: ignore[index]
    assert features.refusal(managed, "cleanup") == (
        f"refusing to clean the log: the table is catalog-managed ({feature}); log cleanup is "
        "its catalog's to run or permit"
    )


def test_the_catalogs_permission_lifts_the_refusal_but_never_for_a_commit_or_expiry():
    for op in ("cleanup", "vacuum", "compaction", "manifest"):
        assert features.refusal(CATALOG, op, catalog_allows=True) is None
    assert features.refusal(CATALOG, "commit", catalog_allows=True) is not None
    assert features.refusal(CATALOG, "expire", catalog_allows=True) == (
        "expire refused, nothing removed: the table is catalog-managed (catalogManaged); its "
        "catalog owns data cleanup, and commits go through the catalog"
    )
    # A feature this build lacks is refused whatever the catalog says.
    both = Protocol(3, 7, ("catalogManaged",), ("catalogManaged", "someFutureFeature"))
    refused = features.refusal(both, "cleanup", catalog_allows=True)
    assert refused is not None and "someFutureFeature" in refused


def test_require_writable_raises_catalog_owned_for_the_catalogs_work(tmp_path):
    managed = protocol(3, 7, readerFeatures=["catalogManaged"], writerFeatures=["catalogManaged"])
    LogBuilder(tmp_path).commit(managed, metadata())
    snap = open_table(str(tmp_path)).snapshot()
    with pytest.raises(CatalogOwnedError, match="log cleanup is its catalog's"):
        features.require_writable(snap, "cleanup")
    assert CatalogOwnedError.reason == "CatalogOwned" and CatalogOwnedError.exit_code == 3
    features.require_writable(snap, "cleanup", catalog_allows=True)
    features.require_writable(snap, "checkpoint")


def test_require_writable_names_the_table(tmp_path):
    LogBuilder(tmp_path).commit(protocol(1, 7, writerFeatures=["someFutureFeature"]), metadata())
    snap = open_table(str(tmp_path)).snapshot()
    with pytest.raises(UnsupportedProtocolError) as raised:
        features.require_writable(snap, "cleanup")
    assert str(raised.value) == (
        f"{snap.uri}: refusing to clean the log: this build does not support someFutureFeature"
    )
