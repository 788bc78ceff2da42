"""delta/cleanup.py: which `_delta_log` files log retention deletes, never one a version needs."""

from collections.abc import Iterable
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from deltakeeper.delta import paths
from deltakeeper.delta.cleanup import DAY_MS, CleanupPlan, midnight_utc, plan_cleanup, stable_until
from deltakeeper.delta.errors import DeltaError
from deltakeeper.delta.log.segment import Listing, group, monotonic, segment_for
from deltakeeper.delta.paths import Kind
from deltakeeper.delta.storage import FileInfo

U1 = "80a083e8-7026-4e79-81be-64bd76c43a11"
U2 = "11111111-2222-4333-8444-555555555555"
NOW = 1_718_409_600_000 + 12 * 3_600_000  # 2024-06-15T12:00:00Z
RETENTION = 30 * DAY_MS
CUTOFF = midnight_utc(NOW - RETENTION)  # 2024-05-16T00:00:00Z
HOUR = 3_600_000


def fi(name: str, mtime: int = 0, size: int = 10) -> FileInfo:
    return FileInfo(f"{paths.LOG_DIR}/{name}", size, mtime)


def history(times: dict[int, int]) -> list[FileInfo]:
    """Commit files whose modification times are `times`."""
    return [fi(paths.commit(v), ts) for v, ts in times.items()]


def hourly(first: int, last: int, end: int) -> dict[int, int]:
    """Commits first..last an hour apart, the last one at `end`."""
    return {v: end - (last - v) * HOUR for v in range(first, last + 1)}


def kind(f: FileInfo) -> Kind | None:
    name = paths.parse(f.key.removeprefix("_delta_log/"))
    return name.kind if name else None


def file_times(files: Iterable[FileInfo]) -> dict[int, int]:
    """Commit timestamps from the commit files' modification times."""
    return {int(f.name[:20]): f.mtime_ms for f in files if kind(f) is Kind.COMMIT}


def plan(files: list[FileInfo], **kw: Any) -> CleanupPlan:
    times = file_times(files)
    kw.setdefault("retention_ms", RETENTION)
    kw.setdefault("now_ms", NOW)
    p = plan_cleanup(files, times.__getitem__, **kw)
    check_invariants(files, p)
    return p


def deleted(p: CleanupPlan) -> set[str]:
    return {f.key.removeprefix("_delta_log/") for f in p.delete}


def remaining(files: Iterable[FileInfo], p: CleanupPlan) -> list[FileInfo]:
    gone = {f.key for f in p.delete}
    return [f for f in files if f.key not in gone]


def check_invariants(files: list[FileInfo], p: CleanupPlan) -> None:
    assert p.delete == sorted(p.delete, key=lambda f: f.key)
    assert len({f.key for f in p.delete}) == len(p.delete)
    assert sum(t.files for t in p.by_kind.values()) == p.files
    assert sum(t.bytes for t in p.by_kind.values()) == p.bytes
    temps = [f for f in p.delete if paths.is_temp(f.name)]
    assert all(f.mtime_ms < p.now_ms - DAY_MS for f in temps)
    log_files = [f for f in p.delete if not paths.is_temp(f.name)]
    c = p.cutoff_checkpoint
    if c is None:
        assert log_files == []
        return
    assert p.cutoff_commit is not None and c <= p.cutoff_commit
    for f in log_files:
        name = paths.parse(f.key.removeprefix("_delta_log/"))
        assert name is not None and name.kind is not Kind.LAST_CHECKPOINT
        if name.kind in (Kind.COMMIT, Kind.CRC) or name.is_checkpoint:
            assert name.version < c, f.key
        elif name.kind in (Kind.COMPACTED, Kind.STAGED_COMMIT):
            assert name.version <= c, f.key
    before, after = group(files), group(remaining(files, p))
    if c in before.commits:
        assert c in after.commits
    assert [x.files for x in before.checkpoints[c]] == [x.files for x in after.checkpoints[c]]
    for v in range(c, max(before.commits) + 1):
        if reconstructable(before, v):
            assert segment_for(after, "t", v).version == v


def reconstructable(listing: Listing, version: int) -> bool:
    try:
        segment_for(listing, "t", version)
    except DeltaError:
        return False
    return True


