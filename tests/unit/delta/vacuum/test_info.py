"""delta/vacuum/info.py: `_last_vacuum_info` in Delta Spark's format, read as Spark reads it."""

from deltakeeper.delta.storage import open_storage
from deltakeeper.delta.vacuum import info
from deltakeeper.delta.vacuum.info import InfoStatus, LastVacuumInfo


def test_written_as_delta_spark_writes_it():
    # Jackson, as Delta Spark's JsonUtils writes LastVacuumInfo: no spaces, no newline.
    assert info.render(42) == b'{"latestCommitVersionOutsideOfRetentionWindow":42}'
    assert info.parse(info.render(7)) == LastVacuumInfo(InfoStatus.RECORDED, 7)


def test_what_spark_reads_as_no_info_is_no_n_here():
    cases = {
        b"{}": InfoStatus.EMPTY,  # Spark's FULL vacuum writes this
        b'{"latestCommitVersionOutsideOfRetentionWindow":null}': InfoStatus.EMPTY,
        b'{"other":1}': InfoStatus.EMPTY,  # unknown fields are ignored, as Jackson is told to
        b"not json": InfoStatus.CORRUPT,
        b"[1]": InfoStatus.CORRUPT,
        b'{"latestCommitVersionOutsideOfRetentionWindow":"7"}': InfoStatus.CORRUPT,
        b'{"latestCommitVersionOutsideOfRetentionWindow":-1}': InfoStatus.CORRUPT,
        b'{"latestCommitVersionOutsideOfRetentionWindow":true}': InfoStatus.CORRUPT,
        b"\xff": InfoStatus.CORRUPT,
    }
    for data, status in cases.items():
        found = info.parse(data)
        assert found.status is status and found.version is None, data
    spaced = b'{ "latestCommitVersionOutsideOfRetentionWindow" : 3, "x": {} }\n'
    assert info.parse(spaced) == LastVacuumInfo(InfoStatus.RECORDED, 3)


def test_read_and_write_on_a_table(tmp_path):
    storage = open_storage(str(tmp_path))
    assert info.read(storage).status is InfoStatus.MISSING
    info.write(storage, 5)
    assert (tmp_path / "_delta_log" / "_last_vacuum_info").read_bytes() == info.render(5)
    assert info.read(storage) == LastVacuumInfo(InfoStatus.RECORDED, 5)
    assert "N = 5" in info.read(storage).describe()


def test_a_file_too_deeply_nested_to_parse_is_corrupt():
    assert info.parse(b'{"a":' * 100_000 + b"1" + b"}" * 100_000).status is InfoStatus.CORRUPT


def test_a_folder_of_that_name_records_nothing_and_says_so(tmp_path):
    (tmp_path / "_delta_log" / "_last_vacuum_info").mkdir(parents=True)
    found = info.read(open_storage(str(tmp_path)))
    assert found == LastVacuumInfo(InfoStatus.FOLDER)
    assert found.describe() == "_last_vacuum_info is a folder (no N recorded)"
