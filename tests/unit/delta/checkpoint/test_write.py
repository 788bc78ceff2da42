"""delta/checkpoint/write.py: writing past a damaged checkpoint or hint, then moving the hint."""

from __future__ import annotations

from pathlib import Path

import pytest

from deltakeeper.delta import paths
from deltakeeper.delta.checkpoint import load_for_checkpoint, write_checkpoint
from deltakeeper.delta.errors import CorruptLogError
from deltakeeper.delta.log import last_checkpoint
from deltakeeper.delta.table import open_table
from tests.support.checkpoints import DAY, NOW, V2, checkpoint, partitioned_table


def _log(path: Path) -> Path:
    return path / paths.LOG_DIR


def test_truncated_part_is_reported_then_repaired(tmp_path):
    path = partitioned_table(tmp_path, n=20)
    first = checkpoint(path, part_size=5)
    good = open_table(str(path)).snapshot()
    part = path / first.keys[1]
    part.write_bytes(part.read_bytes()[:100])
    read_past = open_table(str(path)).snapshot()  # the damaged checkpoint is read past
    assert part.name in read_past.damaged_checkpoints[0].error
    assert read_past.segment.checkpoint is None and read_past.num_files == good.num_files
    table = open_table(str(path))
    snap = load_for_checkpoint(table)  # rebuilt from the commits
    assert snap.segment.checkpoint is None and snap.num_files == good.num_files
    write_checkpoint(table, snap, NOW, 30 * DAY, part_size=5)
    again = open_table(str(path)).snapshot()
    assert sorted(again.files["path"].to_pylist()) == sorted(good.files["path"].to_pylist())
    assert again.segment.checkpoint is not None


def test_a_hint_naming_a_missing_checkpoint_is_moved_to_the_new_one(tmp_path):
    path = partitioned_table(tmp_path)
    body = last_checkpoint.serialize({"version": 7, "size": 3})
    (_log(path) / "_last_checkpoint").write_bytes(body)
    table = open_table(str(path))
    assert table.snapshot().num_files == 12  # falls back to listing the log
    result = write_checkpoint(table, load_for_checkpoint(table), NOW, DAY)
    assert result.last_checkpoint_moved  # the hint named a checkpoint that is not there
    assert last_checkpoint.parse((_log(path) / "_last_checkpoint").read_bytes()).version == 1


def test_missing_sidecar_is_an_error_then_repaired(tmp_path):
    path = partitioned_table(tmp_path, V2)
    first = checkpoint(path, part_size=4)
    (path / first.keys[0]).unlink()
    with pytest.raises(CorruptLogError, match="is missing"):
        open_table(str(path)).snapshot()
    # A classic-named V2 checkpoint is what readers pick first at a version.
    second = checkpoint(path, part_size=4, classic=True)
    assert second.key == f"_delta_log/{paths.checkpoint(1)}"
    assert open_table(str(path)).snapshot().num_files == 12
    assert (path / first.keys[1]).is_file()  # nothing deleted
