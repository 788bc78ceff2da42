"""delta/log/segment.py: which checkpoint and commits make a version (LogSegment), and commit
times."""

import pytest

from deltakeeper.delta import paths
from deltakeeper.delta.errors import CorruptLogError, InvalidInputError, NotADeltaTableError
from deltakeeper.delta.log.segment import earliest_version, group, monotonic, segment_for
from deltakeeper.delta.paths import Kind
from deltakeeper.delta.storage import FileInfo

U = "80a083e8-7026-4e79-81be-64bd76c43a11"


def listing(*names: str, dirs: tuple[str, ...] = ()):
    infos = [FileInfo(f"_delta_log/{n}", 10, 0) for n in names]
    infos += [FileInfo(f"_delta_log/{d}/", 0, 0, is_dir=True) for d in dirs]
    return group(infos)


def commits(a: int, b: int) -> list[str]:
    return [paths.commit(v) for v in range(a, b + 1)]


def test_latest_uses_newest_complete_checkpoint_and_commits_after_it():
    lst = listing(*commits(0, 12), paths.checkpoint(5), paths.checkpoint(10))
    seg = segment_for(lst, "t")
    assert seg.version == 12
    assert seg.checkpoint is not None and seg.checkpoint.version == 10
    assert [c.name.version for c in seg.commits] == [11, 12]
    assert seg.commit_at_version is not None and seg.commit_at_version.name.version == 12


def test_time_travel_uses_a_checkpoint_not_newer_than_the_version():
    lst = listing(*commits(0, 12), paths.checkpoint(5), paths.checkpoint(10))
    seg = segment_for(lst, "t", 9)
    assert seg.checkpoint is not None and seg.checkpoint.version == 5
    assert [c.name.version for c in seg.commits] == [6, 7, 8, 9]


def test_incomplete_multipart_checkpoint_is_ignored():
    lst = listing(
        *commits(0, 12),
        paths.checkpoint(5),
        paths.multipart_checkpoint(10, 1, 3),
        paths.multipart_checkpoint(10, 3, 3),
    )
    seg = segment_for(lst, "t")
    assert seg.checkpoint is not None and seg.checkpoint.version == 5


def test_complete_multipart_checkpoint_is_used_with_parts_in_order():
    parts = [paths.multipart_checkpoint(10, p, 3) for p in (3, 1, 2)]
    seg = segment_for(listing(*commits(0, 11), *parts), "t")
    assert seg.checkpoint is not None and seg.checkpoint.kind is Kind.MULTIPART_CHECKPOINT
    assert [f.name.part for f in seg.checkpoint.files] == [1, 2, 3]


def test_single_file_checkpoint_preferred_when_several_exist_for_a_version():
    lst = listing(
        *commits(0, 10),
        paths.multipart_checkpoint(10, 1, 2),
        paths.multipart_checkpoint(10, 2, 2),
        paths.uuid_checkpoint(10, U),
        paths.checkpoint(10),
    )
    seg = segment_for(lst, "t")
    assert seg.checkpoint is not None and seg.checkpoint.kind is Kind.CHECKPOINT


def test_cleaned_up_log_starts_at_a_checkpoint():
    lst = listing(*commits(10, 14), paths.checkpoint(10))
    assert earliest_version(lst) == 10
    assert segment_for(lst, "t").version == 14
    with pytest.raises(InvalidInputError, match="earliest version available is 10"):
        segment_for(lst, "t", 7)


def test_a_gap_after_the_checkpoint_is_corruption_naming_the_file():
    lst = listing(*commits(0, 5), *commits(7, 9), paths.checkpoint(3))
    with pytest.raises(CorruptLogError, match=paths.commit(6)):
        segment_for(lst, "t")


def test_no_log_is_not_a_delta_table():
    with pytest.raises(NotADeltaTableError, match="not a Delta table"):
        segment_for(listing("_last_checkpoint"), "s3://b/t")


def test_a_version_past_the_latest_is_invalid_input():
    with pytest.raises(InvalidInputError, match="versions up to 3"):
        segment_for(listing(*commits(0, 3)), "t", 4)


def test_sizes_and_staged_folder_are_counted():
    lst = listing(
        *commits(0, 2),
        "_last_checkpoint",
        "00000000000000000001.crc",
        dirs=("_staged_commits", "_sidecars"),
    )
    assert lst.files == 5 and lst.bytes == 50
    assert lst.has_staged_dir


def test_commit_times_are_made_monotonic_as_delta_spark_does() -> None:
    assert monotonic({0: 0, 1: 5, 2: 10, 3: 7, 4: 8, 5: 14}) == {
        0: 0,
        1: 5,
        2: 10,
        3: 11,
        4: 12,
        5: 14,
    }
