"""The queue event sources against real queue servers: ElasticMQ (SQS) and Azurite's Queue
service, fed storage event messages exactly as AWS and Azure document them (S3 direct,
SNS-wrapped and EventBridge; Event Grid BlobCreated in base64), for delta-rs commits on MinIO
and Azurite. `deltakeeper run` reads the queue; tables polled every 5 s with a 1 h resync show
each commit by an event poll, the messages are deleted once handled, and a queue server
stopped puts the tables back on their pollInterval with EventsDegraded until it is back."""

from __future__ import annotations

import asyncio
import base64
import json
import os
import signal
import subprocess
import time
import urllib.request
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any
from urllib.parse import quote_plus

import botocore.session
import pyarrow as pa
import pytest
from deltalake import write_deltalake

from deltakeeper.resources.event_sources import parse
from deltakeeper.runtime import queues
from deltakeeper.runtime.events import Events
from deltakeeper.runtime.metrics import Metrics
from deltakeeper.runtime.model import Target
from deltakeeper.runtime.queues.sqs import SqsClient
from tests.integration.test_events_minio import counter
from tests.integration.test_standalone import DELTAKEEPER, _scrape, _statuses, _until
from tests.support import stores
from tests.support.azure_ad import MSI_PATH, TokenEndpoint
from tests.support.manifests import table_doc
from tests.support.queue_messages import (
    blob_created,
    eventbridge,
    gcs_message,
    queue_text,
    s3_event,
    sns,
)
from tests.support.tls import self_signed

pytestmark = pytest.mark.integration

T = {"namespace": "lake", "table": "t"}
PREFIX = "dt=2026-12-06/a b/été 100%/orders"
QUEUE = "lake-events"
VISIBILITY_S = 2


def log_key(version: int) -> str:
    """The commit's key URL-encoded as S3 puts it in every event (a space as +)."""
    return quote_plus(f"{PREFIX}/_delta_log/{version:020d}.json", safe="/")


@pytest.fixture
def elasticmq(store_binaries: dict[str, str], tmp_path: Path) -> Iterator[stores.Service]:
    service = stores.start_elasticmq(
        store_binaries["ELASTICMQ"], tmp_path / "elasticmq", {QUEUE: VISIBILITY_S}
    )
    yield service
    service.stop()


def sqs_client(endpoint: str) -> Any:
    return botocore.session.get_session().create_client(
        "sqs",
        endpoint_url=endpoint,
        region_name="us-east-1",
        aws_access_key_id="test",
        aws_secret_access_key="test",
    )


def queue_url(endpoint: str) -> str:
    return f"{endpoint}/000000000000/{QUEUE}"


def in_queue(client: Any, url: str) -> int:
    """Messages in the queue, visible or received and not yet deleted."""
    names = ["ApproximateNumberOfMessages", "ApproximateNumberOfMessagesNotVisible"]
    got = client.get_queue_attributes(QueueUrl=url, AttributeNames=names)["Attributes"]
    return sum(int(got[n]) for n in names)


def delta_options(emu: stores.Emulator) -> dict[str, str]:
    return {
        "AWS_ENDPOINT_URL": emu.endpoint,
        "AWS_ACCESS_KEY_ID": emu.storage_options["key"],
        "AWS_SECRET_ACCESS_KEY": emu.storage_options["secret"],
        "AWS_REGION": "us-east-1",
        "AWS_ALLOW_HTTP": "true",
        "AWS_S3_ALLOW_UNSAFE_RENAME": "true",
    }


def condition(status: dict[str, Any], kind: str) -> tuple[str, str] | None:
    for c in status.get("conditions") or []:
        if c["type"] == kind:
            return c["status"], c["reason"]
    return None


def run_daemon(
    folder: Path, port: int, env: dict[str, str] | None = None
) -> subprocess.Popen[bytes]:
    argv = [str(DELTAKEEPER), "run", "--manifests", str(folder), "--metrics-port", str(port)]
    return subprocess.Popen(argv, stderr=subprocess.PIPE, env={**os.environ, **(env or {})})


