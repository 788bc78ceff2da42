"""Start, wait for and stop the object-store emulators the integration tests run against.

MinIO (S3), fake-gcs-server (GCS) and Azurite (Azure Blob) come from scripts/stores/install.sh,
which builds or installs them once into ${XDG_CACHE_HOME:-~/.cache}/deltakeeper/. Each server
runs on a free 127.0.0.1 port with its data in a temporary folder, and dies with the test run.
Nothing here skips: a server that cannot start is an error with its log attached.
"""

from __future__ import annotations

import base64
import contextlib
import ctypes
import importlib
import os
import secrets
import signal
import socket
import subprocess
import time
import urllib.error
import urllib.request
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from tests.support import waiting

REPO = Path(__file__).resolve().parents[2]
INSTALL = REPO / "scripts" / "stores" / "install.sh"

# The plain gcsfs class: its default "extended" one waits 60 s per upload on a gRPC lookup
# that fake-gcs-server does not serve.
FILESYSTEMS = {
    "s3": "s3fs:S3FileSystem",
    "gs": "gcsfs.core:GCSFileSystem",
    "az": "adlfs:AzureBlobFileSystem",
}


class StoreStartError(RuntimeError):
    """An emulator did not come up; the message carries the end of its log."""


def install() -> dict[str, str]:
    """Run install.sh (a no-op once cached) and return {"MINIO": path, "FAKE_GCS_SERVER": ...}.

    install.sh takes a lock, so parallel test processes do not build the same thing twice.
    """
    done = subprocess.run(["bash", str(INSTALL)], stdout=subprocess.PIPE, text=True, check=False)
    if done.returncode != 0:
        raise StoreStartError(f"{INSTALL} failed with exit code {done.returncode}")
    paths = dict(line.split("=", 1) for line in done.stdout.splitlines() if "=" in line)
    for name, path in paths.items():
        if not os.access(path, os.X_OK):
            raise StoreStartError(f"{INSTALL} reported {name}={path}, which is not executable")
    return paths


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _die_with_parent() -> None:
    # PR_SET_PDEATHSIG: the kernel sends SIGTERM to the server if the test process dies.
    ctypes.CDLL("libc.so.6", use_errno=True).prctl(1, signal.SIGTERM)


@dataclass
class Emulator:
    """A running emulator and what a test needs to use it."""

    name: str
    scheme: str  # table URIs are scheme://bucket/path
    bucket: str  # created at start; tests may create more with create_bucket
    endpoint: str
    storage_options: dict[str, Any]
    secret: str  # the credential that must never show up in messages ("" when none)
    process: subprocess.Popen[bytes]
    log: Path
    _fs: Any = field(default=None, repr=False)

    def uri(self, path: str = "", bucket: str | None = None) -> str:
        return f"{self.scheme}://{bucket or self.bucket}/{path.strip('/')}".rstrip("/")

    @property
    def fs(self) -> Any:
        """An fsspec filesystem on the emulator, independent of deltakeeper's own storage code."""
        if self._fs is None:
            module, _, name = FILESYSTEMS[self.scheme].partition(":")
            cls = getattr(importlib.import_module(module), name)
            self._fs = cls(skip_instance_cache=True, **self.storage_options)
        return self._fs

    def create_bucket(self, name: str) -> None:
        self.fs.mkdir(name)

    def upload_folder(self, local: str | Path, uri: str) -> int:
        """Copy every file under `local` to below `uri`; returns how many were copied."""
        bucket, _, path = uri.split("://", 1)[1].partition("/")
        base = f"{bucket.split('@', 1)[0]}/{path.strip('/')}".rstrip("/")  # abfss: container@host
        root = Path(local)
        blobs = {
            f"{base}/{p.relative_to(root).as_posix()}": p.read_bytes()
            for p in sorted(root.rglob("*"))
            if p.is_file()
        }
        for start in range(0, len(blobs), 2000):
            chunk = dict(list(blobs.items())[start : start + 2000])
            self.fs.pipe(chunk, batch_size=64)
        return len(blobs)

    def log_tail(self, lines: int = 40) -> str:
        try:
            return "\n".join(self.log.read_text(errors="replace").splitlines()[-lines:])
        except OSError:
            return "(no log)"

    def stop(self) -> None:
        waiting.stop(self.process, 15, 15)


