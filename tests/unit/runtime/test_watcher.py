"""runtime/watcher.py: one table's observe and maintain on real local tables, and what they report.

Status, conditions and events; what stops a poll before any request; planned and run maintenance;
secrets kept out of every text."""

from __future__ import annotations

import json
import os
import shutil
import time
from collections.abc import Callable
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest

from deltakeeper.cli import main
from deltakeeper.delta.held import HeldSnapshot
from deltakeeper.delta.table import Table, open_table
from deltakeeper.maintenance.operations import vacuum as vacuum_op
from deltakeeper.maintenance.operations.outcome import Outcome
from deltakeeper.maintenance.operations.vacuum import VacuumRun
from deltakeeper.resources.conditions import TABLE_CONDITIONS as CONDITIONS
from deltakeeper.resources.manifests import TableResource
from deltakeeper.runtime import credentials
from deltakeeper.runtime.model import Observation, Problem, Target
from deltakeeper.runtime.targets import resolve
from deltakeeper.runtime.watcher import TableWatcher
from tests.support.logbuilder import LogBuilder, add, commit_info, metadata, protocol, remove
from tests.support.observed import status_of

ALL = ("checkpoint", "cleanup", "vacuum")


DAY = 86_400_000


START = 1_700_000_000_000  # commit times of hand-written tables


Copy = Callable[[str], Path]


# status key -> `deltakeeper inspect --json` key
INSPECT_KEYS = {
    "version": "version",
    "lastCheckpointVersion": "lastCheckpointVersion",
    "commitsSinceCheckpoint": "commitsSinceCheckpoint",
    "logFiles": "logFiles",
    "logBytes": "logBytes",
    "files": "numFiles",
    "bytes": "sizeBytes",
    "smallFiles": "smallFiles",
    "tombstones": "numTombstones",
}


def now_ms() -> int:
    return int(time.time() * 1000)


def cond(obs: Observation, kind: str) -> tuple[str, str]:
    c = next(c for c in obs.conditions if c.type == kind)
    return c.status, c.reason


def message(obs: Observation, kind: str) -> str:
    return next(c.message for c in obs.conditions if c.type == kind)


def events(obs: Observation) -> list[tuple[str, str]]:
    return [(e.type, e.reason) for e in obs.events]


def tree(root: Path) -> dict[str, bytes]:
    """Every file under `root` with its bytes: what "nothing was written or deleted" compares."""
    return {str(p.relative_to(root)): p.read_bytes() for p in root.rglob("*") if p.is_file()}


def all_text(obs: Observation) -> str:
    parts = [json.dumps(status_of(obs))]
    parts += [f"{c.reason} {c.message}" for c in obs.conditions]
    parts += [f"{e.reason} {e.message}" for e in obs.events]
    parts += [o.message for o in obs.outcomes]
    return "\n".join(parts)


def append(root: Path, first_version: int, count: int) -> None:
    b = LogBuilder(root)
    b.next_version = first_version
    for i in range(count):
        b.commit(add(f"appended-{first_version + i}.parquet", size=1000), commit_info())


def snapshot_reads(monkeypatch: pytest.MonkeyPatch) -> list[int | None]:
    """The version of each `Table.snapshot` read from now on (None: the latest)."""
    loads: list[int | None] = []
    real = Table.snapshot
    monkeypatch.setattr(
        Table,
        "snapshot",
        lambda self, version=None, **kw: loads.append(version) or real(self, version, **kw),
    )
    return loads


def dated_table(root: Path, commits: int, prefix: str = "f") -> None:
    """`commits` commits a day apart from START; commit v adds <prefix><v>.parquet, on disk."""
    b = LogBuilder(root)
    for v in range(commits):
        actions = [add(f"{prefix}{v}.parquet")]
        if v == 0:
            actions = [protocol(), metadata(), *actions]
        b.commit(*actions, mtime_ms=START + v * DAY)
        data = root / f"{prefix}{v}.parquet"
        data.write_bytes(b"x" * 100)
        os.utime(data, ns=((START + v * DAY) * 1_000_000,) * 2)


