"""`run --once` on a table whose vacuum cannot be planned (a deeply nested
`_last_vacuum_info`, an inventory that is not Parquet): the checkpoint the pending commits ask
for is written all the same, and the status names the step that failed, not the checkpoint
(issue 49, section 2, item 5)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from deltakeeper.cli import main
from tests.support.tables import daily_table


def run_once(tmp_path: Path, capsys: pytest.CaptureFixture[str], vacuum: str) -> dict:
    """The table's status after `run --once` with spec.vacuum `vacuum` (YAML flow)."""
    folder = tmp_path / "m"
    folder.mkdir()
    (folder / "t.yaml").write_text(
        "apiVersion: deltakeeper.io/v1alpha1\nkind: DeltaTable\n"
        f"metadata: {{name: t}}\nspec: {{uri: 'file://{tmp_path / 't'}', vacuum: {vacuum}}}\n"
    )
    main(["run", "--manifests", str(folder), "--once"])
    capsys.readouterr()
    assert main(["status", "--manifests", str(folder), "--json"]) == 0
    out = capsys.readouterr().out
    return json.loads(out[out.index("{\n") :])["default/t"]


def checkpoints(root: Path) -> list[str]:
    return sorted(p.name for p in (root / "_delta_log").glob("*.checkpoint.parquet"))


def test_a_deeply_nested_last_vacuum_info_does_not_stop_the_checkpoint(tmp_path, capsys):
    root = tmp_path / "t"
    daily_table(root, commits=50)
    (root / "_delta_log" / "_last_vacuum_info").write_text('{"a":' * 100_000 + "1" + "}" * 100_000)
    status = run_once(tmp_path, capsys, "{mode: lite}")
    done = status["lastMaintenance"]
    assert checkpoints(root) == ["00000000000000000049.checkpoint.parquet"]
    assert done["checkpoint"]["result"] == "done", done
    assert "RecursionError" not in json.dumps(status)


def test_an_inventory_that_is_not_parquet_fails_the_vacuum_alone(tmp_path, capsys):
    root = tmp_path / "t"
    daily_table(root, commits=50)
    (tmp_path / "inv.parquet").write_bytes(b"hello, not Parquet")
    inventory = f"{{mode: inventory, inventory: {{uri: '{tmp_path / 'inv.parquet'}'}}}}"
    status = run_once(tmp_path, capsys, inventory)
    done = status["lastMaintenance"]
    assert checkpoints(root) == ["00000000000000000049.checkpoint.parquet"]
    assert done["checkpoint"]["result"] == "done", done
    assert done["vacuum"]["result"] in ("refused", "failed"), done
    assert "not a Parquet file" in json.dumps(done["vacuum"]), done
    text = json.dumps(status)
    assert "checkpoint failed" not in text and "ArrowInvalid" not in text
    assert (root / "f1.parquet").exists()