# -- the cut-off --------------------------------------------------------------------------------
def test_commit_exactly_at_midnight_is_the_cutoff_commit() -> None:
    files = [
        *history(hourly(0, 12, CUTOFF + 2 * HOUR)),
        fi(paths.checkpoint(5)),
        fi(paths.checkpoint(10)),
        fi(paths.checkpoint(11)),
    ]
    p = plan(files)
    assert p.cutoff_ms == CUTOFF
    assert p.cutoff_commit == 10  # at exactly midnight
    assert p.cutoff_checkpoint == 10
    assert deleted(p) == {*map(paths.commit, range(10)), paths.checkpoint(5)}


def test_cutoff_is_midnight_utc_of_now_minus_retention() -> None:
    assert midnight_utc(NOW - RETENTION) == NOW - RETENTION - 12 * HOUR
    assert midnight_utc(DAY_MS) == DAY_MS
    assert midnight_utc(DAY_MS - 1) == 0
    p = plan(history({0: 0}), retention_ms=DAY_MS, now_ms=3 * DAY_MS + 5)
    assert p.cutoff_ms == 2 * DAY_MS


def test_a_commit_one_millisecond_after_midnight_is_not_the_cutoff() -> None:
    files = [*history(hourly(0, 10, CUTOFF + 1)), fi(paths.checkpoint(10)), fi(paths.checkpoint(4))]
    p = plan(files)
    assert p.cutoff_commit == 9
    assert p.cutoff_checkpoint == 4
    assert deleted(p) == set(map(paths.commit, range(4)))


def test_no_checkpoint_before_the_cutoff_deletes_nothing() -> None:
    files = [*history(hourly(0, 20, CUTOFF + 5 * HOUR)), fi(paths.checkpoint(16))]
    p = plan(files)
    assert p.cutoff_commit == 15 and p.cutoff_checkpoint is None
    assert p.delete == []
    assert "nothing to clean" in str(p)


def test_table_without_any_checkpoint_loses_nothing() -> None:
    p = plan([*history(hourly(0, 50, CUTOFF - DAY_MS)), fi(paths.crc(3))])
    assert p.cutoff_commit == 50 and p.cutoff_checkpoint is None and p.delete == []


def test_young_table_has_no_cutoff_commit() -> None:
    p = plan([*history(hourly(0, 5, NOW)), fi(paths.checkpoint(2))])
    assert p.cutoff_commit is None and p.delete == []


def test_keep_from_holds_the_cut_at_a_checkpoint_no_newer_than_it() -> None:
    """The next LITE vacuum reads from the N `_last_vacuum_info` records: commit N stays."""
    files = [
        *history(hourly(0, 30, CUTOFF + 2 * HOUR)),
        *(fi(paths.checkpoint(v)) for v in (10, 20, 28)),
        fi(paths.LAST_VACUUM_INFO),
    ]
    assert plan(files).cutoff_checkpoint == 28
    held = plan(files, keep_from=24)
    assert held.cutoff_checkpoint == 20 and held.kept_for_lite == 24
    assert deleted(held) == {*map(paths.commit, range(20)), paths.checkpoint(10)}
    assert "commits from 24 stay" in str(held)
    assert paths.LAST_VACUUM_INFO not in deleted(held)
    free = plan(files, keep_from=28)  # N at the cut-off checkpoint: nothing held back
    assert free.cutoff_checkpoint == 28 and free.kept_for_lite is None
    assert plan(files, keep_from=5).cutoff_checkpoint is None  # no checkpoint at or before 5


# -- checkpoints --------------------------------------------------------------------------------
def test_multipart_checkpoint_at_cutoff_is_kept_whole_and_older_incomplete_one_goes() -> None:
    files = [
        *history(hourly(0, 12, CUTOFF + 2 * HOUR)),
        fi(paths.multipart_checkpoint(10, 1, 3)),
        fi(paths.multipart_checkpoint(10, 2, 3)),
        fi(paths.multipart_checkpoint(10, 3, 3)),
        fi(paths.multipart_checkpoint(4, 1, 2)),  # incomplete: part 2 missing
        fi(paths.multipart_checkpoint(10, 1, 2)),  # incomplete alternative at the cutoff: stays
    ]
    p = plan(files)
    assert p.cutoff_checkpoint == 10
    assert deleted(p) == {*map(paths.commit, range(10)), paths.multipart_checkpoint(4, 1, 2)}
    assert p.by_kind[Kind.MULTIPART_CHECKPOINT].files == 1


