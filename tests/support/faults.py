"""Crash a deltakeeper command at its k-th storage mutation, for real, with SIGKILL.

No production code knows about this. `crash()` starts a child Python (this file as a module)
that wraps the mutating methods of `deltakeeper.delta.storage.Storage` — `overwrite`,
`put_if_absent` and `delete_many`, which every backend shares and through which every write
and delete goes — and then runs `deltakeeper.cli.main(argv)`. Each mutation is one numbered
step; a batch delete is one step per key, so a crash can land inside a batch. Before acting, the
child appends the step to a journal file (one JSON object a line); at step k it kills itself:

- "before": nothing of step k happened.
- "after":  step k is done, the process dies before the next instruction that uses it.
- "torn":   writes on the local disk only. `LocalStorage` writes a temp file aside, then renames
  or links it into place, so a crash mid-write can leave a partial temp file (never a partial
  final file): half the bytes are written through the same temp-file code, then the process
  dies. An object-store PUT is atomic, so there is no torn mode there.

`count_steps()` runs the same command without a kill and returns every step it took.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[2]
WHEN = ("before", "after", "torn")
WRITES = ("overwrite", "put_if_absent")
TIMEOUT_S = 120


@dataclass(frozen=True)
class Step:
    n: int  # 1-based
    op: str  # overwrite, put_if_absent or delete
    key: str  # relative to the table root
    size: int  # bytes written; 0 for a delete

    @property
    def is_write(self) -> bool:
        return self.op in WRITES


class FaultError(AssertionError):
    """The child did not do what the fault spec asked (it exited, or died the wrong way)."""


# -- parent side ------------------------------------------------------------------------------


def _run(argv: list[str], kill_at: int, when: str) -> tuple[subprocess.CompletedProcess, list]:
    with tempfile.TemporaryDirectory(prefix="deltakeeper-fault-") as tmp:
        spec = Path(tmp) / "spec.json"
        journal = Path(tmp) / "journal.jsonl"
        # argv may carry store credentials: a file keeps them out of the process list
        spec.write_text(json.dumps({"argv": argv, "kill_at": kill_at, "when": when}))
        env = dict(os.environ)
        env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(REPO), env.get("PYTHONPATH")]))
        proc = subprocess.run(
            [sys.executable, "-m", "tests.support.faults", str(spec), str(journal)],
            cwd=REPO,
            env=env,
            capture_output=True,
            text=True,
            timeout=TIMEOUT_S,
        )
        lines = journal.read_text().splitlines() if journal.exists() else []
    return proc, [Step(**json.loads(line)) for line in lines]


def count_steps(argv: list[str]) -> list[Step]:
    """Run `deltakeeper argv` to the end (exit 0 expected); every mutation it made, in order."""
    proc, steps = _run(argv, 0, "before")
    if proc.returncode != 0:
        raise FaultError(f"unfaulted run exited {proc.returncode}: {proc.stderr.strip()}")
    return steps


def crash(argv: list[str], k: int, when: str) -> list[Step]:
    """Run `deltakeeper argv` and SIGKILL it at step k (`when` in WHEN); the steps it began."""
    if when not in WHEN or k < 1:
        raise ValueError(f"bad fault: step {k} {when}")
    proc, steps = _run(argv, k, when)
    if proc.returncode != -signal.SIGKILL:
        raise FaultError(
            f"expected death by SIGKILL at step {k} ({when}), got exit {proc.returncode} "
            f"after {len(steps)} steps: {proc.stderr.strip()[-2000:]}"
        )
    if len(steps) != k:
        raise FaultError(f"killed at step {k} ({when}) but the journal has {len(steps)} steps")
    return steps


# -- child side -------------------------------------------------------------------------------


class _Hook:
    """Counts mutations, journals them, and kills the process at the chosen one."""

    def __init__(self, kill_at: int, when: str, journal: str) -> None:
        self.kill_at = kill_at
        self.when = when
        self.n = 0
        self.fd = os.open(journal, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)

    def step(self, op: str, key: str, size: int) -> bool:
        """Journal the next step; die now if it is the one killed before. True: kill after."""
        self.n += 1
        line = json.dumps({"n": self.n, "op": op, "key": key, "size": size}) + "\n"
        os.write(self.fd, line.encode())  # in the kernel before any kill: no flush needed
        if self.n != self.kill_at:
            return False
        if self.when == "before":
            _die()
        return True

    def write(self, storage: Any, original: Any, op: str, key: str, data: bytes) -> None:
        kill_after = self.step(op, key, len(data))
        if kill_after and self.when == "torn":
            self._torn(storage, key, data)
        original(storage, key, data)
        if kill_after:
            _die()

    def _torn(self, storage: Any, key: str, data: bytes) -> None:
        from deltakeeper.delta.storage import LocalStorage

        if not isinstance(storage, LocalStorage):
            raise FaultError("a torn write only exists on the local disk; a PUT is atomic")
        storage._write_temp(key, data[: len(data) // 2])
        _die()

    def delete(self, storage: Any, original: Any, keys: list[str]) -> int:
        i = self.kill_at - self.n - 1  # where in this batch the killed step falls
        if not 0 <= i < len(keys):
            for key in keys:
                self.step("delete", key, 0)
            return int(original(storage, keys))  # the kill is elsewhere: send the batch whole
        if self.when == "torn":
            raise FaultError("a delete cannot be torn")
        for key in keys[:i]:
            self.step("delete", key, 0)
        original(storage, keys[: i + (self.when == "after")])  # what got through before death
        self.step("delete", keys[i], 0)  # kills here when "before"
        _die()
        return 0


def _die() -> None:
    os.kill(os.getpid(), signal.SIGKILL)


def install(kill_at: int, when: str, journal: str) -> None:
    """Wrap Storage's mutating methods (every backend inherits them) with the hook."""
    from deltakeeper.delta.storage import Storage

    hook = _Hook(kill_at, when, journal)
    overwrite, put_if_absent, delete_many = (
        Storage.overwrite,
        Storage.put_if_absent,
        Storage.delete_many,
    )

    def faulty_overwrite(self: Any, key: str, data: bytes) -> None:
        hook.write(self, overwrite, "overwrite", key, data)

    def faulty_put_if_absent(self: Any, key: str, data: bytes) -> None:
        hook.write(self, put_if_absent, "put_if_absent", key, data)

    def faulty_delete_many(self: Any, keys: Any) -> int:
        return hook.delete(self, delete_many, list(keys))

    Storage.overwrite = faulty_overwrite  # type: ignore[method-assign]
    Storage.put_if_absent = faulty_put_if_absent  # type: ignore[method-assign]
    Storage.delete_many = faulty_delete_many  # type: ignore[method-assign]
    _hook_local_uploads(hook)


