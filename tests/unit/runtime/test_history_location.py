"""runtime/history.py, where the history goes (issue 49, 2.2-2.4): a Delta table is appended
to only when its columns are the history's by name and type, a folder holding anything but a
Delta table is never adopted, and a location that can never hold the history is refused when
the daemon starts (`History.check`), not found out by dropping rows."""

from __future__ import annotations

from pathlib import Path

import pyarrow as pa
import pytest
from deltalake import write_deltalake

from deltakeeper.delta.errors import InvalidCredentialsError, InvalidInputError
from deltakeeper.maintenance.operations import Operation
from deltakeeper.maintenance.operations.outcome import Outcome, Result
from deltakeeper.runtime.history import ARROW_SCHEMA, COLUMNS, History
from deltakeeper.runtime.model import Observation, Target
from tests.support.oracles import Unreadable, deltars_rows, duckdb_rows

T0 = 1_800_000_000_000
TARGET = Target("lake", "events", "/lake/events")


def one_row(history: History) -> History:
    obs = Observation(T0, [], outcomes=[Outcome(Operation.CLEANUP, Result.DONE, "", 0.0)])
    history.add(TARGET, obs)
    return history


def tree(root: Path) -> dict[str, bytes]:
    return {p.relative_to(root).as_posix(): p.read_bytes() for p in root.rglob("*") if p.is_file()}


def both_read(root: Path, rows: int) -> None:
    for reader in (deltars_rows, duckdb_rows):
        got = reader(str(root))
        assert not isinstance(got, Unreadable) and got == rows, (reader.__name__, got)


def same_names_as_strings(root: Path) -> None:
    """A table whose columns are the history's names, every one a string."""
    names = [name for name, _, _ in COLUMNS] + ["metrics"]
    write_deltalake(str(root), pa.table({n: ["x"] for n in names}))


def test_a_table_with_the_names_but_other_types_is_refused_and_left_readable(
    tmp_path: Path,
) -> None:
    root = tmp_path / "h"
    same_names_as_strings(root)
    before = tree(root)
    history = one_row(History(str(root), clock=lambda: T0))
    with pytest.raises(InvalidInputError, match="column start_time is string, not timestamp"):
        history.check()
    assert history.flush() == 0
    assert tree(root) == before
    both_read(root, 1)


def test_a_table_with_the_history_schema_from_another_writer_is_appended_to(
    tmp_path: Path,
) -> None:
    root = tmp_path / "h"
    write_deltalake(str(root), ARROW_SCHEMA.empty_table())
    history = one_row(History(str(root), clock=lambda: T0))
    history.check()
    assert history.flush() == 1
    both_read(root, 1)


def test_a_folder_with_other_files_is_never_adopted(tmp_path: Path) -> None:
    root = tmp_path / "h"
    (root / "reports").mkdir(parents=True)
    (root / "reports" / "q3.csv").write_text("a,b\n1,2\n")
    before = tree(root)
    history = one_row(History(str(root), clock=lambda: T0))
    with pytest.raises(InvalidInputError, match="not empty and not a Delta table"):
        history.check()
    assert history.flush() == 0
    assert tree(root) == before and not (root / "_delta_log").exists()


def test_an_empty_folder_or_a_new_location_becomes_the_history(tmp_path: Path) -> None:
    (tmp_path / "empty").mkdir()
    (tmp_path / "log" / "_delta_log").mkdir(parents=True)  # another replica creating it
    for root in (tmp_path / "empty", tmp_path / "new" / "h", tmp_path / "log"):
        history = one_row(History(str(root), clock=lambda: T0))
        history.check()
        assert history.flush() == 1
        both_read(root, 1)


@pytest.mark.parametrize("where", ["under a file", "a file", "sysfs", "procfs"])
def test_a_location_that_can_never_hold_it_is_refused_at_the_check(
    tmp_path: Path, where: str
) -> None:
    (tmp_path / "plain").write_text("a file")
    uri = {
        "under a file": str(tmp_path / "plain" / "h"),
        "a file": str(tmp_path / "plain"),
        "sysfs": "/sys/deltakeeper-history-test",
        "procfs": "file:///proc/deltakeeper-history-test",
    }[where]
    with pytest.raises(InvalidInputError, match="cannot hold the operation history"):
        History(uri).check()
    assert (tmp_path / "plain").read_text() == "a file"


def test_options_the_store_cannot_use_are_refused_at_the_check(tmp_path: Path) -> None:
    with pytest.raises(InvalidInputError, match="takes no storage options"):
        History(str(tmp_path / "h"), {"bogus": "1"}).check()
    assert not (tmp_path / "h").exists()
    # Refused before any request: no store is asked.
    with pytest.raises(InvalidCredentialsError, match="does not know the storage option 'bogus'"):
        History("s3://bucket/history", {"bogus": "1"}).check()