def test_incomplete_multipart_checkpoint_is_not_a_cutoff() -> None:
    files = [
        *history(hourly(0, 12, CUTOFF + 2 * HOUR)),
        fi(paths.multipart_checkpoint(10, 1, 2)),
        fi(paths.checkpoint(6)),
    ]
    p = plan(files)
    assert p.cutoff_checkpoint == 6
    assert paths.multipart_checkpoint(10, 1, 2) not in deleted(p)


def test_empty_checkpoint_file_is_not_a_cutoff() -> None:
    files = [
        *history(hourly(0, 12, CUTOFF + 2 * HOUR)),
        fi(paths.checkpoint(10), size=0),
        fi(paths.checkpoint(6)),
    ]
    p = plan(files)
    assert p.cutoff_checkpoint == 6
    assert "checkpoint 10 skipped: a file of it is empty" in str(p)


def test_every_checkpoint_before_the_cutoff_goes_in_every_naming() -> None:
    files = [
        *history(hourly(0, 12, CUTOFF + 2 * HOUR)),
        fi(paths.checkpoint(2)),
        fi(paths.uuid_checkpoint(3, U1, "json")),
        fi(paths.multipart_checkpoint(5, 1, 2)),
        fi(paths.multipart_checkpoint(5, 2, 2)),
        fi(paths.checkpoint(10)),
        fi(paths.uuid_checkpoint(10, U2)),
        fi(paths.LAST_CHECKPOINT),
        FileInfo("_delta_log/_staged_commits/", 0, 0, is_dir=True),
        fi("not-a-delta-file.txt"),
    ]
    p = plan(files)
    assert deleted(p) == {
        *map(paths.commit, range(10)),
        paths.checkpoint(2),
        paths.uuid_checkpoint(3, U1, "json"),
        paths.multipart_checkpoint(5, 1, 2),
        paths.multipart_checkpoint(5, 2, 2),
    }
    assert p.by_kind[Kind.UUID_CHECKPOINT].files == 1
    assert p.by_kind[Kind.CHECKPOINT].files == 1


# -- crc, compacted and staged files ------------------------------------------------------------
def test_crc_files_before_the_cutoff_checkpoint_go() -> None:
    files = [*history(hourly(0, 12, CUTOFF + 2 * HOUR)), fi(paths.checkpoint(10))]
    files += [fi(paths.crc(v), size=7) for v in range(13)]
    p = plan(files)
    assert {n for n in deleted(p) if n.endswith(".crc")} == set(map(paths.crc, range(10)))
    assert p.by_kind[Kind.CRC].files == 10 and p.by_kind[Kind.CRC].bytes == 70


def test_compacted_files_starting_at_or_before_the_cutoff_checkpoint_go() -> None:
    files = [*history(hourly(0, 20, CUTOFF + 10 * HOUR)), fi(paths.checkpoint(10))]
    kept = [paths.compacted(11, 14), paths.compacted(15, 20)]
    gone = [paths.compacted(0, 4), paths.compacted(8, 12), paths.compacted(10, 11)]
    p = plan(files + [fi(n) for n in kept + gone])
    assert p.cutoff_checkpoint == 10
    assert {n for n in deleted(p) if "compacted" in n} == set(gone)


def test_staged_commits_at_or_before_the_cutoff_checkpoint_go_from_both_folders() -> None:
    files = [*history(hourly(0, 12, CUTOFF + 2 * HOUR)), fi(paths.checkpoint(10))]
    staged = [fi(paths.staged_commit(v, U1)) for v in (3, 10, 11, 12, 13)]
    older = [fi(f"_commits/{paths.version_prefix(v)}.{U2}.json") for v in (9, 12)]
    p = plan(files + staged + older)
    assert {n for n in deleted(p) if "/" in n} == {
        paths.staged_commit(3, U1),
        paths.staged_commit(10, U1),
        f"_commits/{paths.version_prefix(9)}.{U2}.json",
    }
    assert p.by_kind[Kind.STAGED_COMMIT].files == 3


