"""Storage options in both spellings on the real stores: fsspec's names (what deltakeeper took
before obstore) and object_store's / delta-rs's (in upper and lower case), each through the
command line, a DeltaTable manifest's options and a Secret, on MinIO, Azurite and
fake-gcs-server. Each spelling reads the table at its version, and the same dict opens it in
delta-rs too; no secret value shows in any output. Which key maps to which is
tests/unit/delta/test_storage_options.py's."""

from __future__ import annotations

import json
import uuid
from pathlib import Path
from typing import Any

import pytest

from deltakeeper.cli import main
from tests.conftest import CORPUS
from tests.support import stores

STORES = ("minio", "azurite", "fake_gcs")
VERSION = 10  # simple_table_with_checkpoint's


def spellings(emu: stores.Emulator) -> dict[str, dict[str, str]]:
    """Ways to say the same credentials and endpoint: the old names, object_store's in upper
    case, and in lower case (its aliases)."""
    o = emu.storage_options
    if emu.scheme == "s3":
        new = {
            "AWS_ENDPOINT_URL": o["endpoint_url"],
            "AWS_ACCESS_KEY_ID": o["key"],
            "AWS_SECRET_ACCESS_KEY": o["secret"],
            "AWS_REGION": "us-east-1",
            "AWS_ALLOW_HTTP": "true",
        }
        lower = {
            "aws_endpoint": o["endpoint_url"],
            "aws_access_key_id": o["key"],
            "aws_secret_access_key": o["secret"],
        }  # an http:// endpoint allows plain HTTP by itself
        old = {"endpoint_url": o["endpoint_url"], "key": o["key"], "secret": o["secret"]}
        old["client_kwargs"] = json.dumps({"region_name": "us-east-1"})
    elif emu.scheme == "az":
        new = {
            "AZURE_STORAGE_ACCOUNT_NAME": o["account_name"],
            "AZURE_STORAGE_ACCOUNT_KEY": o["account_key"],
            "AZURE_STORAGE_ENDPOINT": emu.endpoint,
            "AZURE_ALLOW_HTTP": "true",
        }
        lower = {k.lower(): v for k, v in new.items() if k != "AZURE_ALLOW_HTTP"}
        old = {"connection_string": o["connection_string"]}
    else:
        new = {"GOOGLE_BASE_URL": emu.endpoint, "GOOGLE_SKIP_SIGNATURE": "true"}
        lower = {k.lower(): v for k, v in new.items()}
        old = {"endpoint_url": o["endpoint_url"], "token": "anon"}
    return {"old": old, "new": new, "lower": lower}


@pytest.fixture(scope="module", params=STORES)
def table(request: pytest.FixtureRequest) -> tuple[stores.Emulator, str]:
    emu: stores.Emulator = request.getfixturevalue(request.param)
    uri = emu.uri(f"options-{uuid.uuid4().hex[:8]}/t")
    emu.upload_folder(CORPUS / "simple_table_with_checkpoint", uri)
    return emu, uri


def secrets_of(emu: stores.Emulator) -> set[str]:
    return {emu.secret} if emu.secret else set()


@pytest.mark.parametrize("spelling", ["old", "new", "lower"])
def test_each_spelling_through_the_command_line(capsys, table, spelling):
    emu, uri = table
    options = spellings(emu)[spelling]
    assert main(["inspect", uri, *_flags(options), "--json"]) == 0
    out, err = capsys.readouterr()
    assert json.loads(out)["version"] == VERSION
    assert not any(s in out + err for s in secrets_of(emu))


def _run_once(folder: Path, capsys) -> dict[str, Any]:
    code = main(["run", "--manifests", str(folder), "--once"])
    out, err = capsys.readouterr()
    status = json.loads((folder / ".deltakeeper" / "status.json").read_text())
    return {"code": code, "text": out + err, "status": status}


def _manifests(folder: Path, uri: str, options: dict[str, str], secret: dict[str, str]) -> None:
    table = {
        "apiVersion": "deltakeeper.io/v1alpha1",
        "kind": "DeltaTable",
        "metadata": {"name": "t", "namespace": "lake"},
        "spec": {"uri": uri, "storage": {"options": options}},
    }
    if secret:
        table["spec"]["storage"]["secretRef"] = {"name": "creds"}
        doc = {
            "apiVersion": "v1",
            "kind": "Secret",
            "metadata": {"name": "creds", "namespace": "lake"},
            "stringData": secret,
        }
        (folder / "secret.json").write_text(json.dumps(doc))
    (folder / "table.json").write_text(json.dumps(table))


