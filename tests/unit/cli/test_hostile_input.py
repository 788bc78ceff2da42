"""Hostile input on a local table, through every CLI command: secrets in options and URIs,
strict manifests, exit codes, where metrics listen, JSON errors, odd URIs and partition values,
bad daemon manifests. Each case asserts the exit code, a message that says what to fix, that no
secret shows in any output, and that the table's files are byte for byte what they were.
The object-store cases are in tests/integration/test_hostile_stores.py."""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import socket
import subprocess
import sys
from pathlib import Path

import pytest

from deltakeeper.cli import main
from deltakeeper.resources import manifests
from tests.support.cli import run
from tests.support.logbuilder import LogBuilder, add, metadata, protocol

SECRET = "hunter2-Sup3rSecretValue"
NOW = "2030-01-01T00:00:00Z"
TABLE_COMMANDS = ("inspect", "files", "checkpoint", "cleanup", "vacuum", "maintain", "compact")
# Every command that takes a URI and storage options: the table commands and discover (a prefix).
URI_COMMANDS = (*TABLE_COMMANDS, "discover")
# The commands that take --now, and a duration flag of each.
TIMED = ("checkpoint", "cleanup", "vacuum", "maintain", "compact")
RETENTION_FLAG = {
    "checkpoint": "--deleted-file-retention",
    "cleanup": "--log-retention",
    "vacuum": "--deleted-file-retention",
    "maintain": "--log-retention",
    "compact": "--max-age",
}


def tree_hash(root: Path) -> dict[str, str]:
    """Every file under `root` (the table folder) and its SHA-256."""
    return {
        p.relative_to(root).as_posix(): hashlib.sha256(p.read_bytes()).hexdigest()
        for p in sorted(root.rglob("*"))
        if p.is_file()
    }


@pytest.fixture
def table(corpus: Path, tmp_path: Path) -> Path:
    root = tmp_path / "t"
    shutil.copytree(corpus / "simple_table_with_checkpoint", root)
    return root


def check(
    capsys: pytest.CaptureFixture[str],
    root: Path,
    argv: list[str],
    code: int,
    says: str,
    secret: str = SECRET,
) -> None:
    """Run `argv` twice (text, then --json where the command has it) and check everything."""
    before = tree_hash(root) if root.is_dir() else None
    for as_json in (False, True):
        got, out, err = run(capsys, *argv, *(["--json"] if as_json else []))
        assert got == code, (argv, as_json, out, err)
        assert says in err, (argv, err)
        assert secret not in out + err, (argv, out, err)
        if as_json:
            error = json.loads(out)
            assert error["exitCode"] == code and says in error["message"], error
            assert set(error) == {"error", "message", "exitCode"}
    if before is not None:
        assert tree_hash(root) == before, argv


# -- secrets --------------------------------------------------------------------------------------


@pytest.mark.parametrize("command", URI_COMMANDS)
def test_a_storage_option_without_equals_is_not_echoed(capsys, table, command):
    argv = [command, str(table), "--storage-option", SECRET]
    check(capsys, table, argv, 2, "is not KEY=VALUE")


@pytest.mark.parametrize("command", URI_COMMANDS)
def test_credentials_inside_a_uri_are_refused_and_not_echoed(capsys, tmp_path, command):
    uri = f"s3://AKIAEXAMPLEKEY1:{SECRET}@bucket/t"
    check(capsys, tmp_path, [command, uri], 2, "credentials inside the URI")
    check(capsys, tmp_path, [command, uri], 2, "credentials inside", secret="AKIAEXAMPLEKEY1")


@pytest.mark.parametrize("command", URI_COMMANDS)
def test_a_secret_option_is_masked_in_an_error_that_quotes_it(capsys, tmp_path, command):
    # A local path named like the secret: the "not a Delta table" error quotes the URI, and
    # the secret given as an option must still not show.
    missing = tmp_path / SECRET
    argv = [command, str(missing), "--storage-option", f"secret={SECRET}"]
    says = "no such folder" if command == "discover" else "not a Delta table"
    check(capsys, tmp_path, argv, 2, says)


