"""runtime/queues/: the queue sources' messages as AWS, GCS and Azure document them, read into
the objects they name; and a consumer's loop (deliver, then delete; down and up) against a
scripted client. The servers themselves: tests/integration/test_events_queues.py."""

from __future__ import annotations

import asyncio
import base64
import json
from collections.abc import Mapping
from typing import Any

import pytest

from deltakeeper.resources.event_sources import QueueSource
from deltakeeper.runtime import queues
from deltakeeper.runtime.events import Events
from deltakeeper.runtime.metrics import Metrics
from deltakeeper.runtime.model import Target
from deltakeeper.runtime.queues import azqueue, pubsub, sqs
from deltakeeper.runtime.queues.messages import Message, Parsed
from tests.support import stores
from tests.support.queue_messages import (
    KEY,
    TEST_EVENT,
    blob_created,
    eventbridge,
    gcs_message,
    queue_text,
    s3_event,
    sns,
)


def objects(parsed: Parsed | None) -> tuple[list[tuple[str, str]], int] | None:
    return None if parsed is None else (parsed.objects, parsed.ignored)


# -- sqs ------------------------------------------------------------------------------------
@pytest.mark.parametrize(
    "body",
    [s3_event(), sns(s3_event()), eventbridge()],
    ids=["direct", "sns", "eventbridge"],
)
def test_sqs_reads_s3_events_direct_sns_wrapped_and_from_eventbridge(body: Any) -> None:
    assert objects(sqs.parse(json.dumps(body))) == ([("lake", KEY)], 0)


def test_sqs_keys_stay_url_encoded_as_s3_sends_them() -> None:
    key = "a+b/%C3%A9t%C3%A9%3D1/_delta_log/00000000000000000001.json"
    assert objects(sqs.parse(json.dumps(sns(s3_event(key=key))))) == ([("lake", key)], 0)


@pytest.mark.parametrize(
    "body",
    [TEST_EVENT, s3_event(name="ObjectRemoved:Delete"), eventbridge(kind="Object Deleted")],
    ids=["test-event", "removed", "eventbridge-deleted"],
)
def test_sqs_events_that_write_nothing_are_ignored(body: Any) -> None:
    assert objects(sqs.parse(json.dumps(body))) == ([], 1)


@pytest.mark.parametrize(
    "body",
    [
        "not json",
        "[]",
        json.dumps({"Records": [{"s3": {"bucket": {"name": "lake"}}}]}),
        json.dumps({"Type": "Notification", "Message": "not json"}),
        json.dumps({"source": "aws.s3", "detail": {"bucket": {}}}),
        json.dumps({"hello": "world"}),
    ],
)
def test_sqs_messages_that_are_no_s3_event_are_malformed(body: str) -> None:
    assert sqs.parse(body) is None


# -- azqueue --------------------------------------------------------------------------------
@pytest.mark.parametrize("cloud", [False, True], ids=["event-grid-schema", "cloudevents"])
def test_azqueue_reads_blob_created_from_the_subject(cloud: bool) -> None:
    name = "a b/été=1%/_delta_log/00000000000000000001.json"
    parsed = azqueue.parse(queue_text(blob_created(name=name, cloud=cloud)))
    assert parsed is not None and parsed.ignored == 0
    [(container, key)] = parsed.objects
    # The blob's name is raw in the subject; it goes to Events.deliver encoded, as S3's keys.
    assert (
        container == "lake"
        and key == "a%20b/%C3%A9t%C3%A9%3D1%25/_delta_log/00000000000000000001.json"
    )


def test_azqueue_other_events_are_ignored_and_non_events_malformed() -> None:
    deleted = {**blob_created(), "eventType": "Microsoft.Storage.BlobDeleted"}
    assert objects(azqueue.parse(queue_text(deleted))) == ([], 1)
    assert azqueue.parse(queue_text({"hello": "world"})) is None
    assert azqueue.parse("%%% not base64 nor json") is None
    no_subject = {**blob_created(), "subject": None}
    assert objects(azqueue.parse(queue_text(no_subject))) == ([("lake", KEY)], 0)  # data.url


