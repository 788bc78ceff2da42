"""Which protocol versions and table features this build understands.

deltakeeper reads only the log and rewrites only log metadata (checkpoints, cleanup) and
unreferenced files (vacuum). A feature is listed here once we know what it means for that work;
anything else means refusal before any write.
"""

from __future__ import annotations

from dataclasses import dataclass, field

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

# Features that hand a table's commits to a catalog: vacuum and compaction belong to it then.
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
    raw: dict[str, object] = field(default_factory=dict, compare=False)

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
            raw=dict(action),
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
