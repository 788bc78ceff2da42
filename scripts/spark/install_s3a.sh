#!/usr/bin/env bash
# The jars Spark needs for s3a:// tables (hadoop-aws and the AWS SDK v2 modules it uses), for the
# compaction job's tests against MinIO. Idempotent; a second run does no network access.
#
# hadoop-aws must match the Hadoop that pyspark ships (hadoop-client-api-<v>.jar); it is built
# against one AWS SDK release, pinned here. hadoop-aws asks for the SDK's `bundle` (several
# hundred MB); the few modules S3A loads (s3, s3-transfer-manager, sts) are about 20 MB.
# Jars pyspark ships already (netty, httpclient, commons, slf4j) are left out, as in install.sh.
#
# Env: PYTHON_VENV (default .venv), DELTAKEEPER_CACHE (default $XDG_CACHE_HOME/deltakeeper).
# Prints the jar directory (with jars.txt) as its last line.
set -euo pipefail

HADOOP_AWS_VERSION=3.5.0
AWS_SDK_VERSION=2.35.4

cd "$(dirname "$0")/../.."
VENV="${PYTHON_VENV:-.venv}"
CACHE="${DELTAKEEPER_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/deltakeeper}"
JARS_DIR="$CACHE/spark-s3a-jars-hadoop${HADOOP_AWS_VERSION}-sdk${AWS_SDK_VERSION}"
M2="$CACHE/m2"

log() { echo "spark/install_s3a: $*" >&2; }
# shellcheck source=scripts/spark/jars.sh
. "scripts/spark/jars.sh"

PYSPARK_JARS="$("$VENV/bin/python" -c \
    'import os, pyspark; print(os.path.join(os.path.dirname(pyspark.__file__), "jars"))')"
if ! compgen -G "$PYSPARK_JARS/hadoop-client-api-${HADOOP_AWS_VERSION}.jar" >/dev/null; then
    log "pyspark does not ship Hadoop $HADOOP_AWS_VERSION ($(ls "$PYSPARK_JARS" | grep hadoop-client-api)); update the pins here"
    exit 1
fi

if [ ! -f "$JARS_DIR/jars.txt" ]; then
    if ! command -v mvn >/dev/null 2>&1; then
        if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then
            log "installing maven with apt-get"
            apt-get update -qq >&2
            DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends maven >&2
        else
            log "needs Maven but cannot apt-get install it"
            exit 1
        fi
    fi
    mkdir -p "$CACHE"
    work="$(mktemp -d "$CACHE/.spark-s3a-jars-tmp.XXXXXX")"
    trap 'rm -rf "$work"' EXIT
    sdk() {
        echo "<dependency><groupId>software.amazon.awssdk</groupId><artifactId>$1</artifactId><version>$AWS_SDK_VERSION</version></dependency>"
    }
    cat >"$work/pom.xml" <<POM
<project xmlns="http://maven.apache.org/POM/4.0.0">
  <modelVersion>4.0.0</modelVersion>
  <groupId>deltakeeper</groupId><artifactId>spark-s3a-jars</artifactId><version>1</version>
  <packaging>pom</packaging>
  <dependencies>
    <dependency>
      <groupId>org.apache.hadoop</groupId><artifactId>hadoop-aws</artifactId>
      <version>$HADOOP_AWS_VERSION</version>
      <exclusions><exclusion>
        <groupId>software.amazon.awssdk</groupId><artifactId>bundle</artifactId>
      </exclusion></exclusions>
    </dependency>
    $(sdk s3) $(sdk s3-transfer-manager) $(sdk sts)
  </dependencies>
</project>
POM
    log "resolving hadoop-aws $HADOOP_AWS_VERSION and AWS SDK $AWS_SDK_VERSION modules (Maven repo $M2)"
    mvn -B -q -f "$work/pom.xml" -Dmaven.repo.local="$M2" \
        dependency:copy-dependencies -DincludeScope=runtime -DoutputDirectory="$work/all" >&2
    keep_jars_pyspark_lacks "$work/all" "$work/jars" "$PYSPARK_JARS"
    [ -f "$work/jars/hadoop-aws-${HADOOP_AWS_VERSION}.jar" ] || { log "no hadoop-aws jar"; exit 1; }
    (cd "$work/jars" && ls -1 *.jar >jars.txt)
    if ! mv -T "$work/jars" "$JARS_DIR" 2>/dev/null; then
        [ -f "$JARS_DIR/jars.txt" ] || { log "could not move jars into $JARS_DIR"; exit 1; }
    fi
    log "jars ready in $JARS_DIR ($(wc -l <"$JARS_DIR/jars.txt") jars)"
fi
echo "$JARS_DIR"
