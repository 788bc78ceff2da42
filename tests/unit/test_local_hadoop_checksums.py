"""Spark on a local disk (Hadoop's checksummed local file system) writes `.<name>.crc` beside
every file and refuses to read a file that no longer matches it ("ChecksumException"); without a
`.crc` it reads the file as it is. So a file deltakeeper replaces must lose its stale `.crc`,
or Delta Spark cannot read the table any more (seen with `checkpoint --version N` over Spark's
own checkpoint N; tests/integration/test_crash.py covers the Spark side).
"""

from __future__ import annotations

from deltakeeper.delta.storage import LocalStorage

KEY = "_delta_log/00000000000000000030.checkpoint.parquet"


def test_overwrite_drops_the_stale_hadoop_checksum(tmp_path):
    log = tmp_path / "_delta_log"
    log.mkdir()
    (log / "00000000000000000030.checkpoint.parquet").write_bytes(b"spark's")
    crc = log / ".00000000000000000030.checkpoint.parquet.crc"
    crc.write_bytes(b"checksum of spark's")
    other = log / ".00000000000000000030.json.crc"
    other.write_bytes(b"checksum of the commit")
    LocalStorage(str(tmp_path), str(tmp_path)).overwrite(KEY, b"ours")
    assert (log / "00000000000000000030.checkpoint.parquet").read_bytes() == b"ours"
    assert not crc.exists()
    assert other.exists()  # only the replaced file's checksum goes


def test_overwrite_without_a_checksum_is_unchanged(tmp_path):
    storage = LocalStorage(str(tmp_path), str(tmp_path))
    storage.overwrite("_delta_log/_last_checkpoint", b"{}")
    assert sorted(p.name for p in (tmp_path / "_delta_log").iterdir()) == ["_last_checkpoint"]