def _spawn(
    cmd: list[str], workdir: Path, env: dict[str, str]
) -> tuple[subprocess.Popen[bytes], Path]:
    log = workdir / "server.log"
    with open(log, "wb") as out:
        proc = subprocess.Popen(
            cmd,
            cwd=workdir,
            env={**os.environ, **env},
            stdin=subprocess.DEVNULL,
            stdout=out,
            stderr=subprocess.STDOUT,
            preexec_fn=_die_with_parent,
        )
    return proc, log


def _wait_ready(emu: Emulator, probe: Callable[[], bool], timeout: float = 90) -> Emulator:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if emu.process.poll() is not None:
            raise StoreStartError(
                f"{emu.name} exited with code {emu.process.returncode}:\n{emu.log_tail()}"
            )
        with contextlib.suppress(OSError):
            if probe():
                try:
                    emu.create_bucket(emu.bucket)
                except BaseException:
                    emu.stop()
                    raise
                return emu
        time.sleep(0.2)
    emu.stop()
    raise StoreStartError(f"{emu.name} not ready after {timeout:.0f}s:\n{emu.log_tail()}")


def _http_status(url: str) -> int:
    try:
        with urllib.request.urlopen(url, timeout=2) as r:
            return int(r.status)
    except urllib.error.HTTPError as e:
        return int(e.code)


def start_minio(binary: str, workdir: Path, bucket: str = "lake") -> Emulator:
    port, console = free_port(), free_port()
    user, password = "deltakeeper", secrets.token_hex(16)
    env = {
        "MINIO_ROOT_USER": user,
        "MINIO_ROOT_PASSWORD": password,
        "MINIO_BROWSER": "off",
        "MINIO_UPDATE": "off",
    }
    (workdir / "data").mkdir(parents=True, exist_ok=True)
    cmd = [binary, "server", "--quiet", "--address", f"127.0.0.1:{port}"]
    cmd += ["--console-address", f"127.0.0.1:{console}", str(workdir / "data")]
    proc, log = _spawn(cmd, workdir, env)
    endpoint = f"http://127.0.0.1:{port}"
    options = {"endpoint_url": endpoint, "key": user, "secret": password}
    emu = Emulator("minio", "s3", bucket, endpoint, options, password, proc, log)
    return _wait_ready(emu, lambda: _http_status(f"{endpoint}/minio/health/ready") == 200)


def start_fake_gcs(binary: str, workdir: Path, bucket: str = "lake") -> Emulator:
    port = free_port()
    endpoint = f"http://127.0.0.1:{port}"
    cmd = [binary, "-scheme", "http", "-host", "127.0.0.1", "-port", str(port)]
    cmd += ["-backend", "filesystem", "-filesystem-root", str(workdir / "data")]
    cmd += ["-public-host", f"127.0.0.1:{port}"]
    cmd += ["-external-url", endpoint, "-log-level", "warn"]
    proc, log = _spawn(cmd, workdir, {})
    options = {"endpoint_url": endpoint, "token": "anon", "project": "deltakeeper"}
    emu = Emulator("fake-gcs-server", "gs", bucket, endpoint, options, "", proc, log)
    return _wait_ready(emu, lambda: _http_status(f"{endpoint}/storage/v1/b") == 200)


def start_azurite(binary: str, workdir: Path, container: str = "lake") -> Emulator:
    port = free_port()
    account = "deltakeeper"
    key = base64.b64encode(secrets.token_bytes(32)).decode()
    endpoint = f"http://127.0.0.1:{port}/{account}"
    cmd = [binary, "--blobHost", "127.0.0.1", "--blobPort", str(port)]
    cmd += ["--inMemoryPersistence"]
    # The Azure SDK speaks a newer API version than this Azurite release knows.
    cmd += ["--skipApiVersionCheck", "--disableTelemetry", "--silent"]
    proc, log = _spawn(cmd, workdir, {"AZURITE_ACCOUNTS": f"{account}:{key}"})
    options = {
        "account_name": account,
        "account_key": key,
        "connection_string": (
            f"DefaultEndpointsProtocol=http;AccountName={account};AccountKey={key};"
            f"BlobEndpoint={endpoint};"
        ),
    }
    emu = Emulator("azurite", "az", container, endpoint, options, key, proc, log)
    # Any HTTP answer (403 without credentials) means it is listening.
    return _wait_ready(emu, lambda: _http_status(f"{endpoint}?comp=list") > 0)
