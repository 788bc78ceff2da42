"""Version checksum files (`<version>.crc`): build one from a snapshot, write it once, check one.

A checksum records the state of one version (sizes, counts, protocol, metadata, histograms)
so readers can validate their own replay against it. Delta Spark also reads protocol, metadata
and the in-commit timestamp straight from it, and derives the next version's checksum from it,
so every field must be exact. The field names and histogram bins are those of PROTOCOL.md and
Delta Spark.
"""

from __future__ import annotations

import contextlib
from dataclasses import dataclass
from typing import Any

import orjson
import pyarrow as pa
import pyarrow.compute as pc

from deltakeeper.delta import features, paths, schema
from deltakeeper.delta.errors import (
    CorruptLogError,
    InvalidInputError,
    MissingLogFileError,
)
from deltakeeper.delta.log.json_files import read_actions
from deltakeeper.delta.snapshot import Snapshot
from deltakeeper.delta.table import Table

KB = 1024
MB = 1024 * KB
GB = 1024 * MB

# Lower bounds of the file-size bins, as Delta Spark and Delta Kernel write them.
FILE_SIZE_BINS: tuple[int, ...] = (
    0,
    *(k * KB for k in (8, 16, 32, 64, 128, 256, 512)),
    *(m * MB for m in (1, 2, 4)),
    *(m * MB for m in range(8, 41, 4)),
    *(m * MB for m in range(48, 121, 8)),
    *(m * MB for m in range(124, 145, 4)),
    *(m * MB for m in range(160, 577, 16)),
    *(m * MB for m in range(640, 1409, 64)),
    *(m * MB for m in range(1536, 2049, 128)),
    *(m * MB for m in range(2304, 4097, 256)),
    *(g * GB for g in (8, 16, 32, 64, 128, 256)),
)

# Lower bounds of the deleted-record-count bins (spec): 0, 1-9, 10-99, ..., 2^31-1 and up.
DELETED_RECORD_BINS: tuple[int, ...] = (0, *(10**k for k in range(8)), 2**31 - 1)

# Delta Spark lists the live files only for small tables; so do we.
ALL_FILES_MAX = 50
# Delta Spark skips allFiles when stats are collected on more columns than this.
ALL_FILES_MAX_INDEXED_COLS = 32


@dataclass(frozen=True)
class CrcResult:
    version: int
    key: str
    written: bool  # False for a dry run and when a checksum was already there
    existed: bool  # a checksum for this version was already there; it was left as it was
    size_bytes: int  # of what we wrote (or would have written)
    fields: tuple[str, ...]


# -- building --------------------------------------------------------------------------------


def build_crc(
    snap: Snapshot, commit_info: dict[str, Any] | None = None, max_files: int = ALL_FILES_MAX
) -> dict[str, Any]:
    """The checksum of `snap` as a JSON-ready dict, fields in Delta Spark's order.

    `commit_info` (of the commit at `snap.version`) stands in for `snap.commit_info` when the
    snapshot did not read that commit, as one loaded from a checkpoint at its version; it gives
    `txnId` and the in-commit timestamp (`write_crc` reads it). `allFiles` is included for
    tables of at most `max_files` files loaded with every add column.
    """
    info = snap.commit_info or commit_info or {}
    crc: dict[str, Any] = {}
    txn_id = info.get("txnId")
    if isinstance(txn_id, str):
        crc["txnId"] = txn_id
    crc["tableSizeBytes"] = snap.size_bytes
    crc["numFiles"] = snap.num_files
    if _dv_readable(snap):
        cardinalities = _dv_cardinalities(snap.files)
        crc["numDeletedRecordsOpt"] = int(pc.sum(cardinalities).as_py() or 0)
        crc["numDeletionVectorsOpt"] = int(pc.count(snap.files["deletionVector"]).as_py())
    crc["numMetadata"] = 1
    crc["numProtocol"] = 1
    if snap.in_commit_timestamps:
        crc["inCommitTimestampOpt"] = _in_commit_timestamp(snap, info)
    if not snap.metadata.properties.has_txn_retention:
        # With a retention the live set depends on the clock, so a checksum could not hold it.
        crc["setTransactions"] = [_txn(t) for t in snap.txns.values()]
    crc["domainMetadata"] = [_domain(d) for d in snap.domains.values()]
    crc["metadata"] = metadata_json(snap)
    crc["protocol"] = protocol_json(snap)
    crc["fileSizeHistogram"] = file_size_histogram(_sizes(snap.files))
    if _dv_readable(snap):
        crc["deletedRecordCountsHistogramOpt"] = {
            "deletedRecordCounts": _bin_counts(cardinalities, DELETED_RECORD_BINS)
        }
    if _lists_files(snap, max_files):
        crc["allFiles"] = add_actions(snap.files)
    return crc


