"""runtime/credentials.py: Secret data as storage options (object_store's names, whatever the
spelling the Secret used); secret values kept out of text."""

from __future__ import annotations

import json
import logging
import traceback
from collections.abc import Iterator

import pytest

from deltakeeper.delta.errors import InvalidInputError
from deltakeeper.runtime import credentials
from deltakeeper.runtime.credentials import MASK, Scrubber, secret_values, storage_options

# Distinctive values: SCRUBBER is process-wide, so these are masked in every later test too.
AWS_SECRET = "credtest-aws-secret-9f3c1e"
AZ_KEY = "credtest-azure-key-77ab02=="
PRIVATE_KEY = "-----BEGIN PRIVATE KEY-----\ncredtest-pem-body\n-----END PRIVATE KEY-----\n"


def test_aws_names_map_to_object_store_options() -> None:
    secret = {
        "AWS_ACCESS_KEY_ID": "AKIACREDTEST",
        "AWS_SECRET_ACCESS_KEY": AWS_SECRET,
        "AWS_SESSION_TOKEN": "credtest-session",
        "AWS_ENDPOINT_URL": "http://minio:9000",
        "AWS_REGION": "eu-west-1",
    }
    expected = {
        "aws_access_key_id": "AKIACREDTEST",
        "aws_secret_access_key": AWS_SECRET,
        "aws_session_token": "credtest-session",
        "aws_endpoint": "http://minio:9000",
        "aws_region": "eu-west-1",
    }
    assert storage_options("s3://bucket/t", secret) == expected
    assert storage_options("s3a://bucket/t", secret) == expected
    assert storage_options("S3://bucket/t", secret) == expected  # the scheme is not case-bound
    # A Secret with some of the names gives only their options.
    some = {k: secret[k] for k in ("AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "AWS_REGION")}
    assert storage_options("s3://b/t", some) == {
        "aws_access_key_id": "AKIACREDTEST",
        "aws_secret_access_key": AWS_SECRET,
        "aws_region": "eu-west-1",
    }
    # The same names in lower case (delta-rs's spelling) and fsspec's give the same options.
    lower = {k.lower(): v for k, v in secret.items()}
    assert storage_options("s3://bucket/t", lower) == expected
    old = {"key": "AKIACREDTEST", "secret": AWS_SECRET, "token": "credtest-session"}
    assert storage_options("s3://b/t", old) == {
        k: expected[k] for k in ("aws_access_key_id", "aws_secret_access_key", "aws_session_token")
    }


def test_azure_names_map_to_object_store_options() -> None:
    secret = {
        "AZURE_STORAGE_ACCOUNT_NAME": "lake",
        "AZURE_STORAGE_ACCOUNT_KEY": AZ_KEY,
        "AZURE_STORAGE_CONNECTION_STRING": "DefaultEndpointsProtocol=https;AccountName=lake",
        "AZURE_STORAGE_SAS_TOKEN": "sv=2024&sig=credtest",
        "AZURE_CLIENT_ID": "cid",
        "AZURE_CLIENT_SECRET": "credtest-client-secret",
        "AZURE_TENANT_ID": "tid",
    }
    expected = {
        "azure_storage_account_name": "lake",  # the connection string's account, too
        "azure_storage_account_key": AZ_KEY,
        "azure_storage_sas_token": "sv=2024&sig=credtest",
        "azure_client_id": "cid",
        "azure_client_secret": "credtest-client-secret",
        "azure_tenant_id": "tid",
    }
    for uri in ("abfss://c@lake.dfs.core.windows.net/t", "abfs://c/t", "az://c/t"):
        assert storage_options(uri, secret) == expected
    only_key = {"AZURE_STORAGE_ACCOUNT_KEY": AZ_KEY}
    assert storage_options("az://c/t", only_key) == {"azure_storage_account_key": AZ_KEY}
    # A connection string alone gives its account, key and endpoint.
    text = f"AccountName=lake;AccountKey={AZ_KEY};BlobEndpoint=http://127.0.0.1:10000/lake"
    assert storage_options("az://c/t", {"AZURE_STORAGE_CONNECTION_STRING": text}) == {
        "azure_storage_account_name": "lake",
        "azure_storage_account_key": AZ_KEY,
        "azure_storage_endpoint": "http://127.0.0.1:10000/lake",
    }


def test_gcs_service_account_json_becomes_the_service_account_key() -> None:
    info = {"type": "service_account", "client_email": "sa@p.iam", "private_key": PRIVATE_KEY}
    for key in ("service-account.json", "GOOGLE_APPLICATION_CREDENTIALS_JSON"):
        for uri in ("gs://b/t", "gcs://b/t"):
            got = storage_options(uri, {key: json.dumps(info)})
            assert list(got) == ["google_service_account_key"]
            assert json.loads(got["google_service_account_key"]) == info


def test_fsspec_option_names_are_taken_as_their_object_store_names() -> None:
    plain = {"key": "k", "secret": AWS_SECRET, "endpoint_url": "http://127.0.0.1:9000"}
    assert storage_options("s3://b/t", plain) == {
        "aws_access_key_id": "k",
        "aws_secret_access_key": AWS_SECRET,
        "aws_endpoint": "http://127.0.0.1:9000",
    }
    azure = {"account_name": "lake", "account_key": AZ_KEY}
    assert storage_options("az://c/t", azure) == {
        "azure_storage_account_name": "lake",
        "azure_storage_account_key": AZ_KEY,
    }
    assert storage_options("gs://b/t", {"token": "anon"}) == {"google_skip_signature": "true"}


def test_unknown_keys_are_named_but_their_values_never_shown() -> None:
    # (aws_access_key_id, in lower case, is object_store's name: known)
    secret = {"PASSWORD": "credtest-hunter2-value", "aws_acces_key_id": "credtest-lower-value"}
    with pytest.raises(InvalidInputError) as raised:
        storage_options("s3://b/t", {**secret, "AWS_SECRET_ACCESS_KEY": AWS_SECRET})
    text = "".join(traceback.format_exception(raised.value))
    assert "PASSWORD" in text and "aws_acces_key_id" in text
    assert "AWS_SECRET_ACCESS_KEY" in text  # in the list of names to use instead
    for value in (*secret.values(), AWS_SECRET):
        assert value not in text


def test_keys_of_another_cloud_are_unknown() -> None:
    with pytest.raises(InvalidInputError) as raised:
        storage_options("gs://b/t", {"AWS_SECRET_ACCESS_KEY": AWS_SECRET, "AWS_REGION": "us"})
    message = str(raised.value)
    assert "AWS_REGION" in message and "AWS_SECRET_ACCESS_KEY" in message
    assert "service-account.json" in message and AWS_SECRET not in message
    with pytest.raises(InvalidInputError, match="AZURE_STORAGE_ACCOUNT_KEY"):
        storage_options("s3://b/t", {"AZURE_STORAGE_ACCOUNT_KEY": AZ_KEY})


def test_a_service_account_that_is_not_a_json_object_is_refused_without_its_text() -> None:
    broken = "credtest-not-json {" + PRIVATE_KEY
    with pytest.raises(InvalidInputError, match=r"service-account\.json is not JSON") as raised:
        storage_options("gs://b/t", {"service-account.json": broken})
    # The decode error is suppressed: a logged traceback does not carry the document.
    assert "credtest-pem-body" not in "".join(traceback.format_exception(raised.value))
    with pytest.raises(InvalidInputError, match="not a JSON object"):
        storage_options("gs://b/t", {"service-account.json": json.dumps(["credtest-in-list"])})


def test_secret_values_include_json_inner_strings_and_skip_short_ones() -> None:
    sa = json.dumps({"type": "service_account", "private_key": PRIVATE_KEY, "n": 123456789})
    values = secret_values({"a": AWS_SECRET, "sa": sa, "short": "abc12", "six": "abc123"})
    assert AWS_SECRET in values and sa in values and "abc123" in values
    assert PRIVATE_KEY in values and "service_account" in values
    assert "abc12" not in values and "type" not in values  # short, and keys are not values
    assert "123456789" not in values  # only strings inside JSON
    assert secret_values({"region": "eu-1", "json": json.dumps({"k": "short"})}) == {
        json.dumps({"k": "short"})
    }


def test_scrub_masks_every_registered_value_longest_first() -> None:
    s = Scrubber()
    assert s.scrub("nothing registered: credtest-abcdef") == "nothing registered: credtest-abcdef"
    s.register(["credtest-abcdef"])
    s.register(["credtest-abcdef-and-more", "credtest-zzzzzz"])
    text = "a=credtest-abcdef-and-more b=credtest-abcdef c=credtest-zzzzzz credtest-abcdef"
    assert s.scrub(text) == f"a={MASK} b={MASK} c={MASK} {MASK}"


class _Collect(logging.Handler):
    """Formats every record as a real handler would, so tracebacks are included."""

    def __init__(self) -> None:
        super().__init__(logging.DEBUG)
        self.setFormatter(logging.Formatter("%(levelname)s %(message)s"))
        self.lines: list[str] = []

    def emit(self, record: logging.LogRecord) -> None:
        try:
            self.lines.append(self.format(record))
        except Exception:  # as logging's own handlers do: reported, never raised
            self.handleError(record)


@pytest.fixture
def scrubbed_log() -> Iterator[tuple[logging.Logger, _Collect]]:
    credentials.SCRUBBER.register(secret_values({"k": AWS_SECRET, "az": AZ_KEY}))
    credentials.install_log_scrubbing()
    credentials.install_log_scrubbing()  # twice is harmless: one factory, not two
    log = logging.getLogger("deltakeeper.test_credentials")
    handler = _Collect()
    log.addHandler(handler)
    log.setLevel(logging.DEBUG)
    try:
        yield log, handler
    finally:
        log.removeHandler(handler)


def test_log_records_are_scrubbed_in_args_and_tracebacks(
    scrubbed_log: tuple[logging.Logger, _Collect], caplog: pytest.LogCaptureFixture
) -> None:
    log, handler = scrubbed_log
    with caplog.at_level(logging.DEBUG, logger=log.name):
        log.info("options %r and key %s", {"secret": AWS_SECRET}, AZ_KEY)
        try:
            raise RuntimeError(f"request signed with {AWS_SECRET} refused")
        except RuntimeError:
            log.exception("poll failed for %s", "ns/t")
    text = "\n".join(handler.lines) + caplog.text
    text += "".join(r.getMessage() for r in caplog.records)
    assert AWS_SECRET not in text and AZ_KEY not in text
    assert f"options {{'secret': '{MASK}'}} and key {MASK}" in handler.lines[0]
    # The traceback survives, masked, inside the message.
    assert "Traceback (most recent call last)" in handler.lines[1]
    assert f"RuntimeError: request signed with {MASK} refused" in handler.lines[1]
    assert caplog.records[1].exc_info is None


def test_records_created_before_a_value_is_registered_keep_their_text(
    scrubbed_log: tuple[logging.Logger, _Collect],
) -> None:
    log, handler = scrubbed_log
    late = "credtest-registered-later"
    log.warning("value %s", late)
    credentials.SCRUBBER.register([late])
    log.warning("value %s", late)
    assert handler.lines == [f"WARNING value {late}", f"WARNING value {MASK}"]


def test_a_malformed_log_call_does_not_raise_in_the_caller(
    scrubbed_log: tuple[logging.Logger, _Collect],
) -> None:
    # Its own handler only: pytest's capture handler fails a test on any bad record by design.
    log = logging.getLogger("deltakeeper.test_credentials.isolated")
    log.propagate = False
    handler = _Collect()
    log.addHandler(handler)
    try:
        log.warning("two placeholders %s %s, one argument", "only-one")
        log.warning("after it: %s", AWS_SECRET)
    finally:
        log.removeHandler(handler)
        log.propagate = True
    assert handler.lines == [f"WARNING after it: {MASK}"]
