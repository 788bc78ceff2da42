"""delta/vacuum/plan.py: which data files vacuum deletes (never a referenced or young one), and
refusals.

Deletion-vector paths, hidden paths, the CLI's refusals and exit codes, and a property test over
random histories written as real logs on the local disk."""

from __future__ import annotations

import json
import os
import tempfile
import uuid
from pathlib import Path
from typing import Any
from urllib.parse import quote

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from deltakeeper.cli import main
from deltakeeper.delta.errors import InvalidInputError, Stopped, UnsupportedProtocolError
from deltakeeper.delta.storage import FileInfo
from deltakeeper.delta.table import open_table
from deltakeeper.delta.vacuum import plan as vacuum
from deltakeeper.delta.vacuum.modes import Mode
from deltakeeper.delta.vacuum.plan import (
    Root,
    dv_keys,
    dv_relative_path,
    execute_vacuum,
    hidden_key,
    keys_for,
    load_for_vacuum,
    plan_table_vacuum,
    plan_vacuum,
    z85_decode,
)
from deltakeeper.maintenance import policy
from tests.support.logbuilder import LogBuilder, add, metadata, protocol, remove

DAY = 86_400_000
NOW = 1_800_000_000_000
WEEK = 7 * DAY
CUTOFF = NOW - WEEK
OLD = CUTOFF - DAY

# Deletion vectors of the Spark-written `dv` table (tests/support/spark.py) and the files it has.
SPARK_DVS = {
    "5:xvW[bM1GNK@S<(QTYn": "deletion_vector_11ea0093-f000-489b-9a2d-74b7eb484c41.bin",
    "60X6G]pebcK<f8?z<hvD": "deletion_vector_12b19f71-f39c-41e4-91cd-93a96f942003.bin",
}


def z85_encode(data: bytes) -> str:
    out = []
    for i in range(0, len(data), 4):
        value = int.from_bytes(data[i : i + 4], "big")
        chars = []
        for _ in range(5):
            value, digit = divmod(value, 85)
            chars.append(vacuum.Z85_ALPHABET[digit])
        out.append("".join(reversed(chars)))
    return "".join(out)


def u_dv(file_uuid: uuid.UUID, prefix: str = "") -> dict[str, Any]:
    text = prefix + z85_encode(file_uuid.bytes)
    return {
        "storageType": "u",
        "pathOrInlineDv": text,
        "offset": 1,
        "sizeInBytes": 10,
        "cardinality": 1,
    }


def touch(root: Path, key: str, mtime_ms: int = OLD, data: bytes = b"x") -> Path:
    path = root / key
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(data)
    os.utime(path, ns=(mtime_ms * 1_000_000, mtime_ms * 1_000_000))
    return path


def plan(root: Path, now: int = NOW, retention: int = WEEK, allow: bool = False):
    table = open_table(str(root))
    return plan_table_vacuum(table, load_for_vacuum(table), retention, now, allow)


def doomed(root: Path, **kw: Any) -> list[str]:
    return [f.key for f in plan(root, **kw).delete]


def files_under(root: Path) -> set[str]:
    return {str(p.relative_to(root)) for p in root.rglob("*") if p.is_file()}


# -- Z85 and deletion-vector paths ------------------------------------------------------------
def test_z85_decodes_the_zeromq_test_vector():
    assert z85_decode("HelloWorld") == bytes([0x86, 0x4F, 0xD2, 0x6F, 0xB5, 0x59, 0xF7, 0x5B])
    assert z85_decode("") == b""


@pytest.mark.parametrize("text", ["Hello", "HelloWorl"])
def test_z85_decode_checks_the_length(text):
    if len(text) % 5 == 0:
        assert len(z85_decode(text)) == 4
    else:
        with pytest.raises(ValueError, match="multiple of 5"):
            z85_decode(text)


def test_z85_decode_rejects_characters_and_groups_outside_the_alphabet():
    with pytest.raises(ValueError, match="not a Z85 character"):
        z85_decode("Hello Worl")
    with pytest.raises(ValueError, match="out of range"):
        z85_decode("#####")


@pytest.mark.parametrize(("encoded", "name"), SPARK_DVS.items())
def test_dv_path_matches_the_file_delta_spark_wrote(encoded, name):
    assert dv_relative_path(encoded) == name
    assert dv_relative_path("ab" + encoded) == f"ab/{name}"


