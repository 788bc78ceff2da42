"""Crash safety (ARCHITECTURE.md, promise 5): SIGKILL a maintenance command at every storage
mutation.

For each operation and table: run the command once to the end to learn its steps (every
overwrite, create and per-key delete, see tests/support/faults.py), then, for every step k and
for a kill before it, after it and (local disk) in the middle of its temp-file write, start from
a fresh copy, kill the command there, and check that

- the kill landed where it was asked (the table differs from the previous kill point exactly by
  step k), so a hook that killed nothing or the wrong thing fails here;
- deltakeeper, delta-rs, DuckDB and Delta Spark read the latest version exactly as before the
  command: same version, live files and rows (a command that commits, compute-stats, may have
  moved the version: the files and rows are the same), and no version that the finished
  command keeps became unreadable;
- deltakeeper's next run of the same command exits 0, leaves exactly what an uninterrupted run
  leaves (leftover temp files aside; a commit compared without its commitInfo, which says
  when it was written), and the readers still agree.

Identical crash states (a kill after step k is a kill before step k + 1) are read once. Delta
Spark reads every distinct crashed state of a scenario and the finished table, in one session at
the end; a state after a rerun is checked byte for byte against the finished table instead.

Adding an operation is one entry in OPERATIONS.
"""

from __future__ import annotations

import contextlib
import hashlib
import io
import json
import os
import re
import shutil
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from urllib.parse import unquote, urlparse

import pytest

from deltakeeper.cli import main
from deltakeeper.delta import paths
from deltakeeper.delta.checkpoint import load_for_checkpoint, write_checkpoint
from deltakeeper.delta.errors import DeltaError
from deltakeeper.delta.table import open_table
from tests.conftest import CORPUS
from tests.support import faults
from tests.support.compare import check_against_oracles, ours
from tests.support.oracles import decoded, deltars_rows, duckdb_rows, table_versions

pytestmark = pytest.mark.integration

DAY = 86_400_000
HOUR = 3_600_000
BASE = 1_600_041_600_000  # midnight UTC, 2020-09-14: version v is committed on day v
NOW = BASE + 10_000 * DAY
TMP = re.compile(r"^(.*/)?\.(.+)\.[0-9a-f]{32}\.tmp$")  # LocalStorage's temp files


# -- operations -------------------------------------------------------------------------------


def one_commit_a_day(path: Path) -> None:
    """Give a copied table the file times of a real history: version v committed on day v."""
    for f in (path / "_delta_log").iterdir():
        name = paths.parse(f.name)
        if name is not None and name.version >= 0:
            ns = (BASE + name.version * DAY) * 1_000_000
            os.utime(f, ns=(ns, ns))


def our_checkpoint(path: Path, version: int) -> None:
    table = open_table(str(path))
    write_checkpoint(table, load_for_checkpoint(table, version), NOW, 10_000 * DAY)


# table -> (a checkpoint to add first or None, the commit that the log cut-off lands on)
CUTS = {
    "cdf-table": (2, 3),
    "table-with-dv-small": (1, 1),
    "checkpoint-cdf-table": (4, 5),
    "simple_table_with_checkpoint": (4, 5),
    "dv": (4, 6),
    "partitioned_many_commits": (3, 5),
}


def log_cut(path: Path, name: str) -> list[str]:
    """A checkpoint before the cut-off, one commit a day, and a log retention that makes the
    cutOffTimestamp midnight of day `cut`, so the cutoffCommit is `cut`."""
    extra, cut = CUTS[name]
    if extra is not None:
        our_checkpoint(path, extra)
    one_commit_a_day(path)
    return ["--log-retention", f"{(NOW - BASE) // DAY - cut}d"]


def prepare_checkpoint(path: Path, name: str) -> list[str]:
    return ["--now", str(NOW)]


def prepare_checkpoint_again(path: Path, name: str) -> list[str]:
    """Rewrite the newest checkpoint the table already has (Spark's, with its `.crc`)."""
    names = (paths.parse(p.name) for p in (path / "_delta_log").iterdir())
    newest = max(n.version for n in names if n is not None and n.kind is paths.Kind.CHECKPOINT)
    return ["--now", str(NOW), "--version", str(newest)]


def prepare_cleanup(path: Path, name: str) -> list[str]:
    return ["--now", str(NOW), *log_cut(path, name)]


def prepare_vacuum(path: Path, name: str) -> list[str]:
    # every tombstone is older than a week at NOW: each unreferenced data and DV file goes
    return ["--now", str(NOW), "--deleted-file-retention", "7d", "--mode", "full"]