def test_sqs_events_wake_tables_and_are_deleted_and_a_stopped_queue_falls_back(
    minio: stores.Emulator, elasticmq: stores.Service, tmp_path: Path
) -> None:
    source = f"sqs://us-east-1/000000000000/{QUEUE}?endpoint={elasticmq.endpoint}"
    sqs, url = sqs_client(elasticmq.endpoint), queue_url(elasticmq.endpoint)
    uri = minio.uri(f"sqs-{time.monotonic_ns()}/{PREFIX}")
    bucket_path = uri.split("://", 1)[1].split("/", 1)[1].rsplit(PREFIX, 1)[0]
    options = delta_options(minio)
    write_deltalake(uri, pa.table({"x": [0]}), storage_options=options)
    folder = tmp_path / "manifests"
    folder.mkdir()
    doc = table_doc(
        "t",
        uri,
        pollInterval="5s",
        events={"source": source, "resyncInterval": "1h"},
        storage={"options": minio.storage_options},
    )
    (folder / "t.json").write_text(json.dumps(doc))
    port = stores.free_port()
    proc = run_daemon(folder, port)

    def key(version: int) -> str:
        return quote_plus(bucket_path, safe="/") + log_key(version)

    def status() -> dict[str, Any]:
        return dict(_statuses(folder).get("lake/t", {}))

    def metric(name: str, **labels: str) -> float:
        return counter(_scrape(port), name, **labels)

    try:
        _until(lambda: status().get("version") == 0, 60, "the first poll")
        _until(lambda: status().get("events", {}).get("live"), 30, "events live")
        assert metric("deltakeeper_event_source_up", source=source) == 1
        fallback = metric("deltakeeper_polls_total", trigger="fallback")
        # One commit announced in each of the three shapes AWS delivers to SQS.
        shapes: list[Callable[[str], Any]] = [
            lambda k: s3_event(minio.bucket, k),
            lambda k: sns(s3_event(minio.bucket, k)),
            lambda k: eventbridge(minio.bucket, k),
        ]
        for version, shape in enumerate(shapes, start=1):
            write_deltalake(uri, pa.table({"x": [version]}), mode="append", storage_options=options)
            sqs.send_message(QueueUrl=url, MessageBody=json.dumps(shape(key(version))))
            _until(
                lambda v=version: metric("deltakeeper_table_version", **T) == v,
                10,
                f"version {version} by its event",
            )
        assert metric("deltakeeper_events_total", source=source, result="woke") == 3
        assert metric("deltakeeper_polls_total", trigger="event") >= 3
        assert metric("deltakeeper_polls_total", trigger="fallback") == fallback
        _until(lambda: status().get("version") == 3, 10, "version 3 in the status")
        assert status()["events"]["lastEventTime"] is not None
        # Handled, then deleted: nothing left in the queue, visible or not.
        _until(lambda: in_queue(sqs, url) == 0, 10, "the messages deleted")
        sqs.send_message(QueueUrl=url, MessageBody="not an event")
        _until(
            lambda: metric("deltakeeper_events_total", source=source, result="malformed") == 1,
            30,
            "the malformed message counted",
        )
        _until(lambda: in_queue(sqs, url) == 0, 10, "the malformed message deleted")

        # The queue server stops: the source is down, the table back on its pollInterval.
        elasticmq.stop()
        _until(lambda: metric("deltakeeper_event_source_up", source=source) == 0, 30, "down")
        _until(lambda: status().get("events", {}).get("live") is False, 15, "events not live")
        assert condition(status(), "EventsDegraded") == ("True", "EventSourceDown")
        write_deltalake(uri, pa.table({"x": [4]}), mode="append", storage_options=options)
        _until(lambda: status().get("version") == 4, 20, "version 4 by a fallback poll")
        assert metric("deltakeeper_polls_total", trigger="fallback") > fallback

        # Back: read again, live, and events wake the table again.
        elasticmq.start_again(stores.elasticmq_probe(elasticmq.endpoint))
        _until(lambda: metric("deltakeeper_event_source_up", source=source) == 1, 90, "up again")
        _until(lambda: status().get("events", {}).get("live") is True, 15, "live again")
        assert condition(status(), "EventsDegraded") == ("False", "EventsLive")
        write_deltalake(uri, pa.table({"x": [5]}), mode="append", storage_options=options)
        sqs.send_message(QueueUrl=url, MessageBody=json.dumps(s3_event(minio.bucket, key(5))))
        _until(lambda: metric("deltakeeper_table_version", **T) == 5, 10, "version 5")
    finally:
        proc.send_signal(signal.SIGINT)
        _, err = proc.communicate(timeout=60)
    assert proc.returncode == 0, err.decode()
    assert minio.storage_options["secret"] not in err.decode()


