"""delta/checkpoint/sources.py: the incremental source gives exactly the snapshot path's rows.

The newest checkpoint streamed and the commits after it, for every kind of change after the
checkpoint, against the rows of the in-memory snapshot path."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from deltakeeper.delta.checkpoint import (
    checkpoint_source,
    checkpoint_table,
    incremental_content,
    load_for_checkpoint,
    snapshot_content,
    write_checkpoint,
)
from deltakeeper.delta.errors import UnsupportedProtocolError
from deltakeeper.delta.table import open_table
from tests.support.checkpoints import DAY, NOW, V2, content_rows, row_json
from tests.support.logbuilder import LogBuilder, add, dv, metadata, protocol, remove

DOMAINS = protocol(1, 7, writerFeatures=["domainMetadata"])


def both_paths(path: Path, retention_ms: int, txn_retention_ms: int | None = None, version=None):
    """(snapshot path, incremental path) as (rows..., expired); the incremental must apply."""
    table = open_table(str(path))
    snap = load_for_checkpoint(table, version)
    full, full_expired = snapshot_content(snap, NOW, retention_ms, txn_retention_ms)
    found = incremental_content(table, version, NOW, retention_ms, txn_retention_ms)
    assert found is not None, "expected the incremental source to apply"
    inc, inc_expired = found
    assert inc.add_type == full.add_type and inc.remove_type == full.remove_type
    return (*content_rows(full), full_expired), (*content_rows(inc), inc_expired)


def assert_same(path: Path, retention_ms: int = 10_000 * DAY, **kw: Any) -> tuple:
    full, inc = both_paths(path, retention_ms, **kw)
    assert inc == full
    return full


def mid_checkpoint(path: Path, version: int, **kw: Any) -> None:
    table = open_table(str(path))
    write_checkpoint(table, load_for_checkpoint(table, version), NOW, 10_000 * DAY, **kw)


def test_no_checkpoint_means_no_incremental_source(tmp_path):
    b = LogBuilder(tmp_path)
    b.commit(protocol(), metadata(), add("a"))
    assert incremental_content(open_table(str(tmp_path)), None, NOW, DAY) is None
    assert checkpoint_source(open_table(str(tmp_path))).full


def test_deletion_vector_updates_of_one_path(tmp_path):
    b = LogBuilder(tmp_path)
    b.commit(
        protocol(3, 7, readerFeatures=["deletionVectors"], writerFeatures=["deletionVectors"]),
        metadata(),
        add("a"),
        add("b", dv=dv("x")),
        add("c"),
    )
    mid_checkpoint(tmp_path, 0)
    b.commit(remove("b", ts=NOW - DAY, dv=dv("x")), add("b", dv=dv("y")))
    b.commit(remove("a", ts=NOW - DAY), add("a", dv=dv("z", offset=None)))
    b.commit(remove("b", ts=NOW - DAY, dv=dv("y")), add("b", dv=dv("y", offset=7)))
    _, adds, removes, counts, _ = assert_same(tmp_path)
    assert counts == (3, 3)
    dv_of = lambda r: (r["path"], (r["deletionVector"] or {}).get("pathOrInlineDv"))  # noqa: E731
    assert {dv_of(json.loads(a)) for a in adds} == {("a", "z"), ("b", "y"), ("c", None)}
    assert {dv_of(json.loads(r)) for r in removes} == {("a", None), ("b", "x"), ("b", "y")}
    assert not checkpoint_source(open_table(str(tmp_path))).full


def test_a_path_re_added_after_its_remove_and_removed_after_its_re_add(tmp_path):
    b = LogBuilder(tmp_path)
    b.commit(protocol(), metadata(), add("a"), add("b"))
    b.commit(remove("a", ts=NOW - DAY))
    mid_checkpoint(tmp_path, 1)
    b.commit(add("a", size=7))  # re-added: the old tombstone goes
    b.commit(remove("b", ts=NOW - DAY))
    b.commit(add("b", size=9))
    b.commit(remove("b", ts=NOW - 2 * DAY))  # removed again: a tombstone, no add
    _, adds, removes, counts, _ = assert_same(tmp_path)
    assert counts == (1, 1) and json.loads(next(iter(removes)))["path"] == "b"
    assert json.loads(next(iter(adds)))["size"] == 7


def test_tombstones_expire_from_the_checkpoint_and_the_commits(tmp_path):
    b = LogBuilder(tmp_path)
    b.commit(protocol(), metadata(), add("a"), add("b"), add("c"), add("d"))
    b.commit(remove("a", ts=NOW - 10 * DAY), remove("b", ts=NOW - 2 * DAY))
    mid_checkpoint(tmp_path, 1)
    b.commit(remove("c", ts=NOW - 9 * DAY), remove("d", ts=NOW - DAY))
    b.commit({"remove": {"path": "e", "dataChange": True}})  # no timestamp: counts as 0
    full = assert_same(tmp_path, retention_ms=7 * DAY)
    assert full[3] == (0, 2) and full[4] == 3
    assert assert_same(tmp_path, retention_ms=0)[3:] == ((0, 0), 5)


def test_txns_expire_and_a_newer_one_replaces_the_old(tmp_path):
    b = LogBuilder(tmp_path)
    txn = {"txn": {"appId": "old", "version": 1, "lastUpdated": NOW - 40 * DAY}}
    b.commit(protocol(), metadata(), add("a"), txn)
    b.commit({"txn": {"appId": "kept", "version": 3, "lastUpdated": NOW - DAY}})
    mid_checkpoint(tmp_path, 1)
    b.commit({"txn": {"appId": "kept", "version": 4, "lastUpdated": NOW}}, add("b"))
    b.commit({"txn": {"appId": "stale", "version": 1, "lastUpdated": NOW - 31 * DAY}})
    header = assert_same(tmp_path, txn_retention_ms=30 * DAY)[0]
    txns = [json.loads(body) for kind, body in header if kind == "txn"]
    assert txns == [{"appId": "kept", "version": 4, "lastUpdated": NOW}]
    assert len([k for k, _ in assert_same(tmp_path)[0] if k == "txn"]) == 3


def test_domain_removed_and_added_after_the_checkpoint(tmp_path):
    b = LogBuilder(tmp_path)
    dom = {"domainMetadata": {"domain": "gone", "configuration": "{}", "removed": False}}
    b.commit(DOMAINS, metadata(), add("a"), dom)
    b.commit({"domainMetadata": {"domain": "kept", "configuration": "{}", "removed": False}})
    mid_checkpoint(tmp_path, 1)
    b.commit({"domainMetadata": {"domain": "gone", "configuration": "{}", "removed": True}})
    b.commit({"domainMetadata": {"domain": "new", "configuration": '{"a":1}', "removed": False}})
    header = assert_same(tmp_path)[0]
    assert [json.loads(b)["domain"] for k, b in header if k == "domainMetadata"] == ["kept", "new"]


def test_metadata_and_protocol_change_after_the_checkpoint(tmp_path):
    b = LogBuilder(tmp_path)
    b.commit(protocol(), metadata(), add("a"))
    mid_checkpoint(tmp_path, 0)
    b.commit(
        protocol(3, 7, readerFeatures=["deletionVectors"], writerFeatures=["deletionVectors"]),
        metadata(**{"delta.checkpoint.writeStatsAsStruct": "true"}),
        add("b"),
    )
    header = assert_same(tmp_path)[0]
    assert json.loads(dict(header)["protocol"])["minWriterVersion"] == 7


def test_unknown_feature_after_the_checkpoint_is_refused(tmp_path):
    b = LogBuilder(tmp_path)
    b.commit(protocol(), metadata(), add("a"))
    mid_checkpoint(tmp_path, 0)
    b.commit(protocol(1, 7, writerFeatures=["somethingNew"]), add("b"))
    before = sorted(p.name for p in (tmp_path / "_delta_log").iterdir())
    with pytest.raises(UnsupportedProtocolError, match="somethingNew"):
        incremental_content(open_table(str(tmp_path)), None, NOW, DAY)
    with pytest.raises(UnsupportedProtocolError, match="somethingNew"):
        checkpoint_table(open_table(str(tmp_path)), None, NOW, DAY)
    assert sorted(p.name for p in (tmp_path / "_delta_log").iterdir()) == before


def _many(b: LogBuilder, n: int, first: int = 0) -> list[dict[str, Any]]:
    return [add(f"day=d{i % 3}/f{i}.parquet", day=f"d{i % 3}") for i in range(first, first + n)]


def test_a_multipart_old_checkpoint_is_streamed(tmp_path):
    b = LogBuilder(tmp_path)
    b.commit(protocol(), metadata(("day",)), *_many(b, 20))
    b.commit(remove("day=d0/f0.parquet", ts=NOW - DAY), remove("day=d1/f1.parquet", ts=NOW))
    mid_checkpoint(tmp_path, 1, part_size=4)
    assert len(list((tmp_path / "_delta_log").glob("*.checkpoint.*.*.parquet"))) == 5
    b.commit(remove("day=d2/f2.parquet", ts=NOW - DAY), *_many(b, 3, first=20))
    b.commit(add("day=d0/f0.parquet", day="d0"))
    assert assert_same(tmp_path)[3] == (21, 2)


@pytest.mark.parametrize("classic", [False, True])
def test_a_v2_old_checkpoint_is_streamed(tmp_path, classic):
    b = LogBuilder(tmp_path)
    b.commit(V2, metadata(("day",)), *_many(b, 20))
    b.commit(remove("day=d0/f0.parquet", ts=NOW - DAY))
    mid_checkpoint(tmp_path, 1, part_size=6, classic=classic)
    b.commit(remove("day=d2/f2.parquet", ts=NOW - DAY), *_many(b, 3, first=20))
    assert assert_same(tmp_path)[3] == (21, 2)
    result = checkpoint_table(open_table(str(tmp_path)), None, NOW, 10_000 * DAY, part_size=5)
    assert (result.layout, result.adds, result.tombstones, result.sidecars) == ("v2", 21, 2, 5)


def test_a_v2_json_old_checkpoint_with_sidecars_is_streamed(tmp_path):
    b = LogBuilder(tmp_path)
    b.commit(V2, metadata(), add("a"), add("b"), add("c"))
    mid_checkpoint(tmp_path, 0, part_size=2)
    log = tmp_path / "_delta_log"
    (top,) = log.glob("*.checkpoint.*-*.parquet")
    rows = [{k: v for k, v in r.items() if v is not None} for r in pq.read_table(top).to_pylist()]
    body = "".join(json.dumps(_plain(r), default=str) + "\n" for r in rows)
    top.with_suffix(".json").write_text(body)
    top.unlink()
    b.commit(remove("a", ts=NOW - DAY), add("d"))
    assert assert_same(tmp_path)[3] == (3, 1)


def _plain(row: dict[str, Any]) -> dict[str, Any]:
    """Maps read from parquet come back as lists of pairs; JSON wants objects."""
    out: dict[str, Any] = {}
    for k, v in row.items():
        if isinstance(v, dict):
            out[k] = _plain(v)
        elif isinstance(v, list) and v and all(isinstance(x, tuple) for x in v):
            out[k] = dict(v)
        else:
            out[k] = v
    return out


def test_an_old_checkpoint_with_only_stats_parsed_gives_the_json_back(tmp_path):
    b = LogBuilder(tmp_path)
    conf = {
        "delta.checkpoint.writeStatsAsJson": "false",
        "delta.checkpoint.writeStatsAsStruct": "true",
    }
    files = []
    for i in range(6):
        a = add(f"f{i}.parquet")
        a["add"]["stats"] = json.dumps({"numRecords": i + 1, "minValues": {"id": i}})
        files.append(a)
    b.commit(protocol(), metadata(**conf), *files)
    mid_checkpoint(tmp_path, 0)
    (cp,) = (tmp_path / "_delta_log").glob("*.checkpoint.parquet")
    assert all(r["add"]["stats"] is None for r in pq.read_table(cp).to_pylist() if r["add"])
    # the JSON comes back on: stats must come from stats_parsed, also for a re-added path
    b.commit(metadata(), remove("f0.parquet", ts=NOW - DAY))
    b.commit({"add": {**add("f1.parquet")["add"], "dataChange": False}})
    _, adds, _, counts, _ = assert_same(tmp_path)
    assert counts == (5, 1)
    assert all(json.loads(a)["stats"] for a in adds)


def test_same_log_gives_the_same_bytes(tmp_path):
    b = LogBuilder(tmp_path)
    b.commit(protocol(), metadata(("day",)), *_many(b, 12))
    mid_checkpoint(tmp_path, 0, part_size=5)
    b.commit(remove("day=d0/f0.parquet", ts=NOW - DAY), *_many(b, 2, first=12))
    table = open_table(str(tmp_path))
    first = checkpoint_table(table, None, NOW, 10_000 * DAY, part_size=5)
    assert first.layout == "multipart" and first.parts == 3
    body = {k: (tmp_path / k).read_bytes() for k in first.keys}
    again = checkpoint_table(table, 1, NOW, 10_000 * DAY, part_size=5, dry_run=True)
    assert again.keys == first.keys and again.size_bytes == first.size_bytes
    # rewritten from itself (no commits after it), the parts come out byte for byte the same
    third = checkpoint_table(table, 1, NOW, 10_000 * DAY, part_size=5)
    assert {k: (tmp_path / k).read_bytes() for k in third.keys} == body


def test_counting_late_gives_the_same_rows_and_counts(tmp_path):
    """Layouts that do not split by count take the rows without the counting pass; the counts
    are then final once the rows are through, and equal the counted ones."""
    b = LogBuilder(tmp_path)
    b.commit(protocol(), metadata(("day",)), *_many(b, 10))
    b.commit(remove("day=d0/f0.parquet", ts=NOW - 30 * DAY), remove("day=d1/f1.parquet", ts=NOW))
    mid_checkpoint(tmp_path, 1)
    b.commit(remove("day=d2/f2.parquet", ts=NOW - 30 * DAY), *_many(b, 2, first=10))
    source = checkpoint_source(open_table(str(tmp_path)))
    assert source.incremental is not None
    counted = source.incremental.content(source.header, NOW, 7 * DAY, None)
    late = source.incremental.content(source.header, NOW, 7 * DAY, None, count_first=False)
    assert (late.num_adds, late.num_removes) == (0, 0)  # not known yet
    assert content_rows(late) == content_rows(counted)
    assert (late.num_adds, late.num_removes, late.expired) == (9, 1, 2)
    assert (counted.num_adds, counted.num_removes, counted.expired) == (9, 1, 2)
    result = checkpoint_table(open_table(str(tmp_path)), None, NOW, 7 * DAY)
    assert (result.layout, result.adds, result.tombstones, result.expired_tombstones) == (
        "classic",
        9,
        1,
        2,
    )
    hint = json.loads((tmp_path / "_delta_log" / "_last_checkpoint").read_text())
    assert (hint["numOfAddFiles"], hint["size"]) == (9, 12)  # + protocol, metaData


def _with_stats(path: str, n: int) -> dict[str, Any]:
    a = add(path)
    a["add"]["stats"] = json.dumps({"numRecords": n, "minValues": {"id": n}, "nullCount": {}})
    return a


class _ParseSpy:
    """Counts the rows `types.stats_parsed` is asked to parse."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch) -> None:
        from deltakeeper.delta import types

        self.rows = 0
        real = types.stats_parsed

        def spy(stats, *args, **kw):
            self.rows += len(stats)
            return real(stats, *args, **kw)

        monkeypatch.setattr(types, "stats_parsed", spy)