@pytest.mark.parametrize("command", URI_COMMANDS)
def test_a_uri_query_is_masked_like_a_password(capsys, tmp_path, command):
    """Issue 49, section 2, item 11: a presigned URL's signature was printed back."""
    uri = f"file://{tmp_path}/missing?X-Amz-Signature={SECRET}"
    says = "no such folder" if command == "discover" else "not a Delta table"
    check(capsys, tmp_path, [command, uri], 2, says)


def test_a_uri_query_is_masked_in_a_report(capsys, table):
    for argv in (
        ["inspect", f"file://{table}?X-Amz-Signature={SECRET}"],
        ["inspect", f"file://{table}?sig={SECRET}&x=1", "--json"],
        ["discover", f"file://{table.parent}?X-Amz-Signature={SECRET}"],
        ["discover", f"file://{table.parent}?X-Amz-Signature={SECRET}", "--json"],
    ):
        code, out, err = run(capsys, *argv)
        assert code == 0, (argv, err)
        assert SECRET not in out + err, argv
        assert "***" in out + err, argv


@pytest.mark.parametrize("command", URI_COMMANDS)
@pytest.mark.parametrize("value", ["abc", "[1]"])
def test_a_mapping_option_that_is_not_a_json_object_is_exit_2(capsys, table, command, value):
    argv = [command, str(table), "--storage-option", f"client_kwargs={value}"]
    check(capsys, table, argv, 2, "takes a JSON object")


# -- the storage options' two spellings (fsspec's and object_store's), on every object store ------
# No request is sent in these cases: the options are refused before any store is asked.
OBJECT_URIS = ("s3://bucket/t", "gs://bucket/t", "az://container/t")


@pytest.mark.parametrize("uri", OBJECT_URIS)
@pytest.mark.parametrize("key", ["hostile_option", "AWS_HOSTILE_OPTION", "Azure_Hostile"])
def test_an_unknown_storage_option_is_named_in_either_spelling(capsys, tmp_path, uri, key):
    for command in URI_COMMANDS:
        argv = [command, uri, "--storage-option", f"{key}={SECRET}"]
        check(capsys, tmp_path, argv, 2, f"does not know the storage option '{key}'")


@pytest.mark.parametrize(
    "key", ["aws_secret_access_key", "AWS_SECRET_ACCESS_KEY", "azure_storage_account_key"]
)
@pytest.mark.parametrize("command", URI_COMMANDS)
def test_a_secret_option_of_the_new_spelling_is_masked_in_an_error(capsys, tmp_path, key, command):
    missing = tmp_path / SECRET  # quoted by the error, as the value of the option
    argv = [command, str(missing), "--storage-option", f"{key}={SECRET}"]
    says = "no such folder" if command == "discover" else "not a Delta table"
    check(capsys, tmp_path, argv, 2, says)


@pytest.mark.parametrize("key", ["client_kwargs", "config_kwargs", "s3_additional_kwargs"])
@pytest.mark.parametrize("command", URI_COMMANDS)
def test_bad_json_in_any_mapping_option_is_exit_2(capsys, tmp_path, key, command):
    argv = [command, "s3://bucket/t", "--storage-option", f"{key}={{{SECRET}"]
    check(capsys, tmp_path, argv, 2, "takes a JSON object")


@pytest.mark.parametrize("command", URI_COMMANDS)
def test_two_spellings_of_one_option_that_differ_are_exit_2(capsys, tmp_path, command):
    argv = [command, "s3://bucket/t", "--storage-option", f"secret={SECRET}"]
    argv += ["--storage-option", f"AWS_SECRET_ACCESS_KEY={SECRET}x"]
    check(capsys, tmp_path, argv, 2, "both set aws_secret_access_key")