def test_a_message_received_and_not_deleted_comes_back_after_its_visibility_timeout(
    elasticmq: stores.Service,
) -> None:
    """A daemon stopped between receiving a message and deleting it: the message is hidden
    for the queue's visibility timeout, then delivered again, and deleted once handled."""
    source = f"sqs://us-east-1/000000000000/{QUEUE}?endpoint={elasticmq.endpoint}"
    sqs, url = sqs_client(elasticmq.endpoint), queue_url(elasticmq.endpoint)
    sqs.send_message(QueueUrl=url, MessageBody=json.dumps(s3_event("lake", log_key(7))))
    queue = parse(source)
    credentials = {"aws_access_key_id": "test", "aws_secret_access_key": "test"}
    woken: list[float] = []

    async def main() -> float:
        first = SqsClient(queue, credentials)  # the daemon that stops before deleting
        await first.check()
        [message] = await first.receive()
        assert message.objects == [("lake", log_key(7))]
        received = time.monotonic()
        await first.close()
        hub = Events(Metrics())
        hub.queues = queues.Queues(hub)
        table = hub.table(lambda: woken.append(time.monotonic()))
        table.follow(
            Target(
                "ns", "t", f"s3://lake/{PREFIX}", events_source=source, storage_options=credentials
            )
        )
        # The source coming up wakes its tables once (before its first receive): wait for it,
        # not a fixed time (a loaded machine took over 0.5 s to check the queue).
        up_by = time.monotonic() + 30
        while not hub.is_up(source) and time.monotonic() < up_by:
            await asyncio.sleep(0.05)
        assert hub.is_up(source), "the queue source never came up"
        woken.clear()
        deadline = time.monotonic() + 30
        while not woken and time.monotonic() < deadline:
            await asyncio.sleep(0.05)
        table.close()
        await asyncio.sleep(0.1)
        return received

    received = asyncio.run(main())
    assert woken, "the message never came back"
    assert woken[0] - received >= VISIBILITY_S - 0.5  # hidden for its visibility timeout
    _until(lambda: in_queue(sqs, url) == 0, 10, "the message deleted once handled")


