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