def test_gcs_token_in_a_failed_token_check_is_masked(tmp_path):
    """gcsfs checks a token at oauth2.googleapis.com/tokeninfo?access_token=TOKEN; the proxy
    (a closed loopback port) makes that fail at once, with the URL in the error."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    proxy = f"http://127.0.0.1:{port}"
    env = {**os.environ, "HTTPS_PROXY": proxy, "https_proxy": proxy, "NO_PROXY": "", "no_proxy": ""}
    for command in ("inspect", "maintain", "vacuum"):
        argv = [command, "gs://bucket/t", "--storage-option", f"token={SECRET}", "--json"]
        if command == "vacuum":
            argv.append("--dry-run")
        done = subprocess.run(
            [sys.executable, "-m", "deltakeeper", *argv],
            capture_output=True,
            text=True,
            env=env,
            timeout=120,
        )
        assert done.returncode == 4, done.stderr
        assert SECRET not in done.stdout + done.stderr
        assert "check the network" in done.stderr
        assert json.loads(done.stdout)["error"] == "StorageUnreachable"


# -- exit codes -----------------------------------------------------------------------------------


@pytest.mark.parametrize("command", URI_COMMANDS)
def test_a_regular_file_as_the_table_is_exit_2(capsys, tmp_path, command):
    f = tmp_path / "not-a-folder.parquet"
    f.write_bytes(b"PAR1")
    says = "is a file, not a table"
    if command == "discover":  # discover takes a folder of tables, not a table
        says = "is a file; give the folder the tables are in"
    check(capsys, tmp_path, [command, str(f)], 2, says)


@pytest.fixture
def no_aws_credentials(monkeypatch):
    """No AWS_* variable; the metadata service, should it be asked, a closed local port. No
    store cached by an earlier test: a store reads the metadata endpoint from the environment
    when it is built, and the cache is keyed by the options alone: an endpoint on a port used
    again would get an earlier test's store, whose metadata service is gone."""
    from collections import OrderedDict

    from deltakeeper.delta.storage import objects

    for name in [n for n in os.environ if n.startswith("AWS_")]:
        monkeypatch.delenv(name)
    monkeypatch.setenv("AWS_METADATA_ENDPOINT", "http://127.0.0.1:1")
    monkeypatch.setattr(objects, "_STORES", OrderedDict())
    return monkeypatch


@pytest.mark.parametrize("command", URI_COMMANDS)
def test_no_s3_credentials_anywhere_is_said(capsys, tmp_path, command, no_aws_credentials):
    """Issue 49, section 2, item 12: with no credentials the metadata service was asked, and
    its 403 read "refused (403)". Off (AWS_EC2_METADATA_DISABLED): exit 2, nothing sent;
    asked and refusing: exit 4. Both say what to give."""
    from tests.support.http import refusing_server

    with refusing_server() as (imds, asked), refusing_server() as (s3, s3_asked):
        argv = [command, "s3://bucket/t", "--storage-option", f"endpoint_url={s3}"]
        no_aws_credentials.setenv("AWS_METADATA_ENDPOINT", imds)
        check(capsys, tmp_path, argv, 4, "no credentials: give aws_access_key_id")
        assert asked and not s3_asked
        no_aws_credentials.setenv("AWS_EC2_METADATA_DISABLED", "true")
        asked.clear()
        check(capsys, tmp_path, argv, 2, "no credentials: give aws_access_key_id")
        assert not asked and not s3_asked


@pytest.mark.parametrize("command", TIMED)
@pytest.mark.parametrize(
    ("now", "says"),
    [
        ("99999999999999999999", "outside 1970-01-01 to 9999-12-31"),
        ("253402300800000", "outside 1970-01-01 to 9999-12-31"),  # 10000-01-01 in ms
        ("10000-01-01T00:00:00Z", "past the year 9999"),
        ("0", "--now 0"),
    ],
)
def test_now_out_of_range_is_exit_2(capsys, table, command, now, says):
    check(capsys, table, [command, str(table), "--now", now, "--dry-run"], 2, says)
    check(capsys, table, [command, str(table), "--now", now], 2, says)


