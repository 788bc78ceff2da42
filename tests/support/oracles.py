"""Ask readers that no one here wrote what a Delta table holds at a version.

Every function returns plain Python data (dicts, lists, ints, strings) or an `Unreadable`
(a `str` subclass carrying the reason), never an empty answer in place of an error. Nothing
here imports deltakeeper. See ORACLES.md for what each oracle can read in the corpus.

- `deltars_state`: delta-rs (`deltalake` 1.6.6), metadata only; no rows are read.
- `duckdb_state`: DuckDB's delta extension via `delta_list_files` (the file list of the scan).
- `rawlog_state`: a 40-line replay of the raw `_delta_log` written here, only to triage
  disagreements between the two oracles; it is not an oracle.
- `deltars_rows_checksum`, `duckdb_rows_checksum`: a row count and a digest of the sorted rows
  (`rows_digest`), to compare one oracle's reading before and after a change.
- `table_versions`: every version a reader can time-travel to, from the log listing alone.
- `isolated`: run any of the above in a child process (crash and hang become `Unreadable`).

Paths in `files` are spelled as in the log (RFC 2396 escaped, e.g. `x=B%2520B/part-0.parquet`
for the folder `x=B%20B`). `decoded()` turns such keys into file-system paths for comparisons
that must not depend on how a writer chose to escape.

Run `python tests/support/oracles.py survey [TABLES_DIR]` to redo the survey in ORACLES.md.
"""

from __future__ import annotations

import glob
import json
import os
import re
import subprocess
import sys
from urllib.parse import quote, unquote


class Unreadable(str):
    """The reason an oracle cannot read a table or version (e.g. an unsupported feature)."""


def _log_listing(path: str) -> tuple[set[int], dict[int, list[str]]]:
    """Commit versions and complete classic/multi-part checkpoints in `_delta_log`."""
    commits: set[int] = set()
    parts: dict[tuple[int, int], list[str]] = {}
    for name in sorted(os.listdir(os.path.join(path, "_delta_log"))):
        if m := re.fullmatch(r"(\d{20})\.json", name):
            commits.add(int(m[1]))
        elif m := re.fullmatch(r"(\d{20})\.checkpoint(?:\.\d{10}\.(\d{10}))?\.parquet", name):
            parts.setdefault((int(m[1]), int(m[2] or 1)), []).append(name)
        elif m := re.fullmatch(r"(\d{20})\.checkpoint\.[0-9a-f-]{36}\.(json|parquet)", name):
            parts[(int(m[1]), 1)] = [name]  # V2 (UUID) checkpoint: any one is complete
    checkpoints = {v: names for (v, n), names in parts.items() if len(names) == n}
    return commits, checkpoints


def table_versions(path: str) -> list[int]:
    """Every version that can be reconstructed: v is readable iff a complete checkpoint of v
    exists, or the commit v.json exists and v == 0 or v - 1 is readable."""
    commits, checkpoints = _log_listing(path)
    readable, prev = [], False
    for v in range(max(commits | checkpoints.keys(), default=-1) + 1):
        prev = v in checkpoints or (v in commits and (v == 0 or prev))
        if prev:
            readable.append(v)
    return readable


def decoded(files: dict[str, int | None]) -> dict[str, int | None]:
    """Log-form paths -> the file-system paths they name (RFC 2396 unescaped)."""
    return {unquote(p): size for p, size in files.items()}


def _reason(oracle: str, e: Exception) -> Unreadable:
    first = (str(e).strip().splitlines() or [""])[0]  # drop Rust backtraces and SQL echo
    return Unreadable(f"{oracle}: {type(e).__name__}: {first}")


def _features(names: list[str] | None) -> list[str] | None:
    return None if names is None else sorted(names)


