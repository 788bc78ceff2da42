"""Which protocol versions and table features this build understands.

deltakeeper reads only the log and rewrites only log metadata (checkpoints, cleanup) and
unreferenced files (vacuum). A feature is listed here once we know what it means for that work;
anything else means refusal before any write.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Protocol as Structural

from deltakeeper.delta.errors import CatalogOwnedError, UnsupportedProtocolError

MAX_READER_VERSION = 3
MAX_WRITER_VERSION = 7

READER_FEATURES = frozenset(
    {
        "columnMapping",
        "deletionVectors",
        "timestampNtz",
        "v2Checkpoint",
        "vacuumProtocolCheck",
        "catalogManaged",
        "catalogOwned-preview",
        "typeWidening",
        "typeWidening-preview",
        "variantType",
        "variantType-preview",
        "variantShredding",
        "variantShredding-preview",
    }
)

WRITER_FEATURES = READER_FEATURES | frozenset(
    {
        "appendOnly",
        "invariants",
        "checkConstraints",
        "generatedColumns",
        "allowColumnDefaults",
        "changeDataFeed",
        "identityColumns",
        "rowTracking",
        "domainMetadata",
        "icebergCompatV1",
        "icebergCompatV2",
        "clustering",
        "inCommitTimestamp",
        "checkpointProtection",
    }
)

# Features that hand a table's commits to a catalog (the current name, and the preview name
# Delta 4.0 wrote): every maintenance operation but checkpoints, log compaction files and
# checksums is then the catalog's, unless it permits it.
CATALOG_MANAGED = ("catalogManaged", "catalogOwned-preview")

# Features implied by legacy (pre-table-features) protocol versions.
_LEGACY_READER = {2: {"columnMapping"}}
_LEGACY_WRITER = {
    2: {"appendOnly", "invariants"},
    3: {"checkConstraints"},
    4: {"changeDataFeed", "generatedColumns"},
    5: {"columnMapping"},
    6: {"identityColumns"},
}


@dataclass(frozen=True)
class Protocol:
    min_reader_version: int
    min_writer_version: int
    reader_features: tuple[str, ...] | None = None
    writer_features: tuple[str, ...] | None = None

    @classmethod
    def from_action(cls, action: dict[str, object]) -> Protocol:
        def features(key: str) -> tuple[str, ...] | None:
            v = action.get(key)
            return tuple(sorted(str(x) for x in v)) if isinstance(v, list) else None

        return cls(
            int(action.get("minReaderVersion") or 1),  # type: ignore[call-overload]
            int(action.get("minWriterVersion") or 1),  # type: ignore[call-overload]
            features("readerFeatures"),
            features("writerFeatures"),
        )

    def reader_feature_set(self) -> set[str]:
        if self.min_reader_version >= 3:
            return set(self.reader_features or ())
        return {f for v, fs in _LEGACY_READER.items() if self.min_reader_version >= v for f in fs}

    def writer_feature_set(self) -> set[str]:
        if self.min_writer_version >= 7:
            return set(self.writer_features or ())
        return {f for v, fs in _LEGACY_WRITER.items() if self.min_writer_version >= v for f in fs}

    def has(self, feature: str) -> bool:
        return feature in self.reader_feature_set() or feature in self.writer_feature_set()

    def to_json(self) -> dict[str, object]:
        return {
            "minReaderVersion": self.min_reader_version,
            "minWriterVersion": self.min_writer_version,
            "readerFeatures": list(self.reader_features)
            if self.reader_features is not None
            else None,
            "writerFeatures": list(self.writer_features)
            if self.writer_features is not None
            else None,
        }


def unsupported_reader(p: Protocol) -> list[str]:
    """What stops us from reading the log correctly: unknown reader features or versions."""
    out = sorted(p.reader_feature_set() - READER_FEATURES)
    if p.min_reader_version > MAX_READER_VERSION:
        out.insert(0, f"readerVersion {p.min_reader_version}")
    return out


def unsupported_writer(p: Protocol) -> list[str]:
    """What stops us from writing anything to the table (checkpoint, cleanup, vacuum)."""
    out = sorted((p.writer_feature_set() | p.reader_feature_set()) - WRITER_FEATURES)
    if p.min_writer_version > MAX_WRITER_VERSION:
        out.insert(0, f"writerVersion {p.min_writer_version}")
    return out + [f for f in unsupported_reader(p) if f not in out]


@dataclass(frozen=True)
class _Wording:
    """How one operation says no: `lead` + the unknown features + `tail`; `catalog`, for work a
    catalog owns on catalog-managed tables, says whose that work is (refused unless the caller
    says the catalog permits it)."""

    lead: str
    tail: str = ""
    catalog: str | None = None


_WORDING = {
    "checkpoint": _Wording("refusing to write a checkpoint: this build does not support "),
    "cleanup": _Wording(
        "refusing to clean the log: this build does not support ",
        catalog="log cleanup is its catalog's to run or permit",
    ),
    "checksum": _Wording(
        "refusing to write a version checksum: this build does not support ",
        "; upgrade deltakeeper",
    ),
    "vacuum": _Wording(
        "vacuum refused, nothing deleted: this deltakeeper does not support ",
        "; upgrade deltakeeper before vacuuming this table",
        catalog="vacuum is its catalog's to run or permit",
    ),
    "compaction": _Wording(
        "compaction refused: this deltakeeper does not support ",
        "; upgrade deltakeeper",
        catalog="compaction (OPTIMIZE) is its catalog's to run or permit",
    ),
    "commit": _Wording(
        "refusing to commit: this build does not support ",
        "; upgrade deltakeeper",
        catalog="commits go through its catalog",
    ),
    "manifest": _Wording(
        "refusing to write symlink manifests: this build does not support ",
        "; upgrade deltakeeper",
        catalog="symlink manifests are its catalog's to write or permit",
    ),
    "expire": _Wording(
        "expire refused, nothing removed: this deltakeeper does not support ",
        "; upgrade deltakeeper",
        catalog="its catalog owns data cleanup, and commits go through the catalog",
    ),
    "maintenance": _Wording(
        "this build does not support ",
        "; nothing will be written or deleted (upgrade deltakeeper)",
    ),
    "status": _Wording(
        "the table uses ",
        ", which this deltakeeper does not support; nothing is written or deleted until "
        "deltakeeper is upgraded",
    ),
}
OPERATIONS = tuple(_WORDING)
# What no catalog permission allows: these commit, and a catalog-managed table's commits go
# through its catalog.
COMMITS = ("commit", "expire")


def catalog_managed(p: Protocol) -> str | None:
    """The feature that makes a table of protocol `p` catalog-managed, or None."""
    return next((f for f in CATALOG_MANAGED if p.has(f)), None)


def refusal(p: Protocol, operation: str, catalog_allows: bool = False) -> str | None:
    """Why `operation` (one of OPERATIONS) must not write to a table of protocol `p`, or None:
    a feature this build does not know, or a catalog that owns the work (`catalog_refusal`)."""
    wording = _WORDING[operation]
    unknown = unsupported_writer(p)
    if unknown:
        return f"{wording.lead}{', '.join(unknown)}{_why(p, operation)}{wording.tail}"
    return catalog_refusal(p, operation, catalog_allows)


def catalog_refusal(p: Protocol, operation: str, catalog_allows: bool = False) -> str | None:
    """Why `operation` must not run on a catalog-managed table, or None: Delta lets a client
    write checkpoints, log compaction files and checksums there (for published versions);
    anything else is the managing catalog's, unless it permits it (`catalog_allows`, which
    only the caller can know). A commit is never allowed: it must go through the catalog."""
    wording = _WORDING[operation]
    managed = catalog_managed(p)
    if managed is None or wording.catalog is None:
        return None
    if catalog_allows and operation not in COMMITS:
        return None
    lead = wording.lead.partition(":")[0]
    return f"{lead}: the table is catalog-managed ({managed}); {wording.catalog}"


class Versioned(Structural):
    """What the refusal reads of a table's state (a snapshot has it)."""

    @property
    def uri(self) -> str: ...

    @property
    def protocol(self) -> Protocol: ...


def require_writable(snapshot: Versioned, operation: str, catalog_allows: bool = False) -> None:
    """The one refusal before any write or delete: UnsupportedProtocolError naming the table,
    CatalogOwnedError for work a catalog owns (`catalog_allows`: the caller knows the catalog
    permits it)."""
    p = snapshot.protocol
    if unsupported_writer(p):
        raise UnsupportedProtocolError(f"{snapshot.uri}: {refusal(p, operation)}")
    why = catalog_refusal(p, operation, catalog_allows)
    if why is not None:
        raise CatalogOwnedError(f"{snapshot.uri}: {why}")


def _why(p: Protocol, operation: str) -> str:
    """Vacuum says why an unknown feature matters even when it does not touch data files."""
    if operation != "vacuum":
        return ""
    if p.has("vacuumProtocolCheck"):
        return (
            " (the table has vacuumProtocolCheck, so vacuum must support every reader and "
            "writer feature)"
        )
    return " (files this build does not understand may be in use)"
