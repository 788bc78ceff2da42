#!/usr/bin/env bash
# Make PySpark + Delta Lake usable for the Spark-backed tests. Idempotent.
#
#  * pip-installs the pinned pyspark / delta-spark pair into .venv (pip cache outside the repo);
#  * resolves the Delta jars and their runtime dependencies from Maven Central into
#    ${XDG_CACHE_HOME:-$HOME/.cache}/deltakeeper/spark-jars-<delta>-spark<spark>/ , keeping only
#    the jars pyspark does not already ship (pyspark's own hadoop/parquet/jackson/scala win).
#    The directory is built in a temp dir and renamed into place, so it exists only when
#    complete; jars.txt inside it is the manifest tests/support/spark.py reads.
#  * a second run does no network access at all (pip and Maven are skipped when satisfied).
#
# Pins: delta-spark 4.4.1 is on PyPI but not on Maven Central, and delta-spark 4.4.x requires
# pyspark<=4.2.0, so the newest pair that resolves end to end is pyspark 4.2.0 + Delta 4.4.0
# (artifact io.delta:delta-spark_4.2_2.13, the name delta's configure_spark_with_delta_pip uses
# for Spark 4.2). Spark 4.x runs on Java 17.
#
# Env: PYTHON_VENV (default .venv), DELTAKEEPER_CACHE (default $XDG_CACHE_HOME/deltakeeper).
# Prints the jar directory as its last line.
set -euo pipefail

PYSPARK_VERSION=4.2.0
DELTA_VERSION=4.4.0
SCALA_BINARY=2.13

cd "$(dirname "$0")/../.."
VENV="${PYTHON_VENV:-.venv}"
CACHE="${DELTAKEEPER_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/deltakeeper}"
SPARK_MM="${PYSPARK_VERSION%.*}"
ARTIFACT="io.delta:delta-spark_${SPARK_MM}_${SCALA_BINARY}:${DELTA_VERSION}"
JARS_DIR="$CACHE/spark-jars-${DELTA_VERSION}-spark${SPARK_MM}"
M2="$CACHE/m2"
mkdir -p "$CACHE/pip"

log() { echo "spark/install: $*" >&2; }
# shellcheck source=scripts/spark/jars.sh
. "scripts/spark/jars.sh"

# --- Java and Maven -----------------------------------------------------------------------
java_major() {
    java -version 2>&1 | sed -nE 's/.*version "([0-9]+)(\.[0-9]+)*.*/\1/p' | head -1
}
need_apt=()
if ! command -v java >/dev/null 2>&1 || [ "$(java_major)" -lt 17 ] 2>/dev/null; then
    need_apt+=(openjdk-17-jre-headless)
fi
# javac and jar: the concurrency tests compile a test-only Delta LogStore (tests/support/java).
if ! command -v javac >/dev/null 2>&1 || ! command -v jar >/dev/null 2>&1; then
    need_apt+=(openjdk-17-jdk-headless)
fi
if [ ! -f "$JARS_DIR/jars.txt" ] && ! command -v mvn >/dev/null 2>&1; then
    need_apt+=(maven)
fi
if [ "${#need_apt[@]}" -gt 0 ]; then
    if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then
        log "installing ${need_apt[*]} with apt-get"
        apt-get update -qq >&2
        DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends \
            "${need_apt[@]}" >&2
    else
        log "need ${need_apt[*]} (Java >= 17 and Maven) but cannot apt-get install them"
        exit 1
    fi
fi

# --- Python packages ----------------------------------------------------------------------
if [ ! -x "$VENV/bin/python" ]; then
    log "no $VENV/bin/python; run scripts/bootstrap.sh first"
    exit 1
fi
if "$VENV/bin/python" - "$PYSPARK_VERSION" "$DELTA_VERSION" <<'EOF' 2>/dev/null
import sys
from importlib.metadata import version
sys.exit(0 if (version("pyspark"), version("delta-spark")) == tuple(sys.argv[1:3]) else 1)
EOF
then
    :
else
    log "pip install pyspark==$PYSPARK_VERSION delta-spark==$DELTA_VERSION"
    "$VENV/bin/pip" install --cache-dir "$CACHE/pip" -q \
        "pyspark==$PYSPARK_VERSION" "delta-spark==$DELTA_VERSION" >&2
fi

# --- Delta jars ---------------------------------------------------------------------------
if [ ! -f "$JARS_DIR/jars.txt" ]; then
    PYSPARK_JARS="$("$VENV/bin/python" -c \
        'import os, pyspark; print(os.path.join(os.path.dirname(pyspark.__file__), "jars"))')"
    mkdir -p "$CACHE"
    work="$(mktemp -d "$CACHE/.spark-jars-tmp.XXXXXX")"
    trap 'rm -rf "$work"' EXIT
    IFS=: read -r g a v <<<"$ARTIFACT"
    cat >"$work/pom.xml" <<EOF
<project xmlns="http://maven.apache.org/POM/4.0.0">
  <modelVersion>4.0.0</modelVersion>
  <groupId>deltakeeper</groupId><artifactId>spark-jars</artifactId><version>1</version>
  <packaging>pom</packaging>
  <dependencies>
    <dependency><groupId>$g</groupId><artifactId>$a</artifactId><version>$v</version></dependency>
  </dependencies>
</project>
EOF
    log "resolving $ARTIFACT and its runtime dependencies (Maven repo $M2)"
    mvn -B -q -f "$work/pom.xml" -Dmaven.repo.local="$M2" \
        dependency:copy-dependencies -DincludeScope=runtime \
        -DoutputDirectory="$work/all" >&2
    keep_jars_pyspark_lacks "$work/all" "$work/jars" "$PYSPARK_JARS"
    for required in "delta-spark_${SPARK_MM}_${SCALA_BINARY}-${DELTA_VERSION}.jar" \
                    "delta-storage-${DELTA_VERSION}.jar"; do
        if [ ! -f "$work/jars/$required" ]; then
            log "resolution did not produce $required"
            exit 1
        fi
    done
    (cd "$work/jars" && ls -1 *.jar >jars.txt)
    {
        echo "artifact=$ARTIFACT"
        echo "pyspark=$PYSPARK_VERSION"
    } >"$work/jars/versions.txt"
    if [ -d "$JARS_DIR" ] && [ ! -f "$JARS_DIR/jars.txt" ]; then
        rm -rf "$JARS_DIR"   # left by hand or by an older script: never trusted
    fi
    if ! mv -T "$work/jars" "$JARS_DIR" 2>/dev/null; then
        # Someone else finished first; theirs is complete, ours is discarded.
        [ -f "$JARS_DIR/jars.txt" ] || { log "could not move jars into $JARS_DIR"; exit 1; }
    fi
    log "jars ready in $JARS_DIR ($(wc -l <"$JARS_DIR/jars.txt") jars)"
fi
echo "$JARS_DIR"
