"""Deterministic synthetic Delta tables: the log is what is benchmarked, data files never exist.

A table has versions 0 .. commits-1 and exactly `files` live files at the latest version.
Version 0 creates it (protocol 1/2, metaData with a real schemaString, partitioned by `date`
and `region`); later versions are a seeded mix of blind appends, streaming appends (with a
`txn`), DELETEs that rewrite files and OPTIMIZEs that compact them (dataChange=false). Every
add carries JSON stats for an int, a long, a string, a timestamp and a double column.

With a checkpoint, a classic single-file V1 checkpoint is written at version
`commits - 1 - commits_after_checkpoint` (with unexpired tombstones and the txn), plus
`_last_checkpoint`. JSON commits before that version are left out, as metadata cleanup would
have removed them, unless `keep_history` is set.

Everything is a pure function of the parameters: one seeded RNG plans the commits, and a
file's path, partition values, size and stats derive from a hash of (seed, file id).

    python -m benchmarks.synth --files 1000000 --commits-after-checkpoint 100 --out DIR
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import random
import shutil
import sys
import time
from array import array
from dataclasses import asdict, dataclass, field
from datetime import date, timedelta
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq

from benchmarks.harness import building

GENERATOR_VERSION = 1  # bump when the output for the same Params changes
T0_MS = 1_717_200_000_000  # 2024-06-01T00:00:00Z, the time of version 0
SPAN_MS = 30 * 86_400_000  # the whole history spans about 30 days
TOMBSTONE_RETENTION_MS = 7 * 86_400_000  # delta.deletedFileRetentionDuration
CHUNK = 131_072  # checkpoint rows per row group
ENGINE = "Apache-Spark/3.5.3 Delta-Lake/3.2.1"
DATES = [(date(2024, 1, 1) + timedelta(days=d)).isoformat() for d in range(366)]
REGIONS = (
    "us-east-1",
    "us-west-2",
    "eu-west-1",
    "eu-central-1",
    "ap-south-1",
    "ap-northeast-1",
    "sa-east-1",
    "af-south-1",
)
EVENTS = ("click", "logout", "purchase", "refund", "search", "share", "signup", "view")
HIVE_NULL = "__HIVE_DEFAULT_PARTITION__"
PARTITION_COLUMNS = ["date", "region"]


def _field(name: str, type_: str) -> dict:
    return {"name": name, "type": type_, "nullable": True, "metadata": {}}


SCHEMA_STRING = json.dumps(
    {
        "type": "struct",
        "fields": [
            _field("id", "long"),
            _field("user_id", "integer"),
            _field("event_type", "string"),
            _field("ts", "timestamp"),
            _field("amount", "double"),
            _field("date", "date"),
            _field("region", "string"),
        ],
    },
    separators=(",", ":"),
)
CONFIGURATION = {
    "delta.logRetentionDuration": "interval 30 days",
    "delta.deletedFileRetentionDuration": "interval 7 days",
}

# Checkpoint schema (PROTOCOL.md, "Checkpoint Schema"), V1: no checkpointMetadata, no sidecar.
STR, LONG = pa.string(), pa.int64()
SMAP = pa.map_(STR, STR)
TXN = pa.struct([("appId", STR), ("version", LONG), ("lastUpdated", LONG)])
ADD = pa.struct(
    [
        ("path", STR),
        ("partitionValues", SMAP),
        ("size", LONG),
        ("modificationTime", LONG),
        ("dataChange", pa.bool_()),
        ("stats", STR),
        ("tags", SMAP),
    ]
)
REMOVE = pa.struct(
    [
        ("path", STR),
        ("deletionTimestamp", LONG),
        ("dataChange", pa.bool_()),
        ("extendedFileMetadata", pa.bool_()),
        ("partitionValues", SMAP),
        ("size", LONG),
    ]
)
METADATA = pa.struct(
    [
        ("id", STR),
        ("name", STR),
        ("description", STR),
        ("format", pa.struct([("provider", STR), ("options", SMAP)])),
        ("schemaString", STR),
        ("partitionColumns", pa.list_(STR)),
        ("createdTime", LONG),
        ("configuration", SMAP),
    ]
)
PROTOCOL = pa.struct(
    [
        ("minReaderVersion", pa.int32()),
        ("minWriterVersion", pa.int32()),
        ("readerFeatures", pa.list_(STR)),
        ("writerFeatures", pa.list_(STR)),
    ]
)
CHECKPOINT_SCHEMA = pa.schema(
    [("txn", TXN), ("add", ADD), ("remove", REMOVE), ("metaData", METADATA), ("protocol", PROTOCOL)]
)


@dataclass(frozen=True)
class Params:
    files: int = 1_000_000  # live files at the latest version
    commits: int = 10_000  # versions 0 .. commits-1
    checkpoint: bool = True
    commits_after_checkpoint: int = 100  # ignored without a checkpoint
    keep_history: bool = False  # also write the JSON commits the checkpoint covers
    seed: int = 1
    # The checkpoint's adds also carry `stats_parsed` (what Delta Spark and deltakeeper write
    # by default), typed by deltakeeper's parser.
    stats_parsed: bool = False

    def __post_init__(self) -> None:
        if self.files < 1 or self.commits < 1:
            raise ValueError("files and commits must be positive")
        if not self.checkpoint:
            object.__setattr__(self, "commits_after_checkpoint", 0)
        elif not 0 <= self.commits_after_checkpoint < self.commits:
            raise ValueError("commits_after_checkpoint must be in [0, commits)")

    @property
    def version(self) -> int:
        return self.commits - 1

    @property
    def checkpoint_version(self) -> int | None:
        return self.version - self.commits_after_checkpoint if self.checkpoint else None

    def key(self) -> str:
        fields = asdict(self)
        if not self.stats_parsed:  # keeps the keys of tables made before the field existed
            del fields["stats_parsed"]
        blob = json.dumps({**fields, "generator": GENERATOR_VERSION}, sort_keys=True)
        return hashlib.sha256(blob.encode()).hexdigest()[:16]


def cache_dir() -> Path:
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "deltakeeper" / "bench-data"


# -- planning: which ids each commit adds and removes --------------------------------------------
@dataclass
class Commit:
    version: int
    kind: str  # CREATE | WRITE | STREAMING | DELETE | OPTIMIZE
    planned_removes: int = 0
    weight: float = 0.0  # share of the appended files (appending kinds only)
    first_id: int = 0
    n_adds: int = 0
    removes: list[int] = field(default_factory=list)
    epoch: int = -1  # streaming batch id (STREAMING only)


@dataclass
class Plan:
    commits: list[Commit]
    added_at: array  # file id -> version that added it
    removed_at: array  # file id -> version that removed it, -1 while live
    checkpoint_live: list[int]
    checkpoint_tombstones: list[int]
    checkpoint_epoch: int  # last streaming epoch at the checkpoint, -1 if none


def commit_ms(params: Params, version: int) -> int:
    return T0_MS + version * max(1000, SPAN_MS // params.commits)


def _rewritten(kind: str, removed: int) -> int:
    """Files a removing operation writes back: DELETE rewrites half, OPTIMIZE compacts 16:1."""
    if kind == "DELETE":
        return removed // 2
    return (removed + 15) // 16 if kind == "OPTIMIZE" else 0


def _plan_counts(params: Params, rng: random.Random) -> list[Commit]:
    mean = max(1, params.files // params.commits)
    commits = []
    for v in range(params.commits):
        x = rng.random()
        if v == 0:
            c = Commit(v, "CREATE")
        elif x < 0.04:
            c = Commit(v, "OPTIMIZE", planned_removes=rng.randint(2 * mean, 8 * mean))
        elif x < 0.12:
            c = Commit(v, "DELETE", planned_removes=rng.randint(1, max(1, mean // 2)))
        else:
            c = Commit(v, "STREAMING" if x < 0.40 else "WRITE")
        if c.kind in ("CREATE", "WRITE", "STREAMING"):
            c.weight = rng.uniform(0.5, 1.5)
        commits.append(c)
    appenders = [c for c in commits if c.weight]
    # First guess: appends cover the target plus the planned net removals, spread by weight.
    net_removed = sum(c.planned_removes - _rewritten(c.kind, c.planned_removes) for c in commits)
    total, weights, acc, done = params.files + net_removed, sum(c.weight for c in appenders), 0, 0
    for c in appenders:
        acc += c.weight * total / weights
        c.n_adds, done = round(acc) - done, round(acc)
    # Removals are capped by what is live; correct the last appends until the count is exact.
    for _ in range(20):
        live = 0
        for c in commits:
            removed = min(c.planned_removes, live)
            live += c.n_adds - removed if c.weight else _rewritten(c.kind, removed) - removed
        diff = params.files - live
        if diff == 0:
            return commits
        for c in reversed(appenders):
            step = diff if diff > 0 else max(diff, -c.n_adds)
            c.n_adds += step
            diff -= step
            if diff == 0:
                break
    raise RuntimeError(f"cannot plan {params.files} files in {params.commits} commits")


def _pick(rng: random.Random, live: bytearray, n_live: int, k: int) -> list[int]:
    """k distinct live ids, uniformly."""
    if k == 0:
        return []
    if n_live < 4 * k or n_live * 4 < len(live):
        return sorted(rng.sample([i for i, f in enumerate(live) if f], k))
    chosen: set[int] = set()
    while len(chosen) < k:
        i = rng.randrange(len(live))
        if live[i]:
            chosen.add(i)
    return sorted(chosen)


def plan(params: Params) -> Plan:
    rng = random.Random(params.seed)
    commits = _plan_counts(params, rng)
    live, added_at, removed_at = bytearray(), array("i"), array("i")
    n_live, epoch, ckv = 0, -1, params.checkpoint_version
    p = Plan(commits, added_at, removed_at, [], [], -1)
    for c in commits:
        c.removes = _pick(rng, live, n_live, min(c.planned_removes, n_live))
        for i in c.removes:
            live[i], removed_at[i] = 0, c.version
        if not c.weight:
            c.n_adds = _rewritten(c.kind, len(c.removes))
        if c.kind == "STREAMING":
            epoch = c.epoch = epoch + 1
        c.first_id = len(live)
        live.extend(b"\x01" * c.n_adds)
        added_at.extend([c.version] * c.n_adds)
        removed_at.extend([-1] * c.n_adds)
        n_live += c.n_adds - len(c.removes)
        if c.version == ckv:
            horizon = commit_ms(params, ckv) - TOMBSTONE_RETENTION_MS
            p.checkpoint_live = [i for i, f in enumerate(live) if f]
            p.checkpoint_tombstones = [
                i for i, r in enumerate(removed_at) if r >= 0 and commit_ms(params, r) >= horizon
            ]
            p.checkpoint_epoch = epoch
    assert n_live == params.files, (n_live, params.files)
    return p


# -- materializing files: everything derives from hash(seed, id) --------------------------------
def _hms(ms: int) -> str:
    s, ms = divmod(ms, 1000)
    return f"{s // 3600:02d}:{s // 60 % 60:02d}:{s % 60:02d}.{ms:03d}Z"


def _values(id_: int, user: int, event: str, ts: str, amount: float) -> str:
    return f'"id":{id_},"user_id":{user},"event_type":"{event}","ts":"{ts}","amount":{amount}'


def file_columns(params: Params, ids: list[int], added_at: array) -> dict[str, list]:
    """Columns for the files `ids`: path, partitionValues, size, modificationTime, stats, rows."""
    cols: dict[str, list] = {k: [] for k in ("path", "pv", "size", "mtime", "stats", "rows")}
    seed = params.seed
    for i in ids:
        h = hashlib.blake2b(b"%d/%d" % (seed, i), digest_size=48).digest()
        u = h[:16].hex()
        r = int.from_bytes(h[16:], "little")
        r, d = divmod(r, 366)
        r, g = divmod(r, 1600)  # 0.5% of files land in the null region partition
        r, e = divmod(r, 9)
        r, size = divmod(r, 1 << (20 + e))  # log-uniform, 1 MiB .. 512 MiB
        size += 1 << (20 + e)
        r, width = divmod(r, 64)
        rows = size // (48 + width)
        r, u_lo = divmod(r, 100_000)
        r, u_span = divmod(r, 2_000_000_000)
        r, e_lo = divmod(r, 8)
        r, e_span = divmod(r, 8 - e_lo)
        r, t_lo = divmod(r, 43_200_000)
        r, t_span = divmod(r, 43_200_000)
        r, a_lo = divmod(r, 100_000)
        r, a_span = divmod(r, 10_000_000)
        r, nulls = divmod(r, 150)
        day, region = DATES[d], None if g < 8 else REGIONS[g % 8]
        cols["path"].append(
            f"date={day}/region={region or HIVE_NULL}/part-{r % 1000:05d}-{u[:8]}-{u[8:12]}-"
            f"{u[12:16]}-{u[16:20]}-{u[20:]}.c000.snappy.parquet"
        )
        cols["pv"].append({"date": day, "region": region})
        cols["size"].append(size)
        cols["mtime"].append(commit_ms(params, added_at[i]) - r % 60_000)
        cols["rows"].append(rows)
        max_id = i * 10_000_000 + rows - 1
        lo = _values(i * 10_000_000, u_lo, EVENTS[e_lo], f"{day}T{_hms(t_lo)}", a_lo / 100)
        hi = _values(
            max_id,
            u_lo + u_span,
            EVENTS[e_lo + e_span],
            f"{day}T{_hms(t_lo + t_span)}",
            (a_lo + a_span) / 100,
        )
        ev_nulls, amount_nulls = (nulls if nulls < 50 else 0), min(rows, nulls)
        nc = f'"id":0,"user_id":0,"event_type":{ev_nulls},"ts":0,"amount":{amount_nulls}'
        cols["stats"].append(
            f'{{"numRecords":{rows},"minValues":{{{lo}}},"maxValues":{{{hi}}},"nullCount":{{{nc}}}}}'
        )
    return cols


def _uuid(params: Params, what: str) -> str:
    u = hashlib.blake2b(f"{params.seed}/{what}".encode(), digest_size=16).hexdigest()
    return f"{u[:8]}-{u[8:12]}-{u[12:16]}-{u[16:20]}-{u[20:]}"


def _protocol() -> dict:
    return {"minReaderVersion": 1, "minWriterVersion": 2}


def _metadata(params: Params) -> dict:
    return {
        "id": _uuid(params, "table"),
        "format": {"provider": "parquet", "options": {}},
        "schemaString": SCHEMA_STRING,
        "partitionColumns": PARTITION_COLUMNS,
        "configuration": CONFIGURATION,
        "createdTime": T0_MS,
    }


def _txn(params: Params, epoch: int, version: int) -> dict:
    return {
        "appId": _uuid(params, "stream"),
        "version": epoch,
        "lastUpdated": commit_ms(params, version),
    }


def _commit_info(params: Params, c: Commit, adds: dict, removes: dict) -> dict:
    added, removed = sum(adds["size"]), sum(removes["size"])
    if c.kind in ("CREATE", "WRITE"):
        mode = "ErrorIfExists" if c.kind == "CREATE" else "Append"
        op = "WRITE"
        op_params = {
            "mode": mode,
            "partitionBy": json.dumps(PARTITION_COLUMNS, separators=(",", ":")),
        }
        metrics = {
            "numFiles": len(adds["size"]),
            "numOutputRows": sum(adds["rows"]),
            "numOutputBytes": added,
        }
    elif c.kind == "STREAMING":
        op = "STREAMING UPDATE"
        op_params = {
            "outputMode": "Append",
            "queryId": _uuid(params, "query"),
            "epochId": str(c.epoch),
        }
        metrics = {
            "numAddedFiles": len(adds["size"]),
            "numRemovedFiles": 0,
            "numOutputRows": sum(adds["rows"]),
            "numOutputBytes": added,
        }
    elif c.kind == "DELETE":
        op = "DELETE"
        op_params = {"predicate": json.dumps([f"(user_id#4 = {c.version})"])}
        metrics = {
            "numRemovedFiles": len(removes["size"]),
            "numAddedFiles": len(adds["size"]),
            "numDeletedRows": sum(removes["rows"]) - sum(adds["rows"]),
            "numCopiedRows": sum(adds["rows"]),
            "numRemovedBytes": removed,
            "numAddedBytes": added,
        }
    else:
        op = "OPTIMIZE"
        op_params = {"predicate": "[]", "zOrderBy": "[]", "auto": False}
        metrics = {
            "numRemovedFiles": len(removes["size"]),
            "numAddedFiles": len(adds["size"]),
            "numRemovedBytes": removed,
            "numAddedBytes": added,
        }
    info = {
        "timestamp": commit_ms(params, c.version),
        "operation": op,
        "operationParameters": op_params,
    }
    if c.version:
        info["readVersion"] = c.version - 1
    info |= {
        "isolationLevel": "Serializable" if c.kind != "STREAMING" else "SnapshotIsolation",
        "isBlindAppend": c.kind in ("CREATE", "WRITE", "STREAMING"),
        "operationMetrics": {k: str(v) for k, v in metrics.items()},
        "engineInfo": ENGINE,
        "txnId": _uuid(params, f"txn/{c.version}"),
    }
    return info


def commit_lines(params: Params, p: Plan, c: Commit) -> list[str]:
    adds = file_columns(params, list(range(c.first_id, c.first_id + c.n_adds)), p.added_at)
    removes = file_columns(params, c.removes, p.added_at)
    data_change = c.kind != "OPTIMIZE"
    actions: list[dict] = [{"commitInfo": _commit_info(params, c, adds, removes)}]
    if c.kind == "CREATE":
        actions += [{"protocol": _protocol()}, {"metaData": _metadata(params)}]
    if c.kind == "STREAMING":
        actions.append({"txn": _txn(params, c.epoch, c.version)})
    ts = commit_ms(params, c.version)
    for path, pv, size in zip(removes["path"], removes["pv"], removes["size"], strict=True):
        actions.append(
            {
                "remove": {
                    "path": path,
                    "deletionTimestamp": ts,
                    "dataChange": data_change,
                    "extendedFileMetadata": True,
                    "partitionValues": pv,
                    "size": size,
                }
            }
        )
    for path, pv, size, mtime, stats in zip(
        adds["path"], adds["pv"], adds["size"], adds["mtime"], adds["stats"], strict=True
    ):
        actions.append(
            {
                "add": {
                    "path": path,
                    "partitionValues": pv,
                    "size": size,
                    "modificationTime": mtime,
                    "dataChange": data_change,
                    "stats": stats,
                }
            }
        )
    return [json.dumps(a, separators=(",", ":")) for a in actions]


# -- checkpoint ----------------------------------------------------------------------------------
def _rows(schema: pa.Schema = CHECKPOINT_SCHEMA, **columns: pa.Array) -> pa.Table:
    """One checkpoint row group: the given action columns, every other column null."""
    n = len(next(iter(columns.values())))
    arrays = [columns.get(f.name, pa.nulls(n, f.type)) for f in schema]
    return pa.Table.from_arrays(arrays, schema=schema)


def _checkpoint_schema(params: Params) -> pa.Schema:
    if not params.stats_parsed:
        return CHECKPOINT_SCHEMA
    from deltakeeper.delta import types

    parsed = types.stats_type(SCHEMA_STRING, None, PARTITION_COLUMNS)
    add = pa.struct([*ADD, pa.field("stats_parsed", parsed)])
    return CHECKPOINT_SCHEMA.set(CHECKPOINT_SCHEMA.get_field_index("add"), pa.field("add", add))


def _add_struct(params: Params, c: dict[str, list]) -> pa.StructArray:
    arrays = [
        pa.array(c["path"], STR),
        _map(c["pv"]),
        pa.array(c["size"], LONG),
        pa.array(c["mtime"], LONG),
        pa.array([False] * len(c["path"])),
        pa.array(c["stats"], STR),
        pa.nulls(len(c["path"]), SMAP),
    ]
    fields = list(ADD)
    if params.stats_parsed:
        from deltakeeper.delta import types

        parsed = types.stats_parsed(arrays[5], SCHEMA_STRING, None, PARTITION_COLUMNS)
        arrays.append(parsed)
        fields.append(pa.field("stats_parsed", parsed.type))
    return pa.StructArray.from_arrays(arrays, fields=fields)


def _map(dicts: list[dict]) -> pa.Array:
    return pa.array([list(d.items()) for d in dicts], SMAP)


def write_checkpoint(params: Params, p: Plan, log: Path) -> dict:
    version = params.checkpoint_version
    path = log / f"{version:020d}.checkpoint.parquet"
    head_protocol = [_protocol() | {"readerFeatures": None, "writerFeatures": None}, None]
    md = _metadata(params)
    md |= {
        "format": {"provider": "parquet", "options": []},
        "configuration": list(md["configuration"].items()),
    }
    head = {
        "protocol": pa.array(head_protocol, PROTOCOL),
        "metaData": pa.array([None, md], METADATA),
    }
    if p.checkpoint_epoch >= 0:
        txn_version = max(c.version for c in p.commits[: version + 1] if c.kind == "STREAMING")
        head = {k: pa.concat_arrays([a, pa.nulls(1, a.type)]) for k, a in head.items()}
        head["txn"] = pa.array([None, None, _txn(params, p.checkpoint_epoch, txn_version)], TXN)
    rows = 0
    schema = _checkpoint_schema(params)
    with pq.ParquetWriter(path, schema, compression="snappy") as writer:
        writer.write_table(_rows(schema, **head))
        rows += len(head["protocol"])
        for start in range(0, len(p.checkpoint_live), CHUNK):
            c = file_columns(params, p.checkpoint_live[start : start + CHUNK], p.added_at)
            add = _add_struct(params, c)
            writer.write_table(_rows(schema, add=add))
            rows += len(add)
        for start in range(0, len(p.checkpoint_tombstones), CHUNK):
            ids = p.checkpoint_tombstones[start : start + CHUNK]
            c = file_columns(params, ids, p.added_at)
            remove = pa.StructArray.from_arrays(
                [
                    pa.array(c["path"], STR),
                    pa.array([commit_ms(params, p.removed_at[i]) for i in ids], LONG),
                    pa.array([False] * len(ids)),
                    pa.array([True] * len(ids)),
                    _map(c["pv"]),
                    pa.array(c["size"], LONG),
                ],
                fields=list(REMOVE),
            )
            writer.write_table(_rows(schema, remove=remove))
            rows += len(remove)
    last = {
        "version": version,
        "size": rows,
        "sizeInBytes": path.stat().st_size,
        "numOfAddFiles": len(p.checkpoint_live),
    }
    (log / "_last_checkpoint").write_text(json.dumps(last, separators=(",", ":")))
    return last


# -- whole tables --------------------------------------------------------------------------------
def append_commit(table: Path, version: int, files: int = 10) -> None:
    """Write commit `version` of `table`: `files` new files in one partition, stamped now (what
    the memory benchmarks commit between polls)."""
    now = int(time.time() * 1000)
    lines: list[dict] = [{"commitInfo": {"timestamp": now, "operation": "WRITE"}}]
    for n in range(files):
        add = {
            "path": f"date=2030-01-01/region=eu/part-{version:08d}-{n:02d}.parquet",
            "partitionValues": {"date": "2030-01-01", "region": "eu"},
            "size": 4096 + n,
            "modificationTime": now,
            "dataChange": True,
        }
        lines.append({"add": add})
    body = b"".join(json.dumps(line).encode() + b"\n" for line in lines)
    (table / "_delta_log" / f"{version:020d}.json").write_bytes(body)


def generate(params: Params, out: Path) -> dict:
    """Write the table to `out` (which must not exist) through a temp dir and a rename."""
    started = time.perf_counter()
    with building(Path(out)) as tmp:
        log = tmp / "_delta_log"
        log.mkdir()
        p = plan(params)
        ckv = params.checkpoint_version
        first_json = 0 if ckv is None or params.keep_history else ckv
        for c in p.commits[first_json:]:
            lines = commit_lines(params, p, c)
            (log / f"{c.version:020d}.json").write_text("\n".join(lines) + "\n")
        last = write_checkpoint(params, p, log) if ckv is not None else None
        info = {
            "params": asdict(params),
            "key": params.key(),
            "generator": GENERATOR_VERSION,
            "version": params.version,
            "files": params.files,
            "checkpoint": last,
            "tombstones_in_checkpoint": len(p.checkpoint_tombstones),
            "json_commits": params.commits - first_json,
            "log_bytes": sum(f.stat().st_size for f in log.iterdir()),
            "generation_seconds": round(time.perf_counter() - started, 1),
        }
        (tmp / "_synth.json").write_text(json.dumps(info, indent=2) + "\n")
    return info


def ensure(params: Params, root: Path | None = None) -> tuple[Path, dict]:
    """The cached table for `params`, generated once; returns (table path, its _synth.json)."""
    out = (root or cache_dir()) / params.key()
    if not (out / "_synth.json").exists():
        try:
            generate(params, out)
        except OSError:
            if not (out / "_synth.json").exists():  # not merely a concurrent generator winning
                raise
    return out, json.loads((out / "_synth.json").read_text())


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(
        prog="python -m benchmarks.synth", description=__doc__.split("\n")[0]
    )
    ap.add_argument("--files", type=int, default=Params.files)
    ap.add_argument("--commits", type=int, default=Params.commits)
    ap.add_argument("--commits-after-checkpoint", type=int, default=Params.commits_after_checkpoint)
    ap.add_argument("--no-checkpoint", action="store_true", help="JSON commits only")
    ap.add_argument("--keep-history", action="store_true", help="also write pre-checkpoint JSON")
    ap.add_argument("--seed", type=int, default=Params.seed)
    ap.add_argument("--out", type=Path, help="table directory (default: the bench-data cache)")
    ap.add_argument("--force", action="store_true", help="replace --out if it exists")
    a = ap.parse_args(argv)
    params = Params(
        a.files, a.commits, not a.no_checkpoint, a.commits_after_checkpoint, a.keep_history, a.seed
    )
    if a.out is None:
        out, info = ensure(params)
    else:
        out = a.out
        if a.force and out.exists():
            shutil.rmtree(out)
        info = generate(params, out)
    print(json.dumps({"table": str(out), **info}, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
