"""The image layer: the operator and compaction images built with buildah (vfs storage,
chroot isolation) by scripts/image/build.sh on local Debian bases made with mmdebstrap, then
inspected and run. Running a container is `buildah run` on the host network, which is how the
operator inside reaches the e2e API server on 127.0.0.1."""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest

from tests.e2e.conftest import kube_cluster  # noqa: F401 (fixture)

REPO = Path(__file__).resolve().parents[2]
SCRIPTS = REPO / "scripts" / "image"
HADOLINT = Path(sys.executable).parent / "hadolint"


def buildah(
    *args: str, check: bool = True, timeout: float = 600
) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [str(SCRIPTS / "buildah.sh"), *args],
        capture_output=True,
        text=True,
        check=check,
        timeout=timeout,
    )


def build(kind: str) -> str:
    """Build the image with the project's script (cached base, wheels and jars); its tag."""
    done = subprocess.run(
        ["bash", str(SCRIPTS / "build.sh"), kind], stdout=subprocess.PIPE, text=True, timeout=3000
    )
    assert done.returncode == 0, f"scripts/image/build.sh {kind} failed ({done.returncode})"
    return done.stdout.strip().rsplit("IMAGE=", 1)[1]


def image_config(tag: str) -> dict[str, Any]:
    """The OCI config of `tag`: Entrypoint, Cmd, User, Env, Labels, ..."""
    info = json.loads(buildah("inspect", "--type", "image", tag).stdout)
    return dict(info["OCIv1"]["config"])


@contextmanager
def container(tag: str) -> Iterator[str]:
    name = buildah("from", "--pull-never", tag).stdout.strip()
    try:
        yield name
    finally:
        buildah("rm", name, check=False)


def run_in(name: str, *cmd: str, timeout: float = 120) -> subprocess.CompletedProcess[str]:
    """`cmd` inside container `name`, as the image's user, on the host network."""
    return buildah("run", "--isolation", "chroot", name, "--", *cmd, check=False, timeout=timeout)


@pytest.fixture(scope="session")
def operator_image() -> str:
    return build("operator")