# -- sidecars -----------------------------------------------------------------------------------
def sidecar_table() -> tuple[list[FileInfo], dict[str, list[str]]]:
    old, new = CUTOFF - 5 * DAY_MS, NOW - HOUR
    files = [
        *history(hourly(0, 12, CUTOFF + 2 * HOUR)),
        fi(paths.uuid_checkpoint(5, U1)),
        fi(paths.uuid_checkpoint(10, U2)),
        fi(paths.sidecar("a.parquet"), old),  # referenced by the kept checkpoint
        fi(paths.sidecar("b.parquet"), old),  # only by the deleted checkpoint
        fi(paths.sidecar("c.parquet"), old),  # by nothing
        fi(paths.sidecar("d.parquet"), new),  # by nothing, but young (in-progress checkpoint?)
    ]
    refs = {
        f"_delta_log/{paths.uuid_checkpoint(5, U1)}": ["b.parquet", "a.parquet"],
        f"_delta_log/{paths.uuid_checkpoint(10, U2)}": ["_delta_log/_sidecars/a.parquet"],
    }
    return files, refs


def test_uuid_checkpoint_sidecars_referenced_kept_old_unreferenced_deleted_young_kept() -> None:
    files, refs = sidecar_table()
    p = plan(files, sidecar_refs=refs)
    assert p.cutoff_checkpoint == 10
    assert {n for n in deleted(p) if n.startswith("_sidecars/")} == {
        paths.sidecar("b.parquet"),
        paths.sidecar("c.parquet"),
    }
    assert p.by_kind[Kind.SIDECAR].files == 2


def test_sidecar_age_is_a_day_as_of_midnight_utc() -> None:
    files, refs = sidecar_table()
    day_start = midnight_utc(NOW)
    files += [
        fi(paths.sidecar("e.parquet"), day_start - DAY_MS - 1),
        fi(paths.sidecar("f.parquet"), day_start - DAY_MS),
    ]
    p = plan(files, sidecar_refs=refs, retention_ms=0)
    assert paths.sidecar("e.parquet") in deleted(p)
    assert paths.sidecar("f.parquet") not in deleted(p)


def test_sidecars_stay_when_a_remaining_checkpoint_was_not_read() -> None:
    files, refs = sidecar_table()
    del refs[f"_delta_log/{paths.uuid_checkpoint(10, U2)}"]
    p = plan(files, sidecar_refs=refs)
    assert not any(n.startswith("_sidecars/") for n in deleted(p))
    assert paths.commit(0) in deleted(p)
    assert "not read" in str(p)


def test_sidecars_stay_when_there_is_no_cutoff_checkpoint() -> None:
    files, refs = sidecar_table()
    p = plan(files, sidecar_refs=refs, retention_ms=365 * DAY_MS)
    assert p.delete == []


# -- checkpoint protection ----------------------------------------------------------------------
def test_protection_allows_cleanup_that_stops_at_the_cutoff_checkpoint() -> None:
    files = [*history(hourly(0, 12, CUTOFF + 2 * HOUR)), fi(paths.checkpoint(10))]
    for protect in (3, 10, 11, 100):
        p = plan(files, protect_before_version=protect)
        assert deleted(p) == set(map(paths.commit, range(10))), protect


def test_protection_allows_removing_all_history_before_it() -> None:
    # Commit 9 is already gone; commits 0..7 are all the history before version 8.
    times = hourly(0, 12, CUTOFF + 2 * HOUR)
    del times[9]
    files = [*history(times), fi(paths.checkpoint(10))]
    p = plan(files, protect_before_version=8)
    assert deleted(p) == set(map(paths.commit, range(9)))


def test_protection_blocks_cleanup_that_neither_reaches_it_nor_stops_at_a_checkpoint() -> None:
    times = hourly(0, 12, CUTOFF + 2 * HOUR)
    del times[9]
    files = [*history(times), fi(paths.checkpoint(10)), fi(paths.checkpoint(4))]
    p = plan(files, protect_before_version=11)
    assert p.cutoff_checkpoint == 10 and p.delete == []
    assert "requireCheckpointProtectionBeforeVersion is 11" in str(p)
    unprotected = plan(files)
    assert paths.checkpoint(4) in deleted(unprotected)