def test_z85_round_trips_random_uuids():
    for _ in range(50):
        u = uuid.uuid4()
        assert dv_relative_path(z85_encode(u.bytes)) == f"deletion_vector_{u}.bin"


def test_dv_keys_per_storage_type():
    root = Root("file", "", ("/t",))
    u = uuid.UUID("11ea0093-f000-489b-9a2d-74b7eb484c41")
    assert dv_keys(u_dv(u, "q7"), root) == {f"q7/deletion_vector_{u}.bin"}
    assert (
        dv_keys(
            {
                "storageType": "i",
                "pathOrInlineDv": "wi5b=000010000siXQKl0rr91000f55c8Xg0@@D72lkbi5=-{L",
            },
            root,
        )
        == set()
    )
    assert dv_keys({"storageType": "p", "pathOrInlineDv": "file:///t/dv/a%20b.bin"}, root) == {
        "dv/a b.bin"
    }
    assert dv_keys({"storageType": "p", "pathOrInlineDv": "file:///elsewhere/a.bin"}, root) == set()
    with pytest.raises(UnsupportedProtocolError, match="storage type 'z'"):
        dv_keys({"storageType": "z", "pathOrInlineDv": "x"}, root)


# -- paths ------------------------------------------------------------------------------------
def test_log_paths_are_compared_decoded_and_as_written():
    root = Root("file", "", ("/t",))
    assert keys_for("a%20b/c%25d.parquet", root) == {"a b/c%d.parquet", "a%20b/c%25d.parquet"}
    assert keys_for("plain.parquet", root) == {"plain.parquet"}
    assert keys_for("../other/x.parquet", root) == set()
    assert keys_for("a/../../x.parquet", root) == set()


def test_absolute_paths_count_only_inside_the_root():
    local = Root("file", "", ("/data/t",))
    assert keys_for("file:///data/t/p=1/x.parquet", local) == {"p=1/x.parquet"}
    assert keys_for("file:/data/t/x%20y.parquet", local) == {"x y.parquet"}
    assert keys_for("/data/t/x.parquet", local) == {"x.parquet"}
    assert keys_for("file:///data/t2/x.parquet", local) == set()
    assert keys_for("s3://data/t/x.parquet", local) == set()
    s3 = Root("s3", "bucket", ("/lake/t",))
    assert keys_for("s3a://bucket/lake/t/x.parquet", s3) == {"x.parquet"}
    assert keys_for("s3://other/lake/t/x.parquet", s3) == set()
    assert keys_for("s3://bucket/lake/t", s3) == set()
    az = Root("az", "container", ("/t",))
    assert keys_for("abfss://container@acct.dfs.core.windows.net/t/x.parquet", az) == {"x.parquet"}
    whole_bucket = Root("gs", "bucket", ("",))
    assert keys_for("gs://bucket/x.parquet", whole_bucket) == {"x.parquet"}


@pytest.mark.parametrize(
    ("key", "columns", "iceberg", "hidden"),
    [
        ("_delta_log/00000000000000000000.json", (), False, True),
        ("_delta_log/_sidecars/a.parquet", (), False, True),
        (".part-0.parquet.crc", (), False, True),
        ("p=1/.part-0.parquet.crc", ("p",), False, True),
        ("_SUCCESS", (), False, True),
        ("_tmp/part-0.parquet", (), False, True),
        ("_change_data/cdc-0.parquet", (), False, False),
        ("_delta_index/i.bin", (), False, False),
        ("_p=1/part-0.parquet", ("_p",), False, False),
        ("_p=1/part-0.parquet", ("p",), False, True),
        ("_p=1/_q=2/part-0.parquet", ("_p", "_q"), False, False),
        ("metadata/v1.metadata.json", (), True, True),
        ("metadata/v1.metadata.json", (), False, False),
        ("part-0.parquet", (), False, False),
        ("ab/deletion_vector_x.bin", (), False, False),
    ],
)
def test_hidden_paths_follow_delta_spark(key, columns, iceberg, hidden):
    assert hidden_key(key, columns, iceberg) is hidden


