"""Read-only storage: every writing command stops with exit 4 and a message, and nothing changes.

The table is bind-mounted read-only in a private mount namespace (`unshare -m`), so the refusal
comes from the kernel (EROFS), as on a read-only volume in a pod.
"""

import hashlib
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from tests.support.logbuilder import LogBuilder, add, metadata, protocol, remove

pytestmark = pytest.mark.integration

DAY = 86_400_000
START = 1_700_000_000_000
NOW = START + 90 * DAY


def tree_digest(root: Path) -> dict[str, str]:
    return {
        str(p.relative_to(root)): hashlib.sha256(p.read_bytes()).hexdigest()
        for p in sorted(root.rglob("*"))
        if p.is_file()
    }


def make_table(root: Path) -> None:
    b = LogBuilder(root)
    for v in range(15):
        actions = [add(f"f{v}.parquet")]
        if v == 0:
            actions = [protocol(), metadata(), *actions]
        if v == 3:
            actions.append(remove("f1.parquet", ts=START + 3 * DAY))
        b.commit(*actions, mtime_ms=START + v * DAY)
        path = root / f"f{v}.parquet"
        path.write_bytes(b"x" * 10)
        os.utime(path, ns=(START * 1_000_000,) * 2)
    (root / "stray.parquet").write_bytes(b"x")
    os.utime(root / "stray.parquet", ns=(START * 1_000_000,) * 2)


def run_read_only(src: Path, mnt: Path, *argv: str) -> subprocess.CompletedProcess[str]:
    cli = " ".join([sys.executable, "-m", "deltakeeper", *argv])
    script = (
        f"mount --bind {src} {mnt} && mount -o remount,bind,ro {mnt} && "
        f"touch {mnt}/probe 2>/dev/null && echo WRITABLE && exit 99; {cli}"
    )
    return subprocess.run(
        ["unshare", "-m", "sh", "-c", script], capture_output=True, text=True, timeout=120
    )


COMMANDS = [
    ("checkpoint",),
    ("cleanup", "--log-retention", "30d"),
    ("vacuum",),
    ("maintain",),
]


@pytest.mark.parametrize("command", COMMANDS, ids=lambda c: c[0])
def test_writing_commands_on_read_only_storage_exit_4_and_change_nothing(tmp_path, command):
    if shutil.which("unshare") is None:
        pytest.fail("unshare (util-linux) is needed to mount the table read-only")
    src, mnt = tmp_path / "table", tmp_path / "mnt"
    src.mkdir()
    mnt.mkdir()
    make_table(src)
    if command[0] == "cleanup":  # cleanup needs a checkpoint to cut at
        subprocess.run(
            [sys.executable, "-m", "deltakeeper", "checkpoint", str(src), "--now", str(NOW)],
            check=True,
            capture_output=True,
        )
    before = tree_digest(src)
    proc = run_read_only(src, mnt, command[0], str(mnt), "--now", str(NOW), *command[1:])
    assert "WRITABLE" not in proc.stdout, "the bind mount did not become read-only"
    assert proc.returncode == 4, (proc.returncode, proc.stdout, proc.stderr)
    assert "read-only" in proc.stderr.lower() or "read-only" in proc.stdout.lower()
    assert "Traceback" not in proc.stderr
    assert tree_digest(src) == before
