"""Hostile credentials against real stores: every CLI command, on MinIO, Azurite and
fake-gcs-server, with wrong, malformed or misplaced credentials. Each case asserts the exit
code, a message that says what to fix, that neither the store's own secret nor the bad value
shows in any output (text or --json), and that every object of the table is byte for byte
what it was. The local-disk cases are in tests/unit/cli/test_hostile_input.py."""

from __future__ import annotations

import base64
import hashlib
import json
import tempfile
import uuid
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import pytest

from deltakeeper.cli import main
from deltakeeper.delta.storage import retries
from tests.conftest import CORPUS
from tests.support import stores

BAD = "hostile-Sup3rSecretValue-7"  # the value each case passes where a credential goes
COMMANDS = (
    "inspect",
    "files",
    "checkpoint",
    "cleanup",
    "vacuum",
    "maintain",
    "compact",
    "discover",
)
UNTIMED = ("inspect", "files", "discover")  # the commands without --now
NOW = "2030-01-01T00:00:00Z"


FIXTURES = {"s3": "minio", "az": "azurite", "gs": "fake_gcs"}


def table_on(store: stores.Emulator) -> str:
    """A fresh copy of a small table with a checkpoint on the store."""
    where = store.uri(f"hostile-{uuid.uuid4().hex[:8]}")
    store.upload_folder(CORPUS / "simple_table_with_checkpoint", where)
    return where


def objects(store: stores.Emulator, uri: str) -> dict[str, str]:
    """Every object under the table and its SHA-256, read with the store's own client."""
    root = uri.split("://", 1)[1]
    return {
        name: hashlib.sha256(store.fs.cat_file(name)).hexdigest()
        for name in sorted(store.fs.find(root))
    }


def flags(options: dict[str, object]) -> list[str]:
    out = []
    for key, value in options.items():
        out += ["--storage-option", f"{key}={value}"]
    return out


@dataclass(frozen=True)
class Case:
    name: str
    # (store, table uri) -> (uri to give, storage options)
    make: Callable[[stores.Emulator, str], tuple[str, dict[str, object]]]
    # store scheme -> (exit code, text the message must contain)
    expect: dict[str, tuple[int, str]]


def _wrong_secret(store: stores.Emulator, uri: str) -> tuple[str, dict[str, object]]:
    options = dict(store.storage_options)
    if store.scheme == "s3":
        options["secret"] = BAD
    elif store.scheme == "az":
        key = base64.b64encode(BAD.encode() * 2).decode()  # base64, but not the account's
        options["connection_string"] = str(options["connection_string"]).replace(
            str(options["account_key"]), key
        )
        options["account_key"] = key
    else:
        # A user's credentials file (gcloud's) whose refresh token is sent to Google for an
        # access token: with HTTPS going nowhere, the store is unreachable. (fake-gcs-server
        # checks no credentials at all, and obstore signs a service-account key itself.)
        adc = Path(tempfile.mkdtemp(prefix="hostile-gcs-")) / "adc.json"
        user = {"type": "authorized_user", "client_id": "deltakeeper", "client_secret": BAD}
        adc.write_text(json.dumps({**user, "refresh_token": BAD}))
        options["token"] = str(adc)
    return uri, options


# 21 base64 letters: one more than a multiple of 4, which no decoder accepts. (A key with other
# characters may decode anyway, leniently, and then is simply wrong: 403, exit 4.)
NOT_BASE64 = "HostileSup3rSecretVal"


def _key_not_base64(store: stores.Emulator, uri: str) -> tuple[str, dict[str, object]]:
    options = dict(store.storage_options)
    key = NOT_BASE64
    options["connection_string"] = str(options["connection_string"]).replace(
        str(options["account_key"]), key
    )
    options["account_key"] = key
    return uri, options


def _unknown_option(store: stores.Emulator, uri: str) -> tuple[str, dict[str, object]]:
    return uri, {**store.storage_options, "hostile_option": BAD}


def _password_in_uri(store: stores.Emulator, uri: str) -> tuple[str, dict[str, object]]:
    scheme, rest = uri.split("://", 1)
    return f"{scheme}://user1234:{BAD}@{rest}", dict(store.storage_options)


def _option_without_equals(store: stores.Emulator, uri: str) -> tuple[str, dict[str, object]]:
    return uri, dict(store.storage_options)  # BAD is added as a bare option by the test


def _unreachable(store: stores.Emulator, uri: str) -> tuple[str, dict[str, object]]:
    port = stores.free_port()  # nothing listens there
    options = dict(store.storage_options)
    if store.scheme == "az":
        options["connection_string"] = str(options["connection_string"]).replace(
            store.endpoint.rsplit("/", 1)[0], f"http://127.0.0.1:{port}"
        )
    else:
        options["endpoint_url"] = f"http://127.0.0.1:{port}"
    return uri, options