# -- the pure planner -------------------------------------------------------------------------
def test_only_unreferenced_files_older_than_the_cutoff_go():
    listed = [
        FileInfo("live.parquet", 5, OLD),
        FileInfo("stray-old.parquet", 7, CUTOFF - 1),
        FileInfo("stray-at-cutoff.parquet", 9, CUTOFF),
        FileInfo("stray-new.parquet", 11, NOW),
        FileInfo("_delta_log/00000000000000000000.json", 1, OLD),
        FileInfo("sub/", 0, 0, is_dir=True),
    ]
    p = plan_vacuum(listed, {"live.parquet", "missing.parquet"}, CUTOFF, version=3)
    assert [f.key for f in p.delete] == ["stray-old.parquet"]
    assert (p.files, p.bytes, p.scanned, p.referenced) == (1, 7, 5, 2)
    assert (p.hidden, p.in_use, p.too_new) == (1, 1, 2)
    text = "\n".join(p.reasons())
    assert "delete 1 unreferenced files, 7 bytes" in text and "version 3" in text


def test_an_empty_plan_says_so():
    p = plan_vacuum([FileInfo("a.parquet", 1, NOW)], set(), CUTOFF)
    assert p.delete == [] and p.reasons()[-1] == "nothing to delete"


# -- tables on disk ---------------------------------------------------------------------------
def test_a_tombstone_expires_after_the_cutoff_and_one_without_a_time_at_once(tmp_path):
    b = LogBuilder(tmp_path)
    b.commit(protocol(), metadata(), add("a"), add("b"), add("c"), add("d"))
    nulls = remove("d")
    del nulls["remove"]["deletionTimestamp"]
    b.commit(remove("a", ts=CUTOFF), remove("b", ts=CUTOFF - 1), remove("c", ts=NOW), nulls)
    for name in "abcd":
        touch(tmp_path, name)
    # deleted at the cut-off: still inside the retention; without a timestamp: expired (Delta)
    assert doomed(tmp_path) == ["b", "d"]


def test_deletion_vector_files_of_live_files_and_unexpired_tombstones_stay(tmp_path):
    u = [uuid.UUID(int=i + 1) for i in range(4)]
    b = LogBuilder(tmp_path)
    b.commit(
        protocol(3, 7, readerFeatures=["deletionVectors"], writerFeatures=["deletionVectors"]),
        metadata(),
    )
    b.commit(add("f1", dv=u_dv(u[0])), add("f2", dv=u_dv(u[1], "zz")), add("f3", dv=u_dv(u[2])))
    # f2's DV is replaced (old one tombstoned recently); f3 is removed long ago with its DV
    b.commit(remove("f2", ts=NOW - DAY, dv=u_dv(u[1], "zz")), add("f2", dv=u_dv(u[3])))
    b.commit(remove("f3", ts=OLD, dv=u_dv(u[2])))
    keys = ["f1", "f2", "f3", *(f"deletion_vector_{x}.bin" for x in (u[0], u[2], u[3]))]
    keys.append(f"zz/deletion_vector_{u[1]}.bin")
    for key in keys:
        touch(tmp_path, key)
    assert doomed(tmp_path) == [f"deletion_vector_{u[2]}.bin", "f3"]


def test_percent_encoded_and_partition_paths_match_their_files(tmp_path):
    b = LogBuilder(tmp_path)
    b.commit(protocol(), metadata(partitions=("_p",)))
    b.commit(add("_p=a%20b/c%25d.parquet"), add(quote("_p=x/ü.parquet")))
    for key in [
        "_p=a b/c%d.parquet",
        "_p=x/ü.parquet",
        "_p=a b/stray.parquet",
        "_q=1/hidden.parquet",
    ]:
        touch(tmp_path, key)
    assert doomed(tmp_path) == ["_p=a b/stray.parquet"]


def test_absolute_paths_outside_the_root_protect_nothing_and_are_never_touched(tmp_path):
    table, elsewhere = tmp_path / "t", tmp_path / "elsewhere"
    b = LogBuilder(table)
    b.commit(protocol(), metadata())
    b.commit(add(f"file://{elsewhere}/x.parquet"), add(f"file://{table}/inside.parquet"))
    outside = touch(elsewhere, "x.parquet")
    touch(table, "inside.parquet")
    touch(table, "x.parquet")  # same name as the outside file, but unreferenced
    assert doomed(table) == ["x.parquet"]
    t = open_table(str(table))
    execute_vacuum(t, plan(table))
    assert outside.exists() and (table / "inside.parquet").exists()