def test_protection_version_zero_or_below_protects_nothing() -> None:
    times = hourly(0, 12, CUTOFF + 2 * HOUR)
    del times[9]
    files = [*history(times), fi(paths.checkpoint(10))]
    assert plan(files, protect_before_version=0).delete != []


# -- catalog-managed tables ---------------------------------------------------------------------
def test_catalog_managed_only_published_versions_count() -> None:
    files = [
        *history(hourly(0, 12, CUTOFF + 2 * HOUR)),
        fi(paths.checkpoint(4)),
        fi(paths.checkpoint(8)),
        fi(paths.crc(9)),
        fi(paths.crc(10)),
        fi(paths.staged_commit(6, U1)),
        fi(paths.staged_commit(7, U1)),
    ]
    p = plan(files, published_up_to=6)
    assert p.cutoff_commit == 6 and p.cutoff_checkpoint == 4
    assert deleted(p) == set(map(paths.commit, range(4)))


# -- commit timestamps --------------------------------------------------------------------------
def test_checkpoint_whose_commit_time_was_adjusted_is_a_cutoff_as_in_delta_spark() -> None:
    # Commit 6's file time went backwards and is adjusted; Delta Spark still cuts at the
    # checkpoint (its BufferingLogDeletionIterator ends a run of adjusted files there).
    times = hourly(0, 9, CUTOFF - HOUR)
    times[6] = times[2]
    files = [*history(times), fi(paths.checkpoint(6)), fi(paths.checkpoint(3))]
    p = plan(files)
    assert p.cutoff_commit == 9
    assert p.cutoff_checkpoint == 6
    assert deleted(p) == {paths.commit(v) for v in range(6)} | {paths.checkpoint(3)}


def test_equal_commit_times_are_adjusted_and_cleaned() -> None:
    # A table copied with one modification time for every file: times become T, T+1 ms, ...
    same = CUTOFF - 2 * DAY_MS
    files = [*history({v: same for v in range(25)}), fi(paths.checkpoint(10), same)]
    files.append(fi(paths.checkpoint(20), same))
    p = plan(files)
    assert p.cutoff_commit == 24
    assert p.cutoff_checkpoint == 20
    assert deleted(p) == {paths.commit(v) for v in range(20)} | {paths.checkpoint(10)}
    assert "went backwards" not in str(p)


def test_caller_supplied_times_are_used_not_file_times() -> None:
    files = [*history(hourly(0, 12, CUTOFF + 2 * HOUR)), fi(paths.checkpoint(10))]
    ict = {v: NOW - (12 - v) for v in range(13)}  # in-commit timestamps: all recent
    p = plan_cleanup(files, ict.__getitem__, RETENTION, NOW)
    assert p.cutoff_commit is None and p.delete == []


def test_the_plan_says_its_cutoffs_and_what_it_deletes() -> None:
    files = [*history(hourly(0, 12, CUTOFF + 2 * HOUR)), fi(paths.checkpoint(10))]
    text = str(plan(files))
    assert "cutOffTimestamp 2024-05-16T00:00:00.000Z" in text
    assert "retention 30 days" in text
    assert "cutoffCommit: version 10" in text
    assert "cutOffCheckpoint: version 10" in text
    assert "delete 10 files, 100 bytes" in text
    assert "commit: 10 files, 100 bytes" in text


# -- property -----------------------------------------------------------------------------------
Case = tuple[list[FileInfo], dict[str, list[str]], dict[str, int]]


