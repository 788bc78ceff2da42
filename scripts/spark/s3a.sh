#!/usr/bin/env bash
# The s3a connector for the compaction image: hadoop-aws of the Hadoop release PySpark (and so
# the Spark image of the same release) ships, and what it needs at run time that Spark lacks
# (the AWS SDK v2 bundle, the S3 analytics accelerator, ...), resolved from Maven Central into
# ${XDG_CACHE_HOME:-$HOME/.cache}/deltakeeper/s3a-jars-hadoop<version>/ (built in a temp dir and
# renamed into place, so it exists only when complete). A second run does no network access.
# Needs .venv with pyspark (scripts/spark/install.sh) and Maven. Prints the jar directory.
set -euo pipefail

cd "$(dirname "$0")/../.."
# shellcheck source=scripts/spark/lib.sh
. scripts/spark/lib.sh
VENV="${PYTHON_VENV:-.venv}"
CACHE="${DELTAKEEPER_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/deltakeeper}"
log() { echo "spark/s3a: $*" >&2; }

PYSPARK_JARS="$("$VENV/bin/python" -c \
    'import os, pyspark; print(os.path.join(os.path.dirname(pyspark.__file__), "jars"))')"
api_jar="$(find "$PYSPARK_JARS" -maxdepth 1 -name 'hadoop-client-api-*.jar' | head -1)"
[ -n "$api_jar" ] || { log "no hadoop-client-api jar in $PYSPARK_JARS"; exit 1; }
HADOOP="$(basename "$api_jar" .jar)"
HADOOP="${HADOOP#hadoop-client-api-}"
JARS_DIR="$CACHE/s3a-jars-hadoop$HADOOP"

if [ ! -f "$JARS_DIR/jars.txt" ]; then
    command -v mvn >/dev/null 2>&1 || { log "need Maven (apt-get install maven)"; exit 1; }
    mkdir -p "$CACHE"
    work="$(mktemp -d "$CACHE/.s3a-jars-tmp.XXXXXX")"
    trap 'rm -rf "$work"' EXIT
    log "resolving hadoop-aws $HADOOP and the AWS SDK bundle it names (Maven repo $CACHE/m2)"
    # hadoop-aws's runtime tree (its hadoop-common is `provided`: Spark's shaded client jars).
    runtime_jars "org.apache.hadoop:hadoop-aws:$HADOOP" "$work/all" "$CACHE/m2"
    keep_new_jars "$work/all" "$work/jars" "$PYSPARK_JARS"
    (cd "$work/jars" && ls -1 *.jar >jars.txt)
    grep -q "^hadoop-aws-$HADOOP.jar$" "$work/jars/jars.txt" \
        || { log "resolution did not produce hadoop-aws-$HADOOP.jar"; exit 1; }
    grep -q '^bundle-2\.' "$work/jars/jars.txt" \
        || { log "resolution did not produce the AWS SDK v2 bundle"; exit 1; }
    if ! mv -T "$work/jars" "$JARS_DIR" 2>/dev/null; then
        [ -f "$JARS_DIR/jars.txt" ] || { log "could not move jars into $JARS_DIR"; exit 1; }
    fi
    log "s3a jars ready in $JARS_DIR: $(tr '\n' ' ' <"$JARS_DIR/jars.txt")"
fi
echo "$JARS_DIR"