def _not_a_table(store: stores.Emulator, uri: str) -> tuple[str, dict[str, object]]:
    return f"{uri}-nothing-here", dict(store.storage_options)


EVERYWHERE_2 = {"s3": (2, ""), "az": (2, ""), "gs": (2, "")}
CASES = [
    Case(
        "wrong-secret",
        _wrong_secret,
        {
            "s3": (4, "check the credentials"),
            "az": (4, "check the credentials"),
            "gs": (4, "check the network"),
        },
    ),
    # object_store's builders know their keys: an unknown one is named on every store.
    Case(
        "unknown-option",
        _unknown_option,
        {k: (2, "does not know the storage option 'hostile_option'") for k in EVERYWHERE_2},
    ),
    Case(
        "password-in-uri",
        _password_in_uri,
        {k: (2, "credentials inside the URI") for k in EVERYWHERE_2},
    ),
    Case("bare-option", _option_without_equals, {k: (2, "is not KEY=VALUE") for k in EVERYWHERE_2}),
    Case(
        "unreachable",
        _unreachable,
        {k: (4, "check the endpoint") for k in EVERYWHERE_2},
    ),
    Case("not-a-table", _not_a_table, {k: (2, "is not a Delta table") for k in EVERYWHERE_2}),
]


@pytest.fixture(autouse=True)
def no_way_out(monkeypatch: pytest.MonkeyPatch) -> None:
    """HTTPS goes to a closed loopback port: a user's credentials are checked at Google, and
    the tests never leave the machine."""
    proxy = f"http://127.0.0.1:{stores.free_port()}"
    for name in ("HTTPS_PROXY", "https_proxy"):
        monkeypatch.setenv(name, proxy)
    for name in ("NO_PROXY", "no_proxy"):
        monkeypatch.setenv(name, "")


@pytest.fixture(autouse=True)
def no_pause_between_attempts(monkeypatch: pytest.MonkeyPatch) -> None:
    """These cases assert the exit code and the message, not the backoff (test_stores.py
    bounds and counts that): all five attempts still go to the closed port of `unreachable`,
    without the 3 s of pauses that made each of its 19 commands slow."""
    monkeypatch.setattr(retries, "FIRST_BACKOFF_S", 0.0)


@pytest.mark.parametrize(
    ("scheme", "case"),
    [
        pytest.param(scheme, case, id=f"{FIXTURES[scheme]}-{case.name}")
        for case in CASES
        for scheme in case.expect
    ],
)
def test_hostile_input_on_every_store_and_command(
    capsys: pytest.CaptureFixture[str], request: pytest.FixtureRequest, scheme: str, case: Case
) -> None:
    store: stores.Emulator = request.getfixturevalue(FIXTURES[scheme])
    uri = table_on(store)
    before = objects(store, uri)
    given, options = case.make(store, uri)
    code, says = case.expect[store.scheme]
    secrets = {BAD, *([store.secret] if store.secret else [])}
    argv_options = flags(options) + (
        ["--storage-option", BAD] if case.name == "bare-option" else []
    )
    for command in COMMANDS:
        if command == "discover" and case.name == "not-a-table":
            continue  # a prefix without tables is no error to discover: it finds none
        timed = ["--now", NOW] if command not in UNTIMED else []
        dry = [["--dry-run", "--json"]] if command in ("vacuum", "maintain", "compact") else []
        for extra in ([], ["--json"], *dry):
            got = main([command, given, *argv_options, *timed, *extra])
            out, err = capsys.readouterr()
            where = (case.name, store.name, command, extra)
            assert got == code, (where, out, err)
            assert says in err, (where, err)
            for secret in secrets:
                assert secret not in out + err, (where, out, err)
            if "--json" in extra:
                assert json.loads(out)["exitCode"] == code, (where, out)
    assert objects(store, uri) == before


def test_azure_key_that_is_not_base64_is_exit_2(
    capsys: pytest.CaptureFixture[str], azurite: stores.Emulator
) -> None:
    where = table_on(azurite)
    before = objects(azurite, where)
    given, options = _key_not_base64(azurite, where)
    for command in COMMANDS:
        got = main([command, given, *flags(options), "--json"])
        out, err = capsys.readouterr()
        assert got == 2, (command, out, err)
        assert "not valid base64" in err and json.loads(out)["error"] == "InvalidCredentials"
        assert NOT_BASE64 not in out + err and azurite.secret not in out + err
    assert objects(azurite, where) == before
