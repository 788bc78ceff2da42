"""delta/json_log.py: a bad line of a commit is a CorruptLogError that names the file and line."""

import pytest

from deltakeeper.delta.errors import CorruptLogError
from deltakeeper.delta.table import open_table
from tests.support.logbuilder import LogBuilder, metadata, protocol


def test_a_line_that_is_not_json_names_its_file_and_line(tmp_path):
    b = LogBuilder(tmp_path)
    b.commit(protocol(), metadata())
    b.raw("00000000000000000001.json", '{"add": {"path": "x", "size": 1}}\n{"add": oops}\n')
    with pytest.raises(CorruptLogError, match=r"00000000000000000001\.json: line 2"):
        open_table(str(tmp_path)).snapshot()