@pytest.mark.parametrize("command", TIMED)
def test_an_endless_duration_is_exit_2(capsys, table, command):
    argv = [command, str(table), RETENTION_FLAG[command], "99999999999d", "--now", NOW]
    check(capsys, table, argv, 2, "at most 36500d")


@pytest.mark.parametrize("interval", ["0", "-3"])
def test_checkpoint_interval_below_1_is_refused(capsys, table, interval):
    argv = ["maintain", str(table), "--checkpoint-interval", interval, "--now", NOW]
    check(capsys, table, argv, 2, "must be 1 or more")


@pytest.mark.parametrize("port", ["65536", "99999", "-1"])
def test_metrics_port_out_of_range_is_exit_2(capsys, tmp_path, port):
    argv = ["run", "--manifests", str(tmp_path), "--metrics-port", port]
    check(capsys, tmp_path, argv, 2, "is not a port")


def test_metrics_port_in_use_is_exit_2(capsys, tmp_path):
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        s.listen()
        port = str(s.getsockname()[1])
        got, _, err = run(capsys, "run", "--manifests", str(tmp_path), "--metrics-port", port)
    assert got == 2 and "choose another --metrics-port" in err


# -- where metrics listen -------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("flags", "host", "listens"),
    [
        ([], "127.0.0.1", "0100007F"),  # the default: loopback only
        (["--metrics-bind-address", "0.0.0.0"], "0.0.0.0", "00000000"),  # as the chart sets
    ],
)
def test_metrics_listen_where_the_log_says(tmp_path, flags, host, listens):
    proc = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "deltakeeper",
            "run",
            "--manifests",
            str(tmp_path),
            "--metrics-port",
            "0",
            *flags,
        ],
        stderr=subprocess.PIPE,
        stdout=subprocess.DEVNULL,
        text=True,
    )
    try:
        assert proc.stderr is not None
        line = next(line for line in proc.stderr if "metrics: http" in line)
        url = line.split("metrics: ", 1)[1].split()[0]
        assert url.startswith(f"http://{host}:"), line
        port = int(url.rsplit(":", 1)[1].split("/")[0])
        # What the log says is what the socket is bound to, and nothing else.
        bound = {
            fields[1].split(":")[0]
            for fields in (row.split() for row in Path("/proc/net/tcp").read_text().splitlines())
            if fields[1].endswith(f":{port:04X}") and fields[3] == "0A"  # LISTEN
        }
        assert bound == {listens}, bound
    finally:
        proc.terminate()
        proc.wait(timeout=30)


def test_operator_bind_address_comes_from_the_environment(monkeypatch):
    from deltakeeper.k8s.options import Options

    monkeypatch.setenv("DELTAKEEPER_METRICS_BIND_ADDRESS", "0.0.0.0")
    assert Options().metrics_bind_address == "0.0.0.0"
    monkeypatch.delenv("DELTAKEEPER_METRICS_BIND_ADDRESS")
    assert Options().metrics_bind_address == "127.0.0.1"


# -- JSON errors ----------------------------------------------------------------------------------


def test_json_error_for_a_missing_table_and_a_usage_error(capsys, tmp_path):
    code, out, err = run(capsys, "inspect", str(tmp_path / "nothing"), "--json")
    assert code == 2 and "not a Delta table" in err
    assert json.loads(out)["error"] == "NotADeltaTable"
    code, out, _ = run(capsys, "maintain", str(tmp_path), "--checkpoint-interval", "x", "--json")
    assert code == 2 and json.loads(out) == {
        "error": "InvalidInput",
        "message": "maintain: argument --checkpoint-interval: 'x' is not a whole number",
        "exitCode": 2,
    }


