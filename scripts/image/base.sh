#!/usr/bin/env bash
# Make a local base image, since no base-image registry is reachable here:
#   base.sh operator   Debian bookworm (minbase) with python3 (3.11, the project's minimum)
#   base.sh spark      the same with Java 17 and Spark (the pyspark distribution that
#                      scripts/spark/install.sh pins) at /opt/spark, laid out like the
#                      apache/spark images: SPARK_HOME=/opt/spark, jars in /opt/spark/jars,
#                      user 185
# mmdebstrap writes the root file system as a tar, cached in
# ${XDG_CACHE_HOME:-$HOME/.cache}/deltakeeper/image-base-<kind>-<suite>-<key>/ where <key> is a
# hash of everything that went into it (suite, variant, packages, options, mirror); buildah
# then imports it under a tag carrying the same key. A second run only checks the tag.
# Prints BASE=TAG on stdout (progress goes to stderr).
set -euo pipefail

KIND="${1:-}"
SUITE=bookworm
MIRROR="${DELTAKEEPER_DEBIAN_MIRROR:-http://deb.debian.org/debian}"
VARIANT=minbase
# Docs, man pages and locales are of no use in an image; copyright files stay.
DPKG_OPTS=(--dpkgopt='path-exclude=/usr/share/doc/*' --dpkgopt='path-include=/usr/share/doc/*/copyright'
           --dpkgopt='path-exclude=/usr/share/man/*' --dpkgopt='path-exclude=/usr/share/locale/*')
HOOKS=()
case "$KIND" in
    operator) PACKAGES="python3,ca-certificates" ;;
    spark)
        PACKAGES="python3,ca-certificates,openjdk-17-jre-headless,procps"
        # the JRE's update-alternatives links its man pages and fails if man1/ is missing
        HOOKS=(--setup-hook='mkdir -p "$1/usr/share/man/man1"')
        ;;
    *) echo "usage: $0 operator|spark" >&2; exit 2 ;;
esac

cd "$(dirname "$0")/../.."
HERE=scripts/image
say() { echo "image/base: $*" >&2; }
CACHE="${XDG_CACHE_HOME:-$HOME/.cache}/deltakeeper"
mkdir -p "$CACHE"
exec 8>"$CACHE/.image-base-$KIND.lock"
flock 8

key="$(printf '%s\n' "$SUITE" "$VARIANT" "$PACKAGES" "$MIRROR" "${DPKG_OPTS[@]}" "${HOOKS[@]}" | sha256sum | cut -c1-12)"
dir="$CACHE/image-base-$KIND-$SUITE-$key"
tar="$dir/rootfs.tar"
if [ ! -f "$tar" ]; then
    command -v mmdebstrap >/dev/null || { say "ERROR: mmdebstrap missing; run $HERE/install.sh"; exit 1; }
    say "mmdebstrap $SUITE ($VARIANT + $PACKAGES) into $tar (cold: a few minutes)"
    rm -rf "$dir" && mkdir -p "$dir"
    mmdebstrap --quiet --format=tar --variant="$VARIANT" --include="$PACKAGES" "${DPKG_OPTS[@]}" "${HOOKS[@]}" \
        "$SUITE" "$dir/rootfs.tmp.tar" "$MIRROR" >&2
    mv "$dir/rootfs.tmp.tar" "$tar"
fi

bh() { "$HERE/buildah.sh" "$@"; }
exists() { bh inspect --type image "$1" >/dev/null 2>&1; }

debian="localhost/deltakeeper-base-$KIND:$SUITE-$key"
if ! exists "$debian"; then
    say "importing $tar as $debian"
    ctr="$(bh from scratch)"
    bh add "$ctr" "$tar" / >/dev/null
    bh config --env PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin \
        --cmd /bin/sh "$ctr"
    bh commit --quiet --rm "$ctr" "$debian" >/dev/null
fi
if [ "$KIND" = operator ]; then
    echo "BASE=$debian"
    exit 0
fi

# spark: the Spark distribution is the one the pyspark wheel ships (bin/, jars/), the same
# Spark release the apache/spark image of that version carries.
jars_dir="$(scripts/spark/install.sh)"
pyspark="$(sed -n 's/^pyspark=//p' "$jars_dir/versions.txt")"
site="$(.venv/bin/python -c 'import pyspark, os; print(os.path.dirname(os.path.dirname(pyspark.__file__)))')"
tag="localhost/deltakeeper-base-spark:$pyspark-$SUITE-$key"
if ! exists "$tag"; then
    say "adding Spark $pyspark (from $site/pyspark) to $debian as $tag"
    ctr="$(bh from "$debian")"
    bh copy "$ctr" "$site/pyspark" /opt/spark >/dev/null
    bh copy "$ctr" "$site/py4j" /usr/lib/python3/dist-packages/py4j >/dev/null
    bh run --isolation chroot "$ctr" -- sh -ec '
        ln -s /opt/spark /usr/lib/python3/dist-packages/pyspark
        groupadd --system --gid 185 spark
        useradd --system --uid 185 --gid 185 --home-dir /opt/spark/work-dir spark
        mkdir -p /opt/spark/work-dir && chown spark:spark /opt/spark/work-dir
        rm -rf /opt/spark/__pycache__ /opt/spark/*/__pycache__'
    java_home="$(bh run --isolation chroot "$ctr" -- sh -c 'dirname "$(dirname "$(readlink -f /usr/bin/java)")"')"
    bh config --env SPARK_HOME=/opt/spark --env JAVA_HOME="$java_home" \
        --env PATH=/opt/spark/bin:/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin \
        --workingdir /opt/spark/work-dir --user 185 "$ctr"
    bh commit --quiet --rm "$ctr" "$tag" >/dev/null
fi
echo "BASE=$tag"