def test_azure_blob_created_events_in_a_storage_queue_wake_tables_and_fall_back_when_down(
    azurite: stores.Emulator, store_binaries: dict[str, str], tmp_path: Path
) -> None:
    from azure.storage.queue import QueueClient

    o = azurite.storage_options
    account, key = o["account_name"], o["account_key"]
    service = stores.start_azurite_queue(
        store_binaries["AZURITE_QUEUE"], tmp_path / "azurite-queue", account, key
    )
    connection = (
        f"DefaultEndpointsProtocol=http;AccountName={account};AccountKey={key};"
        f"QueueEndpoint={service.endpoint};"
    )
    sdk = QueueClient.from_connection_string(connection, QUEUE)
    sdk.create_queue()
    source = f"azqueue://{account}/{QUEUE}?endpoint={service.endpoint}"
    path = f"azq-{time.monotonic_ns()}/{PREFIX}"
    uri = azurite.uri(path)
    options = {
        "AZURE_STORAGE_ACCOUNT_NAME": account,
        "AZURE_STORAGE_ACCOUNT_KEY": key,
        "AZURE_STORAGE_ENDPOINT": azurite.endpoint,
        "AZURE_ALLOW_HTTP": "true",
    }
    write_deltalake(uri, pa.table({"x": [0]}), storage_options=options)
    folder = tmp_path / "manifests"
    folder.mkdir()
    doc = table_doc(
        "t",
        uri,
        pollInterval="5s",
        events={"source": source, "resyncInterval": "1h"},
        storage={"options": o},
    )
    (folder / "t.json").write_text(json.dumps(doc))
    port = stores.free_port()
    proc = run_daemon(folder, port)

    def status() -> dict[str, Any]:
        return dict(_statuses(folder).get("lake/t", {}))

    def metric(name: str, **labels: str) -> float:
        return counter(_scrape(port), name, **labels)

    try:
        _until(lambda: status().get("version") == 0, 60, "the first poll")
        _until(lambda: status().get("events", {}).get("live"), 30, "events live")
        fallback = metric("deltakeeper_polls_total", trigger="fallback")
        # Event Grid's own schema, then CloudEvents': base64 JSON, as Event Grid writes them.
        for version, cloud in ((1, False), (2, True)):
            write_deltalake(uri, pa.table({"x": [version]}), mode="append", storage_options=options)
            blob = f"{path}/_delta_log/{version:020d}.json"
            sdk.send_message(queue_text(blob_created(azurite.bucket, blob, cloud=cloud)))
            _until(
                lambda v=version: metric("deltakeeper_table_version", **T) == v,
                10,
                f"version {version} by its event",
            )
        assert metric("deltakeeper_events_total", source=source, result="woke") == 2
        assert metric("deltakeeper_polls_total", trigger="fallback") == fallback
        _until(lambda: sdk.get_queue_properties().approximate_message_count == 0, 10, "deleted")

        service.stop()
        _until(lambda: metric("deltakeeper_event_source_up", source=source) == 0, 30, "down")
        _until(lambda: status().get("events", {}).get("live") is False, 15, "events not live")
        assert condition(status(), "EventsDegraded") == ("True", "EventSourceDown")
        write_deltalake(uri, pa.table({"x": [3]}), mode="append", storage_options=options)
        _until(lambda: status().get("version") == 3, 20, "version 3 by a fallback poll")
        assert metric("deltakeeper_polls_total", trigger="fallback") > fallback
    finally:
        proc.send_signal(signal.SIGINT)
        _, err = proc.communicate(timeout=60)
        service.stop()
    assert proc.returncode == 0, err.decode()
    assert key not in err.decode()