# -- a healthy table ---------------------------------------------------------------------------
@pytest.mark.parametrize(
    "name",
    [
        "simple_table",
        "simple_table_with_checkpoint",
        "latest_not_checkpointed",
        "table-with-dv-small",
        "delta-0.8.0-partitioned",
    ],
)
def test_first_observe_plans_everything_and_the_status_is_what_inspect_says(
    name: str, corpus_copy: Copy, capsys: pytest.CaptureFixture[str]
) -> None:
    root = corpus_copy(name)
    now = now_ms()
    obs = TableWatcher(now).observe(Target("ns", "t", str(root)), now)
    assert obs.due == ALL and obs.ready
    assert [cond(obs, k) for k in CONDITIONS] == [
        ("True", "Watching"),
        ("True", "Reachable"),
        ("True", "Supported"),
        ("False", "AsExpected"),
    ]
    assert obs.events == []  # the first healthy poll has no transition to announce

    assert main(["inspect", str(root), "--json"]) == 0
    inspect = json.loads(capsys.readouterr().out)
    s = status_of(obs)
    assert message(obs, "Ready") == f"watching version {inspect['version']}"
    assert {key: s[key] for key in INSPECT_KEYS} == {
        key: inspect[field] for key, field in INSPECT_KEYS.items()
    }
    stamp = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(inspect["timestamp"] // 1000))
    assert s["lastCommitTime"] == stamp
    h = inspect["health"]
    scores = {name: c["score"] for name, c in h["components"].items()}
    status_health = {"score": h["score"], "band": h["band"], "worst": h["worst"]}
    assert s["health"] == {**status_health, "components": scores}
    assert s["lastPoll"] == time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(now // 1000))
    assert s["lastMaintenance"] == {} and s["policy"] is None
    if inspect["lastCheckpointVersion"] is None:
        assert obs.checkpoint_written_ms is None
    else:
        cp = root / "_delta_log" / f"{inspect['lastCheckpointVersion']:020d}.checkpoint.parquet"
        assert obs.checkpoint_written_ms == cp.stat().st_mtime_ns // 1_000_000


def test_the_first_poll_plans_everything_then_a_quiet_poll_costs_one_listing(
    corpus_copy: Copy,
) -> None:
    root = corpus_copy("simple_table_with_checkpoint")
    target = Target("ns", "t", str(root))
    now = now_ms()
    w = TableWatcher(now)
    observed = w.observe(target, now)
    assert observed.due == ALL
    first = w.maintain(target, observed, now)
    assert {o.operation for o in first.outcomes} == set(ALL)
    assert cond(first, "Ready") == ("True", "Watching")
    numbers = {key: status_of(first)[key] for key in ("version", "files", "bytes")}
    assert numbers == {"version": 10, "files": 11, "bytes": 4862}

    quiet = w.observe(target, now + 1000)
    assert dict(quiet.requests) == {"list": 1}
    assert quiet.due == () and quiet.events == [] and quiet.ready
    assert {**status_of(quiet), "lastPoll": None} == {**status_of(first), "lastPoll": None}
    assert w.maintain(target, quiet, now + 1000) is quiet  # nothing due: nothing run

    # An equal Target rebuilt by the caller is still a quiet poll on the storage side.
    again = w.observe(replace(target), now + 2000)
    assert dict(again.requests) == {"list": 1} and again.due == ()

    append(root, 11, 1)
    moved = w.observe(target, now + 3000)
    assert moved.due == ("checkpoint",) and status_of(moved)["version"] == 11
    assert moved.requests["read"] >= 1


def test_auto_vacuums_full_first_then_lite_and_a_quiet_vacuum_costs_one_listing(
    tmp_path: Path,
    holding: str,
) -> None:
    dated_table(tmp_path, 12)
    target = Target("ns", "t", str(tmp_path))
    now = START + 60 * DAY
    w = TableWatcher(now)
    first = w.maintain(target, w.observe(target, now), now)
    vac = next(o for o in first.outcomes if o.operation == "vacuum")
    assert _run(vac).mode == "full" and _run(vac).reason == "auto: no FULL vacuum on record"
    entry = status_of(first)["lastMaintenance"]["vacuum"]
    assert entry["lastFull"] == status_of(first)["lastPoll"] and entry["mode"] == "full"
    assert entry["listedObjects"] > 12 and entry["requests"]["list"] >= 1
    later = now + DAY  # vacuum due again; nothing new in the table
    quiet = w.maintain(target, w.observe(target, later), later)
    vac = next(o for o in quiet.outcomes if o.operation == "vacuum")
    assert _run(vac).mode == "lite" and vac.result == "skipped"
    # One listing of _delta_log from N, as a poll: _last_vacuum_info is known from the FULL
    # run, no commit is new, no data folder is listed.
    assert _run(vac).requests == {"list": 1} and _run(vac).commits is None
    entry = status_of(quiet)["lastMaintenance"]["vacuum"]
    assert entry["mode"] == "full"  # a skipped run leaves the last real one in the status
    week = now + 7 * DAY
    full = w.maintain(target, w.observe(target, week), week)
    vac = next(o for o in full.outcomes if o.operation == "vacuum")
    assert _run(vac).mode == "full" and "over 7 days ago" in _run(vac).reason
    assert isinstance(w._snap, HeldSnapshot) == (holding == "held")


def test_new_commits_update_the_snapshot_instead_of_reloading_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    b = LogBuilder(tmp_path)
    b.commit(protocol(), metadata(), add("a.parquet", size=10), commit_info())
    target = Target("ns", "t", str(tmp_path))
    w = TableWatcher(now_ms())
    w.observe(target, now_ms())
    loads = snapshot_reads(monkeypatch)
    b.commit(add("b.parquet", size=20), commit_info())
    b.commit(add("c.parquet", size=30), commit_info())
    moved = w.observe(target, now_ms())
    assert loads == [] and status_of(moved)["version"] == 2 and status_of(moved)["files"] == 3
    assert status_of(moved)["bytes"] == 60


def test_commits_past_the_interval_get_a_checkpoint_and_the_cleanup_it_allows(
    corpus_copy: Copy,
    holding: str,
) -> None:
    root = corpus_copy("simple_table_with_checkpoint")  # version 10, checkpoint at 10
    target = Target("ns", "t", str(root), settings={"checkpoint_interval": 3})
    now = now_ms() + 60 * DAY  # every commit, those appended below too, is past log retention
    w = TableWatcher(now)
    first = w.maintain(target, w.observe(target, now), now)
    assert status_of(first)["lastCheckpointVersion"] == 10
    assert "checkpoint" not in status_of(first)["lastMaintenance"]  # looked, nothing due

    append(root, 11, 3)
    obs = w.observe(target, now + 1000)
    assert obs.due == ("checkpoint",) and status_of(obs)["commitsSinceCheckpoint"] == 3
    obs = w.maintain(target, obs, now + 1000)

    # A new checkpoint is what lets cleanup cut: it runs right after, in the same pass.
    assert events(obs) == [("Normal", "Checkpointed"), ("Normal", "LogCleaned")]
    checkpointed = [e for e in obs.events if e.reason == "Checkpointed"]
    assert [e.type for e in checkpointed] == ["Normal"]
    assert "wrote the checkpoint at version 13" in checkpointed[0].message
    done = status_of(obs)["lastMaintenance"]["checkpoint"]
    assert done["result"] == "done" and done["version"] == 13 and "timeMs" not in done
    assert (
        status_of(obs)["lastCheckpointVersion"] == 13
        and status_of(obs)["commitsSinceCheckpoint"] == 0
    )
    assert status_of(obs)["files"] == status_of(first)["files"] + 3
    log = root / "_delta_log"
    assert json.loads((log / "_last_checkpoint").read_text())["version"] == 13
    cp = log / "00000000000000000013.checkpoint.parquet"
    assert obs.checkpoint_written_ms == cp.stat().st_mtime_ns // 1_000_000
    # A reader that starts from the new checkpoint sees the same table.
    snap = open_table(str(root)).snapshot()
    assert snap.segment.checkpoint is not None and snap.segment.checkpoint.version == 13
    assert snap.num_files == status_of(obs)["files"]
    # The checkpoint it wrote itself is not "the log moved on".
    quiet = w.observe(target, now + 2000)
    assert dict(quiet.requests) == {"list": 1} and quiet.due == ()
    assert isinstance(w._snap, HeldSnapshot) == (holding == "held")


def test_a_restarted_watcher_keeps_the_schedules_of_its_stored_status(tmp_path: Path) -> None:
    dated_table(tmp_path, 3)
    now = START + 60 * DAY
    stored = {
        op: {"time": "x", "timeMs": now - 60_000, "result": "done"}
        for op in ("checkpoint", "cleanup", "vacuum")
    }
    w = TableWatcher(now - DAY, last_maintenance=stored)
    obs = w.observe(Target("ns", "t", str(tmp_path)), now)
    assert obs.due == ("checkpoint",)  # the first poll always reads the log; the rest ran
    assert status_of(obs)["lastMaintenance"]["vacuum"] == {"time": "x", "result": "done"}


# -- what stops a poll -------------------------------------------------------------------------
def test_a_target_with_a_problem_touches_no_storage(tmp_path: Path) -> None:
    dated_table(tmp_path / "t", 2)
    target = Target("ns", "t", str(tmp_path / "t"))
    now = START + DAY
    w = TableWatcher(now)
    assert w.observe(target, now).ready
    problem = Problem("SecretNotFound", "Secret ns/creds (spec.storage.secretRef) does not exist")
    obs = w.observe(replace(target, problem=problem), now + 1)
    assert cond(obs, "Ready") == ("False", "SecretNotFound")
    assert message(obs, "Ready") == problem.message
    assert cond(obs, "StorageReachable") == ("Unknown", "NotChecked")
    assert cond(obs, "ProtocolSupported") == ("Unknown", "NotChecked")
    assert obs.requests == {} and obs.due == () and "version" not in status_of(obs)
    assert events(obs) == [("Warning", "SecretNotFound")]
    # The problem fixed: a full poll again, and Ready's return is announced.
    back = w.observe(target, now + 2)
    assert back.ready and status_of(back)["version"] == 1 and back.requests["read"] >= 1
    assert ("Normal", "Watching") in events(back)

    missing = tmp_path / "never-created"
    obs = TableWatcher(now).observe(Target("ns", "x", str(missing), problem=problem), now)
    assert cond(obs, "Ready") == ("False", "SecretNotFound") and obs.requests == {}
    assert events(obs) == [("Warning", "SecretNotFound")]  # a first poll announces it too
    assert not missing.exists()


def test_an_unknown_uri_scheme_is_an_invalid_spec() -> None:
    # hdfs:// and the other schemes fsspec knows open through it (delta/storage/fsspec.py)
    obs = TableWatcher(0).observe(Target("ns", "t", "nosuch://x"), START)
    assert cond(obs, "Ready") == ("False", "InvalidSpec")
    assert "unsupported URI scheme 'nosuch'" in message(obs, "Ready")
    assert obs.due == () and obs.requests == {}


def test_an_unknown_uri_scheme_does_not_claim_the_store_answered() -> None:
    obs = TableWatcher(0).observe(Target("ns", "t", "nosuch://x"), START)
    assert cond(obs, "StorageReachable")[0] != "True"


def test_a_folder_without_a_delta_log_is_not_a_delta_table(tmp_path: Path) -> None:
    (tmp_path / "empty").mkdir()
    empty = TableWatcher(START).observe(Target("ns", "e", str(tmp_path / "empty")), START)
    assert cond(empty, "Ready") == ("False", "NotADeltaTable")
    root = tmp_path / "t"
    root.mkdir()
    (root / "data.parquet").write_bytes(b"x")
    target = Target("ns", "t", str(root))
    w = TableWatcher(START)
    obs = w.observe(target, START)
    assert cond(obs, "Ready") == ("False", "NotADeltaTable")
    assert cond(obs, "StorageReachable") == ("True", "Reachable")
    assert events(obs) == [("Warning", "NotADeltaTable")] and obs.due == ()
    # The same failure again: no new event (events mark transitions only).
    for i in range(1, 3):
        again = w.observe(target, START + i)
        assert cond(again, "Ready") == ("False", "NotADeltaTable") and again.events == []
    dated_table(root, 1)
    healed = w.observe(target, START + 10)
    assert healed.ready and healed.due == ALL
    assert ("Normal", "Watching") in events(healed) and ("Normal", "Supported") in events(healed)
    assert (root / "data.parquet").read_bytes() == b"x"


def _with_unknown_writer_feature(corpus_copy: Copy) -> Path:
    root = corpus_copy("simple_table")  # version 4, no checkpoint, 31 tombstones
    b = LogBuilder(root)
    b.next_version = 5
    feature = protocol(3, 7, readerFeatures=[], writerFeatures=["madeUpWriterFeature"])
    b.commit(feature, commit_info())
    return root


def test_an_unknown_writer_feature_stops_all_maintenance(corpus_copy: Copy) -> None:
    root = _with_unknown_writer_feature(corpus_copy)
    before = tree(root)
    # Far enough ahead that everything would be due on a table deltakeeper understands.
    now = now_ms() + 90 * DAY
    target = Target("ns", "t", str(root), settings={"checkpoint_interval": 1})
    w = TableWatcher(now - 90 * DAY)
    obs = w.observe(target, now)
    assert cond(obs, "ProtocolSupported") == ("False", "UnsupportedFeatures")
    assert cond(obs, "Ready") == ("False", "UnsupportedFeatures")
    assert "madeUpWriterFeature" in message(obs, "ProtocolSupported")
    assert obs.due == () and status_of(obs)["version"] == 5  # still observed and reported
    # Ready and ProtocolSupported turn bad for one reason: one Warning, not two.
    assert events(obs) == [("Warning", "UnsupportedFeatures")]
    assert w.maintain(target, obs, now).outcomes == []
    # Even asked directly, the plan is refused as a whole.
    obs.due = ALL
    forced = w.maintain(target, obs, now)
    assert [(o.operation, o.result) for o in forced.outcomes] == [(op, "refused") for op in ALL]
    assert tree(root) == before
    assert w.observe(target, now + 1).events == []


def test_suspend_keeps_watching_but_plans_nothing(corpus_copy: Copy) -> None:
    root = corpus_copy("simple_table")
    before = tree(root)
    now = now_ms() + 90 * DAY
    target = Target("ns", "t", str(root), settings={"checkpoint_interval": 1})
    assert TableWatcher(now).observe(target, now).due == ALL  # what suspend holds back
    w = TableWatcher(now)
    obs = w.observe(replace(target, suspend=True), now)
    assert cond(obs, "Ready") == ("True", "Suspended") and obs.ready
    assert "suspended by spec.suspend" in message(obs, "Ready")
    assert obs.due == () and status_of(obs)["version"] == 4
    assert w.maintain(replace(target, suspend=True), obs, now).outcomes == []
    assert tree(root) == before


def test_vacuum_dry_run_reports_and_deletes_nothing(corpus_copy: Copy) -> None:
    root = corpus_copy("simple_table")
    stray = root / "stray.parquet"  # referenced by no version: vacuum's too
    stray.write_bytes(b"x")
    before = tree(root)
    now = now_ms() + 90 * DAY  # the tombstones and their files are long expired
    target = Target("ns", "t", str(root), settings={"vacuum_dry_run": True})
    w = TableWatcher(now)
    obs = w.maintain(target, w.observe(target, now), now)
    vacuum = next(o for o in obs.outcomes if o.operation == "vacuum")
    assert vacuum.result == "dry-run" and vacuum.deleted_files == 0 and len(vacuum.files) > 5
    assert all((root / f).exists() for f in vacuum.files)
    assert "stray.parquet" in vacuum.files and stray.exists()
    entry = status_of(obs)["lastMaintenance"]["vacuum"]
    assert entry["result"] == "dry-run" and entry["deletedFiles"] == 0
    dry = [e for e in obs.events if e.reason == "VacuumDryRun"]
    assert [(e.type, e.message) for e in dry] == [
        (
            "Normal",
            f"FULL (auto: no FULL vacuum on record) vacuum would delete {len(vacuum.files)} files",
        )
    ]
    assert entry["mode"] == "full" and entry["modeReason"] == "auto: no FULL vacuum on record"
    assert tree(root) == before
    # The same table without dryRun deletes exactly those files.
    wet = TableWatcher(now)
    wet_target = replace(target, settings={})
    obs = wet.maintain(wet_target, wet.observe(wet_target, now), now)
    done = next(o for o in obs.outcomes if o.operation == "vacuum")
    assert done.result == "done" and done.deleted_files == len(vacuum.files)
    assert not any((root / f).exists() for f in vacuum.files)


def test_a_vacuum_below_the_minimum_retention_is_refused_and_degrades(tmp_path: Path) -> None:
    dated_table(tmp_path, 3)
    before = tree(tmp_path)
    target = Target("ns", "t", str(tmp_path), settings={"deleted_file_retention_ms": DAY})
    now = START + 60 * DAY
    w = TableWatcher(now)
    obs = w.maintain(target, w.observe(target, now), now)
    assert status_of(obs)["lastMaintenance"]["vacuum"]["result"] == "refused"
    assert cond(obs, "Degraded")[0] == "True"
    assert "vacuum refused" in message(obs, "Degraded")
    assert ("Warning", "MaintenanceRefused") in events(obs)
    assert obs.ready  # the table is still watched
    assert tree(tmp_path) == before
    # Refused is an answer, not a failure to retry at once.
    assert w.observe(target, now + 60_000).due == ()


# -- credentials -------------------------------------------------------------------------------
SECRET = "wTestSecretKey/K7MDENG+bPxRfiCYEXAMPLE0001"


KEY_ID = "AKIAWATCHERTEST0001"


def _resource(uri: str, **storage: Any) -> TableResource:
    spec = {"uri": uri, "storage": {"secretRef": {"name": "creds"}, **storage}}
    return TableResource("ns", "t", {}, 1, spec)


def test_secrets_never_reach_status_conditions_or_events(
    caplog: pytest.LogCaptureFixture,
) -> None:
    secret = {"AWS_ACCESS_KEY_ID": KEY_ID, "AWS_SECRET_ACCESS_KEY": SECRET}
    # The secret also sits in the URI's path, so that it is in the error text to be masked.
    resource = _resource(f"s3://bucket/{SECRET}/t", options={"endpoint_url": "http://127.0.0.1:1"})
    target = resolve(resource, [], lambda ns, name: secret)
    assert target.problem is None
    options = target.storage_options  # in object_store's names
    assert options["aws_secret_access_key"] == SECRET and options["aws_access_key_id"] == KEY_ID
    started = time.monotonic()
    obs = TableWatcher(START).observe(target, START)
    took = time.monotonic() - started
    assert took < 10, f"an unreachable endpoint took {took:.1f}s to report"
    assert cond(obs, "Ready") == ("False", "StorageUnreachable")
    assert cond(obs, "StorageReachable") == ("False", "StorageUnreachable")
    assert obs.requests["read"] >= 1
    text = all_text(obs) + caplog.text
    assert SECRET not in text and KEY_ID not in text
    assert f"s3://bucket/{credentials.MASK}/t" in message(obs, "Ready")

    # A Secret deltakeeper cannot use: a Problem whose text names the key, not the value.
    other = "watcher-test-unused-password-0001"
    bad = resolve(_resource("s3://bucket/t"), [], lambda ns, name: {**secret, "PASSWORD": other})
    assert bad.problem is not None and bad.problem.reason == "InvalidSecret"
    obs = TableWatcher(START).observe(bad, START)
    assert cond(obs, "Ready") == ("False", "InvalidSecret")
    assert "PASSWORD" in message(obs, "Ready")
    assert other not in all_text(obs) and SECRET not in all_text(obs)


def test_an_unexpected_store_client_error_becomes_a_condition() -> None:
    options = {"key": KEY_ID, "secret": SECRET, "endpoint_url": "http://user:pw@127.0.0.1:1"}
    obs = TableWatcher(START).observe(Target("ns", "t", "s3://b/t", storage_options=options), START)
    assert cond(obs, "Ready")[0] == "False"


# -- several polls, odd histories ---------------------------------------------------------------
def test_the_first_checkpoint_lets_cleanup_run_in_the_same_pass(tmp_path: Path) -> None:
    dated_table(tmp_path, 12)  # 12 daily commits, no checkpoint, all past the 30-day retention
    now = START + 60 * DAY
    target = Target("ns", "t", str(tmp_path))
    w = TableWatcher(now)
    obs = w.maintain(target, w.observe(target, now), now)
    assert ("Normal", "Checkpointed") in events(obs)
    commits = sorted(p.name for p in (tmp_path / "_delta_log").glob("*.json"))
    assert commits == ["00000000000000000011.json"]


def test_degraded_stays_true_while_the_last_vacuum_was_refused(tmp_path: Path) -> None:
    dated_table(tmp_path, 3)
    target = Target("ns", "t", str(tmp_path), settings={"deleted_file_retention_ms": DAY})
    now = START + 60 * DAY
    w = TableWatcher(now)
    w.maintain(target, w.observe(target, now), now)
    b = LogBuilder(tmp_path)
    b.next_version = 3
    b.commit(add("g.parquet"), commit_info())
    obs = w.maintain(target, w.observe(target, now + 60_000), now + 60_000)
    assert status_of(obs)["lastMaintenance"]["vacuum"]["result"] == "refused"
    assert cond(obs, "Degraded")[0] == "True"


def _maintained_then_recreated(tmp_path: Path) -> tuple[TableWatcher, Target, Path, int]:
    """A 12-commit table maintained at START + 60 days, then dropped and written again in place
    with a shorter log (files keep old times, as a restore from a backup does)."""
    root = tmp_path / "t"
    dated_table(root, 12)
    now = START + 60 * DAY
    target = Target("ns", "t", str(root))
    w = TableWatcher(now)
    w.maintain(target, w.observe(target, now), now)
    shutil.rmtree(root)
    dated_table(root, 3, prefix="new")
    return w, target, root, now


def test_a_table_recreated_with_a_shorter_log_is_read_again(tmp_path: Path, holding: str) -> None:
    w, target, _, now = _maintained_then_recreated(tmp_path)
    obs = w.observe(target, now + 60_000)
    assert status_of(obs)["version"] == 2 and status_of(obs)["files"] == 3


def test_vacuum_never_deletes_live_files_of_a_recreated_table(tmp_path: Path, holding: str) -> None:
    w, target, root, now = _maintained_then_recreated(tmp_path)
    later = now + DAY + 1
    w.maintain(target, w.observe(target, later), later)
    assert sorted(p.name for p in root.glob("*.parquet")) == [f"new{v}.parquet" for v in range(3)]


def test_the_status_says_where_each_retention_came_from(tmp_path: Path) -> None:
    dated_table(tmp_path, 3)
    settings = {"log_retention_ms": 5 * DAY, "sources": {"log_retention_ms": "spec"}}
    target = Target("ns", "t", str(tmp_path), settings=settings)
    obs = TableWatcher(START).observe(target, START + 3 * DAY)
    assert status_of(obs)["retention"] == {
        "logRetention": {"ms": 5 * DAY, "source": "spec"},
        "deletedFileRetention": {"ms": 7 * DAY, "source": "default"},
    }


def test_a_damaged_newest_checkpoint_is_read_past_and_rewritten(tmp_path: Path) -> None:
    dated_table(tmp_path, 12)
    assert main(["checkpoint", str(tmp_path), "--version", "5", "--now", str(START)]) == 0
    assert main(["checkpoint", str(tmp_path), "--version", "11", "--now", str(START)]) == 0
    damaged = tmp_path / "_delta_log" / "00000000000000000011.checkpoint.parquet"
    good = damaged.read_bytes()
    damaged.write_bytes(good[: len(good) // 2])  # truncated, as a killed copy leaves it
    now = START + 60 * DAY  # every commit is past the log retention
    target = Target("ns", "t", str(tmp_path))
    w = TableWatcher(now)
    obs = w.observe(target, now)
    assert cond(obs, "Ready") == ("True", "Watching") and status_of(obs)["files"] == 12
    obs = w.maintain(target, obs, now)
    assert ("Warning", "CheckpointRepaired") in events(obs)
    assert "00000000000000000011.checkpoint.parquet" in all_text(obs)
    log = {p.name for p in (tmp_path / "_delta_log").iterdir()}
    # The checkpoint read instead (5) and its commit stay in this run; only older ones went.
    assert "00000000000000000005.checkpoint.parquet" in log
    assert "00000000000000000005.json" in log and "00000000000000000004.json" not in log
    snap = open_table(str(tmp_path)).snapshot()
    assert not snap.damaged_checkpoints and snap.segment.checkpoint.version == 11
    assert snap.num_files == 12


def test_a_held_table_reads_its_file_actions_only_for_a_vacuum_with_candidates(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    dated_table(tmp_path, 12)
    target = Target("ns", "t", str(tmp_path))
    now = START + 60 * DAY
    w = TableWatcher(now, hold_file_actions=-1)
    w.maintain(target, w.observe(target, now), now)  # FULL first
    loads = snapshot_reads(monkeypatch)
    later = now + DAY
    quiet = w.maintain(target, w.observe(target, later), later)
    vac = next(o for o in quiet.outcomes if o.operation == "vacuum")
    assert _run(vac).mode == "lite" and vac.result == "skipped"
    assert loads == []  # nothing removed since: no candidates, no file actions read
    b = LogBuilder(tmp_path)
    b.next_version = 12
    b.commit(remove("f0.parquet", ts=START + 20 * DAY), mtime_ms=START + 20 * DAY)
    again = later + DAY
    done = w.maintain(target, w.observe(target, again), again)
    vac = next(o for o in done.outcomes if o.operation == "vacuum")
    assert _run(vac).mode == "lite" and vac.result == "done"
    assert not (tmp_path / "f0.parquet").exists() and (tmp_path / "f1.parquet").exists()
    # The references, at the version the vacuum brought it to. The table read again after a
    # change made by maintenance, as every watcher does, is counted from its checkpoint a
    # batch at a time (more actions than are held): no snapshot load.
    assert loads == [12]
    assert isinstance(w._snap, HeldSnapshot) and status_of(done)["files"] == 11


def test_a_long_log_without_a_checkpoint_is_counted_in_runs_of_commits(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A table with no checkpoint and more commits than are counted at a time is read as
    counts, a run of commits at a time (never loaded whole), and reports what a load would."""
    from deltakeeper.delta import held

    monkeypatch.setattr(held, "_COUNT_BYTES", 512)
    dated_table(tmp_path, 9)
    b = LogBuilder(tmp_path)
    b.next_version = 9
    b.commit(remove("f2.parquet", ts=START + 9 * DAY), mtime_ms=START + 9 * DAY)
    loads = snapshot_reads(monkeypatch)
    target = Target("ns", "t", str(tmp_path))
    w = TableWatcher(START + 10 * DAY, hold_file_actions=0)
    obs = w.observe(target, START + 10 * DAY)
    assert loads == []  # counted, not loaded
    assert isinstance(w._snap, HeldSnapshot) and w._snap.version == 9
    assert status_of(obs)["files"] == 8 and status_of(obs)["tombstones"] == 1
    full = TableWatcher(START + 10 * DAY, hold_file_actions=10**12)
    assert status_of(full.observe(target, START + 10 * DAY)) == status_of(obs)


def _run(o: Outcome) -> VacuumRun:
    run = vacuum_op.run_of(o)
    assert run is not None, o
    return run


# -- when cleanup is looked at -------------------------------------------------------------------
HOUR = 3_600_000


def _cleanups(obs: Observation) -> list[Outcome]:
    return [o for o in obs.outcomes if o.operation == "cleanup"]


def test_a_quiet_table_plans_cleanup_when_its_cut_off_moves_not_hourly(tmp_path: Path) -> None:
    """Planning cleanup lists the log: a quiet table pays for it once a day, when the cut-off
    day moves on (midnight UTC + retention), and that look finds what the move made due."""
    day = START // DAY * DAY + 60 * DAY  # a midnight UTC
    b = LogBuilder(tmp_path)
    for v in range(5):  # before the cut-off at day - 30 days
        actions = [protocol(), metadata()] if v == 0 else []
        b.commit(*actions, add(f"f{v}.parquet"), mtime_ms=day - 31 * DAY + 12 * HOUR + v * HOUR)
    b.commit(add("f5.parquet"), mtime_ms=day - 30 * DAY + 6 * HOUR)  # past it the day after
    target = Target("ns", "t", str(tmp_path), settings={"checkpoint_interval": 5})
    now = day + 12 * HOUR
    w = TableWatcher(now, spread_ms=0)
    first = w.maintain(target, w.observe(target, now), now)
    assert status_of(first)["lastCheckpointVersion"] == 5
    assert [o.result for o in _cleanups(first)] == ["skipped"]  # no checkpoint at or before 4

    looked: list[tuple[int, Outcome]] = []
    listings = []
    for now in range(day + 12 * HOUR + 600_000, day + 2 * DAY + HOUR, 600_000):
        obs = w.observe(target, now)
        listings.append(obs.requests["list"])
        looked += [(now, o) for o in _cleanups(w.maintain(target, obs, now))]
    # One look a day, at the first poll past each midnight (the cut-off day moves then).
    assert [when for when, _ in looked] == [day + DAY, day + 2 * DAY]
    done = looked[0][1]
    assert done.result == "done" and done.deleted_files == 5
    commits = sorted(p.name for p in (tmp_path / "_delta_log").glob("*.json"))
    assert commits == ["00000000000000000005.json"]
    assert looked[1][1].result == "skipped"
    # Every other poll was one listing from the last version.
    assert listings.count(1) == len(listings) - 2


def test_a_look_again_is_spread_per_table(tmp_path: Path) -> None:
    dated_table(tmp_path, 3)
    target = Target("ns", "t", str(tmp_path))
    now = START + 60 * DAY
    w = TableWatcher(now, spread_ms=20 * 60_000)
    w.maintain(target, w.observe(target, now), now)
    move = (now - 30 * DAY) // DAY * DAY + DAY + 30 * DAY
    assert w.look_again_ms == {"cleanup": move + 20 * 60_000}
    assert "cleanup" not in w.observe(target, move + 20 * 60_000 - 1).due
    assert "cleanup" in w.observe(target, move + 20 * 60_000).due
    assert 0 <= TableWatcher(now).spread_ms < HOUR


def test_an_edit_plans_the_checkpoint_and_cleanup_at_the_next_poll(tmp_path: Path) -> None:
    """A new interval that makes a checkpoint due at the table's current version: it is
    written at the next poll, not at the next commit."""
    b = LogBuilder(tmp_path)
    b.commit(protocol(), metadata(), add("f0.parquet"), commit_info())
    for v in range(1, 6):
        b.commit(add(f"f{v}.parquet"), commit_info())
    target = Target("ns", "t", str(tmp_path), generation=1, settings={"checkpoint_interval": 5})
    now = now_ms()
    w = TableWatcher(now)
    first = w.maintain(target, w.observe(target, now), now)
    assert status_of(first)["lastCheckpointVersion"] == 5
    append(tmp_path, 6, 2)  # version 7: 2 commits past the checkpoint, fewer than 5
    moved = w.maintain(target, w.observe(target, now + 1000), now + 1000)
    assert status_of(moved)["lastCheckpointVersion"] == 5
    assert w.observe(target, now + 2000).due == ()

    edited = replace(target, generation=2, settings={"checkpoint_interval": 2})
    obs = w.observe(edited, now + 3000)
    assert obs.due == ("checkpoint", "cleanup")
    after = w.maintain(edited, obs, now + 3000)
    assert status_of(after)["lastCheckpointVersion"] == 7
    assert w.observe(edited, now + 4000).due == ()


def test_a_commit_that_lands_while_maintenance_runs_is_planned_for_at_the_next_poll(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The snapshot read after maintenance holds that commit already, so no poll sees the log
    move: its checkpoint is planned all the same (CI once waited 60 s for it in vain)."""
    from deltakeeper.runtime import watcher as watcher_module

    b = LogBuilder(tmp_path)
    b.commit(protocol(), metadata(), add("f0.parquet"), commit_info())
    b.commit(add("f1.parquet"), commit_info())
    target = Target("ns", "t", str(tmp_path), settings={"checkpoint_interval": 1})
    now = now_ms()
    w = TableWatcher(now)
    real = watcher_module.executor.execute

    def execute_then_commit(*args: Any, **kw: Any) -> Any:
        report = real(*args, **kw)
        append(tmp_path, 2, 1)  # another writer's commit, while this pass finishes
        return report

    with monkeypatch.context() as m:
        m.setattr(watcher_module.executor, "execute", execute_then_commit)
        first = w.maintain(target, w.observe(target, now), now)
    assert status_of(first)["lastCheckpointVersion"] == 1 and status_of(first)["version"] == 2
    obs = w.observe(target, now + 1000)
    assert obs.due == ("checkpoint",)
    assert status_of(w.maintain(target, obs, now + 1000))["lastCheckpointVersion"] == 2
    assert w.observe(target, now + 2000).due == ()
