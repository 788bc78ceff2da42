"""Storage options: the names users give, turned into what obstore (Rust's object_store) takes.

(Beside delta/storage/, not in it: the CLI masks option values as it starts, and must not load
the stores to know which options are secrets. obstore is imported only to build a store.)

Two spellings are accepted, so one `storage_options` dict serves delta-rs and deltakeeper:

- the fsspec names deltakeeper took before it moved to obstore (`endpoint_url`, `key`,
  `secret`, `token`, `client_kwargs`, `account_name`, `connection_string`, ...), as before
  case-sensitive; OLD_KEYS maps each to its object_store name (docs/storage.md prints the table);
- object_store's and delta-rs's names (`AWS_ENDPOINT_URL`, `aws_access_key_id`, `AWS_ALLOW_HTTP`,
  `azure_storage_account_name`, `google_service_account_key`, ...), case-insensitive, as delta-rs
  takes them. obstore knows the store keys and their aliases; the HTTP client's keys
  (CLIENT_KEYS) go to its client options; delta-rs's keys for its own locking and retries
  (IGNORED) mean nothing here and are let through.

`canonical` gives one spelling of everything (lower-case object_store names), so two sources
(a spec and a Secret) merge key by key; `obstore_config` splits it into what a store is built
with. An `http://` endpoint allows plain HTTP. A key neither spelling knows is named in an
InvalidCredentialsError; values are never quoted (PUBLIC names the keys that are not secrets).
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any
from urllib.parse import urlsplit

from deltakeeper.delta.errors import InvalidCredentialsError, InvalidInputError

# URI scheme -> store.
STORES = {
    "s3": "s3",
    "s3a": "s3",
    "gs": "gcs",
    "gcs": "gcs",
    "az": "azure",
    "abfs": "azure",
    "abfss": "azure",
}
PREFIX = {"s3": "aws_", "gcs": "google_", "azure": "azure_"}

# fsspec name (s3fs, gcsfs, adlfs) -> object_store name, per store. Entries whose meaning
# depends on the value (gcs `token`, azure `connection_string`) are read by the functions below.
OLD_KEYS: dict[str, dict[str, str]] = {
    "s3": {
        "endpoint_url": "aws_endpoint",
        "key": "aws_access_key_id",
        "secret": "aws_secret_access_key",
        "token": "aws_session_token",
        "anon": "aws_skip_signature",
        "requester_pays": "aws_request_payer",
        "use_ssl": "allow_http",  # negated
    },
    "gcs": {
        "endpoint_url": "google_base_url",
        "token": "google_service_account_key",  # or a file, a word, a bearer token
        "anon": "google_skip_signature",
    },
    "azure": {
        "account_name": "azure_storage_account_name",
        "account_key": "azure_storage_account_key",
        "sas_token": "azure_storage_sas_token",
        "client_id": "azure_client_id",
        "client_secret": "azure_client_secret",
        "tenant_id": "azure_tenant_id",
        "anon": "azure_skip_signature",
        "account_host": "azure_storage_endpoint",
        "connection_string": "azure_storage_endpoint",  # and the account, key or SAS in it
    },
}
# Nested fsspec options, each inner key -> object_store name.
NESTED: dict[str, dict[str, str]] = {
    "client_kwargs": {
        "region_name": "aws_region",
        "endpoint_url": "aws_endpoint",
        "aws_access_key_id": "aws_access_key_id",
        "aws_secret_access_key": "aws_secret_access_key",
        "aws_session_token": "aws_session_token",
        "verify": "allow_invalid_certificates",  # negated
    },
    "config_kwargs": {
        "region_name": "aws_region",
        "connect_timeout": "connect_timeout",
        "read_timeout": "timeout",
        "s3.addressing_style": "aws_virtual_hosted_style_request",  # "virtual" -> true
        "retries": "",  # deltakeeper retries in one place (retries.py); botocore's are moot
        "signature_version": "",
    },
    "s3_additional_kwargs": {
        "ServerSideEncryption": "aws_server_side_encryption",
        "SSEKMSKeyId": "aws_sse_kms_key_id",
        "RequestPayer": "aws_request_payer",
    },
}
# fsspec options that no longer mean anything (obstore needs no project, creates no buckets).
DROPPED = {"s3": {"version_aware"}, "gcs": {"project", "default_location"}, "azure": set()}
# Options fsspec wanted as mappings; a string (the command line, a manifest) is read as JSON.
MAPPING_OPTIONS = ("client_kwargs", "config_kwargs", "s3_additional_kwargs", "token")
# object_store's HTTP client settings (its ClientConfigKey), with or without the store's prefix.
CLIENT_KEYS = {
    "allow_http",
    "allow_invalid_certificates",
    "connect_timeout",
    "default_content_type",
    "http1_only",
    "http2_only",
    "http2_keep_alive_interval",
    "http2_keep_alive_timeout",
    "http2_keep_alive_while_idle",
    "pool_idle_timeout",
    "pool_max_idle_per_host",
    "proxy_url",
    "proxy_ca_certificate",
    "proxy_excludes",
    "randomize_addresses",
    "read_timeout",
    "root_certificate",
    "timeout",
    "user_agent",
}
# delta-rs keys for its own commit locking and retries: deltakeeper commits nothing (it writes
# with create-only puts) and retries in one place, so these are accepted and ignored.
IGNORED = {
    "aws_s3_allow_unsafe_rename",
    "aws_s3_locking_provider",
    "delta_dynamo_table_name",
    "aws_endpoint_url_dynamodb",
    "aws_region_dynamodb",
    "aws_access_key_id_dynamodb",
    "aws_secret_access_key_dynamodb",
    "aws_session_token_dynamodb",
    "aws_ec2_metadata_timeout",
    "max_retries",
    "retry_timeout",
    "backoff_config.init_backoff",
    "backoff_config.max_backoff",
    "backoff_config.base",
}
# Options whose values are not secrets; every other option's value is masked in all output.
PUBLIC = {
    # the fsspec names
    "endpoint_url",
    "account_name",
    "account_host",
    "region_name",
    "anon",
    "use_ssl",
    "project",
    "requester_pays",
    "default_location",
    "version_aware",
    # object_store's (lower case; aliases included)
    "aws_endpoint",
    "aws_endpoint_url",
    "endpoint",
    "aws_region",
    "region",
    "aws_default_region",
    "aws_allow_http",
    "aws_skip_signature",
    "aws_virtual_hosted_style_request",
    "aws_conditional_put",
    "aws_request_payer",
    "aws_unsigned_payload",
    "unsigned_payload",
    "google_base_url",
    "base_url",
    "google_skip_signature",
    "azure_storage_account_name",
    "azure_account_name",
    "azure_storage_endpoint",
    "azure_endpoint",
    "azure_storage_use_emulator",
    "azure_use_emulator",
    "azure_allow_http",
    "azure_skip_signature",
    *CLIENT_KEYS,
    *IGNORED,
}
# object_store aliases folded to one spelling, so a spec and a Secret merge key by key (obstore
# knows more aliases and refuses two of them at once).
ALIASES = {
    "aws_endpoint_url": "aws_endpoint",
    "aws_token": "aws_session_token",
    "aws_default_region": "aws_region",
    "unsigned_payload": "aws_unsigned_payload",
    "azure_account_name": "azure_storage_account_name",
    "azure_storage_access_key": "azure_storage_account_key",
    "azure_storage_master_key": "azure_storage_account_key",
    "azure_account_key": "azure_storage_account_key",
    "azure_storage_sas_key": "azure_storage_sas_token",
    "azure_endpoint": "azure_storage_endpoint",
    "azure_use_emulator": "azure_storage_use_emulator",
    "google_service_account_path": "google_service_account",
}
# Keys that name an Azure account (or imply one): an abfss:// host's account is used without.
ACCOUNT_KEYS = {
    "account_name",
    "connection_string",
    "azure_storage_account_name",
    "azure_account_name",
    "azure_storage_use_emulator",
    "azure_use_emulator",
}
# Words gcsfs took as its `token`: "anon" sends no credentials; the others are the usual
# credential chain (a key file in GOOGLE_APPLICATION_CREDENTIALS, gcloud's, the metadata server).
GCS_TOKEN_WORDS = {"anon", "google_default", "cloud", "cache", "browser"}
# No credentials on GCS: object_store 0.14 still asks the metadata server for a token when told
# to skip signing; a key with "disable_oauth" sends no Authorization header at all.
ANONYMOUS_GCS = json.dumps(
    {"disable_oauth": True, "client_email": "", "private_key": "", "private_key_id": ""}
)
# Azurite's well-known account (Microsoft's documented development key, not a secret).
EMULATOR_ACCOUNT = "devstoreaccount1"
EMULATOR_KEY = (
    "Eby8vdM02xNOcqFlqUwJPLlmEtlCDXJ1OUzFT50uSRZ6IFsuFq2UVErCz4I6tq/K1SZFPTOtr/KBHBeksoGMGw=="
)
EMULATOR_ENDPOINT = "http://127.0.0.1:10000"
# An account's blob endpoint when none is given; object_store builds the same.
AZURE_BLOB_HOST = "blob.core.windows.net"


def store_of(uri: str) -> str | None:
    """ "s3", "gcs" or "azure" for an object-store URI; None for anything else."""
    scheme = uri.split("://", 1)[0].lower() if "://" in uri else ""
    return STORES.get(scheme)


def normalize_options(options: Mapping[str, Any]) -> dict[str, Any]:
    """`options` with the mapping options as dicts; a clear error where one is not a JSON
    object. A gcs `token` may also be a plain string (a file, 'anon', 'google_default')."""
    out = dict(options)
    for key in MAPPING_OPTIONS:
        value = out.get(key)
        if value is None or isinstance(value, dict):
            continue
        if key == "token" and not (isinstance(value, str) and value.lstrip().startswith("{")):
            continue
        try:
            parsed = json.loads(value) if isinstance(value, str) else None
        except ValueError:
            parsed = None
        if not isinstance(parsed, dict):
            raise InvalidInputError(
                f"storage option {key} takes a JSON object, e.g. "
                f'{key}=\'{{"region_name": "eu-west-1"}}\''
            )
        out[key] = parsed
    return out


def canonical(store: str, options: Mapping[str, Any]) -> dict[str, Any]:
    """`options` for `store` in one spelling: lower-case object_store names, values as given
    (booleans as "true"/"false"). Two keys for one option with different values are refused;
    keys neither spelling knows pass, for obstore to name when the store is built."""
    out: dict[str, Any] = {}
    given: dict[str, str] = {}  # object_store name -> the key it came from
    for key, value in normalize_options(options).items():
        if value is None or key in DROPPED[store]:
            continue
        one: dict[str, Any] = {}
        if key in NESTED:
            _nested(store, key, value, one)
        elif key in OLD_KEYS[store]:
            _old(store, key, value, one)
        else:
            one[_new_key(store, key)] = _text(value)
        for name, v in one.items():
            if name in out and out[name] != v:
                raise InvalidInputError(
                    f"storage options {given[name]} and {key} both set {name}, differently; "
                    "give it once"
                )
            out[name], given[name] = v, key
    return out


def _old(store: str, key: str, value: Any, out: dict[str, Any]) -> None:
    if store == "gcs" and key == "token":
        out.update(gcs_token(value))
    elif store == "azure" and key == "connection_string":
        out.update(connection_string(str(value)))
    elif store == "azure" and key == "account_host":
        out["azure_storage_endpoint"] = _with_scheme(str(value))
    elif key == "use_ssl":
        out["allow_http"] = _text(not _true(value))
    else:
        out[OLD_KEYS[store][key]] = _text(value)


def _nested(store: str, option: str, value: Mapping[str, Any], out: dict[str, Any]) -> None:
    if store != "s3":
        raise InvalidCredentialsError(
            f"the storage option {option!r} is for s3:// tables (s3fs); see docs/storage.md"
        )
    names = NESTED[option]
    for inner, inner_value in _flat(value):
        target = names.get(inner)
        if target is None:
            raise InvalidCredentialsError(
                f"deltakeeper does not know the storage option '{option}.{inner}'; its "
                f"object_store counterparts are listed in docs/storage.md"
            )
        if not target:
            continue
        if inner == "verify":
            inner_value = not _true(inner_value)
        elif inner == "s3.addressing_style":
            inner_value = str(inner_value) == "virtual"
        out[target] = _text(inner_value)


def _flat(value: Mapping[str, Any], prefix: str = "") -> list[tuple[str, Any]]:
    """{"s3": {"addressing_style": "path"}} -> [("s3.addressing_style", "path")]."""
    out: list[tuple[str, Any]] = []
    for k, v in value.items():
        if isinstance(v, Mapping) and k != "retries":
            out += _flat(v, f"{prefix}{k}.")
        else:
            out.append((f"{prefix}{k}", v))
    return out


def _new_key(store: str, key: str) -> str:
    lower = key.lower()
    bare = lower.removeprefix(PREFIX[store])
    if bare in CLIENT_KEYS:
        return bare
    return ALIASES.get(lower, lower)


def gcs_token(value: Any) -> dict[str, str]:
    """gcsfs's `token`: a service-account key (a mapping or its JSON), a key file, a word of
    GCS_TOKEN_WORDS, or else an OAuth access token."""
    if isinstance(value, Mapping):
        return {"google_service_account_key": json.dumps(dict(value))}
    text = str(value)
    if text == "anon":
        return {"google_skip_signature": "true"}  # see obstore_config
    if text in GCS_TOKEN_WORDS:
        return {}
    if text.lstrip().startswith("{"):
        return {"google_service_account_key": text}
    if "/" in text or text.endswith(".json"):
        return {"google_application_credentials": text}
    return {"google_bearer_token": text}


def connection_string(text: str) -> dict[str, str]:
    """The account, key, SAS and blob endpoint an Azure connection string names."""
    fields = {k.strip(): v for k, _, v in (p.partition("=") for p in text.split(";")) if k}
    if fields.get("UseDevelopmentStorage", "").lower() == "true":
        return emulator()
    out: dict[str, str] = {}
    names = {
        "AccountName": "azure_storage_account_name",
        "AccountKey": "azure_storage_account_key",
        "SharedAccessSignature": "azure_storage_sas_token",
    }
    out.update({names[k]: v for k, v in fields.items() if k in names and v})
    if fields.get("BlobEndpoint"):
        out["azure_storage_endpoint"] = fields["BlobEndpoint"].rstrip("/")
        out.setdefault("azure_storage_account_name", _endpoint_account(fields["BlobEndpoint"]))
    elif fields.get("EndpointSuffix") and out.get("azure_storage_account_name"):
        protocol = fields.get("DefaultEndpointsProtocol", "https")
        account = out["azure_storage_account_name"]
        out["azure_storage_endpoint"] = f"{protocol}://{account}.blob.{fields['EndpointSuffix']}"
    return out


def _endpoint_account(endpoint: str) -> str:
    """The account of a blob endpoint: its host's first label (account.blob.core.windows.net),
    or its path's first segment where the host is an address (http://127.0.0.1:10000/acct)."""
    parts = urlsplit(endpoint)
    host = parts.hostname or ""
    if host.replace(".", "").isdigit() or host == "localhost":
        return parts.path.strip("/").split("/", 1)[0]
    return host.split(".", 1)[0]


