"""Everything the CLI prints: JSON, each command's text form, progress, warnings and errors,
all through the masking that keeps credentials given on the command line out of stdout and
stderr. Light to import: the parser reads LAKES_KEY from here."""

from __future__ import annotations

import contextlib
import json
import sys
from collections.abc import Callable, Iterable, Iterator, Sequence
from typing import TYPE_CHECKING, Any

from deltakeeper.runtime import credentials
from deltakeeper.units import format_bytes, format_ms

if TYPE_CHECKING:
    import pyarrow as pa

    from deltakeeper.delta.checkpoint import CheckpointResult
    from deltakeeper.delta.crc import CrcResult
    from deltakeeper.delta.discover import Scan
    from deltakeeper.delta.snapshot import SnapshotHeader
    from deltakeeper.delta.storage import FileInfo
    from deltakeeper.maintenance.compaction_plan import CompactionPlan
    from deltakeeper.maintenance.operations.outcome import Report

# `status --json`: the key of the DeltaLakes' statuses, beside the tables' NAMESPACE/NAME keys
LAKES_KEY = "lakes"


@contextlib.contextmanager
def masked(argv: Sequence[str]) -> Iterator[None]:
    """While the command runs, every value on its command line that may be a credential is
    masked in stdout, stderr and logs."""
    register_secrets(argv)
    credentials.install_log_scrubbing()
    stdout, stderr = sys.stdout, sys.stderr
    sys.stdout = credentials.ScrubbingStream(stdout)
    sys.stderr = credentials.ScrubbingStream(stderr)
    try:
        yield
    finally:
        sys.stdout, sys.stderr = stdout, stderr


def register_secrets(argv: Sequence[str]) -> None:
    """Storage option values, and the user:password part and the query of a URI, are masked
    from now on."""
    words = list(argv)
    values: set[str] = set()
    for i, word in enumerate(words):
        if word.startswith("--storage-option"):
            pair = word.partition("=")[2] if "=" in word else (words[i + 1 : i + 2] or [""])[0]
            values |= credentials.option_secrets(pair)
        elif "@" in word or "?" in word:
            values |= credentials.uri_secrets(word)
    credentials.SCRUBBER.register(values)


def print_json(value: Any, indent: int | None = None, sort_keys: bool = False) -> None:
    print(json.dumps(value, indent=indent, sort_keys=sort_keys))


def lines(text: Iterable[str]) -> None:
    print("\n".join(text))


def fail(as_json: bool, error: str, message: str, code: int) -> int:
    """Report an error on stderr, and as one JSON object on stdout when --json asked for JSON."""
    print(f"deltakeeper: error: {message}", file=sys.stderr)
    if as_json:
        print_json({"error": error, "message": message, "exitCode": code})
    return code


def warn(message: str) -> None:
    print(f"deltakeeper: warning: {message}", file=sys.stderr)


def warn_damage(snap: SnapshotHeader) -> None:
    note = snap.damage_note()
    if note:
        warn(note)


def progress(operation: str, done: int, total: int) -> None:
    print(f"{operation}: deleted {done}/{total} files", file=sys.stderr, flush=True)


def step_progress(operation: str, what: str, every: int = 1000) -> Callable[[int, int], None]:
    """A progress callback for long work: a line on stderr every `every` items and at the end."""

    def show(done: int, total: int) -> None:
        if done % every == 0 or done == total:
            print(f"{operation}: {done}/{total} {what}", file=sys.stderr, flush=True)

    return show


def stats_computed(run: Any, dry_run: bool) -> None:
    """compute-stats: what was found, what was (or would be) committed, what waits."""
    verb = "would give" if dry_run else "gave"
    print(
        f"version {run.version}: {run.missing} of {run.files} files lack statistics; "
        f"{verb} {run.given} statistics"
        + (f" in commits {', '.join(map(str, run.commits))}" if run.commits else "")
    )
    if run.deletion_vectors:
        print(f"{run.deletion_vectors} files with deletion vectors left alone")
    if run.deferred:
        print(
            f"{run.deferred} files wait for a later run: reading their columns would pass "
            "--max-read-bytes"
        )
    if run.dropped:
        print(f"{run.dropped} files were removed by a concurrent commit and left out")
    for path, error in run.unreadable:
        warn(f"{path}: not read: {error}")


def health_line(h: dict[str, Any]) -> str:
    """`83 (healthy), worst smallFiles 52` from a health's status or JSON form."""
    line = f"{h['score']} ({h['band']})"
    if h.get("worst"):
        worst = h["components"][h["worst"]]
        line += f", worst {h['worst']} {worst['score'] if isinstance(worst, dict) else worst}"
    return line


