#!/usr/bin/env bash
# ElasticMQ, the SQS-compatible server the sqs:// event source's tests start. Maven Central has
# no all-in-one jar of it, so its dependency set is resolved with Maven into
#   ${XDG_CACHE_HOME:-$HOME/.cache}/deltakeeper/elasticmq-<version>/
# (jars.txt written last: its presence says the install is complete); a second run, or a fresh
# clone on the same machine, finds it there and does no network access. Needs Java 17 to run.
# Prints ELASTICMQ=<jar directory> on stdout (progress goes to stderr).
set -euo pipefail

ELASTICMQ_VERSION="1.7.1"

CACHE="${DELTAKEEPER_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/deltakeeper}"
DIR="$CACHE/elasticmq-$ELASTICMQ_VERSION"
M2="$CACHE/m2"
say() { echo "stores/install_elasticmq: $*" >&2; }

if [ -f "$DIR/jars.txt" ]; then
    say "elasticmq $ELASTICMQ_VERSION cached"
else
    command -v mvn >/dev/null 2>&1 || { say "ERROR: needs Maven (apt-get install maven)"; exit 1; }
    mkdir -p "$CACHE"
    work="$(mktemp -d "$CACHE/.elasticmq-tmp.XXXXXX")"
    trap 'rm -rf "$work"' EXIT
    cat >"$work/pom.xml" <<POM
<project xmlns="http://maven.apache.org/POM/4.0.0">
  <modelVersion>4.0.0</modelVersion>
  <groupId>deltakeeper</groupId><artifactId>elasticmq</artifactId><version>1</version>
  <packaging>pom</packaging>
  <dependencies>
    <dependency>
      <groupId>org.elasticmq</groupId><artifactId>elasticmq-server_2.13</artifactId>
      <version>$ELASTICMQ_VERSION</version>
    </dependency>
  </dependencies>
</project>
POM
    say "resolving elasticmq-server $ELASTICMQ_VERSION (Maven repo $M2)"
    mvn -B -q -f "$work/pom.xml" -Dmaven.repo.local="$M2" \
        dependency:copy-dependencies -DincludeScope=runtime -DoutputDirectory="$work/jars" >&2
    [ -f "$work/jars/elasticmq-server_2.13-$ELASTICMQ_VERSION.jar" ] || { say "no server jar"; exit 1; }
    (cd "$work/jars" && ls -1 *.jar >jars.txt.tmp && mv jars.txt.tmp jars.txt)
    if ! mv -T "$work/jars" "$DIR" 2>/dev/null; then
        [ -f "$DIR/jars.txt" ] || { say "could not move jars into $DIR"; exit 1; }
    fi
    say "elasticmq $ELASTICMQ_VERSION installed ($(wc -l <"$DIR/jars.txt") jars)"
fi
echo "ELASTICMQ=$DIR"