def emulator(account: str = EMULATOR_ACCOUNT) -> dict[str, str]:
    """Azurite as an endpoint, not object_store's emulator mode: that mode lists every blob of a
    folder to start after a key, where Azurite takes the Blob API's startFrom."""
    out = {
        "azure_storage_account_name": account,
        "azure_storage_endpoint": f"{EMULATOR_ENDPOINT}/{account}",
    }
    if account == EMULATOR_ACCOUNT:
        out["azure_storage_account_key"] = EMULATOR_KEY
    return out


def _with_scheme(host: str) -> str:
    return host if "://" in host else f"https://{host}"


def _true(value: Any) -> bool:
    return value is True or str(value).lower() == "true"


def _text(value: Any) -> Any:
    if isinstance(value, bool):
        return "true" if value else "false"
    return value


ENDPOINTS = ("aws_endpoint", "google_base_url", "azure_storage_endpoint")

# Where object_store finds S3 credentials besides keys in the options: these environment
# variables (keys, a web identity, an ECS/EKS container endpoint); with none, it asks the EC2
# instance metadata service (docs/storage.md, "Where S3 credentials come from").
AWS_CREDENTIAL_OPTIONS = (
    "aws_access_key_id",
    "aws_container_credentials_relative_uri",
    "aws_container_credentials_full_uri",
)
AWS_CREDENTIAL_ENV = (
    "AWS_ACCESS_KEY_ID",
    "AWS_WEB_IDENTITY_TOKEN_FILE",
    "AWS_CONTAINER_CREDENTIALS_RELATIVE_URI",
    "AWS_CONTAINER_CREDENTIALS_FULL_URI",
)
NO_AWS_CREDENTIALS = (
    "no credentials: give aws_access_key_id and aws_secret_access_key (storage options, a "
    "Secret's AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY, or those environment variables), a "
    "web identity (AWS_WEB_IDENTITY_TOKEN_FILE and AWS_ROLE_ARN), container credentials "
    "(AWS_CONTAINER_CREDENTIALS_RELATIVE_URI or _FULL_URI), an instance role, or "
    "aws_skip_signature=true for a public bucket"
)