@st.composite
def histories(draw: st.DrawFn) -> Case:
    latest = draw(st.integers(1, 40))
    start = draw(st.integers(0, latest))  # an earlier cleanup left commits from `start` on
    t = CUTOFF - draw(st.integers(0, 10)) * DAY_MS
    files: list[FileInfo] = []
    refs: dict[str, list[str]] = {}
    for v in range(latest + 1):
        t += draw(st.integers(-2 * HOUR, 2 * DAY_MS))
        if v >= start or draw(st.integers(0, 3)) == 0:  # before start: leftovers with gaps
            files.append(fi(paths.commit(v), t))
        shape = draw(st.sampled_from(["", "", "", "classic", "multi", "partial", "uuid", "empty"]))
        if v == start and start > 0:
            shape = "classic"
        if shape == "classic":
            files.append(fi(paths.checkpoint(v), t))
        elif shape in ("multi", "partial"):
            parts = draw(st.integers(2, 3))
            have = range(1, parts + 1) if shape == "multi" else range(2, parts + 1)
            files += [fi(paths.multipart_checkpoint(v, p, parts), t) for p in have]
        elif shape == "uuid":
            cp = fi(paths.uuid_checkpoint(v, U1), t)
            files.append(cp)
            refs[cp.key] = [f"s{v}.parquet"]
        elif shape == "empty":
            files.append(fi(paths.checkpoint(v), t, size=0))
        if draw(st.booleans()):
            files.append(fi(paths.crc(v), t))
        if draw(st.booleans()):
            files.append(fi(paths.staged_commit(v, U2), t))
        if v < latest and draw(st.integers(0, 4)) == 0:
            files.append(fi(paths.compacted(v, draw(st.integers(v + 1, latest))), t))
    for v in range(draw(st.integers(0, 5))):
        files.append(fi(paths.sidecar(f"s{v}.parquet"), CUTOFF - draw(st.integers(-5, 5)) * DAY_MS))
    for f in files:
        if kind(f) is Kind.CHECKPOINT:
            refs.setdefault(f.key, [])  # classic checkpoints were read too
    knobs = {
        "retention": draw(st.integers(0, 20)) * DAY_MS + draw(st.integers(0, DAY_MS)),
        "protect": draw(st.integers(-1, latest + 2)),
        "published": draw(st.integers(-1, latest)),
    }
    return files, refs, knobs


@settings(max_examples=400, deadline=None)
@given(histories())
def test_property_cleanup_keeps_every_version_from_the_cutoff_checkpoint(case: Case) -> None:
    files, refs, knobs = case
    times = file_times(files)
    published = knobs["published"] if knobs["published"] >= 0 else None
    protect = knobs["protect"] if knobs["protect"] >= 0 else None
    p = plan_cleanup(
        files,
        times.__getitem__,
        knobs["retention"],
        NOW,
        sidecar_refs=refs,
        protect_before_version=protect,
        published_up_to=published,
    )
    check_invariants(files, p)
    c = p.cutoff_checkpoint
    if c is None:
        return
    if published is not None:
        assert c <= published
    # Time travel answers stay where the first kept commit's time was not adjusted; when it
    # was (Delta Spark cuts there too), kept times move back by at most that adjustment.
    kept = {v: times[v] for v in group(remaining(files, p)).commits}
    everything = monotonic({v: times[v] for v in group(files).commits})
    after = monotonic(kept)
    if kept:
        first = min(kept)
        shift = everything[first] - times[first]
        for v in kept:
            assert 0 <= everything[v] - after[v] <= shift
    # Checkpoint protection: history before P goes all at once, or up to a checkpoint that stays.
    gone = [int(f.name[:20]) for f in p.delete if kind(f) is Kind.COMMIT]
    below = [v for v in gone if protect is not None and v < protect]
    if below and protect is not None:
        assert max(below) >= protect - 1 or max(below) + 1 == c
    # Sidecars go only when unreferenced by what stays and older than the sidecar cut-off.
    left = {f.key for f in remaining(files, p)}
    live = {name for key, names in refs.items() if key in left for name in names}
    for f in p.delete:
        if "/_sidecars/" in f.key:
            assert f.name not in live and f.mtime_ms < p.sidecar_cutoff_ms


def test_temp_files_of_killed_writes_older_than_a_day_go() -> None:
    # Delta Spark / Hadoop (UUID with dashes, and Hadoop's .crc of it), deltakeeper (hex) and
    # delta-rs temp names; one of each is younger than a day and stays.
    dashed = "b16f838b-a848-4ab4-a5ff-f004e355b277"
    old = NOW - 2 * DAY_MS
    young = NOW - HOUR
    names = {
        f".{paths.commit(3)}.{dashed}.tmp": old,
        f"..{paths.commit(3)}.{dashed}.tmp.crc": old,
        f".{paths.checkpoint(3)}.{'ab' * 16}.tmp": old,
        f"_commit_{dashed}.json.tmp": old,
        f".{paths.commit(4)}.{dashed}.tmp": young,
        f"_commit_{U2}.json.tmp": young,
        ".notes.tmp": old,  # not a writer's temp name: left alone
    }
    files = [*history(hourly(0, 4, NOW - HOUR)), *(fi(n, t) for n, t in names.items())]
    p = plan(files)
    assert p.cutoff_checkpoint is None  # nothing of the log itself goes
    assert deleted(p) == {n for n, t in names.items() if t == old and n != ".notes.tmp"}
    assert p.by_kind[Kind.TEMP].files == 4
    assert "4 temp files of killed writes" in str(p)


