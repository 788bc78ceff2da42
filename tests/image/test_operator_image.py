"""The operator image (Dockerfile), built with buildah on a local Debian base: its config and
contents as the issue asks (non-root, no compilers, no pip caches, OCI labels, the entrypoint),
and `deltakeeper operator` run from it against the e2e API server, keeping a local table."""

from __future__ import annotations

import os
import re
import shutil
import stat
import subprocess
import tempfile
import time
import tomllib
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest
import yaml
from deltalake import PostCommitHookProperties, write_deltalake
from kubernetes import client

from tests.image.conftest import HADOLINT, REPO, SCRIPTS, buildah, container, image_config, run_in
from tests.support import native, waiting
from tests.support.kube import KubeCluster
from tests.support.stores import free_port

pytestmark = pytest.mark.image
UID = 10001
GROUP, VERSION, PLURAL = "deltakeeper.io", "v1alpha1", "deltatables"
COMPILERS = ("gcc", "cc", "c++", "g++", "clang", "x86_64-linux-gnu-gcc", "make", "ld")


def project_version() -> str:
    with open(REPO / "pyproject.toml", "rb") as f:
        return str(tomllib.load(f)["project"]["version"])


def test_hadolint_passes_on_both_dockerfiles() -> None:
    done = subprocess.run(
        [str(HADOLINT), "Dockerfile", "Dockerfile.spark"],
        cwd=REPO,
        capture_output=True,
        text=True,
        check=False,
    )
    assert done.returncode == 0, done.stdout + done.stderr


def test_hadolint_catches_what_it_should() -> None:
    """The lint above is not vacuous: an unpinned base and `apt-get` without pins fail it."""
    bad = "FROM python\nRUN apt-get update && apt-get install -y gcc\n"
    done = subprocess.run(
        [str(HADOLINT), "-"], input=bad, capture_output=True, text=True, check=False
    )
    assert done.returncode != 0
    assert "DL3006" in done.stdout  # untagged image
    assert "DL3008" in done.stdout  # unpinned apt package


def test_config_entrypoint_user_and_labels(operator_image: str) -> None:
    config = image_config(operator_image)
    assert config["Entrypoint"] == ["deltakeeper"]
    assert config["Cmd"] == ["operator"]
    assert config["User"] == f"{UID}:{UID}"
    labels = config["Labels"]
    assert labels["org.opencontainers.image.title"] == "deltakeeper"
    assert labels["org.opencontainers.image.version"] == project_version()
    assert labels["org.opencontainers.image.licenses"] == "Apache-2.0"
    assert labels["org.opencontainers.image.source"].startswith("https://")
    assert labels["org.opencontainers.image.revision"] not in ("", "unknown")


def test_contents_no_compilers_no_pip_no_sources(operator_image: str) -> None:
    with container(operator_image) as name:
        root = Path(buildah("mount", name).stdout.strip())
        try:
            found = [
                f"{d}/{c}"
                for d in ("usr/bin", "usr/local/bin", "bin", "opt/venv/bin")
                for c in COMPILERS
                if (root / d / c).exists()
            ]
            assert found == [], f"compilers or build tools in the image: {found}"
            venv = root / "opt/venv"
            assert (venv / "bin/deltakeeper").is_file()
            assert not list(venv.glob("lib/python*/site-packages/pip")), "pip is in the venv"
            caches = [p for p in (root / "root/.cache", root / "wheels") if p.exists()]
            caches += list(root.glob("home/*/.cache"))
            assert caches == [], f"build leftovers in the image: {caches}"
            site = next(venv.glob("lib/python*/site-packages"))
            names = {p.name for p in site.iterdir()}
            assert "deltakeeper" in names and "kopf" in names
            # the native stats parser, staged from the host's build (CI requires it)
            if native.REQUIRED:
                assert any(n.startswith("deltakeeper_native") for n in names), sorted(names)
            # deltakeeper only: none of the test or dev extras came along
            assert not names & {"pytest", "deltalake", "duckdb", "ruff", "mypy", "hypothesis"}
            # nothing of the venv is writable by the user the operator runs as
            writable = [
                p
                for p in venv.rglob("*")
                if p.stat().st_uid == UID or p.stat().st_mode & stat.S_IWOTH
            ][:5]
            assert writable == []
        finally:
            buildah("umount", name, check=False)


def _pin(name: str, version: str) -> str:
    """`name==version`, the name normalized as packaging does (PEP 503)."""
    return f"{re.sub(r'[-_.]+', '-', name).lower()}=={version}"


def test_dependencies_are_the_lock_files(operator_image: str) -> None:
    """The venv holds deltakeeper (and its native parser) plus exactly what
    requirements/operator.lock pins: no other package, no other version."""
    lock = (REPO / "requirements" / "operator.lock").read_text()
    locked = {_pin(*pin) for pin in re.findall(r"^([\w.-]+)==([^\s;\\]+)", lock, re.MULTILINE)}
    with container(operator_image) as name:
        root = Path(buildah("mount", name).stdout.strip())
        try:
            site = next((root / "opt/venv").glob("lib/python*/site-packages"))
            infos = [p.name.removesuffix(".dist-info") for p in site.glob("*.dist-info")]
        finally:
            buildah("umount", name, check=False)
    installed = {_pin(*info.split("-", 1)) for info in infos}
    ours = {p for p in installed if p.startswith(("deltakeeper==", "deltakeeper-native=="))}
    assert "deltakeeper==" + project_version() in ours
    assert installed - ours == locked