def test_the_plan_is_made_from_the_newest_snapshot(tmp_path):
    b = LogBuilder(tmp_path)
    b.commit(protocol(), metadata(), add("a"))
    table = open_table(str(tmp_path))
    snap = load_for_vacuum(table)
    touch(tmp_path, "a")
    touch(tmp_path, "late.parquet")
    b.commit(add("late.parquet"))  # committed after the snapshot was loaded
    p = plan_table_vacuum(table, snap, WEEK, NOW)
    assert p.version == 1 and p.delete == []


def test_a_snapshot_without_the_vacuum_columns_is_refused(tmp_path):
    b = LogBuilder(tmp_path)
    b.commit(protocol(), metadata(), add("a"))
    table = open_table(str(tmp_path))
    snap = table.snapshot(add_cols=("path", "size"), remove_cols=("path",))
    with pytest.raises(ValueError, match="load_for_vacuum"):
        plan_table_vacuum(table, snap, WEEK, NOW)


def five_strays_in_batches_of_2(tmp_path, monkeypatch) -> None:
    """A table with no file and 5 strays to vacuum, deleted 2 at a time."""
    LogBuilder(tmp_path).commit(protocol(), metadata())
    for i in range(5):
        touch(tmp_path, f"s{i}")
    monkeypatch.setattr(vacuum, "DELETE_BATCH", 2)


def test_progress_is_reported_per_batch(tmp_path, monkeypatch):
    five_strays_in_batches_of_2(tmp_path, monkeypatch)
    seen: list[tuple[int, int]] = []
    p = plan(tmp_path)
    assert execute_vacuum(open_table(str(tmp_path)), p, lambda d, t: seen.append((d, t))) == 5
    assert seen == [(2, 5), (4, 5), (5, 5)]
    assert files_under(tmp_path) == {"_delta_log/00000000000000000000.json"}


def test_a_stop_ends_the_deletes_after_the_current_batch(tmp_path, monkeypatch):
    five_strays_in_batches_of_2(tmp_path, monkeypatch)
    seen: list[tuple[int, int]] = []
    table, p = open_table(str(tmp_path)), plan(tmp_path)
    with pytest.raises(Stopped, match="after deleting 2 of 5 files"):
        execute_vacuum(table, p, lambda d, t: seen.append((d, t)), lambda: bool(seen))
    assert len(files_under(tmp_path)) == 1 + 3  # the commit, and the batches not begun


# -- refusals ---------------------------------------------------------------------------------
def test_vacuums_minimum_retention_is_the_policys():
    assert vacuum.MIN_VACUUM_RETENTION_MS == policy.MIN_VACUUM_RETENTION_MS


def test_short_retention_is_refused_unless_allowed(tmp_path):
    b = LogBuilder(tmp_path)
    b.commit(protocol(), metadata())
    touch(tmp_path, "stray", NOW - 2 * DAY)
    with pytest.raises(InvalidInputError, match="--allow-short-retention"):
        plan(tmp_path, retention=WEEK - 1)
    with pytest.raises(InvalidInputError, match="negative"):
        plan(tmp_path, retention=-1, allow=True)
    assert doomed(tmp_path, retention=DAY, allow=True) == ["stray"]


def _cli(capsys, *args: str) -> tuple[int, str, str]:
    code = main(["vacuum", *args])
    out, err = capsys.readouterr()
    return code, out, err


def test_cli_short_retention_exits_2_and_deletes_nothing(tmp_path, capsys):
    b = LogBuilder(tmp_path)
    b.commit(protocol(), metadata())
    touch(tmp_path, "stray", OLD)
    code, _, err = _cli(capsys, str(tmp_path), "--deleted-file-retention", "1d", "--now", str(NOW))
    assert code == 2 and "--allow-short-retention" in err
    assert (tmp_path / "stray").exists()
    code, out, _ = _cli(
        capsys,
        str(tmp_path),
        "--deleted-file-retention",
        "1d",
        "--allow-short-retention",
        "--now",
        str(NOW),
        "--json",
        "--mode",
        "full",
    )
    assert code == 0 and json.loads(out)["deletedFiles"] == 1
    assert not (tmp_path / "stray").exists()


