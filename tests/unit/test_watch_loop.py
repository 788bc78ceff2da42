"""The watch loop on real local tables: status, conditions, events, schedules, metrics,
credentials, and standalone mode end to end (`deltakeeper run --once`, `status`)."""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path
from typing import Any

import pytest

from deltakeeper.cli import main
from deltakeeper.runtime.model import Problem, Target
from deltakeeper.runtime.watcher import TableWatcher
from tests.support.logbuilder import LogBuilder, add, commit_info, metadata, protocol
from tests.support.observed import status_of

NOW = 1_800_000_000_000


def _table(root: Path, commits: int = 3, **features: list[str]) -> LogBuilder:
    b = LogBuilder(root)
    b.commit(
        protocol(**features) if features else protocol(),
        metadata(),
        add("a.parquet"),
        commit_info(),
    )
    for i in range(1, commits):
        b.commit(add(f"f{i}.parquet", size=10 * i), commit_info())
    return b


def _target(root: Path, **kw: Any) -> Target:
    return Target("ns", "t", str(root), **kw)


def _cond(obs: Any, kind: str) -> tuple[str, str]:
    c = next(c for c in obs.conditions if c.type == kind)
    return c.status, c.reason


def test_first_poll_plans_everything_then_a_quiet_poll_costs_one_listing(tmp_path: Path) -> None:
    _table(tmp_path)
    w = TableWatcher(NOW)
    obs = w.observe(_target(tmp_path), NOW)
    assert obs.due == ("checkpoint", "cleanup", "vacuum")
    obs = w.maintain(_target(tmp_path), obs, NOW)
    assert (
        status_of(obs)["version"] == 2
        and status_of(obs)["files"] == 3
        and status_of(obs)["bytes"] == 130
    )
    assert _cond(obs, "Ready") == ("True", "Watching")
    quiet = w.observe(_target(tmp_path), NOW + 1000)
    assert quiet.due == ()
    assert dict(quiet.requests) == {"list": 1}
    assert quiet.events == []


def test_commits_past_the_interval_make_a_checkpoint(tmp_path: Path) -> None:
    b = _table(tmp_path, commits=2)
    target = _target(tmp_path, settings={"checkpoint_interval": 3})
    w = TableWatcher(NOW)
    w.maintain(target, w.observe(target, NOW), NOW)
    b.commit(add("g.parquet"), commit_info())
    obs = w.observe(target, NOW + 1)
    assert obs.due == ("checkpoint",)
    obs = w.maintain(target, obs, NOW + 1)
    # The commits are older than the 30-day log retention at NOW, and a new checkpoint is what
    # lets cleanup cut: it runs right after, in the same pass.
    assert [(e.type, e.reason) for e in obs.events] == [
        ("Normal", "Checkpointed"),
        ("Normal", "LogCleaned"),
    ]
    assert (
        status_of(obs)["lastCheckpointVersion"] == 2
        and status_of(obs)["commitsSinceCheckpoint"] == 0
    )
    assert status_of(obs)["lastMaintenance"]["checkpoint"]["result"] == "done"
    assert (tmp_path / "_delta_log" / "_last_checkpoint").exists()


def test_problems_refusals_and_suspend(tmp_path: Path) -> None:
    problem = Problem("SecretNotFound", "Secret ns/x does not exist")
    obs = TableWatcher(NOW).observe(_target(tmp_path / "none", problem=problem), NOW)
    assert _cond(obs, "Ready") == ("False", "SecretNotFound") and obs.requests == {}
    assert [e.reason for e in obs.events] == ["SecretNotFound"]

    obs = TableWatcher(NOW).observe(Target("ns", "t", "hdfs://nn/x"), NOW)
    assert _cond(obs, "Ready") == ("False", "InvalidSpec")

    (tmp_path / "empty").mkdir()
    obs = TableWatcher(NOW).observe(_target(tmp_path / "empty"), NOW)
    assert _cond(obs, "Ready") == ("False", "NotADeltaTable")

    future = tmp_path / "future"
    _table(future, reader=3, writer=7, readerFeatures=[], writerFeatures=["madeUpFeature"])
    before = sorted(p.name for p in (future / "_delta_log").iterdir())
    w = TableWatcher(NOW)
    obs = w.observe(_target(future), NOW)
    assert _cond(obs, "ProtocolSupported") == ("False", "UnsupportedFeatures") and obs.due == ()
    again = w.observe(_target(future), NOW + 1)
    assert again.events == []  # a Warning on the transition only
    assert sorted(p.name for p in (future / "_delta_log").iterdir()) == before

    ok = tmp_path / "ok"
    _table(ok)
    obs = TableWatcher(NOW).observe(_target(ok, suspend=True), NOW)
    assert _cond(obs, "Ready") == ("True", "Suspended") and obs.due == ()


def test_vacuum_dry_run_deletes_nothing(tmp_path: Path) -> None:
    _table(tmp_path)
    stray = tmp_path / "stray.parquet"
    stray.write_bytes(b"x")
    os.utime(stray, (NOW / 1000 - 30 * 86400,) * 2)
    target = _target(tmp_path, vacuum_dry_run=True)
    w = TableWatcher(NOW)
    obs = w.maintain(target, w.observe(target, NOW), NOW)
    assert status_of(obs)["lastMaintenance"]["vacuum"]["result"] == "dry-run"
    assert ("Normal", "VacuumDryRun") in [(e.type, e.reason) for e in obs.events]
    assert stray.exists()


def test_standalone_once_and_status(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    _table(tmp_path / "t")
    folder = tmp_path / "m"
    folder.mkdir()
    (folder / "t.yaml").write_text(
        "apiVersion: deltakeeper.io/v1alpha1\nkind: DeltaTable\n"
        f"metadata: {{name: good}}\n"
        f"spec: {{uri: 'file://{tmp_path / 't'}', checkpoint: {{interval: 2}}}}\n"
        "---\napiVersion: deltakeeper.io/v1alpha1\nkind: DeltaTable\n"
        f"metadata: {{name: gone}}\nspec: {{uri: 'file://{tmp_path / 'nothing'}'}}\n"
    )
    assert main(["run", "--manifests", str(folder), "--once"]) == 1  # one table is not Ready
    assert main(["status", "--manifests", str(folder), "--json"]) == 0
    out = capsys.readouterr().out
    statuses = json.loads(out[out.index("{\n") :])
    assert statuses["default/good"]["lastCheckpointVersion"] == 2
    assert statuses["default/good"]["observedGeneration"] == 1
    ready = {c["type"]: c for c in statuses["default/gone"]["conditions"]}["Ready"]
    assert ready["status"] == "False" and ready["reason"] == "NotADeltaTable"
    # A changed spec is a new generation.
    text = (folder / "t.yaml").read_text().replace("interval: 2", "interval: 3")
    (folder / "t.yaml").write_text(text)
    main(["run", "--manifests", str(folder), "--once"])
    capsys.readouterr()
    main(["status", "--manifests", str(folder), "--json"])
    out = capsys.readouterr().out
    assert json.loads(out)["default/good"]["observedGeneration"] == 2
    shutil.rmtree(folder / ".deltakeeper")
    assert main(["status", "--manifests", str(folder)]) == 2