def serialize(crc: dict[str, Any]) -> bytes:
    """One JSON object on one line, newline-terminated, as Delta Spark writes it."""
    return orjson.dumps(crc) + b"\n"


def file_size_histogram(
    sizes: pa.Array | pa.ChunkedArray, bins: tuple[int, ...] | list[int] = FILE_SIZE_BINS
) -> dict[str, list[int]]:
    at_least = _at_least(sizes, bins)
    # Values at or above a bound form nested sets: equal counts mean equal sets, so each
    # distinct count needs one sum (a table's files usually span a few bins).
    sums: dict[int, int] = {0: 0}
    for bound, n in zip(bins, at_least, strict=True):
        if n not in sums:
            chosen = pc.if_else(pc.greater_equal(sizes, bound), sizes, 0)
            sums[n] = int(pc.sum(chosen).as_py() or 0)
    return {
        "sortedBinBoundaries": [int(b) for b in bins],
        "fileCounts": _per_bin(at_least),
        "totalBytes": _per_bin([sums[n] for n in at_least]),
    }


def _bin_counts(values: pa.Array | pa.ChunkedArray, bins: tuple[int, ...]) -> list[int]:
    return _per_bin(_at_least(values, bins))


def _at_least(values: pa.Array | pa.ChunkedArray, bins: tuple[int, ...] | list[int]) -> list[int]:
    """How many values are at or above each bound (one vectorized pass per bound)."""
    return [int(pc.sum(pc.greater_equal(values, b)).as_py() or 0) for b in bins]


def _per_bin(at_least: list[int]) -> list[int]:
    """From "at or above each bound" to "in each bin": a value's bin is the last lower bound at
    or below it; values below the first bound are in none (Delta Spark drops them too)."""
    return [n - m for n, m in zip(at_least, [*at_least[1:], 0], strict=True)]


def _sizes(files: pa.Table) -> pa.ChunkedArray:
    return pc.fill_null(pc.cast(files["size"], pa.int64()), -1)  # no size: in no bin (Spark)


def _dv_readable(snap: Snapshot) -> bool:
    # Delta Spark's test for DV metrics: the feature is supported and the files are parquet.
    return (
        snap.protocol.has("deletionVectors")
        and snap.metadata.provider == "parquet"
        and "deletionVector" in snap.files.column_names
    )


def _dv_cardinalities(files: pa.Table) -> pa.ChunkedArray:
    """Deleted rows per live file (0 without a deletion vector)."""
    cardinality = pc.struct_field(files["deletionVector"], "cardinality")
    return pc.cast(pc.fill_null(cardinality, 0), pa.int64())


def _in_commit_timestamp(snap: Snapshot, info: dict[str, Any]) -> int:
    ts = info.get("inCommitTimestamp")
    if not isinstance(ts, int):
        raise CorruptLogError(
            f"{snap.uri}: in-commit timestamps are enabled but commit {snap.version} has no "
            "inCommitTimestamp; the checksum cannot be written for this version"
        )
    return ts


def _txn(t: dict[str, Any]) -> dict[str, Any]:
    return _without_nulls(
        {"appId": t.get("appId"), "version": t.get("version"), "lastUpdated": t.get("lastUpdated")}
    )


def _domain(d: dict[str, Any]) -> dict[str, Any]:
    return {"domain": d.get("domain"), "configuration": d.get("configuration"), "removed": False}


def metadata_json(snap: Snapshot) -> dict[str, Any]:
    """The metaData action as Delta Spark serializes it: defaults filled, nulls left out."""
    return _without_nulls(snap.metadata.action())


def protocol_json(snap: Snapshot) -> dict[str, Any]:
    p = snap.protocol
    out: dict[str, Any] = {
        "minReaderVersion": p.min_reader_version,
        "minWriterVersion": p.min_writer_version,
    }
    if p.reader_features is not None:
        out["readerFeatures"] = list(p.reader_features)
    if p.writer_features is not None:
        out["writerFeatures"] = list(p.writer_features)
    return out