@pytest.mark.parametrize(
    "proto",
    [
        protocol(
            3,
            7,
            readerFeatures=["vacuumProtocolCheck"],
            writerFeatures=["vacuumProtocolCheck", "somethingNew"],
        ),
        protocol(3, 7, readerFeatures=["somethingNew"], writerFeatures=["somethingNew"]),
        protocol(1, 7, writerFeatures=["somethingNew"]),
        protocol(3, 7, readerFeatures=["catalogManaged"], writerFeatures=["catalogManaged"]),
    ],
    ids=["vacuumProtocolCheck", "reader", "writer", "catalogManaged"],
)
def test_unsupported_protocols_exit_3_and_delete_nothing(tmp_path, capsys, proto):
    b = LogBuilder(tmp_path)
    b.commit(proto, metadata(), add("a"))
    touch(tmp_path, "stray", OLD)
    before = files_under(tmp_path)
    code, _, err = _cli(capsys, str(tmp_path), "--now", str(NOW))
    assert code == 3, err
    assert "nothing deleted" in err or "upgrade deltakeeper" in err
    assert files_under(tmp_path) == before


def test_vacuum_protocol_check_with_known_features_still_vacuums(tmp_path):
    b = LogBuilder(tmp_path)
    features = ["vacuumProtocolCheck", "deletionVectors"]
    b.commit(protocol(3, 7, readerFeatures=features, writerFeatures=features), metadata())
    touch(tmp_path, "stray", OLD)
    assert doomed(tmp_path) == ["stray"]


def test_cli_dry_run_lists_what_the_real_run_deletes(tmp_path, capsys):
    b = LogBuilder(tmp_path)
    b.commit(protocol(), metadata(), add("live"))
    for key, mtime in [("live", OLD), ("old-1", OLD), ("d/old 2", OLD), ("new", NOW)]:
        touch(tmp_path, key, mtime, data=b"12345")
    full = ("--mode", "full")
    code, out, _ = _cli(capsys, str(tmp_path), "--now", str(NOW), "--dry-run", "--json", *full)
    dry = json.loads(out)
    assert code == 0 and dry["dryRun"] and dry["deletedFiles"] == 0
    assert dry["files"] == ["d/old 2", "old-1"]
    assert dry["filesWithSizes"] == [{"path": "d/old 2", "size": 5}, {"path": "old-1", "size": 5}]
    assert (dry["retentionMs"], dry["cutoffTimestamp"]) == (WEEK, CUTOFF)
    assert (dry["scannedFiles"], dry["referencedFiles"], dry["operation"]) == (5, 1, "vacuum")
    before = files_under(tmp_path)
    code, out, err = _cli(capsys, str(tmp_path), "--now", str(NOW), *full)
    assert code == 0 and "deleted 2 files" in out and "vacuum: deleted 2/2 files" in err
    assert before - files_under(tmp_path) == set(dry["files"])


# -- property ---------------------------------------------------------------------------------
NAMES = [
    "part-{}.parquet",
    "a b/part-{}.parquet",
    "x%20y-{}.parquet",
    "_p=1/part-{}.parquet",
    "p=2/ü-{}.parquet",
]
STRAYS = [
    "stray-{}.parquet",
    "_tmp/x-{}",
    ".x-{}.crc",
    "_p=1/stray-{}",
    "_change_data/c-{}.parquet",
    "_delta_index/i-{}",
]


@st.composite
def histories(draw: st.DrawFn) -> list[tuple[Any, ...]]:
    steps = st.one_of(
        st.tuples(st.just("write"), st.sampled_from(NAMES)),
        st.tuples(st.just("dv"), st.integers(0, 50), st.sampled_from(["", "ab"])),
        st.tuples(st.just("remove"), st.integers(0, 50)),
        st.tuples(st.just("clock"), st.integers(-2 * DAY, 10 * DAY)),
        st.tuples(st.just("stray"), st.sampled_from(STRAYS)),
    )
    return draw(st.lists(steps, max_size=25))


