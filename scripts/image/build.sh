#!/usr/bin/env bash
# Build an image with buildah (vfs storage, chroot isolation) on a local base from base.sh:
#   build.sh operator   Dockerfile        -> localhost/deltakeeper:<version>
#   build.sh spark      Dockerfile.spark  -> localhost/deltakeeper-spark:<version>
# The inputs are staged under dist/ first (with requirements/operator.lock, all .dockerignore
# lets through): the operator gets the wheels of deltakeeper and the dependencies that lock file
# pins (pip's cache makes a rebuild offline), the Spark image the Delta jars and delta-spark's Python package from
# scripts/spark/install.sh, the s3a connector from scripts/spark/install_s3a.sh and the job.
# Env: BASE=TAG uses that base instead of base.sh's (e.g. a pulled python:3.11-slim-bookworm).
# Prints IMAGE=TAG on stdout (progress goes to stderr).
set -euo pipefail

KIND="${1:-}"
case "$KIND" in
    operator) DOCKERFILE=Dockerfile NAME=localhost/deltakeeper STAGED=(dist/wheels) ;;
    spark)
        DOCKERFILE=Dockerfile.spark NAME=localhost/deltakeeper-spark
        STAGED=(dist/spark-jars dist/spark-s3a dist/spark-python dist/spark-job)
        ;;
    *) echo "usage: $0 operator|spark" >&2; exit 2 ;;
esac

cd "$(dirname "$0")/../.."
HERE=scripts/image
say() { echo "image/build: $*" >&2; }
CACHE="${XDG_CACHE_HOME:-$HOME/.cache}/deltakeeper"
[ -x .venv/bin/python ] || { say "ERROR: no .venv; run make setup first"; exit 1; }
"$HERE/install.sh" >/dev/null
mkdir -p "$CACHE"
exec 7>"$CACHE/.image-build-$KIND.lock"
flock 7

base="${BASE:-$("$HERE/base.sh" "$KIND" | sed -n 's/^BASE=//p')}"
version="$(.venv/bin/python -c 'import tomllib; print(tomllib.load(open("pyproject.toml", "rb"))["project"]["version"])')"
revision="$(git rev-parse --short HEAD 2>/dev/null || echo unknown)"

stage_operator() {
    say "wheels of deltakeeper $version and its locked dependencies into dist/wheels"
    rm -rf dist/wheels
    # Wheels only: one built here would not match the hashes the image installs them with.
    .venv/bin/pip download --quiet --cache-dir "$CACHE/pip" --dest dist/wheels \
        --only-binary=:all: --require-hashes -r requirements/operator.lock >&2
    .venv/bin/pip wheel --quiet --cache-dir "$CACHE/pip" --wheel-dir dist/wheels --no-deps . pip >&2
    rm -rf build   # setuptools' work folder from building deltakeeper's wheel
    # The native stats parser: the host's cached cp311 wheel (the base is Debian bookworm with
    # Python 3.11, as the build host), since the image build has no compiler and no network.
    local native
    native="$(scripts/native.sh wheel)"
    if [ -n "$native" ]; then
        cp "$native" dist/wheels/
    else
        say "no native stats parser for the image (no Rust here): it parses stats more slowly"
    fi
}

stage_spark() {
    local jars_dir delta
    jars_dir="$(scripts/spark/install.sh)"
    delta="$(sed -n 's/^artifact=.*://p' "$jars_dir/versions.txt")"
    say "Delta $delta jars from $jars_dir into dist/spark-jars"
    rm -rf dist/spark-jars dist/spark-s3a dist/spark-python dist/spark-job
    mkdir -p dist/spark-jars dist/spark-s3a dist/spark-job
    while read -r jar; do cp "$jars_dir/$jar" dist/spark-jars/; done <"$jars_dir/jars.txt"
    s3a_dir="$(scripts/spark/install_s3a.sh)"
    say "s3a connector from $s3a_dir into dist/spark-s3a"
    while read -r jar; do cp "$s3a_dir/$jar" dist/spark-s3a/; done <"$s3a_dir/jars.txt"
    .venv/bin/pip install --quiet --cache-dir "$CACHE/pip" --no-deps \
        --target dist/spark-python "delta-spark==$delta" >&2
    rm -rf dist/spark-python/bin dist/spark-python/*.dist-info
    cp operator/deltakeeper/compaction/job.py dist/spark-job/
}

# What went into an image, hashed: its Dockerfile, base and staged files (a wheel's bytes carry
# build times, so deltakeeper's own wheel counts by its sources instead). A new commit that
# changes none of these reuses the image, revision label included.
inputs_key() {
    {
        echo "$base"
        cat "$DOCKERFILE" .dockerignore
        find "${STAGED[@]}" -type f ! -name 'deltakeeper-*.whl' | LC_ALL=C sort \
            | xargs -r sha256sum
        find operator -type f -name '*.py' | LC_ALL=C sort | xargs sha256sum
        sha256sum pyproject.toml requirements/operator.lock
    } | sha256sum | cut -c1-16
}

"stage_$KIND"
tag="$NAME:$version"
built="$NAME:build-$(inputs_key)"
if "$HERE/buildah.sh" inspect --type image "$built" >/dev/null 2>&1; then
    say "$tag is up to date ($built)"
else
    say "building $tag from $DOCKERFILE on $base"
    "$HERE/buildah.sh" bud --quiet --isolation chroot --layers=false \
        --build-arg BASE="$base" --build-arg VERSION="$version" --build-arg REVISION="$revision" \
        -f "$DOCKERFILE" -t "$built" . >&2
fi
"$HERE/buildah.sh" tag "$built" "$tag"
# Older builds of this image: vfs keeps full copies of every one, so drop them.
"$HERE/buildah.sh" images --format '{{.Name}}:{{.Tag}}' | grep -F "$NAME:build-" \
    | grep -vxF "$built" | xargs -r "$HERE/buildah.sh" rmi >/dev/null 2>&1 || true
"$HERE/buildah.sh" rmi --prune >/dev/null 2>&1 || true
echo "IMAGE=$tag"