def deltars_state(path: str, version: int | None = None) -> dict | Unreadable:
    """delta-rs: `DeltaTable(path, version=...)`, `.protocol()`, `.metadata()`, `.schema()`,
    `.get_add_actions()`; its `path` column is the log's spelling, byte for byte."""
    try:
        import pyarrow as pa
        from deltalake import DeltaTable

        dt = DeltaTable(path, version=version)
        protocol, meta = dt.protocol(), dt.metadata()
        adds = pa.table(dt.get_add_actions(flatten=False)).select(["path", "size_bytes"])
        return {
            "version": dt.version(),
            "protocol": {
                "minReaderVersion": protocol.min_reader_version,
                "minWriterVersion": protocol.min_writer_version,
                "readerFeatures": _features(protocol.reader_features),
                "writerFeatures": _features(protocol.writer_features),
            },
            "tableId": meta.id,
            "partitionColumns": list(meta.partition_columns),
            "configuration": dict(meta.configuration),
            # delta-rs re-serializes the schema: compare json.loads() of it, not the text.
            "schemaString": dt.schema().to_json(),
            "files": dict(zip(*adds.to_pydict().values(), strict=True)),
        }
    except Exception as e:
        return _reason("delta-rs", e)


def duckdb_extension_file() -> str:
    """The delta extension shipped by the `duckdb-extension-delta` wheel (no downloads here)."""
    import duckdb_extension_delta

    (folder,) = duckdb_extension_delta.__path__
    return glob.glob(os.path.join(folder, "extensions", "*", "delta.duckdb_extension"))[0]


def duckdb_connect():
    import duckdb

    con = duckdb.connect(
        config={
            "allow_unsigned_extensions": "true",
            "autoinstall_known_extensions": "false",
            "autoload_known_extensions": "false",
        }
    )
    con.execute(f"LOAD '{duckdb_extension_file()}'")
    return con


# RFC 2396 path characters left unescaped, as Hadoop's Path.toUri (Spark) and delta-rs write
# them. Non-ASCII is escaped as UTF-8 here; Spark would write it raw (compare with decoded()).
_RFC2396_SAFE = "/;:@&=+$,!~*'()"


def duckdb_state(path: str, version: int | None = None) -> dict | Unreadable:
    """DuckDB: `delta_list_files(path[, version => N])`, the list of files a `delta_scan` at
    that snapshot would read. It reports no sizes (values are None), no protocol or metadata,
    and not the snapshot's version (None unless asked for one)."""
    try:
        root = os.path.abspath(path).rstrip("/") + "/"
        sql, args = "SELECT data_file FROM delta_list_files(?)", [root]
        if version is not None:
            sql, args = "SELECT data_file FROM delta_list_files(?, version => ?)", [root, version]
        with duckdb_connect() as con:
            rows = con.execute(sql, args).fetchall()
        files = {}
        for (data_file,) in rows:
            if not data_file.startswith(root):
                return Unreadable(f"duckdb: file outside the table root: {data_file}")
            files[quote(data_file[len(root) :], safe=_RFC2396_SAFE)] = None
        return {"version": version, "files": files}
    except Exception as e:
        return _reason("duckdb", e)


def deltars_rows(path: str, version: int | None = None) -> int | Unreadable:
    """Live rows as delta-rs reads them: every row through `QueryBuilder` (deletion vectors
    applied). Not `count(*)`, which DataFusion answers from stats without opening files."""
    try:
        import pyarrow as pa
        from deltalake import DeltaTable, QueryBuilder

        qb = QueryBuilder().register("t", DeltaTable(path, version=version))
        return pa.table(qb.execute("SELECT * FROM t").read_all()).num_rows
    except Exception as e:
        return _reason("delta-rs", e)


def duckdb_rows(path: str, version: int | None = None) -> int | Unreadable:
    """Live rows as DuckDB reads them: `count(t)` over the whole row `t` of `delta_scan`, so
    every column is decoded (a bare count(*) projects none)."""
    try:
        sql, args = "SELECT count(t) FROM delta_scan(?) AS t", [path]
        if version is not None:
            sql, args = "SELECT count(t) FROM delta_scan(?, version => ?) AS t", [path, version]
        with duckdb_connect() as con:
            return con.execute(sql, args).fetchone()[0]
    except Exception as e:
        return _reason("duckdb", e)