def aws_credentials_given(options: Mapping[str, Any], env: Mapping[str, str]) -> bool:
    """Whether canonical S3 `options` or the environment give object_store credentials (or
    tell it to sign nothing); if not, it asks the instance metadata service for some."""
    if any(options.get(k) for k in AWS_CREDENTIAL_OPTIONS):
        return True
    if _true(options.get("aws_skip_signature", env.get("AWS_SKIP_SIGNATURE", False))):
        return True
    return any(env.get(k) for k in AWS_CREDENTIAL_ENV)


def metadata_lookup_off(env: Mapping[str, str]) -> bool:
    """AWS_EC2_METADATA_DISABLED, as the AWS SDKs and CLI read it (object_store does not)."""
    return env.get("AWS_EC2_METADATA_DISABLED", "").strip().lower() == "true"


def obstore_config(store: str, options: Mapping[str, Any]) -> tuple[dict[str, Any], dict[str, Any]]:
    """(store config, client options) for obstore from canonical options: an `http://`
    endpoint allows plain HTTP; Azure's emulator flag becomes Azurite's endpoint; S3 over TLS
    sends unsigned payloads unless told otherwise."""
    config: dict[str, Any] = {}
    client: dict[str, Any] = {}
    for key, value in options.items():
        if key in CLIENT_KEYS:
            client[key] = value
        elif key in IGNORED:
            continue
        else:
            config[key] = value
    if store == "gcs" and _true(config.pop("google_skip_signature", False)):
        config.setdefault("google_service_account_key", ANONYMOUS_GCS)
    if store == "azure" and _true(config.pop("azure_storage_use_emulator", False)):
        account = config.get("azure_storage_account_name", EMULATOR_ACCOUNT)
        config = {**emulator(str(account)), **config}
    endpoint = next((str(config[k]) for k in ENDPOINTS if k in config), "")
    if urlsplit(endpoint).scheme == "http":
        client.setdefault("allow_http", "true")
    elif store == "s3":
        # As the AWS SDKs do: over TLS the body is not hashed into the signature (TLS guards
        # it; the hash costs about 1 ms of CPU a MiB sent), over plain HTTP it is.
        config.setdefault("aws_unsigned_payload", "true")
    return config, client


