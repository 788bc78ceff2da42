"""Storage events end to end: MinIO's own webhook delivery (its MINIO_NOTIFY_WEBHOOK_*
settings, a queue dir, and a bucket notification set by PutBucketNotificationConfiguration)
into `deltakeeper run --events-listen`. A table polled every 30 s with a 1 h resync shows
delta-rs commits within seconds, by event polls; its prefix has `=`, a space, `%` and
non-ASCII characters, which MinIO URL-encodes in the event's key."""

from __future__ import annotations

import json
import re
import signal
import statistics
import subprocess
import time
from pathlib import Path

import botocore.session
import pyarrow as pa
import pytest
from deltalake import write_deltalake

from tests.integration.test_standalone import DELTAKEEPER, _scrape, _statuses, _until
from tests.support import stores
from tests.support.manifests import table_doc

pytestmark = pytest.mark.integration

TOKEN = "minio-to-deltakeeper-token-0123456789"
T = {"namespace": "lake", "table": "t"}
PREFIX = "dt=2026-12-06/a b/été 100%/orders"


def notify_on_log_writes(emu: stores.Emulator, target_id: str) -> None:
    """PutBucketNotificationConfiguration: objects ending .json to MinIO's webhook target."""
    s3 = botocore.session.get_session().create_client(
        "s3",
        endpoint_url=emu.endpoint,
        region_name="us-east-1",
        aws_access_key_id=emu.storage_options["key"],
        aws_secret_access_key=emu.storage_options["secret"],
    )
    s3.put_bucket_notification_configuration(
        Bucket=emu.bucket,
        NotificationConfiguration={
            "QueueConfigurations": [
                {
                    "QueueArn": f"arn:minio:sqs::{target_id}:webhook",
                    "Events": ["s3:ObjectCreated:*"],
                    "Filter": {"Key": {"FilterRules": [{"Name": "suffix", "Value": ".json"}]}},
                }
            ]
        },
    )


def counter(text: str, name: str, **labels: str) -> float:
    inner = ",".join(f'{k}="{v}"' for k, v in labels.items())
    found = re.search(rf"^{name}\{{{re.escape(inner)}\}} (\S+)$", text, re.M)
    return float(found.group(1)) if found else -1.0


def test_minio_events_bring_commits_to_the_status_within_seconds(
    store_binaries: dict[str, str], tmp_path: Path
) -> None:
    listen = stores.free_port()
    env = {
        "MINIO_NOTIFY_WEBHOOK_ENABLE_DK": "on",
        "MINIO_NOTIFY_WEBHOOK_ENDPOINT_DK": f"http://127.0.0.1:{listen}/events",
        "MINIO_NOTIFY_WEBHOOK_AUTH_TOKEN_DK": TOKEN,
        "MINIO_NOTIFY_WEBHOOK_QUEUE_DIR_DK": str(tmp_path / "minio-queue"),
    }
    (tmp_path / "minio-queue").mkdir()
    emu = stores.start_minio(store_binaries["MINIO"], tmp_path / "minio", env=env)
    try:
        notify_on_log_writes(emu, "DK")
        uri = emu.uri(PREFIX)
        delta_options = {
            "AWS_ENDPOINT_URL": emu.endpoint,
            "AWS_ACCESS_KEY_ID": emu.storage_options["key"],
            "AWS_SECRET_ACCESS_KEY": emu.storage_options["secret"],
            "AWS_REGION": "us-east-1",
            "AWS_ALLOW_HTTP": "true",
            "AWS_S3_ALLOW_UNSAFE_RENAME": "true",
        }
        write_deltalake(uri, pa.table({"x": [0]}), storage_options=delta_options)
        folder = tmp_path / "manifests"
        folder.mkdir()
        doc = table_doc(
            "t",
            uri,
            pollInterval="30s",
            events={"source": "webhook", "resyncInterval": "1h"},
            storage={"options": emu.storage_options},
        )
        (folder / "t.json").write_text(json.dumps(doc))
        token_file = tmp_path / "token"
        token_file.write_text(TOKEN)
        port = stores.free_port()
        argv = [str(DELTAKEEPER), "run", "--manifests", str(folder), "--metrics-port", str(port)]
        argv += ["--events-listen", f"127.0.0.1:{listen}", "--events-token-file", str(token_file)]
        proc = subprocess.Popen(argv, stderr=subprocess.PIPE)
        try:
            _until(lambda: _statuses(folder).get("lake/t", {}).get("version") == 0, 60, "polled")
            status = _statuses(folder)["lake/t"]
            assert status["events"]["live"] is True, status
            timed = counter(_scrape(port), "deltakeeper_polls_total", trigger="interval")
            lags = []
            for v in range(1, 6):
                write_deltalake(
                    uri, pa.table({"x": [v]}), mode="append", storage_options=delta_options
                )
                written = time.monotonic()
                _until(
                    lambda v=v: counter(_scrape(port), "deltakeeper_table_version", **T) == v,
                    10,
                    f"version {v} in the metrics",
                )
                lags.append(time.monotonic() - written)
                # The status file is rewritten every RELOAD_S (2 s): the status follows.
                _until(
                    lambda v=v: _statuses(folder)["lake/t"].get("version") == v,
                    10,
                    f"version {v} in the status",
                )
            # Polled every 30 s (and resynced every hour), yet each commit is in the metrics
            # within a second or two (MinIO's delivery, the event poll, the scrape): measured
            # 0.2 to 2.7 s on a loaded 2-core machine; a poll would have taken up to 33 s. The
            # figures under load are benchmarks/'s to give; here: no interval poll found them.
            assert statistics.median(lags) < 2.5, lags
            status = _statuses(folder)["lake/t"]
            assert status["events"]["lastEventTime"] is not None
            text = _scrape(port)
            assert counter(text, "deltakeeper_polls_total", trigger="interval") == timed
            assert counter(text, "deltakeeper_polls_total", trigger="event") >= 5
            assert counter(text, "deltakeeper_events_total", source="webhook", result="woke") >= 5
            assert counter(text, "deltakeeper_event_source_up", source="webhook") == 1
        finally:
            proc.send_signal(signal.SIGINT)
            _, err = proc.communicate(timeout=60)
        assert proc.returncode == 0, err.decode()
        assert TOKEN not in err.decode()
    finally:
        emu.stop()