def test_entrypoint_runs_as_non_root(operator_image: str) -> None:
    config = image_config(operator_image)
    with container(operator_image) as name:
        ids = run_in(name, "sh", "-c", "id -u; id -g; id -un")
        assert ids.returncode == 0, ids.stderr
        # a named user: kopf's peer identity (getpass.getuser()) needs the passwd entry
        assert ids.stdout.split() == [str(UID), str(UID), "deltakeeper"]
        helped = run_in(name, *config["Entrypoint"], "--help")
        assert helped.returncode == 0, helped.stderr
        for command in ("operator", "run", "inspect", "maintain"):
            assert command in helped.stdout
        version = run_in(name, *config["Entrypoint"], "--version")
        assert version.stdout.strip() == f"deltakeeper {project_version()}"
        default = run_in(name, *config["Entrypoint"], *config["Cmd"], "--help")
        assert default.returncode == 0 and "--namespace" in default.stdout, default.stderr
        if native.REQUIRED:  # the host-built wheel loads
            probe = "from deltakeeper.delta import native_stats; assert native_stats.available()"
            loaded = run_in(name, "/opt/venv/bin/python", "-c", probe)
            assert loaded.returncode == 0, loaded.stderr


# -- the operator from the image against the e2e API server ----------------------------------
def _open_dir(prefix: str) -> Path:
    """A folder outside pytest's private (0700) tmp tree, so the image's user can reach it."""
    path = Path(tempfile.mkdtemp(prefix=prefix))
    path.chmod(0o755)
    return path


@pytest.fixture
def shared_dirs() -> Iterator[tuple[Path, Path]]:
    kube, table = _open_dir("deltakeeper-image-kube-"), _open_dir("deltakeeper-image-table-")
    yield kube, table
    shutil.rmtree(kube, ignore_errors=True)
    shutil.rmtree(table, ignore_errors=True)


def _kubeconfig_for_container(cluster: KubeCluster, folder: Path) -> None:
    """The cluster's kubeconfig with its CA copied next to it, as seen at /kube inside."""
    config = yaml.safe_load(cluster.kubeconfig.read_text())
    ca = Path(config["clusters"][0]["cluster"]["certificate-authority"])
    shutil.copy(ca, folder / "ca.crt")
    config["clusters"][0]["cluster"]["certificate-authority"] = "/kube/ca.crt"
    (folder / "config").write_text(yaml.safe_dump(config))
    for p in folder.iterdir():
        p.chmod(0o644)


def _write_table(path: Path, commits: int) -> None:
    hooks = PostCommitHookProperties(create_checkpoint=False, cleanup_expired_logs=False)
    for n in range(commits):
        data = pa.table({"id": pa.array(range(n * 10, n * 10 + 10), pa.int64())})
        mode = "overwrite" if n == 0 else "append"
        write_deltalake(str(path), data, mode=mode, post_commithook_properties=hooks)
    for p in [path, *path.rglob("*")]:
        os.chown(p, UID, UID)


def _until(check: Any, timeout: float, what: str) -> Any:
    deadline = time.monotonic() + timeout
    while not (value := check()):
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout:.0f}s waiting for {what}")
        time.sleep(0.5)
    return value


def test_operator_from_the_image_keeps_a_local_table(
    operator_image: str, kube_cluster: KubeCluster, shared_dirs: tuple[Path, Path]
) -> None:
    kube_dir, table = shared_dirs
    _kubeconfig_for_container(kube_cluster, kube_dir)
    _write_table(table, 12)  # versions 0..11: one checkpoint (interval 10) is due
    namespace = "image"
    kube_cluster.create_namespace(namespace)
    objects = client.CustomObjectsApi(kube_cluster.api_client())
    body = {
        "apiVersion": f"{GROUP}/{VERSION}",
        "kind": "DeltaTable",
        "metadata": {"name": "events"},
        "spec": {"uri": "/data/events", "pollInterval": "1s"},
    }
    objects.create_namespaced_custom_object(GROUP, VERSION, namespace, PLURAL, body)

    config = image_config(operator_image)
    port = free_port()
    with container(operator_image) as name:
        log = kube_dir / "operator.log"
        with open(log, "wb") as out:
            proc = subprocess.Popen(
                [
                    str(SCRIPTS / "buildah.sh"), "run", "--isolation", "chroot",
                    "--env", "KUBECONFIG=/kube/config",
                    "--volume", f"{kube_dir}:/kube:ro",
                    "--volume", f"{table}:/data/events",
                    name, "--",
                    *config["Entrypoint"], *config["Cmd"],
                    "--namespace", namespace, "--metrics-port", str(port),
                ],
                stdin=subprocess.DEVNULL,
                stdout=out,
                stderr=subprocess.STDOUT,
            )  # fmt: skip
        try:

            def status() -> dict[str, Any]:
                got = objects.get_namespaced_custom_object(
                    GROUP, VERSION, namespace, PLURAL, "events"
                )
                assert proc.poll() is None, log.read_text(errors="replace")
                return dict(got.get("status") or {})

            done = _until(
                lambda: (s := status()).get("lastCheckpointVersion") == 11 and s,
                180,
                "the operator in the image to checkpoint version 11",
            )
            assert done["version"] == 11
            ready = {c["type"]: c["status"] for c in done["conditions"]}
            assert ready["Ready"] == "True", done["conditions"]
            checkpoint = table / "_delta_log" / f"{11:020d}.checkpoint.parquet"
            assert checkpoint.is_file()
            assert checkpoint.stat().st_uid == UID  # written by the image's user
            url = f"http://127.0.0.1:{port}/metrics"
            with urllib.request.urlopen(url, timeout=10) as r:
                metrics = r.read().decode()
            assert 'deltakeeper_table_version{namespace="image",table="events"} 11.0' in metrics
        finally:
            waiting.stop(proc, 30)