def _incremental_rows(path: Path) -> set[str]:
    found = incremental_content(open_table(str(path)), None, NOW, 10_000 * DAY)
    assert found is not None
    return content_rows(found[0])[1]


def test_old_stats_parsed_is_kept_not_parsed_again(tmp_path, monkeypatch):
    b = LogBuilder(tmp_path)
    b.commit(protocol(), metadata(), *[_with_stats(f"f{i}", i + 10) for i in range(50)])
    mid_checkpoint(tmp_path, 0)
    b.commit(_with_stats("g1", 1), _with_stats("g2", 2))
    assert_same(tmp_path)
    spy = _ParseSpy(monkeypatch)
    adds = _incremental_rows(tmp_path)
    assert spy.rows == 2  # the two new files only
    counts = sorted(json.loads(a)["stats_parsed"]["numRecords"] for a in adds)
    assert counts == [1, 2, *range(10, 60)]


def test_old_stats_parsed_of_another_schema_is_parsed_again(tmp_path, monkeypatch):
    b = LogBuilder(tmp_path)
    b.commit(protocol(), metadata(), *[_with_stats(f"f{i}", i) for i in range(5)])
    mid_checkpoint(tmp_path, 0)
    wider = metadata()
    fields = json.loads(wider["metaData"]["schemaString"])
    fields["fields"].append({"name": "extra", "type": "integer", "nullable": True, "metadata": {}})
    wider["metaData"]["schemaString"] = json.dumps(fields)
    b.commit(wider, _with_stats("g", 9))
    assert_same(tmp_path)
    spy = _ParseSpy(monkeypatch)
    _incremental_rows(tmp_path)
    assert spy.rows == 6