@pytest.mark.parametrize("identity", ["workload", "managed"])
def test_azure_identity_reads_a_queue_in_another_account_over_https(
    azurite: stores.Emulator, store_binaries: dict[str, str], tmp_path: Path, identity: str
) -> None:
    """The queue is in another storage account than the table, so the table's key is not used:
    the daemon takes Workload Identity's AZURE_* variables and trades the federated token for an
    Azure AD token, or, with only a client id, asks the metadata service for its user-assigned
    managed identity's token (stand-ins for both: tests/support/azure_ad.py), and reads the
    queue with it over HTTPS from Azurite, which accepts only a bearer token with Azure AD's
    issuer and storage's audience. No token is logged (that the token file is read again for
    each token: tests/unit/runtime/test_queues.py)."""
    from azure.storage.queue import QueueClient

    cert, cert_key = self_signed(tmp_path)
    account, key = "events", base64.b64encode(os.urandom(32)).decode()
    service = stores.start_azurite_queue(
        store_binaries["AZURITE_QUEUE"], tmp_path / "azurite-queue", account, key, (cert, cert_key)
    )
    connection = (
        f"DefaultEndpointsProtocol=https;AccountName={account};AccountKey={key};"
        f"QueueEndpoint={service.endpoint};"
    )
    sdk = QueueClient.from_connection_string(connection, QUEUE, connection_verify=str(cert))
    sdk.create_queue()
    federated = tmp_path / "azure-identity-token"
    federated.write_text("federated-jwt-from-the-kubelet")
    path = f"azad-{time.monotonic_ns()}/{PREFIX}"
    uri = azurite.uri(path)
    o = azurite.storage_options
    options = {
        "AZURE_STORAGE_ACCOUNT_NAME": o["account_name"],
        "AZURE_STORAGE_ACCOUNT_KEY": o["account_key"],
        "AZURE_STORAGE_ENDPOINT": azurite.endpoint,
        "AZURE_ALLOW_HTTP": "true",
    }
    write_deltalake(uri, pa.table({"x": [0]}), storage_options=options)
    folder = tmp_path / "manifests"
    folder.mkdir()
    source = f"azqueue://{account}/{QUEUE}?endpoint={service.endpoint}"
    events = {"source": source, "resyncInterval": "1h"}
    doc = table_doc("t", uri, pollInterval="1h", events=events, storage={"options": o})
    (folder / "t.json").write_text(json.dumps(doc))
    port = stores.free_port()
    with TokenEndpoint("tenant-1", "app-1", assertion=federated.read_text()) as aad:
        env = {"AZURE_CLIENT_ID": "app-1", "SSL_CERT_FILE": str(cert)}
        if identity == "workload":
            env["AZURE_TENANT_ID"] = "tenant-1"
            env["AZURE_FEDERATED_TOKEN_FILE"] = str(federated)
            env["AZURE_AUTHORITY_HOST"] = aad.url
        else:
            env["AZURE_MSI_ENDPOINT"] = aad.url + MSI_PATH
        proc = run_daemon(folder, port, env)
        try:
            _until(lambda: _statuses(folder).get("lake/t", {}).get("version") == 0, 60, "poll")
            live = lambda: _statuses(folder)["lake/t"].get("events", {}).get("live")  # noqa: E731
            _until(live, 30, "events live with an Azure AD token")
            write_deltalake(uri, pa.table({"x": [1]}), mode="append", storage_options=options)
            blob = f"{path}/_delta_log/{1:020d}.json"
            sdk.send_message(queue_text(blob_created(azurite.bucket, blob)))
            _until(
                lambda: counter(_scrape(port), "deltakeeper_table_version", **T) == 1,
                15,
                "version 1 by its event (the next interval poll is an hour away)",
            )
            woke = counter(_scrape(port), "deltakeeper_events_total", source=source, result="woke")
            assert woke == 1
            _until(lambda: sdk.get_queue_properties().approximate_message_count == 0, 10, "gone")
        finally:
            proc.send_signal(signal.SIGINT)
            _, err = proc.communicate(timeout=60)
            service.stop()
    assert proc.returncode == 0, err.decode()
    assert aad.requests, "no token was asked for"
    if identity == "workload":
        assert {r["client_assertion"] for r in aad.requests} == {"federated-jwt-from-the-kubelet"}
        assert all("client_secret" not in r for r in aad.requests)
    else:  # one token for the run: renewed only near its end, an hour away
        assert aad.requests == [
            {
                "api-version": "2019-08-01",
                "resource": "https://storage.azure.com",
                "client_id": "app-1",
                "metadata": "true",
            }
        ]
    text = err.decode()
    assert "federated-jwt-from-the-kubelet" not in text and aad.token()[:20] not in text


def publish(endpoint: str, topic: str, message: dict[str, Any]) -> None:
    body = {"messages": [{"data": message["data"], "attributes": message["attributes"]}]}
    request = urllib.request.Request(
        f"{endpoint}/v1/{topic}:publish", json.dumps(body).encode(), method="POST"
    )
    with urllib.request.urlopen(request, timeout=10) as r:
        assert r.status == 200