def test_azqueue_shared_key_signature_is_the_documented_one() -> None:
    # The string to sign of a Queue service GET, as the REST reference spells it out.
    key = base64.b64encode(b"secret-key-bytes").decode()
    headers = {"x-ms-date": "Sun, 06 Dec 2026 00:00:00 GMT", "x-ms-version": "2021-12-02"}
    url = "http://127.0.0.1:10001/acct/lake-events/messages?numofmessages=32&visibilitytimeout=30"
    got = azqueue.sign("acct", key, "GET", url, headers)
    to_sign = (
        "GET\n\n\n\n\n\n\n\n\n\n\n\n"
        "x-ms-date:Sun, 06 Dec 2026 00:00:00 GMT\nx-ms-version:2021-12-02\n"
        "/acct/acct/lake-events/messages\nnumofmessages:32\nvisibilitytimeout:30"
    )
    import hashlib
    import hmac

    digest = hmac.new(b"secret-key-bytes", to_sign.encode(), hashlib.sha256).digest()
    assert got == f"SharedKey acct:{base64.b64encode(digest).decode()}"


def test_azqueue_azure_ad_from_the_options_in_object_store_spellings() -> None:
    options = {
        "azure_storage_client_id": "app",
        "azure_authority_id": "tenant",
        "azure_client_secret": "s3cret",
    }
    ad = azqueue.azure_ad(options, environ={})
    assert ad == azqueue.AzureAd("tenant", "app", secret="s3cret")
    assert ad.url == "https://login.microsoftonline.com/tenant/oauth2/v2.0/token"
    assert ad.form() == {
        "grant_type": "client_credentials",
        "client_id": "app",
        "scope": "https://storage.azure.com/.default",
        "client_secret": "s3cret",
    }


def test_azqueue_workload_identity_from_aks_variables_reads_the_token_file_each_time(
    tmp_path: Any,
) -> None:
    token = tmp_path / "azure-identity-token"
    token.write_text("first-jwt\n")
    environ = {
        "AZURE_CLIENT_ID": "app",
        "AZURE_TENANT_ID": "tenant",
        "AZURE_FEDERATED_TOKEN_FILE": str(token),
        "AZURE_AUTHORITY_HOST": "https://login.example/",
    }
    ad = azqueue.azure_ad({}, environ=environ)
    assert ad is not None and ad.url == "https://login.example/tenant/oauth2/v2.0/token"
    assert ad.form()["client_assertion"] == "first-jwt"
    assert ad.form()["client_assertion_type"] == azqueue.ASSERTION
    token.write_text("rotated-jwt")  # the kubelet rotates it
    assert ad.form()["client_assertion"] == "rotated-jwt" and "client_secret" not in ad.form()


def test_azqueue_table_options_win_over_the_environment_and_half_an_identity_is_none() -> None:
    environ = {"AZURE_CLIENT_ID": "pod", "AZURE_TENANT_ID": "t", "AZURE_CLIENT_SECRET": "x"}
    ad = azqueue.azure_ad({"azure_client_id": "table", "azure_client_secret": "y"}, environ)
    assert ad is not None and (ad.client_id, ad.secret, ad.tenant) == ("table", "y", "t")
    assert azqueue.azure_ad({"azure_client_id": "app", "azure_tenant_id": "t"}, {}) is None
    assert azqueue.azure_ad({}, {}) is None


def test_azqueue_managed_identity_as_object_store_asks_for_it() -> None:
    msi = azqueue.managed_identity({}, environ={})
    assert msi.endpoint == "http://169.254.169.254/metadata/identity/oauth2/token"
    assert msi.query() == {"api-version": "2019-08-01", "resource": "https://storage.azure.com"}
    assert msi.headers() == {"Metadata": "true"}
    # A user-assigned identity: by client id, or more specifically by object or resource id.
    assert azqueue.managed_identity({}, {"AZURE_CLIENT_ID": "pod"}).identity == ("client_id", "pod")
    both = {"azure_client_id": "app", "azure_msi_resource_id": "/subscriptions/s/id"}
    assert azqueue.managed_identity(both, {}).query()["msi_res_id"] == "/subscriptions/s/id"
    assert "client_id" not in azqueue.managed_identity(both, {}).query()
    # App Service: its own endpoint and the header that proves the caller is the app.
    app = azqueue.managed_identity({}, {"IDENTITY_ENDPOINT": "http://x/t", "IDENTITY_HEADER": "h"})
    assert (app.endpoint, app.headers()["x-identity-header"]) == ("http://x/t", "h")
    options = {"azure_msi_endpoint": "http://y/t", "azure_object_id": "o"}
    assert azqueue.managed_identity(options, {"IDENTITY_ENDPOINT": "http://x/t"}) == (
        azqueue.ManagedIdentity("http://y/t", ("object_id", "o"))
    )