def test_old_rows_without_stats_parsed_are_parsed(tmp_path, monkeypatch):
    # Another writer left stats_parsed null in two rows that do have JSON stats.
    b = LogBuilder(tmp_path)
    b.commit(protocol(), metadata(), *[_with_stats(f"f{i}", i + 1) for i in range(8)])
    mid_checkpoint(tmp_path, 0)
    (cp,) = (tmp_path / "_delta_log").glob("*.checkpoint.parquet")
    rows = pq.read_table(cp).to_pylist()
    for r in rows:
        if r["add"] and r["add"]["path"] in ("f2", "f5"):
            r["add"]["stats_parsed"] = None
    pq.write_table(pa.Table.from_pylist(rows, pq.read_schema(cp)), cp)
    b.commit(_with_stats("g", 42))
    spy = _ParseSpy(monkeypatch)
    adds = {json.loads(a)["path"]: json.loads(a) for a in _incremental_rows(tmp_path)}
    assert spy.rows == 3
    monkeypatch.undo()
    assert assert_same(tmp_path)[1] == set(map(row_json, adds.values()))
    assert [adds[p]["stats_parsed"]["numRecords"] for p in ("f2", "f5", "f0", "g")] == [3, 6, 1, 42]


def test_old_checkpoint_parts_are_opened_with_their_listed_sizes(tmp_path):
    """On object stores a size saves a head request per old part and pass."""
    b = LogBuilder(tmp_path)
    b.commit(protocol(), metadata(("day",)), *_many(b, 10))
    mid_checkpoint(tmp_path, 0, part_size=4)
    b.commit(*_many(b, 2, first=10))
    table = open_table(str(tmp_path))
    opened: list[tuple[str, int | None]] = []
    real = table.storage.open_input
    table.storage.open_input = lambda key, size=None: opened.append((key, size)) or real(key, size)  # type: ignore[method-assign]
    source = checkpoint_source(table)
    assert source.incremental is not None
    content_rows(source.incremental.content(source.header, NOW, 7 * DAY, None))
    parts = [(k, s) for k, s in opened if ".checkpoint." in k]
    assert len(parts) >= 3 * 3  # header, counting and rows pass over each of 3 parts
    assert all(s == (tmp_path / k).stat().st_size for k, s in parts)
