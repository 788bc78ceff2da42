"""delta/storage_options.py: both spellings of the storage options, into what obstore takes.

Every old (fsspec) key of the docs/storage.md table maps to its object_store key; the new keys
are taken in any case; an http:// endpoint allows plain HTTP; what neither spelling knows is
named by the store's builder, without its value."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from deltakeeper.delta import storage_options as opts
from deltakeeper.delta.errors import InvalidCredentialsError, InvalidInputError
from deltakeeper.delta.storage import open_storage

SECRET = "optstest-Sup3rSecret-value"
KEY64 = "b3B0c3Rlc3Qta2V5LWJhc2U2NC1vcHRzdGVzdC1rZXk="  # base64, so Azure builds with it

# (store, old options, object_store options): one row per old key of docs/storage.md.
OLD = [
    ("s3", {"endpoint_url": "https://s3.example"}, {"aws_endpoint": "https://s3.example"}),
    ("s3", {"key": "AKIAOPTS"}, {"aws_access_key_id": "AKIAOPTS"}),
    ("s3", {"secret": SECRET}, {"aws_secret_access_key": SECRET}),
    ("s3", {"token": SECRET}, {"aws_session_token": SECRET}),
    ("s3", {"anon": True}, {"aws_skip_signature": "true"}),
    ("s3", {"requester_pays": True}, {"aws_request_payer": "true"}),
    ("s3", {"use_ssl": False}, {"allow_http": "true"}),
    ("s3", {"client_kwargs": {"region_name": "eu-west-1"}}, {"aws_region": "eu-west-1"}),
    ("s3", {"config_kwargs": {"region_name": "eu-west-1"}}, {"aws_region": "eu-west-1"}),
    (
        "s3",
        {"client_kwargs": {"endpoint_url": "https://s3.example", "verify": False}},
        {"aws_endpoint": "https://s3.example", "allow_invalid_certificates": "true"},
    ),
    (
        "s3",
        {"client_kwargs": {"aws_access_key_id": "AKIAOPTS", "aws_secret_access_key": SECRET}},
        {"aws_access_key_id": "AKIAOPTS", "aws_secret_access_key": SECRET},
    ),
    (
        "s3",
        {"config_kwargs": {"s3": {"addressing_style": "virtual"}, "retries": {"max": 3}}},
        {"aws_virtual_hosted_style_request": "true"},
    ),
    (
        "s3",
        {"config_kwargs": {"connect_timeout": "5s", "read_timeout": "30s"}},
        {"connect_timeout": "5s", "timeout": "30s"},
    ),
    (
        "s3",
        {"s3_additional_kwargs": {"ServerSideEncryption": "aws:kms", "SSEKMSKeyId": "arn:k"}},
        {"aws_server_side_encryption": "aws:kms", "aws_sse_kms_key_id": "arn:k"},
    ),
    ("s3", {"version_aware": True}, {}),
    (
        "gcs",
        {"endpoint_url": "http://127.0.0.1:4443"},
        {"google_base_url": "http://127.0.0.1:4443"},
    ),
    (
        "gcs",
        {"token": {"type": "service_account"}},
        {"google_service_account_key": '{"type": "service_account"}'},
    ),
    (
        "gcs",
        {"token": '{"type": "service_account"}'},
        {"google_service_account_key": '{"type": "service_account"}'},
    ),
    (
        "gcs",
        {"token": "/var/run/key.json"},
        {"google_application_credentials": "/var/run/key.json"},
    ),
    ("gcs", {"token": "anon"}, {"google_skip_signature": "true"}),
    ("gcs", {"token": "google_default"}, {}),
    ("gcs", {"token": "cloud"}, {}),
    ("gcs", {"token": SECRET}, {"google_bearer_token": SECRET}),
    ("gcs", {"anon": True}, {"google_skip_signature": "true"}),
    ("gcs", {"project": "p", "default_location": "EU"}, {}),
    ("azure", {"account_name": "acct"}, {"azure_storage_account_name": "acct"}),
    ("azure", {"account_key": KEY64}, {"azure_storage_account_key": KEY64}),
    ("azure", {"sas_token": "sv=1&sig=x"}, {"azure_storage_sas_token": "sv=1&sig=x"}),
    ("azure", {"client_id": "c"}, {"azure_client_id": "c"}),
    ("azure", {"client_secret": SECRET}, {"azure_client_secret": SECRET}),
    ("azure", {"tenant_id": "t"}, {"azure_tenant_id": "t"}),
    ("azure", {"anon": True}, {"azure_skip_signature": "true"}),
    (
        "azure",
        {"account_host": "acct.blob.core.usgovcloudapi.net"},
        {"azure_storage_endpoint": "https://acct.blob.core.usgovcloudapi.net"},
    ),
    (
        "azure",
        {
            "connection_string": (
                f"AccountName=acct;AccountKey={KEY64};EndpointSuffix=core.chinacloudapi.cn"
            )
        },
        {
            "azure_storage_account_name": "acct",
            "azure_storage_account_key": KEY64,
            "azure_storage_endpoint": "https://acct.blob.core.chinacloudapi.cn",
        },
    ),
    (
        "azure",
        {
            "connection_string": "BlobEndpoint=https://acct.blob.core.windows.net/;SharedAccessSignature=sv=1&sig=x"
        },
        {
            "azure_storage_account_name": "acct",
            "azure_storage_sas_token": "sv=1&sig=x",
            "azure_storage_endpoint": "https://acct.blob.core.windows.net",
        },
    ),
]


@pytest.mark.parametrize(("store", "old", "new"), OLD)
def test_each_old_key_maps_to_its_object_store_key(store: str, old: dict, new: dict) -> None:
    assert opts.canonical(store, old) == new
    assert opts.canonical(store, new) == new  # the new spelling is its own canonical form
    assert not opts.unknown_keys(store, old) and not opts.unknown_keys(store, new)


# New keys in the case delta-rs users write them, and what they are in one spelling.
NEW = [
    ("s3", {"AWS_ENDPOINT_URL": "https://s3.example"}, {"aws_endpoint": "https://s3.example"}),
    ("s3", {"aws_endpoint": "https://s3.example"}, {"aws_endpoint": "https://s3.example"}),
    ("s3", {"AWS_ACCESS_KEY_ID": "AKIAOPTS"}, {"aws_access_key_id": "AKIAOPTS"}),
    ("s3", {"aws_secret_access_key": SECRET}, {"aws_secret_access_key": SECRET}),
    ("s3", {"AWS_SESSION_TOKEN": SECRET}, {"aws_session_token": SECRET}),
    ("s3", {"AWS_REGION": "eu-west-1"}, {"aws_region": "eu-west-1"}),
    ("s3", {"AWS_DEFAULT_REGION": "eu-west-1"}, {"aws_region": "eu-west-1"}),
    ("s3", {"AWS_ALLOW_HTTP": "true"}, {"allow_http": "true"}),
    ("s3", {"aws_conditional_put": "etag"}, {"aws_conditional_put": "etag"}),
    ("s3", {"AWS_S3_ALLOW_UNSAFE_RENAME": "true"}, {"aws_s3_allow_unsafe_rename": "true"}),
    ("s3", {"timeout": "30s"}, {"timeout": "30s"}),
    ("gcs", {"GOOGLE_SERVICE_ACCOUNT_KEY": "{}"}, {"google_service_account_key": "{}"}),
    ("gcs", {"google_service_account": "/k.json"}, {"google_service_account": "/k.json"}),
    ("gcs", {"google_base_url": "http://x:1"}, {"google_base_url": "http://x:1"}),
    ("azure", {"AZURE_STORAGE_ACCOUNT_NAME": "acct"}, {"azure_storage_account_name": "acct"}),
    ("azure", {"azure_storage_account_key": KEY64}, {"azure_storage_account_key": KEY64}),
    ("azure", {"AZURE_STORAGE_SAS_TOKEN": "sv=1"}, {"azure_storage_sas_token": "sv=1"}),
    ("azure", {"AZURE_CLIENT_SECRET": SECRET}, {"azure_client_secret": SECRET}),
    ("azure", {"azure_allow_http": "true"}, {"allow_http": "true"}),
]


@pytest.mark.parametrize(("store", "given", "new"), NEW)
def test_object_store_keys_are_taken_in_any_case(store: str, given: dict, new: dict) -> None:
    assert opts.canonical(store, given) == new
    assert not opts.unknown_keys(store, given)


def test_an_http_endpoint_allows_plain_http_in_either_spelling() -> None:
    for store, key in (("s3", "endpoint_url"), ("s3", "AWS_ENDPOINT_URL"), ("gcs", "endpoint_url")):
        _config, client = opts.obstore_config(store, opts.canonical(store, {key: "http://h:1"}))
        assert client == {"allow_http": "true"}
    _config, client = opts.obstore_config("s3", {"aws_endpoint": "https://h"})
    assert client == {}
    text = f"AccountName=a;AccountKey={KEY64};BlobEndpoint=http://127.0.0.1:10000/a"
    config, client = opts.obstore_config(
        "azure", opts.canonical("azure", {"connection_string": text})
    )
    assert client == {"allow_http": "true"} and config["azure_storage_account_name"] == "a"


def test_s3_signs_payloads_over_plain_http_only_unless_told() -> None:
    def config(given: dict[str, str]) -> dict[str, str]:
        return opts.obstore_config("s3", opts.canonical("s3", given))[0]

    assert config({})["aws_unsigned_payload"] == "true"  # AWS itself: https
    assert config({"endpoint_url": "https://s3.example"})["aws_unsigned_payload"] == "true"
    assert "aws_unsigned_payload" not in config({"endpoint_url": "http://minio:9000"})
    for key in ("AWS_UNSIGNED_PAYLOAD", "unsigned_payload", "aws_unsigned_payload"):
        assert config({key: "false"})["aws_unsigned_payload"] == "false"
        assert (
            config({key: "true", "endpoint_url": "http://m:9000"})["aws_unsigned_payload"] == "true"
        )
        assert not opts.unknown_keys("s3", {key: "true"}) and opts.is_public(key)
    assert "aws_unsigned_payload" not in opts.obstore_config("gcs", {})[0]


def test_the_azure_emulator_becomes_azurites_endpoint_not_emulator_mode() -> None:
    for given in (
        {"azure_storage_use_emulator": "true"},
        {"connection_string": "UseDevelopmentStorage=true"},
    ):
        config, client = opts.obstore_config("azure", opts.canonical("azure", given))
        assert "azure_storage_use_emulator" not in config and client == {"allow_http": "true"}
        assert config["azure_storage_endpoint"] == "http://127.0.0.1:10000/devstoreaccount1"
        assert config["azure_storage_account_name"] == "devstoreaccount1"


def test_anonymous_gcs_sends_no_credentials() -> None:
    config, _client = opts.obstore_config("gcs", opts.canonical("gcs", {"token": "anon"}))
    assert json.loads(config["google_service_account_key"])["disable_oauth"] is True


def test_two_spellings_of_one_option_must_agree() -> None:
    same = {"endpoint_url": "http://h:1", "AWS_ENDPOINT_URL": "http://h:1"}
    assert opts.canonical("s3", same) == {"aws_endpoint": "http://h:1"}
    with pytest.raises(InvalidInputError, match="secret and aws_secret_access_key") as e:
        opts.canonical("s3", {"secret": SECRET, "aws_secret_access_key": SECRET + "x"})
    assert SECRET not in str(e.value)


@pytest.mark.parametrize(
    ("uri", "options", "named"),
    [
        ("s3://b/t", {"hostile_option": SECRET}, "hostile_option"),
        ("s3://b/t", {"AWS_HOSTILE_OPTION": SECRET}, "AWS_HOSTILE_OPTION"),
        ("gs://b/t", {"hostile_option": SECRET}, "hostile_option"),
        ("az://c/t", {"account_name": "a", "hostile_option": SECRET}, "hostile_option"),
        ("s3://b/t", {"client_kwargs": {"hostile": SECRET}}, "client_kwargs.hostile"),
    ],
)
def test_an_unknown_key_is_named_without_its_value(uri: str, options: dict, named: str) -> None:
    with pytest.raises(
        InvalidCredentialsError, match=f"does not know the storage option '{named}'"
    ) as e:
        open_storage(uri, options)
    assert SECRET not in str(e.value) and e.value.__cause__ is None


def test_a_mapping_option_that_is_not_json_is_refused_without_its_text() -> None:
    for key in ("client_kwargs", "config_kwargs", "s3_additional_kwargs"):
        with pytest.raises(InvalidInputError, match=f"{key} takes a JSON object") as e:
            opts.canonical("s3", {key: "{" + SECRET})
        assert SECRET not in str(e.value)
    with pytest.raises(InvalidInputError, match="token takes a JSON object"):
        opts.canonical("gcs", {"token": "{" + SECRET})


def test_which_values_are_secrets_in_either_spelling() -> None:
    public = ("endpoint_url", "AWS_ENDPOINT_URL", "aws_region", "AWS_ALLOW_HTTP", "account_name")
    public += ("azure_storage_account_name", "google_base_url", "timeout", "region_name")
    secret = ("secret", "key", "token", "aws_secret_access_key", "AWS_SECRET_ACCESS_KEY")
    secret += ("account_key", "AZURE_STORAGE_ACCOUNT_KEY", "sas_token", "connection_string")
    secret += ("google_service_account_key", "azure_client_secret", "hostile_option")
    assert all(opts.is_public(k) for k in public)
    assert not any(opts.is_public(k) for k in secret)


def test_store_of_a_uri() -> None:
    got = [opts.store_of(u) for u in ("s3a://b/t", "GS://b/t", "abfss://c@a.dfs/t", "hdfs://n/t")]
    assert got == ["s3", "gcs", "azure", None]
    assert opts.store_of(str(Path("/tmp/t"))) is None


def test_whether_a_key_is_known_is_asked_of_obstore_once(monkeypatch: pytest.MonkeyPatch) -> None:
    """Each table's Target checks its option keys; asking obstore builds a store (20 ms), so
    the answer for a key is kept: 10,000 tables spent 200 s of the event loop on it."""
    built: list[str] = []
    real = opts.build
    monkeypatch.setattr(opts, "_KNOWN", {})
    monkeypatch.setattr(opts, "build", lambda *a, **k: built.append(a[0]) or real(*a, **k))
    for endpoint in ("http://a:9000", "http://b:9000", "http://c:9000"):
        assert opts.unknown_keys("s3", {"endpoint_url": endpoint, "endpointurl": "x"}) == [
            "endpointurl"
        ]
    assert len(built) == 2  # one store for each key, not for each table
    opts.unknown_keys("gcs", {"endpoint_url": "http://a"})
    assert built[2:] == ["gcs"]  # another store's answer is its own