def _actions(log_file: str) -> list[dict]:
    if log_file.endswith(".json"):
        with open(log_file, encoding="utf-8") as f:
            actions = [json.loads(line) for line in f if line.strip()]
        names = {k for a in actions for k in a}
    else:
        import pyarrow.parquet as pq

        names = set(pq.read_schema(log_file).names)
        kinds = [k for k in ("add", "remove", "metaData", "protocol") if k in names]
        rows = pq.read_table(log_file, columns=kinds).to_pylist()
        actions = [{k: row[k]} for row in rows for k in kinds if row[k] is not None]
    if "sidecar" in names:
        raise NotImplementedError("checkpoints with sidecars are not replayed here")
    return actions


def rawlog_state(path: str, version: int | None = None) -> dict | Unreadable:
    """Our own minimal replay (newest checkpoint <= version, then commits; within a commit,
    removes before adds; key = path as written). Triage aid, not an oracle."""
    checkpoints = _log_listing(path)[1]
    versions = table_versions(path)
    version = versions[-1] if version is None and versions else version
    if version not in versions:
        return Unreadable(f"rawlog: version {version} cannot be reconstructed from the log")
    base = max((c for c in checkpoints if c <= version), default=-1)
    log = os.path.join(path, "_delta_log")
    try:
        batches = [[a for n in checkpoints.get(base, []) for a in _actions(os.path.join(log, n))]]
        batches += [
            _actions(os.path.join(log, f"{v:020d}.json")) for v in range(base + 1, version + 1)
        ]
    except NotImplementedError as e:
        return Unreadable(f"rawlog: {e}")
    state: dict = {"version": version, "files": {}}
    for actions in batches:
        for a in actions:
            if "remove" in a:
                state["files"].pop(a["remove"]["path"], None)
            if "protocol" in a:
                state["protocol"] = a["protocol"]
            if "metaData" in a:
                state["metaData"] = a["metaData"]
        for a in actions:
            if "add" in a:
                state["files"][a["add"]["path"]] = a["add"]["size"]
    return state


ORACLES = {
    "deltars": deltars_state,
    "duckdb": duckdb_state,
    "rawlog": rawlog_state,
    "deltars_rows": deltars_rows,
    "duckdb_rows": duckdb_rows,
}


def isolated(oracle: str, path: str, version: int | None = None, timeout: float = 120):
    """Run ORACLES[oracle] in a child Python; a crash or hang is reported as Unreadable."""
    cmd = [sys.executable, os.path.abspath(__file__), "call", oracle, path]
    cmd += [] if version is None else [str(version)]
    try:
        proc = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout)
    except subprocess.TimeoutExpired:
        return Unreadable(f"{oracle}: hang: no answer within {timeout:g}s")
    if proc.returncode != 0:
        tail = proc.stderr.strip().splitlines()[-1:] or [""]
        return Unreadable(f"{oracle}: process exited with status {proc.returncode}: {tail[0]}")
    answer = json.loads(proc.stdout)
    is_reason = isinstance(answer, dict) and "unreadable" in answer
    return Unreadable(answer["unreadable"]) if is_reason else answer