def test_temp_files_of_the_newest_version_or_later_stay_whatever_the_clock_says() -> None:
    # A writer committing or checkpointing the tip right now leaves such a file for a moment;
    # with an injected clock far ahead of the files' times, age alone would delete it mid-write.
    dashed = "b16f838b-a848-4ab4-a5ff-f004e355b277"
    old = NOW - 2 * DAY_MS
    names = {
        f".{paths.commit(2)}.{dashed}.tmp": old,  # behind the tip: a dead write, goes
        f".{paths.checkpoint(3)}.{'ab' * 16}.tmp": old,  # the tip's checkpoint: may be in flight
        f".{paths.commit(4)}.{dashed}.tmp": old,  # the next commit: may be in flight
        f"..{paths.commit(4)}.{dashed}.tmp.crc": old,
    }
    files = [*history(hourly(0, 3, NOW - HOUR)), *(fi(n, t) for n, t in names.items())]
    assert max(v for f in files if (n := paths.parse(f.name)) and (v := n.version) >= 0) == 3
    assert deleted(plan(files)) == {f".{paths.commit(2)}.{dashed}.tmp"}


# -- when a plan can change --------------------------------------------------------------------
def _decided(p: CleanupPlan) -> tuple[Any, ...]:
    return (p.cutoff_commit, p.cutoff_checkpoint, deleted(p), p.sidecar_cutoff_ms)


@settings(max_examples=300, deadline=None)
@given(histories(), st.integers(0, DAY_MS), st.integers(0, 10**6))
def test_property_a_plan_stays_the_same_until_its_until_ms(
    case: Case, later: int, split: int
) -> None:
    """Whatever the listing, planning again before `until_ms` decides the same: a watch loop
    that skips planning until then misses nothing."""
    files, refs, knobs = case
    retention = knobs["retention"]
    dashed = "b16f838b-a848-4ab4-a5ff-f004e355b277"
    files = [*files, fi(f".{paths.commit(0)}.{dashed}.tmp", NOW - DAY_MS + later)]
    times = file_times(files)

    def at(now: int) -> CleanupPlan:
        return plan_cleanup(files, times.__getitem__, retention, now, sidecar_refs=refs)

    first = at(NOW)
    assert first.until_ms == stable_until(files, retention, NOW)
    assert NOW < first.until_ms <= midnight_utc(NOW) + DAY_MS + DAY_MS
    between = NOW + split % (first.until_ms - NOW)
    assert _decided(at(first.until_ms - 1)) == _decided(first) == _decided(at(between))


def test_the_cut_off_moves_at_midnight_utc_plus_the_retention() -> None:
    files = [*history(hourly(0, 10, CUTOFF + 5 * HOUR)), fi(paths.checkpoint(10))]
    p = plan(files)
    assert p.cutoff_commit == 5 and p.until_ms == CUTOFF + DAY_MS + RETENTION
    moved = plan(files, now_ms=p.until_ms)
    assert moved.cutoff_commit == 10 and len(moved.delete) == 10


def test_a_young_temp_file_or_a_short_retention_brings_the_next_look_closer() -> None:
    dashed = "b16f838b-a848-4ab4-a5ff-f004e355b277"
    young = fi(f".{paths.commit(3)}.{dashed}.tmp", NOW - 20 * HOUR)
    files = [*history(hourly(0, 4, NOW - HOUR)), young]
    assert plan(files).until_ms == NOW - 20 * HOUR + DAY_MS + 1  # before midnight
    assert plan(files, now_ms=NOW - 20 * HOUR + DAY_MS + 1).delete == [young]
    # A 12-hour retention: the log's cut-off moves at noon, the sidecars' at midnight.
    twelve = 12 * HOUR
    at_noon = midnight_utc(NOW) + twelve  # NOW is noon
    assert stable_until([], twelve, at_noon - 1) == at_noon
    assert stable_until([], twelve, at_noon) == midnight_utc(NOW) + DAY_MS