def prepare_vacuum_lite(path: Path, name: str) -> list[str]:
    # every remove's file and DV file goes, then _last_vacuum_info records the newest commit
    return ["--now", str(NOW), "--deleted-file-retention", "7d", "--mode", "lite"]


def prepare_maintain(path: Path, name: str) -> list[str]:
    # all three due: a checkpoint at every commit, the log cut as for cleanup, and vacuum (auto:
    # LITE, or FULL once a killed run's cleanup has taken commit 0 before LITE recorded an N)
    cut = log_cut(path, name)
    return ["--now", str(NOW), "--deleted-file-retention", "7d", *cut, "--checkpoint-interval", "1"]


def prepare_compute_stats(path: Path, name: str) -> list[str]:
    """Strip every add's statistics (a writer that kept none); three commits of re-adds."""
    for f in (path / "_delta_log").glob("*.json"):
        lines = [json.loads(line) for line in f.read_text().splitlines()]
        for a in lines:
            a.get("add", {}).pop("stats", None)
        f.write_text("".join(json.dumps(a) + "\n" for a in lines))
        (f.parent / f".{f.name}.crc").unlink(missing_ok=True)  # Hadoop's checksum of the old
    return ["--batch-size", "4"]


@dataclass(frozen=True)
class Operation:
    name: str  # the CLI command
    prepare: Callable[[Path, str], list[str]]  # give the command work; returns its flags
    # It commits versions of its own: a crashed state may hold some of them, and reads the
    # same files and rows at any of them.
    commits: bool = False


OPERATIONS = {
    "checkpoint": Operation("checkpoint", prepare_checkpoint),
    "checkpoint-again": Operation("checkpoint", prepare_checkpoint_again),
    "cleanup": Operation("cleanup", prepare_cleanup),
    "vacuum": Operation("vacuum", prepare_vacuum),
    "vacuum-lite": Operation("vacuum", prepare_vacuum_lite),
    "maintain": Operation("maintain", prepare_maintain),
    "compute-stats": Operation("compute-stats", prepare_compute_stats, commits=True),
}

CORPUS_TABLES = (
    "cdf-table",  # partitioned by birthday, 4 commits, no checkpoint
    "table-with-dv-small",  # deletion vectors
    "checkpoint-cdf-table",  # partitioned, log starts at a checkpoint written by Spark
    "simple_table_with_checkpoint",  # delta-rs checkpoint at the latest version
)
SPARK_TABLES = ("dv", "partitioned_many_commits")
SCENARIOS = [
    # cdf-table's checkpoint would repeat checkpoint-cdf-table's (partitioned, no DVs)
    *(("checkpoint", t) for t in CORPUS_TABLES + SPARK_TABLES if t != "cdf-table"),
    *(("cleanup", t) for t in CORPUS_TABLES + SPARK_TABLES),
    ("checkpoint-again", "partitioned_many_commits"),  # over Spark's checkpoint 30
    ("vacuum", "column_mapping"),  # FULL: partition folders named by column mapping, 9 files
    ("vacuum-lite", "dv"),  # LITE: removed files and deletion-vector files, _last_vacuum_info
    ("vacuum-lite", "cdf-table"),  # LITE: change data files in partition folders
    ("maintain", "dv"),  # checkpoint, log cleanup and vacuum in one run
    ("compute-stats", "cdf-table"),  # 9 live files given statistics by 3 commits (the writer)
]


# -- what a table holds, and what changed -----------------------------------------------------


def fingerprint(path: Path) -> dict[str, tuple[int, str]]:
    """Every file below the table: relative key -> (size, sha1); temp files by their target."""
    out = {}
    for f in sorted(path.rglob("*")):
        if f.is_file():
            key = f.relative_to(path).as_posix()
            if m := TMP.match(key):
                key = f"{m[1] or ''}.{m[2]}.*.tmp"
            assert key not in out, f"two temp files for one target: {key}"
            out[key] = (f.stat().st_size, hashlib.sha1(_content(key, f)).hexdigest())
    return out


def _content(key: str, f: Path) -> bytes:
    """A file's bytes; a commit's without its commitInfo, which says when and by which
    transaction it was written, and so differs between two runs that commit the same."""
    data = f.read_bytes()
    name = paths.parse(key.rpartition("/")[2])
    if key.startswith("_delta_log/") and name is not None and name.kind is paths.Kind.COMMIT:
        return b"\n".join(line for line in data.split(b"\n") if b'"commitInfo"' not in line)
    return data