class Model:
    """Plain-Python state of the history, with every file written to disk at the clock time."""

    def __init__(self, root: Path) -> None:
        self.root = root
        self.log = LogBuilder(root)
        self.log.commit(
            protocol(3, 7, readerFeatures=["deletionVectors"], writerFeatures=["deletionVectors"]),
            metadata(partitions=("_p",)),
        )
        self.t = NOW - 30 * DAY
        self.n = 0
        self.live: dict[str, str | None] = {}  # data file key -> its DV file key
        self.dvs: dict[str, dict[str, Any]] = {}  # data file key -> DV descriptor
        self.tombstones: list[tuple[str, str | None, int]] = []
        self.mtimes: list[int] = []

    def file(self, key: str) -> None:
        touch(self.root, key, self.t)
        self.mtimes.append(self.t)

    def step(self, op: tuple[Any, ...]) -> None:
        self.n += 1
        kind = op[0]
        if kind == "clock":
            self.t += op[1]
        elif kind == "stray":
            self.file(op[1].format(self.n))
        elif kind == "write":
            key = op[1].format(self.n)
            self.file(key)
            self.live[key] = None
            self.log.commit(add(quote(key)))
        elif self.live:
            key = sorted(self.live)[op[1] % len(self.live)]
            old = self.dvs.get(key)
            self.tombstones.append((key, self.live[key], self.t))
            if kind == "remove":
                del self.live[key]
                self.log.commit(remove(quote(key), ts=self.t, dv=old))
                return
            u = uuid.uuid4()
            dv = u_dv(u, op[2])
            dv_key = dv_relative_path(dv["pathOrInlineDv"])
            self.file(dv_key)
            self.live[key], self.dvs[key] = dv_key, dv
            self.log.commit(remove(quote(key), ts=self.t, dv=old), add(quote(key), dv=dv))

    def referenced(self, cutoff: int) -> set[str]:
        keep = {k for k in self.live} | {d for d in self.live.values() if d}
        for key, dv, ts in self.tombstones:
            if ts >= cutoff:
                keep |= {key} | ({dv} if dv else set())
        return keep


@settings(max_examples=100, deadline=None)
@given(histories(), st.data(), st.integers(0, 15 * DAY))
def test_property_vacuum_never_deletes_a_referenced_or_young_file(history, data, retention):
    with tempfile.TemporaryDirectory() as tmp:
        model = Model(Path(tmp))
        for op in history:
            model.step(op)
        # a cut-off at, just before or just after some file time or deletion time (or anywhere)
        times = [model.t, *(ts for _, _, ts in model.tombstones), *model.mtimes]
        pivot = data.draw(st.sampled_from(times)) + data.draw(st.sampled_from([-1, 0, 1, DAY]))
        cutoff = pivot
        now = cutoff + retention
        table = open_table(tmp)
        p = plan_table_vacuum(table, load_for_vacuum(table), retention, now, True)
        keep = model.referenced(cutoff)
        listed = {f.key: f for f in table.storage.walk("")}
        expected = sorted(
            k
            for k, f in listed.items()
            if k not in keep and f.mtime_ms < cutoff and not hidden_key(k, ("_p",), False)
        )
        assert [f.key for f in p.delete] == expected
        assert p.cutoff_ms == cutoff
        execute_vacuum(table, p)
        left = files_under(Path(tmp))
        assert keep <= left
        assert {k for k, f in listed.items() if f.mtime_ms >= cutoff} <= left


@settings(max_examples=100, deadline=None)
@given(histories(), st.data(), st.integers(0, 15 * DAY))
def test_property_lite_deletes_what_removes_name_and_nothing_referenced(history, data, retention):
    """LITE (every commit past the cut-off here) deletes exactly the files and old DV files that
    removes name with a deletion time before the cut-off (the newest, for a file removed twice)
    and nothing still referenced; FULL deletes all of them too."""
    with tempfile.TemporaryDirectory() as tmp:
        model = Model(Path(tmp))
        for op in history:
            model.step(op)
        times = [model.t, *(ts for _, _, ts in model.tombstones), *model.mtimes]
        cutoff = data.draw(st.sampled_from(times)) + data.draw(st.sampled_from([-1, 0, 1]))
        now = cutoff + retention
        table = open_table(tmp)
        lite = plan_table_vacuum(table, load_for_vacuum(table), retention, now, True, Mode.LITE)
        removed: dict[str, int] = {}
        for key, dv_key, ts in model.tombstones:
            for k in (key, dv_key):
                if k:
                    removed[k] = max(ts, removed.get(k, ts))
        keep = model.referenced(cutoff)
        expected = sorted(k for k, ts in removed.items() if ts < cutoff and k not in keep)
        assert [f.key for f in lite.delete] == expected
        full = plan_table_vacuum(table, load_for_vacuum(table), retention, now, True)
        gone_full = {f.key for f in full.delete}
        assert {k for k in expected if model_mtime(Path(tmp), k) < cutoff} <= gone_full