# The keys that carry credentials go in the Secret; the rest (endpoint, flags) in the spec.
CREDENTIAL_WORDS = ("key", "secret", "token", "connection_string", "signature")


@pytest.mark.parametrize("spelling", ["old", "new", "lower"])
@pytest.mark.parametrize("where", ["manifest", "secret"])
def test_each_spelling_through_a_manifest_and_a_secret(capsys, tmp_path, table, spelling, where):
    emu, uri = table
    options = spellings(emu)[spelling]
    secret: dict[str, str] = {}
    if where == "secret":
        secret = {k: v for k, v in options.items() if any(w in k.lower() for w in CREDENTIAL_WORDS)}
        options = {k: v for k, v in options.items() if k not in secret}
    _manifests(tmp_path, uri, options, secret)
    got = _run_once(tmp_path, capsys)
    entry = got["status"]["tables"]["lake/t"]
    ready = next(c for c in entry["conditions"] if c["type"] == "Ready")
    assert got["code"] == 0 and ready["status"] == "True", (ready, got["text"][-2000:])
    assert entry["version"] == VERSION
    assert not any(s in got["text"] + json.dumps(got["status"]) for s in secrets_of(emu))


@pytest.mark.parametrize("spelling", ["new", "lower"])
def test_the_same_dict_opens_the_table_in_delta_rs(table, spelling):
    import deltalake

    emu, uri = table
    options = spellings(emu)[spelling]
    if emu.scheme != "gs":  # delta-rs does not take plain HTTP from an http:// endpoint alone
        options = {**options, "allow_http": "true"}
    assert deltalake.DeltaTable(uri, storage_options=options).version() == VERSION
    assert main(["inspect", uri, *_flags(options)]) == 0  # and deltakeeper takes it as it is


def _flags(options: dict[str, str]) -> list[str]:
    return [a for k, v in options.items() for a in ("--storage-option", f"{k}={v}")]


def test_no_s3_credentials_on_minio_says_what_to_give(minio, monkeypatch, capsys) -> None:
    """Issue 49, section 2, item 12, on a real S3 server: with the credentials left out the
    table is not read, and the error says "no credentials: give ...", not MinIO's or the
    metadata service's 403. Nothing leaves loopback: the metadata lookup is off, then asked of
    a local server that refuses."""
    import os

    from tests.support.http import refusing_server

    uri = minio.uri(f"no-credentials-{uuid.uuid4().hex[:8]}")
    minio.upload_folder(CORPUS / "simple_table_with_checkpoint", uri)
    endpoint = f"endpoint_url={minio.storage_options['endpoint_url']}"
    for name in [n for n in os.environ if n.startswith("AWS_")]:
        monkeypatch.delenv(name)
    monkeypatch.setenv("AWS_METADATA_ENDPOINT", "http://127.0.0.1:1")  # should it be asked
    monkeypatch.setenv("AWS_EC2_METADATA_DISABLED", "true")
    keys = [f"key={minio.storage_options['key']}", f"secret={minio.storage_options['secret']}"]
    flags = [a for kv in (endpoint, *keys) for a in ("--storage-option", kv)]
    assert main(["inspect", uri, "--json", *flags]) == 0  # with its keys, it is read
    assert json.loads(capsys.readouterr().out)["version"] == VERSION

    assert main(["inspect", uri, "--storage-option", endpoint]) == 2
    assert "no credentials: give aws_access_key_id" in capsys.readouterr().err
    with refusing_server() as (imds, asked):
        monkeypatch.delenv("AWS_EC2_METADATA_DISABLED")
        # an option, not the variable: a store built before (the process keeps them by their
        # options) would still ask where the variable said then
        metadata = f"aws_metadata_endpoint={imds}"
        argv = ["inspect", uri, "--storage-option", endpoint, "--storage-option", metadata]
        assert main(argv) == 4
    err = capsys.readouterr().err
    assert "no credentials: give aws_access_key_id" in err and "refused" not in err
    assert asked  # the metadata service was asked, and only the local one