def changed(a: dict, b: dict) -> set[str]:
    return {k for k in a.keys() | b.keys() if a.get(k) != b.get(k)}


def without_temp(fp: dict) -> dict:
    return {k: v for k, v in fp.items() if not k.endswith(".*.tmp")}


def temp_key(key: str) -> str:
    folder, _, base = key.rpartition("/")
    return f"{folder}/.{base}.*.tmp" if folder else f".{base}.*.tmp"


def hadoop_checksum(key: str) -> str:
    folder, _, base = key.rpartition("/")
    return f"{folder}/.{base}.crc" if folder else f".{base}.crc"


def check_kill_point(prev: dict, fp: dict, step: faults.Step, when: str) -> None:
    """The kill landed exactly at `step`: `prev` is the table as the previous step left it."""
    where = f"step {step.n} {step.op} {step.key} ({when})"
    if when == "before":
        assert fp == prev, f"{where}: the table changed before the step: {changed(prev, fp)}"
    elif when == "torn":
        assert changed(prev, fp) == {temp_key(step.key)}, f"{where}: {changed(prev, fp)}"
        assert fp[temp_key(step.key)][0] == step.size // 2, where
    elif step.is_write:  # a replaced file loses the checksum Spark kept of the old one
        assert changed(prev, fp) <= {step.key, hadoop_checksum(step.key)}, where
        assert fp[step.key][0] == step.size and hadoop_checksum(step.key) not in fp, where
    else:
        assert changed(prev, fp) == {step.key} and step.key not in fp, where


def read_latest(path: Path, tally) -> dict:
    """Latest version, live files and rows as deltakeeper, delta-rs and DuckDB read them."""
    mine = ours(path, None)
    assert not isinstance(mine, DeltaError), mine
    assert check_against_oracles(mine, path, None, tally) == ["delta-rs", "duckdb"]
    rows = deltars_rows(str(path)), duckdb_rows(str(path))
    assert isinstance(rows[0], int) and rows[0] == rows[1], rows
    return {"version": mine["version"], "files": mine["files"], "rows": rows[0]}


def spark_latest(spark, path: Path) -> dict:
    df = spark.read.format("delta").load(str(path))
    root = path.resolve()
    files = {str(Path(unquote(urlparse(u).path)).relative_to(root)) for u in df.inputFiles()}
    return {"files": files, "rows": df.count()}


# -- one scenario: an operation on a table, killed at every step ------------------------------


@dataclass
class Scenario:
    op: Operation
    prepared: Path  # the table, ready for the command; never run on
    flags: list[str]
    work: Path
    tally: object
    baseline: dict = field(default_factory=dict)
    final: dict = field(default_factory=dict)  # fingerprint after an uninterrupted run
    kept_versions: set[int] = field(default_factory=set)
    final_version: int = 0  # the latest after an uninterrupted run
    added_versions: set[int] = field(default_factory=set)  # what an uninterrupted run commits
    read: dict = field(default_factory=dict)  # fingerprint -> checked already
    for_spark: list[Path] = field(default_factory=list)
    diverged: dict = field(default_factory=dict)  # kill point -> what its rerun left different

    def argv(self, path: Path | str) -> list[str]:
        return [self.op.name, str(path), *self.flags]

    def fresh(self, label: str) -> Path:
        dest = self.work / label
        shutil.copytree(self.prepared, dest)
        return dest

    def check_state(self, path: Path, label: str, spark: bool = True) -> None:
        """The table at `path` reads as before the command, unless this state was read already.

        `spark`: keep a copy for Delta Spark too (crashed states; a rerun state is the finished
        table byte for byte plus the temp files a torn state already showed Spark)."""
        fp = fingerprint(path)
        key = frozenset(fp.items())
        if key in self.read:
            return
        got = read_latest(path, self.tally)
        if self.op.commits:  # the files and rows as before, at the version before or after
            versions = range(self.baseline["version"], self.final_version + 1)
            assert got["version"] in versions, f"{label}: version {got['version']}"
            got["version"] = self.baseline["version"]
        assert got == self.baseline, label
        # (a command that commits keeps the versions before it; a crash may precede its own)
        lost = self.kept_versions - self.added_versions - set(table_versions(str(path)))
        assert not lost, f"{label}: versions the finished command keeps are unreadable: {lost}"
        self.read[key] = label
        if spark:
            self.for_spark.append(self.keep_copy(path, label))

    def keep_copy(self, path: Path, label: str) -> Path:
        dest = self.work / "for-spark" / label
        shutil.copytree(path, dest)
        return dest

    def rerun(self, path: Path, label: str) -> None:
        with contextlib.redirect_stdout(io.StringIO()):
            code = main([*self.argv(path), "--json"])
        assert code == 0, f"{label}: the next run exited {code}"
        # still read by the oracles when it differs, so every kill point is checked before failing
        if diff := changed(without_temp(fingerprint(path)), self.final):
            self.diverged[label] = sorted(diff)
        self.check_state(path, f"{label}, then rerun", spark=False)