def put(endpoint: str, name: str, body: dict[str, Any]) -> None:
    request = urllib.request.Request(
        f"{endpoint}/v1/{name}", json.dumps(body).encode(), method="PUT"
    )
    with urllib.request.urlopen(request, timeout=10) as r:
        assert r.status == 200


def unacked(endpoint: str) -> int:
    with urllib.request.urlopen(f"{endpoint}/_unacked/lake/lake-events", timeout=10) as r:
        return int(json.loads(r.read())["unacked"])


def test_gcs_notifications_through_pubsub_wake_tables_and_fall_back_when_down(
    fake_gcs: stores.Emulator, tmp_path: Path
) -> None:
    """fake-gcs-server holds the table; the notifications are fed to a fake Pub/Sub server
    (tests/support/fake_pubsub.py) as GCS documents them."""
    service = stores.start_fake_pubsub(tmp_path / "pubsub")
    topic, subscription = "projects/lake/topics/gcs", "projects/lake/subscriptions/lake-events"
    put(service.endpoint, topic, {})
    put(service.endpoint, subscription, {"topic": topic, "ackDeadlineSeconds": 10})
    source = f"pubsub://{subscription}?endpoint={service.endpoint}"
    path = f"ps-{time.monotonic_ns()}/{PREFIX}"
    uri = fake_gcs.uri(path)
    local = tmp_path / "local"  # delta-rs cannot reach fake-gcs-server without a token:
    # it commits here, and each commit is copied there (as its writer would put it)

    def commit(x: int) -> None:
        write_deltalake(str(local), pa.table({"x": [x]}), mode="append")
        fake_gcs.upload_folder(local, uri)

    commit(0)
    folder = tmp_path / "manifests"
    folder.mkdir()
    doc = table_doc(
        "t",
        uri,
        pollInterval="5s",
        events={"source": source, "resyncInterval": "1h"},
        storage={"options": fake_gcs.storage_options},
    )
    (folder / "t.json").write_text(json.dumps(doc))
    port = stores.free_port()
    proc = run_daemon(folder, port)

    def status() -> dict[str, Any]:
        return dict(_statuses(folder).get("lake/t", {}))

    def metric(name: str, **labels: str) -> float:
        return counter(_scrape(port), name, **labels)

    try:
        _until(lambda: status().get("version") == 0, 60, "the first poll")
        _until(lambda: status().get("events", {}).get("live"), 30, "events live")
        fallback = metric("deltakeeper_polls_total", trigger="fallback")
        for version in (1, 2):
            commit(version)
            name = f"{path}/_delta_log/{version:020d}.json"
            publish(service.endpoint, topic, gcs_message(fake_gcs.bucket, name))
            _until(
                lambda v=version: metric("deltakeeper_table_version", **T) == v,
                10,
                f"version {version} by its event",
            )
        publish(service.endpoint, topic, gcs_message(fake_gcs.bucket, name, "OBJECT_DELETE"))
        _until(
            lambda: metric("deltakeeper_events_total", source=source, result="ignored") == 1,
            15,
            "the delete ignored",
        )
        assert metric("deltakeeper_events_total", source=source, result="woke") == 2
        assert metric("deltakeeper_polls_total", trigger="fallback") == fallback
        _until(lambda: unacked(service.endpoint) == 0, 10, "acknowledged")

        service.stop()
        _until(lambda: metric("deltakeeper_event_source_up", source=source) == 0, 30, "down")
        _until(lambda: status().get("events", {}).get("live") is False, 15, "events not live")
        assert condition(status(), "EventsDegraded") == ("True", "EventSourceDown")
        commit(3)
        _until(lambda: status().get("version") == 3, 20, "version 3 by a fallback poll")
    finally:
        proc.send_signal(signal.SIGINT)
        _, err = proc.communicate(timeout=60)
        service.stop()
    assert proc.returncode == 0, err.decode()
