"""A table whose polls stop shows it (ARCHITECTURE: a quiet table's status is written about
once an hour, so `lastPoll` cannot): `deltakeeper run` watches a table on a MinIO of its own,
which is then frozen (SIGSTOP: connections open, no answer, as a hung store behaves). Within
two poll intervals (here the 30 s floor: it polls every second) the table is Degraded
(PollsStalled) in the status and the metrics; once MinIO answers again, the next poll clears
it."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import time
from pathlib import Path

import pyarrow as pa
import pytest
from deltalake import write_deltalake

from tests.integration.test_standalone import DELTAKEEPER, _scrape, _statuses, _until
from tests.support import stores
from tests.support.manifests import table_doc

pytestmark = pytest.mark.integration


def degraded(folder: Path) -> tuple[str, str] | None:
    for c in _statuses(folder).get("lake/t", {}).get("conditions") or []:
        if c["type"] == "Degraded":
            return c["status"], c["reason"]
    return None


def test_a_table_whose_store_hangs_is_degraded_until_it_answers(
    store_binaries: dict[str, str], tmp_path: Path
) -> None:
    emu = stores.start_minio(store_binaries["MINIO"], tmp_path / "minio")
    frozen = False
    try:
        write_deltalake(str(tmp_path / "local"), pa.table({"x": [1, 2]}))
        emu.upload_folder(tmp_path / "local", emu.uri("t"))
        folder = tmp_path / "manifests"
        folder.mkdir()
        doc = table_doc(
            "t", emu.uri("t"), pollInterval="1s", storage={"options": emu.storage_options}
        )
        (folder / "t.json").write_text(json.dumps(doc))
        port = stores.free_port()
        argv = [str(DELTAKEEPER), "run", "--manifests", str(folder), "--metrics-port", str(port)]
        proc = subprocess.Popen(argv, stderr=subprocess.PIPE)
        series = 'deltakeeper_table_condition{namespace="lake",table="t",condition="Degraded"}'
        try:
            _until(lambda: degraded(folder) == ("False", "AsExpected"), 60, "the table polled")
            assert f"{series} 0.0" in _scrape(port)
            os.kill(emu.process.pid, signal.SIGSTOP)
            frozen = True
            frozen_at = time.monotonic()
            _until(lambda: degraded(folder) == ("True", "PollsStalled"), 45, "a stalled table")
            assert time.monotonic() - frozen_at >= 29  # not before the floor
            assert f"{series} 1.0" in _scrape(port)
            entry = _statuses(folder)["lake/t"]
            ready = [c for c in entry["conditions"] if c["type"] == "Ready"]
            assert ready[0]["status"] == "True"  # as of its last poll
            os.kill(emu.process.pid, signal.SIGCONT)
            frozen = False
            _until(lambda: degraded(folder) == ("False", "AsExpected"), 60, "polls resumed")
            assert f"{series} 0.0" in _scrape(port)
        finally:
            proc.send_signal(signal.SIGINT)
            _, err = proc.communicate(timeout=60)
        assert proc.returncode == 0, err.decode()
        assert "PollsStalled" in err.decode() and "polls resumed" in err.decode()
    finally:
        if frozen:
            os.kill(emu.process.pid, signal.SIGCONT)
        emu.stop()