def _hook_local_uploads(hook: _Hook) -> None:
    """The local disk's streamed upload (a checkpoint) renames its temp file over the key at
    commit without going through `overwrite`: its commit is one "overwrite" step. Before: as
    if killed before the upload opened; torn: the temp file holds half the bytes and is never
    renamed."""
    from deltakeeper.delta.storage import local

    commit = local._LocalUpload.commit

    def faulty_commit(self: Any) -> None:
        if hook.n + 1 == hook.kill_at and hook.when == "before":
            # Killed before the upload began: no storage mutation lies between its opening and
            # its commit, so the table is as a kill then leaves it (torn covers the temp file).
            self.abort()
        kill_after = hook.step("overwrite", self.key, self.size)
        if kill_after and hook.when == "torn":
            self.file.flush()
            os.truncate(self.tmp, self.size // 2)
            _die()
        commit(self)
        if kill_after:
            _die()

    local._LocalUpload.commit = faulty_commit  # type: ignore[method-assign]


def _main(spec_file: str, journal: str) -> int:
    spec = json.loads(Path(spec_file).read_text())
    install(spec["kill_at"], spec["when"], journal)
    from deltakeeper.cli import main

    return main(spec["argv"])


if __name__ == "__main__":
    sys.exit(_main(*sys.argv[1:]))
