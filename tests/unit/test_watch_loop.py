"""The watch loop on real local tables: status, conditions, events, schedules, metrics,
credentials, and standalone mode end to end (`deltakeeper run --once`, `status`)."""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

import pytest

from deltakeeper.cli import main
from deltakeeper.runtime.model import Target
from tests.support.logbuilder import LogBuilder, add, commit_info, metadata, protocol

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