# -- URIs and partition values --------------------------------------------------------------------


def test_file_uri_with_one_slash_is_the_table(capsys, table):
    code, out, _ = run(capsys, "inspect", f"file:{table}", "--json")
    assert code == 0 and json.loads(out)["version"] == 10


def test_empty_string_partition_value_is_null(capsys, tmp_path):
    b = LogBuilder(tmp_path)
    b.commit(
        protocol(),
        metadata(partitions=("day",)),
        add("day=__HIVE_DEFAULT_PARTITION__/a.parquet", day=""),
        add("day=x/b.parquet", day="x"),
    )
    code, out, _ = run(capsys, "files", str(tmp_path), "--json")
    assert code == 0
    values = {
        json.loads(line)["path"]: json.loads(line)["partitionValues"] for line in out.splitlines()
    }
    assert values == {
        "day=__HIVE_DEFAULT_PARTITION__/a.parquet": {"day": None},
        "day=x/b.parquet": {"day": "x"},
    }


# -- strict manifests -----------------------------------------------------------------------------

TABLE_YAML = """\
apiVersion: deltakeeper.io/v1alpha1
kind: DeltaTable
metadata: {{name: {name}}}
spec:
  uri: file://{uri}
  deletedFileRetention: 1h
  vacuum: {{{vacuum}: true, allowShortRetention: true}}
"""


def test_unknown_fields_are_named_like_kubectl_strict_validation():
    doc = {
        "apiVersion": manifests.API_VERSION,
        "kind": "DeltaTable",
        "metadata": {"name": "t", "lables": {}},
        "spec": {"uri": "s3://b/t", "vacuum": {"dryrun": True}, "storage": {"options": {"a": "b"}}},
    }
    with pytest.raises(manifests.ManifestError) as raised:
        manifests.parse(doc, "t.yaml")
    message = str(raised.value)
    assert (
        "t.yaml: DeltaTable default/t: unknown field metadata.lables, spec.vacuum.dryrun" in message
    )


def test_a_misspelt_dry_run_deletes_nothing_and_the_other_tables_run(capsys, tmp_path):
    """`vacuum: {dryrun: true}` once made `run --once` delete files; now the manifest is
    refused, named, and the correctly spelt table next to it is still maintained."""
    folder = tmp_path / "m"
    folder.mkdir()
    tables = {}
    for name in ("typo", "good"):
        root = tmp_path / name
        b = LogBuilder(root)
        b.commit(protocol(), metadata(), add("a.parquet"))
        (root / "orphan.parquet").write_bytes(b"x")  # unreferenced: vacuum would delete it
        tables[name] = root
    (folder / "typo.yaml").write_text(
        TABLE_YAML.format(name="typo", uri=tables["typo"], vacuum="dryrun")
    )
    (folder / "good.yaml").write_text(
        TABLE_YAML.format(name="good", uri=tables["good"], vacuum="dryRun")
    )
    before = tree_hash(tables["typo"])
    code = main(["run", "--manifests", str(folder), "--once"])
    out, _ = capsys.readouterr()
    assert code == 1  # a manifest was rejected
    assert tree_hash(tables["typo"]) == before
    assert "typo.yaml: DeltaTable default/typo: unknown field spec.vacuum.dryrun" in out
    status = json.loads((folder / ".deltakeeper" / "status.json").read_text())
    assert set(status["tables"]) == {"default/good"}
    assert status["rejected"] and "spec.vacuum.dryrun" in status["rejected"][0]
    assert main(["status", "--manifests", str(folder)]) == 0
    assert "spec.vacuum.dryrun" in capsys.readouterr().out


# -- the daemon -----------------------------------------------------------------------------------