def model_mtime(root: Path, key: str) -> int:
    return (root / key).stat().st_mtime_ns // 1_000_000


# -- nested tables and empty folders -------------------------------------------------------------
def test_a_nested_delta_table_is_skipped_and_named(tmp_path, capsys):
    outer = LogBuilder(tmp_path)
    outer.commit(protocol(), metadata(), add("live"))
    inner = LogBuilder(tmp_path / "inner")  # a table of its own inside the outer one's folder
    inner.commit(protocol(), metadata(), add("part-0.parquet"))
    deeper = LogBuilder(tmp_path / "inner" / "deeper")
    deeper.commit(protocol(), metadata(), add("x.parquet"))
    for key in ["live", "stray", "inner/part-0.parquet", "inner/deeper/x.parquet", "inner/y"]:
        touch(tmp_path, key)
    p = plan(tmp_path)
    assert [f.key for f in p.delete] == ["stray"]
    assert p.nested == ["inner"] and p.in_nested == 5  # 3 data files and 2 commits
    assert "skipped 1 nested Delta tables (5 files; each has its own _delta_log): inner" in str(p)
    full = ("--mode", "full")
    code, out, _ = _cli(capsys, str(tmp_path), "--now", str(NOW), "--dry-run", "--json", *full)
    assert code == 0 and json.loads(out)["skippedNestedTables"] == ["inner"]
    before = files_under(tmp_path)
    code, out, _ = _cli(capsys, str(tmp_path), "--now", str(NOW), "--json", *full)
    assert code == 0 and json.loads(out)["skippedNestedTables"] == ["inner"]
    assert before - files_under(tmp_path) == {"stray"}


def _old_folder(root: Path, key: str, mtime_ms: int = OLD) -> None:
    os.utime(root / key, ns=(mtime_ms * 1_000_000, mtime_ms * 1_000_000))


def test_folders_left_empty_are_removed_but_never_the_root_log_or_new_ones(tmp_path, capsys):
    b = LogBuilder(tmp_path)
    b.commit(protocol(), metadata(partitions=("p",)), add("p=1/live.parquet"))
    for key in ["p=1/live.parquet", "p=2/gone.parquet", "a/b/gone.parquet", "keep/.x.crc"]:
        touch(tmp_path, key)
    (tmp_path / "empty" / "deeper").mkdir(parents=True)
    (tmp_path / "young").mkdir()
    for key in ["p=1", "p=2", "a/b", "a", "keep", "empty/deeper", "empty"]:
        _old_folder(tmp_path, key)
    _old_folder(tmp_path, "young", NOW)  # a writer may be about to fill it
    p = plan(tmp_path)
    assert [f.key for f in p.delete] == ["a/b/gone.parquet", "p=2/gone.parquet"]
    assert p.folders == ["a/", "a/b/", "empty/", "empty/deeper/", "p=2/"]
    full = ("--mode", "full")
    code, out, _ = _cli(capsys, str(tmp_path), "--now", str(NOW), "--dry-run", "--json", *full)
    dry = json.loads(out)
    assert dry["folders"] == p.folders and dry["deletedFolders"] == 0
    assert (tmp_path / "empty" / "deeper").is_dir()
    code, out, _ = _cli(capsys, str(tmp_path), "--now", str(NOW), "--json", *full)
    assert code == 0 and json.loads(out)["deletedFolders"] == 5
    left = sorted(p.name for p in tmp_path.iterdir())
    assert left == ["_delta_log", "keep", "p=1", "young"]


def test_a_folder_filled_after_planning_stays(tmp_path):
    b = LogBuilder(tmp_path)
    b.commit(protocol(), metadata())
    touch(tmp_path, "d/gone.parquet")
    _old_folder(tmp_path, "d")
    table = open_table(str(tmp_path))
    p = plan(tmp_path)
    assert p.folders == ["d/"]
    execute_vacuum(table, p)
    touch(tmp_path, "d/just-written.parquet", NOW)  # a writer got there first
    assert vacuum.remove_empty_folders(table, p) == 0
    assert (tmp_path / "d" / "just-written.parquet").exists()
