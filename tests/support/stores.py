"""Start, wait for and stop the object-store emulators the integration tests run against.

MinIO (S3), fake-gcs-server (GCS) and Azurite (Azure Blob) come from scripts/stores/install.sh,
which builds or installs them once into ${XDG_CACHE_HOME:-~/.cache}/deltakeeper/. Each server
runs on a free 127.0.0.1 port with its data in a temporary folder, and dies with the test run.
Nothing here skips: a server that cannot start is an error with its log attached.

fake-gcs-server does not serve the XML API that obstore speaks for uploads and listings; it runs
behind tests/support/gcs_xml.py, which answers those through its JSON API (see there).

`Emulator.requests()` is each store's own count of the requests it served, by operation:
MinIO's Prometheus metrics, Azurite's debug log, the GCS gateway's log.
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
import ssl
import subprocess
import sys
import time
import urllib.error
import urllib.request
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

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
    requests_log: Path | None = None  # where the store writes one line a request (not MinIO)
    helpers: list[subprocess.Popen[bytes]] = field(default_factory=list)  # die with it
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
        for helper in self.helpers:
            waiting.stop(helper, 15, 15)
        waiting.stop(self.process, 15, 15)

    def requests(self) -> Counter[str]:
        """The requests the store itself served so far, by operation (list, get, head, put,
        delete, other), read once they settle (the logs are written after the answers)."""
        return served(self.counter())

    def counter(self) -> dict[str, str]:
        """What `served` needs to count this store's requests, from any process."""
        log = str(self.requests_log) if self.requests_log else ""
        return {"name": self.name, "endpoint": self.endpoint, "log": log}


def served(counter: dict[str, str]) -> Counter[str]:
    """The requests a store served so far, by operation, once the count settles; `counter` is
    an Emulator's `counter()`."""

    def read() -> Counter[str]:
        if counter["name"] == "minio":
            return minio_requests(counter["endpoint"])
        text = Path(counter["log"]).read_text() if counter["log"] else ""
        if counter["name"] == "azurite":  # its log is written a moment after the answer
            return _azurite_requests(text)
        return Counter(_gateway_op(line) for line in text.splitlines() if line)

    return settled(read)


MINIO_OPS = {
    "listobjectsv2": "list",
    "listobjectsv1": "list",
    "getobject": "get",
    "headobject": "head",
    "putobject": "put",
    "newmultipartupload": "put",
    "putobjectpart": "put",
    "completemultipartupload": "put",
    "deletemultipleobjects": "delete",
    "deleteobject": "delete",
    "abortmultipartupload": "delete",
}


def minio_requests(endpoint: str) -> Counter[str]:
    """MinIO's own count of S3 requests by operation (list, get, head, put, delete, other)."""
    out: Counter[str] = Counter()
    for api, n in minio_api_requests(endpoint).items():
        out[MINIO_OPS.get(api, "other")] += n
    return out


def minio_api_requests(endpoint: str) -> Counter[str]:
    """MinIO's own count of S3 requests by API name (listobjectsv2, deletemultipleobjects, ...),
    from its Prometheus endpoint (v3: up to date at once, where v2's is cached for some
    seconds)."""
    with urllib.request.urlopen(f"{endpoint}/minio/metrics/v3/api/requests", timeout=10) as r:
        text = r.read().decode()
    out: Counter[str] = Counter()
    for line in text.splitlines():
        if line.startswith("minio_api_requests_total{"):
            labels, value = line.rsplit(" ", 1)
            out[labels.split('name="', 1)[1].split('"', 1)[0].lower()] += int(float(value))
    return out


def settled(read: Callable[[], Counter[str]], timeout: float = 30) -> Counter[str]:
    """`read()` once two reads a moment apart agree (or `timeout` has passed)."""
    deadline = time.monotonic() + timeout
    last = read()
    while time.monotonic() < deadline:
        time.sleep(1)
        now = read()
        if now == last:
            return now
        last = now
    return last


def _azurite_requests(text: str) -> Counter[str]:
    """Azurite's debug log: a "RequestMethod=" line for each request it served, and one or two
    for each part of a Blob Batch, which it logs with the port in their URL (the requests as
    they arrived come without)."""
    out: Counter[str] = Counter()
    for line in text.splitlines():
        if "BlobStorageContextMiddleware: RequestMethod=" not in line:
            continue
        method = line.split("RequestMethod=", 1)[1].split(" ", 1)[0]
        url = urlsplit(line.split("RequestURL=", 1)[1].split(" ", 1)[0])
        if url.port is None:
            out[_azurite_op(method, url.query)] += 1
    return out


