"""delta/storage/s3.py: where an S3 table's credentials come from, and what is said when there
are none (issue 49, section 2, item 12). Nothing here leaves loopback: the endpoint and the
instance metadata service are local ports, and AWS_EC2_METADATA_DISABLED turns the lookup off."""

from __future__ import annotations

import pytest

from deltakeeper.delta.discover import is_table
from deltakeeper.delta.errors import InvalidCredentialsError, StorageUnreachableError
from deltakeeper.delta.storage import open_storage
from tests.support.http import refusing_server

ENDPOINT = {"endpoint_url": "http://127.0.0.1:1"}  # nothing listens: no request is answered


@pytest.fixture
def no_aws_credentials(monkeypatch: pytest.MonkeyPatch) -> pytest.MonkeyPatch:
    """No AWS_* variable but where the metadata service is: a closed local port."""
    import os

    for name in [n for n in os.environ if n.startswith("AWS_")]:
        monkeypatch.delenv(name)
    monkeypatch.setenv("AWS_METADATA_ENDPOINT", "http://127.0.0.1:1")
    return monkeypatch


def test_no_credentials_and_no_metadata_lookup_is_said_at_once(no_aws_credentials) -> None:
    no_aws_credentials.setenv("AWS_EC2_METADATA_DISABLED", "true")
    with pytest.raises(InvalidCredentialsError) as e:
        open_storage("s3://bucket/t", ENDPOINT)
    message = str(e.value)
    assert message.startswith("no credentials: give ")
    for name in ("AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "aws_skip_signature"):
        assert name in message
    assert "AWS_EC2_METADATA_DISABLED" in message


@pytest.mark.parametrize(
    "given",
    [
        {"key": "AKIAEXAMPLE", "secret": "s3cr3tvalue"},
        {"anon": True},
        {"aws_container_credentials_relative_uri": "/v2/credentials/x"},
    ],
)
def test_credentials_in_the_options_are_enough(no_aws_credentials, given) -> None:
    no_aws_credentials.setenv("AWS_EC2_METADATA_DISABLED", "true")
    open_storage("s3://bucket/t", {**ENDPOINT, **given})  # opens: nothing to say yet


@pytest.mark.parametrize(
    "env",
    [
        {"AWS_ACCESS_KEY_ID": "AKIAEXAMPLE", "AWS_SECRET_ACCESS_KEY": "s3cr3tvalue"},
        {"AWS_WEB_IDENTITY_TOKEN_FILE": "/var/run/token", "AWS_ROLE_ARN": "arn:aws:iam::1:role/r"},
        {"AWS_CONTAINER_CREDENTIALS_FULL_URI": "http://127.0.0.1:1/creds"},
    ],
)
def test_credentials_in_the_environment_are_enough(no_aws_credentials, env) -> None:
    no_aws_credentials.setenv("AWS_EC2_METADATA_DISABLED", "true")
    for name, value in env.items():
        no_aws_credentials.setenv(name, value)
    open_storage("s3://bucket/t", ENDPOINT)


def test_a_metadata_service_that_refuses_is_no_credentials_not_a_refusal(
    no_aws_credentials,
) -> None:
    """It said "read ... was refused (403): check the credentials": the 403 was the metadata
    service's, and no request had reached the bucket."""
    with refusing_server() as (imds, asked), refusing_server() as (s3, s3_asked):
        no_aws_credentials.setenv("AWS_METADATA_ENDPOINT", imds)
        storage = open_storage("s3://bucket/t", {"endpoint_url": s3})
        with pytest.raises(StorageUnreachableError) as e:
            is_table(storage)
    message = str(e.value)
    assert message.startswith("no credentials: give "), message
    assert "instance metadata service" in message and "403" in message
    assert asked and not s3_asked