def test_azqueue_without_any_credential_says_which_options_it_reads(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """No key, SAS or application: the managed identity is asked, as object_store would; off
    Azure it does not answer, and the source is down with what would do instead."""
    for name in (
        "AZURE_CLIENT_ID",
        "AZURE_TENANT_ID",
        "AZURE_CLIENT_SECRET",
        "AZURE_FEDERATED_TOKEN_FILE",
        "IDENTITY_ENDPOINT",
        "IDENTITY_HEADER",
    ):
        monkeypatch.delenv(name, raising=False)
    closed = f"http://127.0.0.1:{stores.free_port()}/metadata/identity/oauth2/token"
    queue = QueueSource("azqueue://acct/q", "azqueue", "https://acct.queue/q", account="acct")
    client = azqueue.QueueClient(queue, {"azure_msi_endpoint": closed})
    assert client.ad is None and client.msi == azqueue.ManagedIdentity(closed)

    async def check() -> None:
        try:
            await client.check()
        finally:
            await client.close()

    with pytest.raises(PermissionError, match="azure_federated_token_file") as e:
        asyncio.run(check())
    assert f"managed identity endpoint {closed} did not answer" in str(e.value)


# -- pubsub ---------------------------------------------------------------------------------
def test_pubsub_reads_object_finalize_from_the_attributes() -> None:
    name = "a b/été=1+/_delta_log/00000000000000000001.json"
    parsed = pubsub.parse(gcs_message(name=name))
    assert objects(parsed) == (
        [("lake", "a%20b/%C3%A9t%C3%A9%3D1%2B/_delta_log/00000000000000000001.json")],
        0,
    )


def test_pubsub_other_events_are_ignored_and_non_notifications_malformed() -> None:
    for kind in ("OBJECT_DELETE", "OBJECT_METADATA_UPDATE", "OBJECT_ARCHIVE"):
        assert objects(pubsub.parse(gcs_message(kind=kind))) == ([], 1)
    assert pubsub.parse({"data": "aGVsbG8=", "attributes": {}}) is None
    assert pubsub.parse({"attributes": "x"}) is None
    # Without bucketId and objectId, the JSON_API_V1 payload says which object.
    message = gcs_message()
    for name in ("bucketId", "objectId"):
        del message["attributes"][name]
    assert objects(pubsub.parse(message)) == ([("lake", KEY)], 0)


# -- the consumer ---------------------------------------------------------------------------
SOURCE = "sqs://us-east-1/123456789012/lake-events?endpoint=http://127.0.0.1:1"


class Scripted:
    """A client whose receives, checks and failures a test scripts."""

    def __init__(self, script: list[Any], log: list[Any]) -> None:
        self.script, self.log = script, log

    async def check(self) -> None:
        step = self.script.pop(0)
        self.log.append(("check", step))
        if isinstance(step, Exception):
            raise step

    async def receive(self) -> list[Message]:
        if not self.script:
            await asyncio.sleep(3600)
        step = self.script.pop(0)
        if isinstance(step, Exception):
            raise step
        return step  # type: ignore[no-any-return]

    async def ack(self, handles: list[Any]) -> None:
        self.log.append(("ack", handles, list(self.wakes)))

    async def close(self) -> None:
        self.log.append(("close",))

    wakes: list[str] = []


def run_consumer(
    script: list[Any], rounds: int = 50
) -> tuple[list[Any], list[str], Metrics, list[bool]]:
    m = Metrics()
    hub = Events(m)
    log: list[Any] = []
    woken: list[str] = []
    ups: list[bool] = []
    Scripted.wakes = woken

    def make(queue: QueueSource, options: Mapping[str, Any]) -> Scripted:
        assert queue.scheme == "sqs" and options["aws_access_key_id"] == "AKIA"
        return Scripted(script, log)

    async def main() -> None:
        queues.RETRY_MIN_S = 0.01  # the retry's wait, not its doubling, is what the test skips
        queues.RELEASE_AFTER_S = 0.02
        q = queues.Queues(hub, {"sqs": make})
        hub.queues = q
        table = hub.table(lambda: woken.append("t"))
        table.follow(
            Target(
                "ns",
                "t",
                "s3://lake/sales",
                events_source=SOURCE,
                storage_options={"aws_access_key_id": "AKIA"},
            )
        )
        assert SOURCE in q
        for _ in range(rounds):
            await asyncio.sleep(0.02)
            ups.append(hub.is_up(SOURCE))
        table.close()  # no table names it: stopped after RELEASE_AFTER_S
        assert SOURCE in q
        await asyncio.sleep(0.1)
        assert SOURCE not in q
        await asyncio.sleep(0.05)

    try:
        asyncio.run(main())
    finally:
        queues.RETRY_MIN_S, queues.RELEASE_AFTER_S = 1.0, 30.0
    return log, woken, m, ups


def test_a_message_is_deleted_only_after_its_wakes_are_queued() -> None:
    good = Message("1", "h1", [("lake", KEY)])
    bad = Message("2", "h2", None)
    test_event = Message("3", "h3", [], ignored=1)
    log, _, m, ups = run_consumer([None, [good, bad, test_event]])
    acks = [entry for entry in log if entry[0] == "ack"]
    # Source up (its tables woken once), then the event's wake, then one delete of all three.
    assert acks == [("ack", ["h1", "h2", "h3"], ["t", "t"])]
    counted = {
        r: m.registry.get_sample_value("deltakeeper_events_total", {"source": SOURCE, "result": r})
        for r in ("woke", "malformed", "ignored")
    }
    assert counted == {"woke": 1, "malformed": 1, "ignored": 1}
    assert ups[-1] is True and log[-1] == ("close",)
    up = m.registry.get_sample_value("deltakeeper_event_source_up", {"source": SOURCE})
    assert up == 0  # stopped with its last table


def test_a_queue_that_cannot_be_read_is_down_until_it_can() -> None:
    log, _, _, ups = run_consumer(
        [
            ConnectionError("refused"),
            PermissionError("AccessDenied"),
            None,
            [],
            ConnectionError("gone"),
            None,
        ]
    )
    checks = [entry[1] for entry in log if entry[0] == "check"]
    assert [type(c).__name__ for c in checks] == [
        "ConnectionError",
        "PermissionError",
        "NoneType",
        "NoneType",
    ]
    assert ups[0] is False and ups[-1] is True  # down while failing, up again after
    assert True in ups


class Recorded:
    """A QueueConsumers that records what Events asks of it."""

    def __init__(self) -> None:
        self.calls: list[tuple[str, str, Any]] = []

    def want(self, source: str, options: Mapping[str, Any]) -> None:
        self.calls.append(("want", source, dict(options)))

    def release(self, source: str) -> None:
        self.calls.append(("release", source, None))


def test_a_queue_is_wanted_while_any_table_names_it_and_released_after_the_last() -> None:
    hub = Events(Metrics())
    recorded = Recorded()
    hub.queues = recorded
    a, b = hub.table(lambda: None), hub.table(lambda: None)
    options = {"aws_access_key_id": "AKIA1"}
    a.follow(Target("ns", "a", "s3://lake/a", events_source=SOURCE, storage_options=options))
    b.follow(Target("ns", "b", "s3://lake/b", events_source=SOURCE))
    # A table moving to another path keeps the queue: wanted before the old place is dropped.
    a.follow(Target("ns", "a", "s3://lake/a2", events_source=SOURCE, storage_options=options))
    # A rotated Secret reaches the consumer at the table's next poll.
    rotated = {"aws_access_key_id": "AKIA2"}
    a.follow(Target("ns", "a", "s3://lake/a2", events_source=SOURCE, storage_options=rotated))
    assert [c[0] for c in recorded.calls] == ["want"] * 4
    assert recorded.calls[-1][2] == rotated
    a.close()
    assert recorded.calls[-1][0] == "want"  # b still names it
    b.follow(Target("ns", "b", "s3://lake/b", events_source="webhook"))
    assert recorded.calls[-1] == ("release", SOURCE, None)
