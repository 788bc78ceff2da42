"""`deltakeeper run` keeps what Spark gives its own tables on a table written without it: the
statistics (`stats.enabled`), log compaction files (`logCompaction.interval`) and symlink
manifests (the table's `delta.compatibility.symlinkFormatManifest.enabled`), each after the
table moves on, each recorded in the status."""

from __future__ import annotations

import json
import signal
import subprocess
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq

from deltakeeper.delta.table import open_table
from tests.integration.test_standalone import DELTAKEEPER, _manifest, _scrape, _statuses, _until
from tests.support.logbuilder import LogBuilder, add, commit_info, metadata, protocol
from tests.support.stores import free_port

MANIFESTS = "delta.compatibility.symlinkFormatManifest.enabled"


def data_file(root: Path, n: int) -> dict[str, Any]:
    name = f"f{n}.parquet"
    pq.write_table(pa.table({"id": pa.array([n], pa.int64()), "day": [f"d{n}"]}), root / name)
    return add(name, size=(root / name).stat().st_size)


def stats_of(root: Path) -> dict[str, Any]:
    snap = open_table(str(root)).snapshot(add_cols=("path", "stats"))
    return {r["path"]: r["stats"] for r in snap.files.to_pylist()}


def written(port: int, operation: str) -> float:
    """deltakeeper_written_files_total for table t and a writer operation (0 while absent)."""
    series = (
        f'deltakeeper_written_files_total{{namespace="lake",table="t",operation="{operation}"}}'
    )
    for line in _scrape(port).splitlines():
        if line.startswith(series + " "):
            return float(line.split()[-1])
    return 0.0


def test_run_gives_statistics_compaction_files_and_manifests(tmp_path: Path) -> None:
    root = tmp_path / "t"
    root.mkdir()
    log = LogBuilder(root)
    log.commit(commit_info(), protocol(), metadata(**{MANIFESTS: "true"}), data_file(root, 0))
    folder = tmp_path / "manifests"
    folder.mkdir()
    spec = {"stats": {"enabled": True}, "logCompaction": {"interval": 2}}
    (folder / "t.json").write_text(_manifest("t", root, **spec))

    def done(op: str) -> dict[str, Any]:
        entry = _statuses(folder).get("lake/t", {}).get("lastMaintenance", {}).get(op, {})
        return entry if entry.get("result") == "done" else {}

    port = free_port()
    argv = [str(DELTAKEEPER), "run", "--manifests", str(folder), "--metrics-port", str(port)]
    proc = subprocess.Popen(argv, stderr=subprocess.PIPE)
    try:
        _until(lambda: done("stats"), 60, "statistics")
        _until(lambda: done("logCompaction"), 60, "a log compaction file")
        _until(lambda: done("manifest"), 60, "manifests")
        assert [done(op)["writtenFiles"] for op in ("stats", "logCompaction", "manifest")] == [
            1,
            1,
            1,
        ]
        log.next_version = 2
        log.commit(commit_info(), data_file(root, 1))  # version 2: a writer without stats
        _until(lambda: all(stats_of(root).values()) and len(stats_of(root)) == 2, 60, "stats")
        _until(
            lambda: (root / "_symlink_format_manifest/manifest").read_text().count("\n") == 2,
            60,
            "the manifest of two files",
        )
        _until(lambda: written(port, "stats") == 2.0, 60, "the statistics counted")
        # The second run read only the commits after the first left every file with stats.
        _until(lambda: "3..3" in done("stats").get("message", ""), 60, "stats at 3")
        assert (
            done("stats")["message"]
            == "gave 1 of the 1 files added since 1 statistics in versions 3..3"
        )
        # One compaction file a pair of commits (0-1, then 2-3 once stats commit 3); one
        # manifest a poll that changed it (the first, and each after a commit).
        assert written(port, "logCompaction") >= 1.0
        assert written(port, "manifest") >= 2.0
    finally:
        proc.send_signal(signal.SIGINT)
        _, err = proc.communicate(timeout=60)
    assert proc.returncode == 0, err.decode()
    stats = {p: json.loads(s) for p, s in stats_of(root).items()}
    assert stats["f1.parquet"]["minValues"] == {"id": 1, "day": "d1"}
    compacted = sorted(p.name for p in (root / "_delta_log").glob("*.compacted.json"))
    assert compacted[0] == f"{0:020d}.{1:020d}.compacted.json"
    lines = (root / "_symlink_format_manifest/manifest").read_text().splitlines()
    assert lines == [f"file:{root}/f0.parquet", f"file:{root}/f1.parquet"]
