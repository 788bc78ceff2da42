"""delta/paths.py: every kind of `_delta_log` name parses; names outside the grammar do not."""

from deltakeeper.delta import paths
from deltakeeper.delta.paths import Kind

UUID = "80a083e8-7026-4e79-81be-64bd76c43a11"


def test_every_log_file_kind_parses():
    cases = {
        "00000000000000000042.json": (Kind.COMMIT, 42),
        "00000000000000000010.checkpoint.parquet": (Kind.CHECKPOINT, 10),
        "00000000000000000010.checkpoint.0000000002.0000000003.parquet": (
            Kind.MULTIPART_CHECKPOINT,
            10,
        ),
        f"00000000000000000010.checkpoint.{UUID}.json": (Kind.UUID_CHECKPOINT, 10),
        f"00000000000000000010.checkpoint.{UUID}.parquet": (Kind.UUID_CHECKPOINT, 10),
        "00000000000000000004.00000000000000000006.compacted.json": (Kind.COMPACTED, 4),
        "00000000000000000007.crc": (Kind.CRC, 7),
        "_last_checkpoint": (Kind.LAST_CHECKPOINT, -1),
        "_last_vacuum_info": (Kind.LAST_VACUUM_INFO, -1),
        f"_staged_commits/00000000000000000008.{UUID}.json": (Kind.STAGED_COMMIT, 8),
        f"_commits/00000000000000000009.{UUID}.json": (Kind.STAGED_COMMIT, 9),
        f"_sidecars/{UUID}.parquet": (Kind.SIDECAR, -1),
    }
    for name, (kind, version) in cases.items():
        parsed = paths.parse(name)
        assert parsed is not None, name
        assert (parsed.kind, parsed.version) == (kind, version), name


def test_multipart_parts_and_compacted_ranges_are_read_from_the_name():
    mp = paths.parse("00000000000000000010.checkpoint.0000000002.0000000003.parquet")
    assert mp is not None and (mp.part, mp.parts) == (2, 3)
    c = paths.parse("00000000000000000004.00000000000000000006.compacted.json")
    assert c is not None and (c.version, c.end_version) == (4, 6)


def test_names_outside_the_grammar_are_rejected():
    for name in [
        "42.json",  # not zero-padded
        "00000000000000000042.json.tmp",
        ".00000000000000000042.json.crc",  # Hadoop checksum side files
        "00000000000000000010.checkpoint.0000000004.0000000003.parquet",  # part > parts
        "00000000000000000006.00000000000000000004.compacted.json",  # end before start
        "00000000000000000010.checkpoint.not-a-uuid.parquet",
        "_staged_commits/00000000000000000008.json",
    ]:
        assert paths.parse(name) is None, name


def test_every_name_a_builder_spells_parses_back():
    assert paths.parse(paths.commit(5)).version == 5
    assert paths.parse(paths.checkpoint(5)).kind is Kind.CHECKPOINT
    assert paths.parse(paths.multipart_checkpoint(5, 1, 2)).kind is Kind.MULTIPART_CHECKPOINT
    assert paths.parse(paths.uuid_checkpoint(5, UUID)).uuid == UUID
    assert paths.parse(paths.compacted(1, 3)).end_version == 3
    assert paths.parse(paths.crc(5)).kind is Kind.CRC
    assert paths.parse(paths.staged_commit(5, UUID)).kind is Kind.STAGED_COMMIT
