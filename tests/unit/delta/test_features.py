"""delta/features.py: the one refusal of features this build does not know or the catalog owns."""

import pytest

from deltakeeper.delta import features
from deltakeeper.delta.errors import UnsupportedProtocolError
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


def test_only_what_the_catalog_owns_is_refused_on_catalog_managed_tables():
    refused = {op for op in features.OPERATIONS if features.refusal(CATALOG, op)}
    assert refused == {"vacuum", "compaction", "commit"}  # commits belong to the catalog
    assert features.refusal(CATALOG, "vacuum") == (
        "vacuum refused, nothing deleted: the table is catalog-managed (catalogManaged); run "
        "VACUUM through the catalog that owns it"
    )


def test_require_writable_names_the_table(tmp_path):
    LogBuilder(tmp_path).commit(protocol(1, 7, writerFeatures=["someFutureFeature"]), metadata())
    snap = open_table(str(tmp_path)).snapshot()
    with pytest.raises(UnsupportedProtocolError) as raised:
        features.require_writable(snap, "cleanup")
    assert str(raised.value) == (
        f"{snap.uri}: refusing to clean the log: this build does not support someFutureFeature"
    )