def table_summary(r: dict[str, Any]) -> None:
    """`inspect`: the summary as aligned rows, and a warning for features this build lacks."""
    p = r["protocol"]
    features = sorted(set(p["readerFeatures"] or []) | set(p["writerFeatures"] or []))
    flagged = [f + (" (unsupported)" if f in r["unsupportedFeatures"] else "") for f in features]
    cp = r["lastCheckpointVersion"]
    rows = [
        ("table", r["uri"]),
        ("version", f"{r['version']}  committed {format_ms(r['timestamp'])}{_published(r)}"),
        ("protocol", f"reader {p['minReaderVersion']}, writer {p['minWriterVersion']}"),
        ("features", ", ".join(flagged) or "-"),
        ("table id", r["tableId"]),
        ("partitioned by", ", ".join(r["partitionColumns"]) or "-"),
        ("live files", f"{r['numFiles']}  ({format_bytes(r['sizeBytes'])})"),
        ("small files", f"{r['smallFiles']}  (< {format_bytes(r['smallFileThreshold'])})"),
        ("tombstones", str(r["numTombstones"])),
        ("transactions", str(r["numTxns"])),
        (
            "last checkpoint",
            "none" if cp is None else f"{cp}  ({r['commitsSinceCheckpoint']} commits since)",
        ),
        ("_last_checkpoint", r["lastCheckpointFile"]),
        ("log", f"{r['logFiles']} files, {format_bytes(r['logBytes'])}"),
    ]
    if r.get("health"):
        rows.append(("health", health_line(r["health"])))
    if r["unpublishedCommits"] or r["catalogManaged"]:
        rows.append(("unpublished", f"{r['unpublishedCommits']} staged commits newer (not read)"))
    for key, value in sorted(r["configuration"].items()):
        rows.append((f"  {key}", value))
    if r["configuration"]:
        rows.insert(len(rows) - len(r["configuration"]), ("configuration", ""))
    width = max(len(k) for k, _ in rows)
    for key, value in rows:
        print(f"{key:<{width}}  {value}")
    if r["unsupportedFeatures"]:
        print(
            f"\nwarning: this build does not support {', '.join(r['unsupportedFeatures'])}; "
            "maintenance will refuse to write to this table",
            file=sys.stderr,
        )


def _published(r: dict[str, Any]) -> str:
    """A catalog-managed table's version is the newest published one: its catalog may be ahead."""
    if not r["catalogManaged"]:
        return ""
    return (
        f"  (newest published; catalog-managed ({r['catalogManaged']}): the catalog may be ahead)"
    )


def files(live: pa.Table, as_json: bool) -> None:
    """`files`: one line a live file, tab-separated or one JSON object."""
    out = sys.stdout
    for batch in live.to_batches(max_chunksize=10_000):
        for row in batch.to_pylist():
            if as_json:
                dv = row.get("deletionVector")
                line = {
                    "path": row["path"],
                    "size": row["size"],
                    "partitionValues": _partition_values(row["partitionValues"]),
                    "deletionVector": {k: v for k, v in dv.items() if v is not None}
                    if dv
                    else None,
                }
                out.write(json.dumps(line) + "\n")
            else:
                out.write(f"{row['path']}\t{row['size']}\n")


def _partition_values(pairs: list[tuple[str, str | None]] | None) -> dict[str, str | None]:
    # The protocol writes a null partition value as "" as often as null; both mean null.
    return {k: None if v == "" else v for k, v in pairs or []}


def discovered(uri: str, scan: Scan) -> None:
    """`discover`: the tables on stdout, what the scan cost on stderr."""
    for path in scan.tables:
        print(path)
    print(
        f"{len(scan.tables)} tables under {uri} ({scan.excluded} left out by patterns, "
        f"{len(scan.empty_logs)} _delta_log folders without commits); {scan.requests} "
        f"requests in {scan.seconds:.2f}s",
        file=sys.stderr,
    )


def checkpoint_written(result: CheckpointResult, checksum: CrcResult | None, dry_run: bool) -> None:
    verb = "would write" if dry_run else "wrote"
    print(
        f"{verb} {result.key}: {result.adds} files, {result.tombstones} tombstones "
        f"({result.expired_tombstones} expired), {format_bytes(result.size_bytes)}"
    )
    if len(result.keys) > 1:
        print(f"{result.layout}: {len(result.keys)} files")
    if not dry_run and not result.last_checkpoint_moved:
        print("_last_checkpoint already points at a newer checkpoint; left as it is")
    if checksum is not None:
        print(f"{checksum.key}: {'already there, left as it is' if checksum.existed else verb}")


def deleted_files(delete: Sequence[FileInfo], size: int, deleted: int, dry_run: bool) -> None:
    """`cleanup` and `vacuum`: what was deleted, or for a dry run each file and its size."""
    if delete and dry_run:
        print("dry run: nothing deleted; would delete:")
        print("\n".join(f"  {f.key}\t{f.size}" for f in delete))
    elif delete:
        print(f"deleted {deleted} files ({format_bytes(size)})")


def removed_folders(folders: Sequence[str], removed: int, dry_run: bool) -> None:
    if folders and dry_run:
        print("would remove empty folders:")
        print("\n".join(f"  {key}" for key in folders))
    elif folders:
        print(f"removed {removed} empty folders")


def maintained(report: Report, dry_run: bool) -> None:
    print("dry run, nothing changed:" if dry_run else "done:")
    lines(report.lines())


def compaction_plan(uri: str, version: int, found: CompactionPlan, steps: list[str]) -> None:
    """`compact`: why each partition is compacted, then the steps before the job (a due
    checkpoint)."""
    print(f"{uri} at version {version}: {found.reason()}")
    for p in found.partitions:
        print(f"  {p.values or '(whole table)'}: {p.why} {p.files} files -> {p.expected_files}")
    for line in steps:
        print(line)


def job_line(result: dict[str, Any]) -> None:
    if result.get("result") == "failed":
        print(f"job failed: {result.get('error')}: {result.get('message')}")
        return
    print(
        f"job {result.get('result')}: {result.get('filesRemoved', 0)} files "
        f"({format_bytes(int(result.get('bytesRemoved', 0)))}) rewritten as "
        f"{result.get('filesAdded', 0)} ({format_bytes(int(result.get('bytesAdded', 0)))})"
    )