def is_public(key: str) -> bool:
    """Whether an option's value is no secret (an endpoint, a region, an account name)."""
    return key in PUBLIC or key.lower() in PUBLIC


def unknown_keys(store: str, options: Mapping[str, Any]) -> list[str]:
    """The keys of `options` that neither spelling knows for `store`, as given."""
    return [key for key, value in options.items() if not _known_key(store, key, value)]


# Whether each (store, key) is known, as _known found it once: it builds a store to ask
# obstore (20 ms), and every table's Target is checked so at each start (200 s of the event
# loop at 10,000 tables). Whether a key is known does not depend on its value.
_KNOWN: dict[tuple[str, str], bool] = {}
MAX_KNOWN = 4096


def _known_key(store: str, key: str, value: Any) -> bool:
    found = _KNOWN.get((store, key))
    if found is None:
        found = _known(store, key, value)
        if len(_KNOWN) < MAX_KNOWN:
            _KNOWN[(store, key)] = found
    return found


def _known(store: str, key: str, value: Any) -> bool:
    from obstore.exceptions import UnknownConfigurationKeyError

    try:
        config, _client = obstore_config(store, canonical(store, {key: value}))
        build(store, "bucket", config)
    except UnknownConfigurationKeyError:
        return False
    except InvalidCredentialsError as e:
        return "does not know" not in str(e)
    except Exception:  # a known key with a value it cannot take: said when the store opens
        return True
    return True


def build(store: str, bucket: str, config: Mapping[str, Any], **kwargs: Any) -> Any:
    """The obstore store of `store` for `bucket` (an Azure container) with `config`."""
    from obstore.store import AzureStore, GCSStore, S3Store

    cls = {"s3": S3Store, "gcs": GCSStore, "azure": AzureStore}[store]
    return cls(bucket, config=dict(config), **kwargs)
