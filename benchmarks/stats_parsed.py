"""`stats_parsed` from stats JSON: deltakeeper's bulk parser on the synthetic table's stats.

The stats strings are those of `benchmarks/synth.py` (5 columns: long, int, string, timestamp,
double); a second run has 1% of them truncated, the common kind of malformed stats. Prints the
median and fastest of `--repeats` runs of `types.stats_parsed` for each.

    python -m benchmarks.stats_parsed --rows 1000000

`--dump DIR` writes the inputs for native/bench (the parser timed without Python) instead:
DIR/spec.tsv, DIR/stats.txt and DIR/bad.txt (one stats string a line).
"""

from __future__ import annotations

import argparse
import array
import os
import statistics
import time
from pathlib import Path

import pyarrow as pa

from benchmarks.synth import PARTITION_COLUMNS, SCHEMA_STRING, Params, file_columns
from deltakeeper.delta import native_stats, types


def stats_strings(rows: int) -> list[str]:
    params = Params(files=rows, commits=1000, commits_after_checkpoint=10)
    return list(file_columns(params, list(range(rows)), array.array("q", [0] * rows))["stats"])


def timed(stats: pa.Array, repeats: int) -> list[float]:
    out = []
    for _ in range(repeats):
        started = time.perf_counter()
        types.stats_parsed(stats, SCHEMA_STRING, None, PARTITION_COLUMNS)
        out.append(time.perf_counter() - started)
    return out


def dump(to: Path, good: list[str], bad: list[str]) -> None:
    to.mkdir(parents=True, exist_ok=True)
    shape = native_stats.spec(types.stats_type(SCHEMA_STRING, None, PARTITION_COLUMNS))
    assert shape is not None
    (to / "spec.tsv").write_text("".join("\t".join(map(str, node)) + "\n" for node in shape))
    for name, strings in (("stats.txt", good), ("bad.txt", bad)):
        (to / name).write_text("".join(s + "\n" for s in strings))
    print(f"wrote {to}/spec.tsv, stats.txt and bad.txt ({len(good):,} rows each)")


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m benchmarks.stats_parsed", description=__doc__)
    ap.add_argument("--rows", type=int, default=1_000_000)
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument(
        "--dump", metavar="DIR", help="write native/bench's inputs to DIR, time nothing"
    )
    args = ap.parse_args(argv)
    good = stats_strings(args.rows)
    bad = [s[:-7] if i % 100 == 0 else s for i, s in enumerate(good)]
    if args.dump:
        dump(Path(args.dump), good, bad)
        return 0
    print(f"load average at start: {' '.join(f'{x:.1f}' for x in os.getloadavg())}")
    for name, strings in (("well-formed", good), ("1% truncated", bad)):
        runs = timed(pa.array(strings, pa.string()), args.repeats)
        print(
            f"{args.rows:,} rows, {name}: median {statistics.median(runs):.2f} s, "
            f"fastest {min(runs):.2f} s"
        )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
