"""runtime/targets.py: a DeltaTable and its Secret as a Target: storage options, bad ones named."""

from __future__ import annotations

from typing import Any

from deltakeeper.resources.manifests import TableResource
from deltakeeper.runtime.targets import resolve

SECRET = "wTestSecretKey/K7MDENG+bPxRfiCYEXAMPLE0001"
KEY_ID = "AKIAWATCHERTEST0001"


def _resource(uri: str, **storage: Any) -> TableResource:
    spec = {"uri": uri, "storage": {"secretRef": {"name": "creds"}, **storage}}
    return TableResource("ns", "t", {}, 1, spec)


def test_the_secrets_region_joins_the_specs_client_kwargs() -> None:
    secret = {"AWS_ACCESS_KEY_ID": KEY_ID, "AWS_SECRET_ACCESS_KEY": SECRET, "AWS_REGION": "eu-1"}
    # A manifest or CRD option is a string: JSON for the options fsspec wants as mappings.
    options = {
        "client_kwargs": '{"verify": false, "region_name": "us-1"}',
        "endpoint_url": "http://127.0.0.1:1",
    }
    target = resolve(_resource("s3://b/t", options=options), [], lambda ns, name: secret)
    assert target.problem is None
    # Both in object_store's names: the Secret's region replaces the spec's, the rest stays.
    assert target.storage_options == {
        "allow_invalid_certificates": "true",
        "aws_endpoint": "http://127.0.0.1:1",
        "aws_region": "eu-1",
        "aws_access_key_id": KEY_ID,
        "aws_secret_access_key": SECRET,
    }
    bad = resolve(_resource("s3://b/t", options={"client_kwargs": "x"}), [], lambda ns, n: secret)
    assert bad.problem is not None and bad.problem.reason == "InvalidSpec"
    assert "spec.storage.options: storage option client_kwargs takes a JSON object" in (
        bad.problem.message
    )


def test_a_queue_event_source_it_cannot_read_is_a_problem_not_a_silent_poll() -> None:
    from deltakeeper.resources.conditions import Reason
    from deltakeeper.resources.manifests import TableResource
    from deltakeeper.runtime.targets import resolve

    spec = {"uri": "s3://lake/t", "events": {"source": "sqs://eu-west-1/q"}}
    target = resolve(TableResource("ns", "t", {}, 1, spec), [], lambda ns, name: None)
    assert target.problem is not None and target.problem.reason is Reason.INVALID_SPEC
    assert "expected sqs://REGION/ACCOUNT/QUEUE" in target.problem.message
    good = {**spec, "events": {"source": "sqs://eu-west-1/123456789012/lake-events"}}
    target = resolve(TableResource("ns", "t", {}, 1, good), [], lambda ns, name: None)
    assert target.problem is None
    assert target.events_source == "sqs://eu-west-1/123456789012/lake-events"


def test_a_uri_query_is_masked_once_its_table_is_resolved() -> None:
    """Issue 49, section 2, item 11: a presigned URL's signature in spec.uri showed in the
    status and logs; it is masked like a password."""
    from deltakeeper.runtime.credentials import SCRUBBER

    signature = "Zm9vYmFyc2lnbmF0dXJlMDAwMQ"
    uri = f"s3://b/t?X-Amz-Signature={signature}"
    resolve(TableResource("ns", "t", {}, 1, {"uri": uri}), [], lambda ns, name: None)
    assert signature not in SCRUBBER.scrub(f"cannot read {uri}: refused")