SECRET_YAML = """\
apiVersion: v1
kind: Secret
metadata: {{name: creds}}
stringData: {{{key}: "{value}"}}
---
apiVersion: deltakeeper.io/v1alpha1
kind: DeltaTable
metadata: {{name: t}}
spec: {{uri: "{uri}", storage: {{secretRef: {{name: creds}}, options: {options}}}}}
"""


def once(capsys: pytest.CaptureFixture[str], folder: Path) -> tuple[int, dict, str]:
    code = main(["run", "--manifests", str(folder), "--once"])
    out, err = capsys.readouterr()
    status = json.loads((folder / ".deltakeeper" / "status.json").read_text())
    return code, status, out + err


def conditions(status: dict, name: str = "default/t") -> dict[str, tuple[str, str]]:
    return {c["type"]: (c["status"], c["reason"]) for c in status["tables"][name]["conditions"]}


def test_daemon_azure_key_not_base64_is_invalid_secret_without_a_traceback(
    capsys, caplog, tmp_path
):
    folder = tmp_path / "m"
    folder.mkdir()
    (folder / "t.yaml").write_text(
        SECRET_YAML.format(
            key="AZURE_STORAGE_ACCOUNT_KEY",
            value=f"{SECRET}!!!",
            uri="az://lake/t",
            options="{account_name: devaccount}",
        )
    )
    code, status, output = once(capsys, folder)
    assert code == 1
    cond = conditions(status)
    assert cond["Ready"] == ("False", "InvalidSecret")
    assert cond["StorageReachable"][0] != "True"  # nothing was sent
    message = status["tables"]["default/t"]["conditions"][0]["message"]
    assert "not valid base64" in message
    logged = output + caplog.text
    assert "Traceback" not in logged and SECRET not in logged + json.dumps(status)


def test_daemon_gcs_unreachable_agrees_in_both_conditions(capsys, monkeypatch, tmp_path):
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        proxy = f"http://127.0.0.1:{s.getsockname()[1]}"
    for name in ("HTTPS_PROXY", "https_proxy"):
        monkeypatch.setenv(name, proxy)
    monkeypatch.setenv("NO_PROXY", "")
    monkeypatch.setenv("no_proxy", "")
    folder = tmp_path / "m"
    folder.mkdir()
    (folder / "t.yaml").write_text(
        SECRET_YAML.format(key="token", value=SECRET, uri="gs://lake/t", options="{}")
    )
    code, status, output = once(capsys, folder)
    assert code == 1
    cond = conditions(status)
    assert cond["Ready"] == ("False", "StorageUnreachable")
    assert cond["StorageReachable"] == ("False", "StorageUnreachable")
    assert SECRET not in output + json.dumps(status)


def test_daemon_keeps_a_manifest_at_its_last_good_version_when_its_yaml_breaks(
    capsys, caplog, tmp_path
):
    from deltakeeper.runtime import metrics
    from deltakeeper.standalone import tables as standalone

    root = tmp_path / "t"
    LogBuilder(root).commit(protocol(), metadata(), add("a.parquet"))
    folder = tmp_path / "m"
    folder.mkdir()
    manifest = folder / "t.yaml"
    manifest.write_text(TABLE_YAML.format(name="t", uri=root, vacuum="dryRun"))
    daemon = standalone.Standalone(folder, tmp_path / "status.json", metrics.Metrics())
    assert daemon.reload()
    spec = daemon.tables[("default", "t")].resource.spec
    assert spec["vacuum"]["dryRun"] is True
    manifest.write_text(manifest.read_text().replace("vacuum: {", "vacuum: {{{"))  # bad YAML
    assert daemon.reload()
    assert daemon.tables[("default", "t")].resource.spec == spec  # still watched, as it was
    assert "kept its last good version" in caplog.text
    assert daemon.rejected and "t.yaml" in daemon.rejected[0]
    # A typo in a field is refused the same way: the table keeps its dry run.
    manifest.write_text(TABLE_YAML.format(name="t", uri=root, vacuum="dryrun"))
    assert daemon.reload()
    assert daemon.tables[("default", "t")].resource.spec == spec
    assert "spec.vacuum.dryrun" in daemon.rejected[0]
    daemon.flush()
    assert main(["status", "--status-file", str(tmp_path / "status.json")]) == 0
    assert "spec.vacuum.dryrun" in capsys.readouterr().out
    manifest.write_text(TABLE_YAML.format(name="t", uri=root, vacuum="enabled"))
    assert daemon.reload()
    assert daemon.tables[("default", "t")].resource.spec["vacuum"] == {
        "enabled": True,
        "allowShortRetention": True,
    }
    assert daemon.rejected == []
    daemon.fleet.close()


