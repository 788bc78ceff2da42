"""Write requirements/operator.lock: deltakeeper's [project] dependencies resolved by uv for the
operator image (CPython 3.11, x86_64 Linux), every file's hash included, so the image installs
them with pip --require-hashes. It keeps the pins the file has unless told to move them:

    scripts/lock.py                        make lock: follow pyproject.toml, keep the pins
    scripts/lock.py --upgrade              every pin to the newest release pyproject.toml allows
    scripts/lock.py --upgrade-package X    the same for X only
    scripts/lock.py --check                make lint: fail if the file no longer matches

--check resolves again from the file's own pins, offline from uv's cache when it can. A pin
that moves, appears or goes, or a hash the index no longer has, makes the file stale; files that
a pinned release gained on the index since do not (they would fail CI with nothing changed here).
"""

from __future__ import annotations

import difflib
import os
import subprocess
import sys
import tempfile
from pathlib import Path

from uv import find_uv_bin

REPO = Path(__file__).resolve().parent.parent
LOCK = REPO / "requirements" / "operator.lock"
HEADER = """\
# The operator image's runtime dependencies: the [project] dependencies of pyproject.toml,
# resolved by uv for CPython 3.11 on x86_64 Linux (the image's base), with every file's hash.
# Do not edit: `make lock` regenerates it (scripts/lock.py, which keeps these pins unless told
# --upgrade) and `make lint` fails when it no longer matches pyproject.toml.
"""
# glibc 2.36: Debian bookworm, the base of the image (scripts/image/base.sh, Dockerfile).
COMPILE = (
    *("pip", "compile", "pyproject.toml", "--quiet", "--no-config", "--no-header"),
    *("--generate-hashes", "--python-version", "3.11"),
    *("--python-platform", "x86_64-manylinux_2_36"),
)
CACHE = Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "deltakeeper" / "uv"


def resolve(pins: Path, options: list[str], offline_first: bool) -> str:
    """The lock's text, resolved from the pins in `pins` (uv prefers an output file's pins)."""
    env = {**os.environ, "UV_CACHE_DIR": str(CACHE)}
    with tempfile.TemporaryDirectory() as tmp:
        out = Path(tmp) / "operator.lock"
        for offline in ([["--offline"]] if offline_first else []) + [[]]:
            # Pins without hashes: uv would carry an output file's hashes over unchecked.
            if pins.exists():
                out.write_text("".join(f"{req}\n" for req in requirements(pins.read_text())))
            cmd = [find_uv_bin(), *COMPILE, "--output-file", str(out), *options, *offline]
            done = subprocess.run(cmd, cwd=REPO, env=env, capture_output=True, text=True)
            if done.returncode == 0:
                return HEADER + out.read_text()
        sys.stderr.write(done.stderr)
        raise SystemExit(f"lock: uv pip compile failed ({done.returncode})")


def requirements(text: str) -> dict[str, set[str]]:
    """`name==version[ ; markers]` -> its hashes."""
    out: dict[str, set[str]] = {}
    current = ""
    for line in text.splitlines():
        item = line.strip().removesuffix("\\").strip()
        if not item or item.startswith("#"):
            continue
        if item.startswith("--hash="):
            out[current].add(item.removeprefix("--hash="))
        else:
            current = item
            out[current] = set()
    return out


def stale_because(committed: str, fresh: str) -> list[str]:
    """Why the committed lock does not match a fresh resolution; [] when it does."""
    if committed == fresh:
        return []
    if not committed.startswith(HEADER):
        return ["its header is not the one scripts/lock.py writes"]
    ours, theirs = requirements(committed), requirements(fresh)
    if ours.keys() != theirs.keys():
        diff = difflib.unified_diff(sorted(ours), sorted(theirs), "committed", "resolved", n=0)
        return ["its pins differ from a fresh resolution:", *(d.rstrip() for d in diff)]
    return [f"{req}: hashes the index no longer has" for req in ours if ours[req] - theirs[req]]


def main(argv: list[str]) -> int:
    if argv == ["--check"]:
        if not LOCK.exists():
            print(f"{LOCK.relative_to(REPO)} is missing; run: make lock", file=sys.stderr)
            return 1
        reasons = stale_because(LOCK.read_text(), resolve(LOCK, [], offline_first=True))
        if reasons:
            print(f"{LOCK.relative_to(REPO)} is stale; run: make lock", file=sys.stderr)
            print("\n".join(f"  {r}" for r in reasons), file=sys.stderr)
            return 1
        return 0
    # Online: --upgrade wants the index as it is now, not as uv's cache last saw it.
    text = resolve(LOCK, argv, offline_first=False)
    LOCK.parent.mkdir(parents=True, exist_ok=True)
    LOCK.write_text(text)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