def modes(step: faults.Step) -> tuple[str, ...]:
    return ("before", "after", "torn") if step.is_write else ("before", "after")


def run_scenario(op: Operation, src: Path, name: str, tmp_path: Path, tally) -> Scenario:
    prepared = tmp_path / "prepared"
    shutil.copytree(src, prepared)
    for p in prepared.rglob("*"):
        p.chmod(0o755 if p.is_dir() else 0o644)
    s = Scenario(op, prepared, op.prepare(prepared, name), tmp_path, tally)
    s.baseline = read_latest(prepared, tally)

    full = s.fresh("uninterrupted")
    steps = faults.count_steps(s.argv(full))
    assert steps, f"{op.name} on {name} does nothing: the scenario would test nothing"
    s.final = fingerprint(full)
    s.kept_versions = set(table_versions(str(full)))
    s.final_version = max(s.kept_versions)
    s.added_versions = set(range(s.baseline["version"] + 1, s.final_version + 1))
    s.check_state(full, "uninterrupted")

    prev = fingerprint(prepared)
    for step in steps:
        after = None
        for when in modes(step):
            label = f"{step.n}-{when}"
            path = s.fresh(label)
            faults.crash(s.argv(path), step.n, when)
            fp = fingerprint(path)
            check_kill_point(prev, fp, step, when)
            after = fp if when == "after" else after
            s.check_state(path, label)
            s.rerun(path, label)
            tally[f"{op.name} crash points checked"] += 1
        prev = after
    assert prev == s.final, "killing after the last step must leave the finished table"
    return s


def check_reruns_finished(s: Scenario) -> None:
    assert not s.diverged, (
        f"after these kills the next {s.op.name} left files different from an uninterrupted "
        f"run: {s.diverged}"
    )


def check_with_spark(s: Scenario) -> None:
    from tests.support.spark import spark_session

    spark = spark_session("deltakeeper-crash")
    want = {"files": set(decoded(s.baseline["files"])), "rows": s.baseline["rows"]}
    for path in s.for_spark:
        assert spark_latest(spark, path) == want, f"Delta Spark: {path.name}"
        s.tally["crash states read by Delta Spark"] += 1


def table_source(name: str) -> Path:
    from tests.support.spark import TABLES, ensure_tables

    return Path(ensure_tables()[name]) if name in TABLES else CORPUS / name


@pytest.mark.spark
@pytest.mark.parametrize(("operation", "name"), SCENARIOS)
def test_killed_at_every_step_the_table_stays_readable(operation, name, tmp_path, tally):
    """Slow: a deltakeeper process killed at each kill point (two or three a storage step: a
    vacuum deletes key by key), each crashed state read by four readers, then rerun."""
    s = run_scenario(OPERATIONS[operation], table_source(name), name, tmp_path, tally)
    check_with_spark(s)
    check_reruns_finished(s)


# -- the same on MinIO: a PUT is atomic, a batch delete may stop part-way -----------------------


