"""delta/log/json_files.py: a bad line of a commit is a CorruptLogError that names the file and
line; table_action_lines reads a commit's table-level actions without parsing its file actions."""

import pytest

from deltakeeper.delta.errors import CorruptLogError
from deltakeeper.delta.log.json_files import table_action_lines
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
