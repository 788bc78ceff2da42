# Sourced by install.sh and install_s3a.sh.
#
# keep_jars_pyspark_lacks SRC DEST PYSPARK_JARS: copy the jars in SRC to DEST except those whose
# artifact pyspark ships already (no second hadoop, parquet, jackson, netty, scala-library or
# log4j on the classpath).
keep_jars_pyspark_lacks() {
    local src="$1" dest="$2" pyspark_jars="$3" jar base artifact
    mkdir -p "$dest"
    for jar in "$src"/*.jar; do
        base="$(basename "$jar" .jar)"
        artifact="$(sed -E 's/-[0-9][^-]*(-[0-9]+)?$//' <<<"$base")"
        if compgen -G "$pyspark_jars/${artifact}-[0-9]*.jar" >/dev/null; then
            continue
        fi
        cp "$jar" "$dest/"
    done
}