def _azurite_op(method: str, query: str) -> str:
    if method == "GET" and "comp=list" in query:
        return "list"
    if method == "POST" and "comp=batch" in query:
        return "delete"
    return {"GET": "get", "HEAD": "head", "PUT": "put", "DELETE": "delete"}.get(method, "other")


def _gateway_op(line: str) -> str:
    method, kind, path = line.split(" ", 2)
    if kind == "list" or (method == "GET" and "/o?" in path):
        return "list"
    if kind in ("put", "multipart"):
        return "delete" if method == "DELETE" else "put"
    return {"GET": "get", "HEAD": "head", "DELETE": "delete", "POST": "put"}.get(method, "other")


def _spawn(
    cmd: list[str], workdir: Path, env: dict[str, str], name: str = "server"
) -> tuple[subprocess.Popen[bytes], Path]:
    log = workdir / f"{name}.log"
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


def _http_status(url: str, context: ssl.SSLContext | None = None) -> int:
    try:
        with urllib.request.urlopen(url, timeout=2, context=context) as r:
            return int(r.status)
    except urllib.error.HTTPError as e:
        return int(e.code)


def start_minio(
    binary: str, workdir: Path, bucket: str = "lake", env: dict[str, str] | None = None
) -> Emulator:
    """`env`: more of MinIO's settings (its MINIO_NOTIFY_WEBHOOK_* ones, say)."""
    port, console = free_port(), free_port()
    user, password = "deltakeeper", secrets.token_hex(16)
    env = {
        "MINIO_ROOT_USER": user,
        "MINIO_ROOT_PASSWORD": password,
        "MINIO_BROWSER": "off",
        "MINIO_UPDATE": "off",
        # its request metrics without a bearer token: an independent count of what was sent
        "MINIO_PROMETHEUS_AUTH_TYPE": "public",
        **(env or {}),
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
    port, gateway_port = free_port(), free_port()
    server = f"http://127.0.0.1:{port}"
    cmd = [binary, "-scheme", "http", "-host", "127.0.0.1", "-port", str(port)]
    cmd += ["-backend", "filesystem", "-filesystem-root", str(workdir / "data")]
    cmd += ["-public-host", f"127.0.0.1:{port}"]
    cmd += ["-external-url", server, "-log-level", "warn"]
    proc, log = _spawn(cmd, workdir, {})
    requests_log = workdir / "gateway-requests.log"
    requests_log.touch()
    gateway_cmd = [sys.executable, "-m", "tests.support.gcs_xml", str(gateway_port), server]
    gateway_env = {"PYTHONPATH": str(REPO)}
    gateway, _ = _spawn([*gateway_cmd, str(requests_log)], workdir, gateway_env, "gateway")
    endpoint = f"http://127.0.0.1:{gateway_port}"
    options = {"endpoint_url": endpoint, "token": "anon", "project": "deltakeeper"}
    emu = Emulator("fake-gcs-server", "gs", bucket, endpoint, options, "", proc, log)
    emu.requests_log, emu.helpers = requests_log, [gateway]
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
    requests_log = workdir / "debug.log"  # a line per request: the count of what it served
    cmd += ["--debug", str(requests_log)]
    proc, log = _spawn(cmd, workdir, {"AZURITE_ACCOUNTS": f"{account}:{key}"})
    options = {
        "account_name": account,
        "account_key": key,
        "connection_string": (
            f"DefaultEndpointsProtocol=http;AccountName={account};AccountKey={key};"
            f"BlobEndpoint={endpoint};"
        ),
    }
    emu = Emulator("azurite", "az", container, endpoint, options, key, proc, log, requests_log)
    # Any HTTP answer (403 without credentials) means it is listening.
    return _wait_ready(emu, lambda: _http_status(f"{endpoint}?comp=list") > 0)


@dataclass
class Service:
    """A queue server beside the stores (ElasticMQ, Azurite's Queue service): where it
    listens, and how to stop and start it again on the same port."""

    name: str
    endpoint: str
    process: subprocess.Popen[bytes]
    log: Path
    restart: Callable[[], subprocess.Popen[bytes]]
    grace_s: float = 15  # after SIGTERM, before SIGKILL

    def log_tail(self, lines: int = 40) -> str:
        try:
            return "\n".join(self.log.read_text(errors="replace").splitlines()[-lines:])
        except OSError:
            return "(no log)"

    def stop(self) -> None:
        waiting.stop(self.process, self.grace_s, 15)

    def start_again(self, probe: Callable[[], bool]) -> None:
        self.process = self.restart()
        _wait_listening(self, probe)


def _wait_listening(service: Service, probe: Callable[[], bool], timeout: float = 90) -> Service:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if service.process.poll() is not None:
            raise StoreStartError(
                f"{service.name} exited with code {service.process.returncode}:\n"
                f"{service.log_tail()}"
            )
        with contextlib.suppress(OSError):
            if probe():
                return service
        time.sleep(0.2)
    service.stop()
    raise StoreStartError(f"{service.name} not ready after {timeout:.0f}s:\n{service.log_tail()}")


def elasticmq_probe(endpoint: str) -> Callable[[], bool]:
    return lambda: _http_status(f"{endpoint}/?Action=ListQueues") > 0


def start_elasticmq(jars: str, workdir: Path, queues: dict[str, int]) -> Service:
    """ElasticMQ (scripts/stores/install_elasticmq.sh's jars) on a free port, in memory, with
    `queues` (name -> visibility timeout in seconds) created at start, so a restart has them
    again (empty)."""
    port = free_port()
    workdir.mkdir(parents=True, exist_ok=True)
    declared = "\n".join(
        f"  {name} {{ defaultVisibilityTimeout = {seconds} seconds }}"
        for name, seconds in queues.items()
    )
    conf = workdir / "elasticmq.conf"
    conf.write_text(
        'include classpath("application.conf")\n'
        f'node-address {{ protocol = http, host = "127.0.0.1", port = {port} }}\n'
        f'rest-sqs {{ enabled = true, bind-port = {port}, bind-hostname = "127.0.0.1" }}\n'
        "rest-stats { enabled = false }\n"
        f"queues {{\n{declared}\n}}\n"
    )
    cmd = ["java", "-Xmx256m", f"-Dconfig.file={conf}", "-cp", f"{jars}/*"]
    cmd += ["org.elasticmq.server.Main"]

    def spawn() -> subprocess.Popen[bytes]:
        return _spawn(cmd, workdir, {}, "elasticmq")[0]

    endpoint = f"http://127.0.0.1:{port}"
    # In memory, and slow to stop on SIGTERM (Pekko's shutdown): killed after 2 s.
    service = Service("elasticmq", endpoint, spawn(), workdir / "elasticmq.log", spawn, 2)
    return _wait_listening(service, elasticmq_probe(endpoint))


def start_azurite_queue(
    binary: str, workdir: Path, account: str, key: str, tls: tuple[Path, Path] | None = None
) -> Service:
    """Azurite's Queue service on a free port, in memory, with `account` and its key. `tls`
    (certificate, key): HTTPS, and Azure AD bearer tokens accepted (Azurite's basic OAuth: it
    checks a token's issuer, audience and lifetime, not its signature)."""
    port = free_port()
    workdir.mkdir(parents=True, exist_ok=True)
    cmd = [binary, "--queueHost", "127.0.0.1", "--queuePort", str(port), "--inMemoryPersistence"]
    cmd += ["--skipApiVersionCheck", "--disableTelemetry", "--silent"]
    scheme, context = "http", None
    if tls is not None:
        cmd += ["--cert", str(tls[0]), "--key", str(tls[1]), "--oauth", "basic"]
        scheme, context = "https", ssl.create_default_context(cafile=tls[0])

    def spawn() -> subprocess.Popen[bytes]:
        return _spawn(cmd, workdir, {"AZURITE_ACCOUNTS": f"{account}:{key}"}, "azurite-queue")[0]

    endpoint = f"{scheme}://127.0.0.1:{port}/{account}"
    service = Service("azurite-queue", endpoint, spawn(), workdir / "azurite-queue.log", spawn)
    return _wait_listening(service, lambda: _http_status(f"{endpoint}?comp=list", context) > 0)


def start_fake_pubsub(workdir: Path) -> Service:
    """tests/support/fake_pubsub.py (no Pub/Sub emulator can be installed here) on a free
    port."""
    port = free_port()
    workdir.mkdir(parents=True, exist_ok=True)
    cmd = [sys.executable, "-m", "tests.support.fake_pubsub", str(port)]

    def spawn() -> subprocess.Popen[bytes]:
        return _spawn(cmd, workdir, {"PYTHONPATH": str(REPO)}, "fake-pubsub")[0]

    endpoint = f"http://127.0.0.1:{port}"
    service = Service("fake-pubsub", endpoint, spawn(), workdir / "fake-pubsub.log", spawn)
    return _wait_listening(service, lambda: _http_status(f"{endpoint}/v1/projects/p/x/y") > 0)