@pytest.mark.spark
def test_checkpoint_killed_on_minio(minio, tmp_path, tally):
    name = "cdf-table"
    prepared = tmp_path / "prepared"
    shutil.copytree(CORPUS / name, prepared)
    flags = prepare_checkpoint(prepared, name)
    baseline = read_latest(prepared, tally)
    options = [f"--storage-option={k}={v}" for k, v in minio.storage_options.items()]

    def upload() -> str:
        uri = minio.uri(f"crash-{uuid.uuid4().hex[:8]}/{name}")
        minio.upload_folder(prepared, uri)
        return uri

    def download(uri: str, label: str) -> Path:
        dest = tmp_path / label
        minio.fs.get(uri.split("://", 1)[1] + "/", str(dest) + "/", recursive=True)
        return dest

    full = upload()
    steps = faults.count_steps(["checkpoint", full, *flags, *options])
    assert [s.op for s in steps] == ["overwrite", "overwrite"]
    final = fingerprint(download(full, "uninterrupted"))
    prev = fingerprint(prepared)
    spark_paths = []
    for step in steps:
        for when in ("before", "after"):
            label = f"{step.n}-{when}"
            uri = upload()
            faults.crash(["checkpoint", uri, *flags, *options], step.n, when)
            crashed = download(uri, label)
            fp = fingerprint(crashed)
            check_kill_point(prev, fp, step, when)
            assert read_latest(crashed, tally) == baseline, label
            spark_paths.append(crashed)
            with contextlib.redirect_stdout(io.StringIO()):
                assert main(["checkpoint", uri, *flags, *options]) == 0, label
            rerun = download(uri, f"{label}-rerun")
            assert fingerprint(rerun) == final, label
            assert read_latest(rerun, tally) == baseline, label
            prev = fp if when == "after" else prev
            tally["checkpoint crash points checked on MinIO"] += 1
    s = Scenario(OPERATIONS["checkpoint"], prepared, flags, tmp_path, tally, baseline=baseline)
    s.for_spark = spark_paths
    check_with_spark(s)


# -- a crash between the checkpoint and _last_checkpoint ----------------------------------------


def test_maintain_moves_the_hint_a_killed_checkpoint_left_behind(tmp_path, capsys):
    """Killed after writing checkpoint N but before moving `_last_checkpoint`: the checkpoint
    is complete and listed, so the next `maintain` sees 0 commits since it and writes nothing;
    `_last_checkpoint` must still end up at N, as an uninterrupted run leaves it (else it stays
    behind, and once cleanup deletes the checkpoint it names, it names a missing file)."""
    path = tmp_path / "t"
    shutil.copytree(CORPUS / "cdf-table", path)
    our_checkpoint(path, 1)
    argv = ["maintain", str(path), "--now", str(NOW), "--checkpoint-interval", "1"]
    steps = faults.count_steps([*argv, "--only", "checkpoint", "--dry-run"])
    assert steps == []  # a dry run writes nothing
    steps = faults.crash([*argv, "--only", "checkpoint"], 1, "after")
    assert steps[0].key == f"_delta_log/{paths.checkpoint(3)}"
    hint = path / "_delta_log" / paths.LAST_CHECKPOINT
    assert json.loads(hint.read_bytes())["version"] == 1
    assert main([*argv, "--json"]) == 0
    capsys.readouterr()
    assert json.loads(hint.read_bytes())["version"] == 3, "_last_checkpoint was left behind"


# -- the hook itself ----------------------------------------------------------------------------


def test_the_fault_hook_kills_exactly_where_asked(tmp_path):
    """Without Spark or oracles: each kill point leaves what it claims, and a kill point the
    command never reaches is an error, not a silent pass."""
    from tests.support.logbuilder import LogBuilder, add, metadata, protocol

    src = tmp_path / "src"
    b = LogBuilder(src)
    b.commit(protocol(), metadata(), add("a"))
    for i in range(4):
        b.commit(add(f"f{i}"))
    our_checkpoint(src, 2)
    one_commit_a_day(src)
    flags = ["--now", str(NOW), "--log-retention", f"{(NOW - BASE) // DAY - 3}d"]

    def copy(label: str) -> Path:
        return Path(shutil.copytree(src, tmp_path / label))

    steps = faults.count_steps(["cleanup", str(copy("count")), *flags])
    assert [s.key.rsplit("/", 1)[1] for s in steps] == [paths.commit(0), paths.commit(1)]
    logs = {}
    for k, when in ((1, "before"), (1, "after"), (2, "after")):
        path = copy(f"{k}-{when}")
        faults.crash(["cleanup", str(path), *flags], k, when)
        logs[k, when] = len(list((path / "_delta_log").iterdir()))
    assert logs[1, "before"] - 1 == logs[1, "after"] == logs[2, "after"] + 1

    path = copy("torn")
    faults.crash(["checkpoint", str(path), "--now", str(NOW)], 1, "torn")
    temps = [p for p in (path / "_delta_log").iterdir() if TMP.match(p.name)]
    assert len(temps) == 1 and not (path / "_delta_log" / paths.checkpoint(4)).exists()

    with pytest.raises(faults.FaultError, match="expected death by SIGKILL"):
        faults.crash(["cleanup", str(copy("beyond")), *flags], 3, "before")
