"""A hand-run OPTIMIZE with Delta's defaults, for `benchmarks/compaction.py` (spark-submit).

    spark-submit ... benchmarks/spark_jobs/optimize.py TABLE

Imports nothing but PySpark and the standard library, and times itself as deltakeeper's job
does: `seconds` from the script's start (the JVM is up by then), `sessionSeconds` the part
spent starting the Spark session. Prints one JSON line.
"""

from __future__ import annotations

import json
import sys
import time


def main(table: str) -> int:
    began = time.monotonic()
    from pyspark.sql import SparkSession

    spark = SparkSession.builder.appName("bench-optimize").getOrCreate()
    session = time.monotonic() - began
    ident = "`" + table.replace("`", "``") + "`"
    metrics = spark.sql(f"OPTIMIZE delta.{ident}").first()
    out = {
        "result": "done",
        "seconds": round(time.monotonic() - began, 3),
        "sessionSeconds": round(session, 3),
        "metrics": str(metrics["metrics"]) if metrics else None,
    }
    print(json.dumps(out), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1]))