def _survey(tables: str) -> None:
    """Per table: readable versions, what each oracle could not read, where it disagrees with
    the raw log, and probes of versions that must NOT be readable. Totals at the end."""
    total = dict.fromkeys(["versions", *ORACLES], 0)
    for name in sorted(os.listdir(tables)):
        path = os.path.abspath(os.path.join(tables, name))
        if not os.path.isdir(os.path.join(path, "_delta_log")):
            print(f"{name}: no _delta_log")
            continue
        versions = table_versions(path)
        total["versions"] += len(versions)
        notes: list[str] = []
        for v in [None, *versions]:
            tag = "latest" if v is None else f"v{v}"
            got = {o: isolated(o, path, v) for o in ORACLES}
            total.update({o: total[o] + (v is not None) for o, r in got.items() if _ok(r)})
            notes += [f"{o} {tag}: {r}" for o, r in got.items() if not _ok(r)]
            if _ok(got["rawlog"]):
                notes += [
                    f"{o} {tag}: {why}"
                    for o in ("deltars", "duckdb")
                    if _ok(got[o]) and (why := _disagreement(got[o], got["rawlog"]))
                ]
                live = decoded(got["rawlog"]["files"])
                gone = [p for p in live if not os.path.exists(os.path.join(path, p))]
                notes += [f"disk {tag}: {len(gone)} of {len(live)} live files absent"] * bool(gone)
            rows = [got[o] for o in ("deltars_rows", "duckdb_rows")]
            if all(map(_ok, rows)) and rows[0] != rows[1]:
                notes.append(f"rows {tag}: delta-rs {rows[0]} != duckdb {rows[1]}")
        # versions the log cannot reconstruct (0 and the one just before the first readable,
        # gaps, one past the end): every reader must refuse them
        missing = [v for v in range(versions[-1] + 2 if versions else 1) if v not in versions]
        probes = {v for v in missing if v == 0 or v + 1 == versions[0] or v > versions[0]}
        for v in sorted(probes):
            notes += [
                f"{o} v{v} (unreadable): answered" for o in ORACLES if _ok(isolated(o, path, v))
            ]
        notes.append(f"probed unreadable versions {sorted(probes)}: all refused unless noted")
        span = f"{versions[0]}..{versions[-1]}" if versions else "none"
        print(f"{name}: versions {span} ({len(versions)})")
        for line in dict.fromkeys(notes):
            print(f"  {line[:240]}")
    print("readable (table, version) pairs:", total)


def _ok(result) -> bool:
    return not isinstance(result, Unreadable)


def _disagreement(got: dict, raw: dict) -> str | None:
    """What an oracle's answer says differently from the raw log replay, if anything."""
    if got["files"].keys() != raw["files"].keys():
        extra = sorted(got["files"].keys() - raw["files"].keys())
        missing = sorted(raw["files"].keys() - got["files"].keys())
        same = decoded(got["files"]).keys() == decoded(raw["files"]).keys()
        how = "path spelling differs" if same else "files differ"
        return f"{how}: extra={extra[:2]}({len(extra)}) missing={missing[:2]}({len(missing)})"
    if "protocol" not in got:  # duckdb: files only
        return None
    if got["files"] != raw["files"]:
        return "sizes differ"
    proto, meta = raw["protocol"], raw["metaData"]
    expect = {
        "version": raw["version"],
        "protocol": {
            k: _features(proto.get(k)) if "Features" in k else proto.get(k) for k in got["protocol"]
        },
        "tableId": meta["id"],
        "partitionColumns": list(meta["partitionColumns"]),
        "configuration": dict(meta["configuration"] or {}),
        "schemaString": json.loads(meta["schemaString"]),
    }
    actual = {**got, "schemaString": json.loads(got["schemaString"])}
    wrong = [k for k in expect if actual[k] != expect[k]]
    return (
        f"{wrong} differ: {[actual[k] for k in wrong]} vs log {[expect[k] for k in wrong]}"
        if wrong
        else None
    )


if __name__ == "__main__":
    if sys.argv[1] == "call":
        oracle, path, *rest = sys.argv[2:]
        result = ORACLES[oracle](path, int(rest[0]) if rest else None)
        is_reason = isinstance(result, Unreadable)
        print(json.dumps({"unreadable": result} if is_reason else result))
    elif sys.argv[1] == "survey":
        here = os.path.dirname(os.path.abspath(__file__))
        default = os.path.join(here, "..", "..", "..", "shared", "conformance", "tables")
        _survey(sys.argv[2] if len(sys.argv) > 2 else default)
