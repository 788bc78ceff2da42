# Sourced by install.sh and s3a.sh.

# keep_new_jars FROM TO PYSPARK_JARS: copy the jars of FROM into TO whose artifact PySpark does
# not ship already (no second hadoop, parquet, jackson, scala-library or log4j on the classpath).
keep_new_jars() {
    local from="$1" to="$2" pyspark_jars="$3" jar base artifact
    mkdir -p "$to"
    for jar in "$from"/*.jar; do
        base="$(basename "$jar" .jar)"
        artifact="$(sed -E 's/-[0-9][^-]*(-[0-9]+)?$//' <<<"$base")"
        if compgen -G "$pyspark_jars/${artifact}-[0-9]*.jar" >/dev/null; then
            continue
        fi
        cp "$jar" "$to/"
    done
}

# runtime_jars GROUP:ARTIFACT:VERSION TO M2: the artifact and its runtime dependencies from
# Maven Central (through the local repository M2) into TO; the pom goes beside TO.
runtime_jars() {
    local g a v pom
    IFS=: read -r g a v <<<"$1"
    pom="$(dirname "$2")/pom.xml"
    cat >"$pom" <<POM
<project xmlns="http://maven.apache.org/POM/4.0.0">
  <modelVersion>4.0.0</modelVersion>
  <groupId>deltakeeper</groupId><artifactId>jars</artifactId><version>1</version>
  <packaging>pom</packaging>
  <dependencies>
    <dependency><groupId>$g</groupId><artifactId>$a</artifactId><version>$v</version></dependency>
  </dependencies>
</project>
POM
    mvn -B -q -f "$pom" -Dmaven.repo.local="$3" \
        dependency:copy-dependencies -DincludeScope=runtime -DoutputDirectory="$2" >&2
}