def _lists_files(snap: Snapshot, max_files: int) -> bool:
    if snap.num_files > max_files or not set(schema.FULL_ADD) <= set(snap.files.column_names):
        return False
    props = snap.metadata.properties
    # Delta Spark leaves allFiles out when checkpoints may drop JSON stats (its replay would
    # then see files without stats) and when stats cover many columns (a big file).
    if not props.write_stats_as_json:
        return False
    indexed = props.num_indexed_cols
    return indexed is not None and indexed <= ALL_FILES_MAX_INDEXED_COLS


def add_actions(files: pa.Table) -> list[dict[str, Any]]:
    """Live adds as in a checksum: dataChange false, null fields left out."""
    out = []
    for row in files.select(list(schema.FULL_ADD)).to_pylist():
        row["dataChange"] = False
        row["partitionValues"] = dict(row["partitionValues"] or [])  # keeps null values
        if row["tags"] is not None:
            row["tags"] = dict(row["tags"])
        if row["deletionVector"] is not None:
            row["deletionVector"] = _without_nulls(row["deletionVector"])
        out.append(_without_nulls(row))
    return out


def _without_nulls(d: dict[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in d.items() if v is not None}


# -- writing and reading ---------------------------------------------------------------------


def crc_key(version: int) -> str:
    return f"{paths.LOG_DIR}/{paths.crc(version)}"


def write_crc(
    table: Table, snap: Snapshot, dry_run: bool = False, max_files: int = ALL_FILES_MAX
) -> CrcResult:
    """Write `<version>.crc` for `snap` unless one exists; never overwrite (spec).

    The commit at `snap.version` must already be in the log, which a snapshot guarantees.
    Tables with features this build does not know are refused before anything is written.
    """
    features.require_writable(snap, "checksum")
    crc = build_crc(snap, snap.commit_info or commit_info(table, snap.version), max_files)
    body = serialize(crc)
    key = crc_key(snap.version)

    def result(written: bool, existed: bool) -> CrcResult:
        return CrcResult(snap.version, key, written, existed, len(body), tuple(crc))

    if dry_run:
        return result(False, table.storage.head(key) is not None)
    try:
        table.storage.put_if_absent(key, body)  # one request; refuses an existing checksum
    except FileExistsError:
        return result(False, True)  # someone's checksum is there already; it stands
    return result(True, False)


def commit_info(table: Table, version: int) -> dict[str, Any] | None:
    """The commitInfo of commit `version`; None when it has none or the commit is gone."""
    try:
        actions = read_actions(table.storage, f"{paths.LOG_DIR}/{paths.commit(version)}")
    except MissingLogFileError:
        return None  # cleaned up: the checksum goes without txnId
    for _, action in actions:
        info = action.get("commitInfo")
        if isinstance(info, dict):
            return info
    return None


def read_crc(table: Table, version: int) -> dict[str, Any] | None:
    """The checksum at `version`, or None when there is none; CorruptLogError if unparsable."""
    key = crc_key(version)
    try:
        data = table.storage.read(key)
    except FileNotFoundError:
        return None
    try:
        crc = orjson.loads(data)
    except orjson.JSONDecodeError as e:
        raise CorruptLogError(f"{table.uri}/{key} is not valid JSON: {e}") from e
    if not isinstance(crc, dict):
        raise CorruptLogError(f"{table.uri}/{key} does not hold a JSON object")
    if "histogramOpt" in crc and "fileSizeHistogram" not in crc:
        crc["fileSizeHistogram"] = crc.pop("histogramOpt")  # older Delta Spark's name
    return crc


# -- checking --------------------------------------------------------------------------------

REQUIRED = ("tableSizeBytes", "numFiles", "numMetadata", "numProtocol", "metadata", "protocol")


def crc_mismatches(
    crc: dict[str, Any], snap: Snapshot, commit_info: dict[str, Any] | None = None
) -> list[str]:
    """How `crc` disagrees with `snap`'s replay, one line per field; empty when it agrees.

    Required fields are always checked, optional ones when we can compute them. `snap` must
    carry every add column when the checksum lists `allFiles`; `commit_info` as for
    `build_crc` (without either, the in-commit timestamp is not checked).
    """
    if "allFiles" in crc and not set(schema.FULL_ADD) <= set(snap.files.column_names):
        raise InvalidInputError(
            "checking allFiles needs a snapshot with every add column (schema.FULL_ADD)"
        )
    missing = [f for f in REQUIRED if f not in crc]
    out = [f"{f}: missing (required)" for f in missing]
    expected = _expected_crc(crc, snap, snap.commit_info or commit_info)
    for field, found in crc.items():
        want = _expected(field, found, expected, snap)
        if want is _UNCHECKED:
            continue
        if _normal(field, found) != _normal(field, want):
            out.append(f"{field}: checksum has {_short(found)}, the log gives {_short(want)}")
    return out


_UNCHECKED = object()


def _expected_crc(
    crc: dict[str, Any], snap: Snapshot, info: dict[str, Any] | None
) -> dict[str, Any]:
    ict = (info or {}).get("inCommitTimestamp")
    known = {"inCommitTimestamp": ict} if isinstance(ict, int) else {"inCommitTimestamp": 0}
    expected = build_crc(snap, {**(info or {}), **known}, max_files=0)
    if not isinstance(ict, int):
        expected.pop("inCommitTimestampOpt", None)  # unknown here: not checked
    if "allFiles" in crc:
        expected["allFiles"] = add_actions(snap.files)
    return expected


def _expected(field: str, found: Any, expected: dict[str, Any], snap: Snapshot) -> Any:
    if field == "txnId" or field not in _CHECKED:
        return _UNCHECKED
    if field not in expected and field not in REQUIRED:
        return _UNCHECKED  # e.g. DV metrics on a table whose DVs we do not count
    if field == "fileSizeHistogram" and isinstance(found, dict):
        bins = found.get("sortedBinBoundaries")
        if isinstance(bins, list) and bins and all(isinstance(b, int) for b in bins):
            return file_size_histogram(_sizes(snap.files), bins)  # the writer's own bins
    if field == "setTransactions" and snap.metadata.properties.has_txn_retention:
        return _UNCHECKED  # depends on when the checksum was written
    return expected.get(field)


_CHECKED = frozenset(
    {
        *REQUIRED,
        "numDeletedRecordsOpt",
        "numDeletionVectorsOpt",
        "inCommitTimestampOpt",
        "setTransactions",
        "domainMetadata",
        "fileSizeHistogram",
        "deletedRecordCountsHistogramOpt",
        "allFiles",
    }
)


def _normal(field: str, value: Any) -> Any:
    """A form in which two checksums that mean the same compare equal."""
    if value is None:
        return None
    if field == "protocol" and isinstance(value, dict):
        return {
            k: sorted(v) if isinstance(v, list) else v for k, v in value.items() if v is not None
        }
    if field == "metadata" and isinstance(value, dict):
        fmt = value.get("format") or {}
        return _without_nulls(
            {
                **value,
                "format": {"provider": fmt.get("provider", "parquet"), **_opts(fmt)},
                "partitionColumns": value.get("partitionColumns") or [],
                "configuration": value.get("configuration") or {},
            }
        )
    if field in ("setTransactions", "domainMetadata") and isinstance(value, list):
        return sorted(orjson.dumps(x, option=orjson.OPT_SORT_KEYS) for x in value)
    if field == "allFiles" and isinstance(value, list):
        return sorted((_normal_add(a) for a in value), key=lambda a: str(a.get("path")))
    return value


def _opts(fmt: dict[str, Any]) -> dict[str, Any]:
    return {"options": fmt.get("options") or {}}


def _normal_add(add: dict[str, Any]) -> dict[str, Any]:
    out = _without_nulls(add)
    stats = out.get("stats")
    if isinstance(stats, str):
        with contextlib.suppress(orjson.JSONDecodeError):
            out["stats"] = orjson.loads(stats)  # spacing and key order do not matter
    if isinstance(out.get("deletionVector"), dict):
        out["deletionVector"] = _without_nulls(out["deletionVector"])
    if not out.get("tags"):
        # Delta Spark itself gives {} or null for "no tags" depending on where it read the add.
        out.pop("tags", None)
    return out


def _short(value: Any) -> str:
    text = orjson.dumps(value).decode()
    return text if len(text) <= 300 else text[:300] + "..."
