"""delta/log/json_files.py: a bad line of a commit is a CorruptLogError that names the file and
line; table_action_lines reads a commit's table-level actions without parsing its file actions."""

import time

import pytest

from deltakeeper.delta.errors import CorruptLogError, MissingLogFileError
from deltakeeper.delta.log.json_files import read_in_order, table_action_lines
from deltakeeper.delta.storage.local import LocalStorage
from deltakeeper.delta.table import open_table
from tests.support.logbuilder import LogBuilder, metadata, protocol


def test_a_line_that_is_not_json_names_its_file_and_line(tmp_path):
    b = LogBuilder(tmp_path)
    b.commit(protocol(), metadata())
    b.raw("00000000000000000001.json", '{"add": {"path": "x", "size": 1}}\n{"add": oops}\n')
    with pytest.raises(CorruptLogError, match=r"00000000000000000001\.json: line 2"):
        open_table(str(tmp_path)).snapshot()


def _table_actions(tmp_path, text: str) -> list[tuple[str, object]]:
    storage = open_table(str(tmp_path)).storage
    (tmp_path / "_delta_log").mkdir(exist_ok=True)
    (tmp_path / "_delta_log" / "00000000000000000000.json").write_text(text)
    return list(table_action_lines(storage, "_delta_log/00000000000000000000.json"))


def test_table_action_lines_skip_file_actions_unparsed_and_keep_the_rest(tmp_path):
    text = "\n".join(
        [
            '{"protocol": {"minReaderVersion": 1}}',
            '{"add": not json at all, skipped unparsed}',
            '{"remove": neither}',
            '{ "add": {"path": "spaced", "size": 1}}',  # parsed, then left out
            '{"txn": {"appId": "a", "version": 3}}',
            "",
        ]
    )
    got = _table_actions(tmp_path, text)
    assert got == [("protocol", {"minReaderVersion": 1}), ("txn", {"appId": "a", "version": 3})]


def test_table_action_lines_name_a_bad_table_level_line(tmp_path):
    with pytest.raises(CorruptLogError, match=r"00000000000000000000\.json: line 2"):
        _table_actions(tmp_path, '{"add": {}}\n{"metaData": oops}\n')


# Actions of the right name but the wrong shape: each names its file and line (issue 49).
COMMIT_1 = "00000000000000000001.json"
MALFORMED = [
    ('{"txn": "x"}', "txn is not an object"),
    ('{"domainMetadata": [1]}', "domainMetadata is not an object"),
    ('{"metaData": 5}', "metaData is not an object"),
    ('{"protocol": "x"}', "protocol is not an object"),
    ('{"txn": {"version": 1}}', "txn without an appId"),
    ('{"domainMetadata": {"removed": false}}', "domainMetadata without a domain"),
    ('{"remove": {"path": "x", "deletionVector": 7}}', "remove's deletionVector is not an object"),
    ('{"add": {"path": "x", "deletionVector": "u"}}', "add's deletionVector is not an object"),
]


@pytest.mark.parametrize(("line", "says"), MALFORMED)
def test_a_malformed_action_is_a_corrupt_log_naming_file_and_line(tmp_path, line, says):
    b = LogBuilder(tmp_path)
    b.commit(protocol(), metadata())
    b.raw(COMMIT_1, f'{{"commitInfo": {{}}}}\n{line}\n')
    with pytest.raises(CorruptLogError, match=rf"00000000000000000001\.json: line 2: {says}"):
        open_table(str(tmp_path)).snapshot()
    if not line.startswith(('{"add"', '{"remove"')):  # file actions are skipped unparsed there
        with pytest.raises(CorruptLogError, match=rf"line 2: {says}"):
            list(table_action_lines(open_table(str(tmp_path)).storage, "_delta_log/" + COMMIT_1))


class _Slow(LocalStorage):
    """The local disk as if each read waited 0.1 s on the network."""

    overlap_reads = True

    def _read(self, key: str) -> bytes:
        time.sleep(0.1)
        return super()._read(key)


def test_commits_are_read_in_order_with_reads_overlapped_and_counted(tmp_path):
    log = tmp_path / "_delta_log"
    log.mkdir()
    keys = [f"_delta_log/{v:020d}.json" for v in range(16)]
    for v, key in enumerate(keys):
        (tmp_path / key).write_bytes(b'{"commitInfo": {"v": %d}}\n' % v)
    storage = _Slow(str(tmp_path), str(tmp_path))
    started = time.monotonic()
    got = list(read_in_order(storage, keys))
    took = time.monotonic() - started
    assert got == [(tmp_path / k).read_bytes() for k in keys]
    assert took < 0.1 * len(keys) / 2  # 16 reads of 0.1 s, READ_AHEAD at once: about 0.2 s
    assert storage.requests["read"] == len(keys)


def test_a_commit_gone_is_raised_where_it_comes_and_the_rest_is_not_handed_out(tmp_path):
    log = tmp_path / "_delta_log"
    log.mkdir()
    keys = [f"_delta_log/{v:020d}.json" for v in range(5)]
    for key in keys[:2] + keys[3:]:
        (tmp_path / key).write_bytes(b"{}\n")
    storage = _Slow(str(tmp_path), str(tmp_path))
    got = []
    with pytest.raises(MissingLogFileError, match=r"00000000000000000002\.json"):
        for data in read_in_order(storage, keys):
            got.append(data)
    assert len(got) == 2