def test_daemon_warns_when_two_tables_name_one_uri(capsys, tmp_path):
    root = tmp_path / "t"
    LogBuilder(root).commit(protocol(), metadata(), add("a.parquet"))
    folder = tmp_path / "m"
    folder.mkdir()
    (folder / "a.yaml").write_text(TABLE_YAML.format(name="a", uri=root, vacuum="dryRun"))
    # The same table, spelt file:/path/ this time.
    (folder / "b.yaml").write_text(
        TABLE_YAML.format(name="b", uri=root, vacuum="dryRun").replace(
            f"file://{root}", f"file:{root}/"
        )
    )
    code, status, _ = once(capsys, folder)
    assert code == 0  # both are watched, and Ready
    for name, other in (("a", "default/b"), ("b", "default/a")):
        entry = status["tables"][f"default/{name}"]
        degraded = next(c for c in entry["conditions"] if c["type"] == "Degraded")
        assert (degraded["status"], degraded["reason"]) == ("True", "DuplicateUri")
        assert other in degraded["message"]


@pytest.mark.parametrize(
    ("uri", "options", "reason", "says"),
    [
        (f"s3://AKIAEXAMPLEKEY1:{SECRET}@bucket/t", "{}", "InvalidSpec", "credentials inside"),
        ("s3://bucket/t", f'{{client_kwargs: "{SECRET}"}}', "InvalidSpec", "takes a JSON object"),
        (
            "s3://bucket/t",
            f'{{no_such_option: "{SECRET}", endpoint_url: "http://127.0.0.1:9"}}',
            "InvalidSecret",
            "does not know the storage option 'no_such_option'",
        ),
        (  # object_store's spelling
            "s3://bucket/t",
            f'{{AWS_NO_SUCH_OPTION: "{SECRET}", AWS_ENDPOINT_URL: "http://127.0.0.1:9"}}',
            "InvalidSecret",
            "does not know the storage option 'AWS_NO_SUCH_OPTION'",
        ),
        (
            "gs://bucket/t",
            f'{{google_no_such_option: "{SECRET}"}}',
            "InvalidSecret",
            "does not know the storage option 'google_no_such_option'",
        ),
        ("s3://bucket/t", f'{{config_kwargs: "{SECRET}"}}', "InvalidSpec", "takes a JSON object"),
    ],
)
def test_daemon_refuses_bad_storage_in_a_manifest_without_showing_it(
    capsys, caplog, tmp_path, uri, options, reason, says
):
    folder = tmp_path / "m"
    folder.mkdir()
    (folder / "t.yaml").write_text(
        SECRET_YAML.format(key="secret", value=SECRET, uri=uri, options=options)
    )
    code, status, output = once(capsys, folder)
    assert code == 1
    cond = conditions(status)
    assert cond["Ready"] == ("False", reason)
    assert cond["StorageReachable"][0] != "True"
    message = status["tables"]["default/t"]["conditions"][0]["message"]
    assert says in message
    status_file = (folder / ".deltakeeper" / "status.json").read_text()
    logged = output + caplog.text
    assert "Traceback" not in logged
    assert SECRET not in logged + status_file and "AKIAEXAMPLEKEY1" not in status_file
