#!/usr/bin/env bash
# Install the object-store emulators the integration tests start: MinIO (S3), fake-gcs-server
# (GCS) and Azurite (Azure Blob). Idempotent; everything lands outside the clone, in
#   ${XDG_CACHE_HOME:-$HOME/.cache}/deltakeeper/<tool>-<version>/
# so a second run, or a fresh clone on the same machine, finds it there and does nothing.
# Prints the three binaries' paths as KEY=PATH lines on stdout (progress goes to stderr).
set -euo pipefail

# MinIO tags releases RELEASE.<date>, which the Go module proxy does not serve (403), so the pin
# is the pseudo-version of the newest commit the proxy has (2026-02-12); it builds with Go 1.24+.
MINIO_VERSION="v0.0.0-20260212201848-7aac2a2c5b7c"
FAKE_GCS_VERSION="v1.56.1"
# Azurite 3.37.0 is the first release whose blob batch accepts the Python SDK's multipart
# boundary (Azure/Azurite#2413); it wants Node >= 22, so a pinned Node comes from npm too.
AZURITE_VERSION="3.37.0"
NODE_VERSION="22.23.3"

CACHE="${XDG_CACHE_HOME:-$HOME/.cache}/deltakeeper"
GO_MOD_CACHE="$CACHE/go-mod"          # shared module downloads (writable: -modcacherw)
GO_BUILD_CACHE="$CACHE/go-build"
NPM_CACHE="$CACHE/npm"

say() { echo "stores: $*" >&2; }
need() { command -v "$1" >/dev/null || { say "ERROR: $1 is required ($2)"; exit 1; }; }

# One installer at a time (parallel test workers, two clones): the others wait, then find it done.
mkdir -p "$CACHE"
exec 9>"$CACHE/.stores-install.lock"
flock 9

# Build a Go command into $CACHE/<name>-<version>/bin; the binary's presence is the stamp.
go_tool() {
    local name="$1" pkg="$2" version="$3" bin="$4"
    local dir="$CACHE/$name-$version"
    if [ -x "$dir/bin/$bin" ]; then
        say "$name $version cached"
    else
        need go "to build $name"
        say "building $name $version with $(go env GOVERSION) (first time only, a few minutes)"
        local start=$SECONDS
        mkdir -p "$dir"
        # Build into a scratch GOBIN and move into place, so an interrupted build leaves no stamp.
        rm -rf "$dir/bin.tmp"
        GOBIN="$dir/bin.tmp" GOMODCACHE="$GO_MOD_CACHE" GOCACHE="$GO_BUILD_CACHE" \
            GOFLAGS="-modcacherw -buildvcs=false" CGO_ENABLED=0 \
            go install -trimpath "$pkg@$version"
        rm -rf "$dir/bin" && mv "$dir/bin.tmp" "$dir/bin"
        say "$name $version built in $((SECONDS - start))s"
    fi
    echo "$(echo "$name" | tr 'a-z-' 'A-Z_')=$dir/bin/$bin"
}

go_tool minio github.com/minio/minio "$MINIO_VERSION" minio
go_tool fake-gcs-server github.com/fsouza/fake-gcs-server "$FAKE_GCS_VERSION" fake-gcs-server

dir="$CACHE/azurite-$AZURITE_VERSION-node$NODE_VERSION"
launcher="$dir/azurite-blob"
if [ -x "$launcher" ]; then
    say "azurite $AZURITE_VERSION cached"
else
    need npm "to install azurite"
    case "$(uname -m)" in
        x86_64) arch=x64 ;;
        aarch64 | arm64) arch=arm64 ;;
        *) say "ERROR: no Node build on npm for $(uname -m)"; exit 1 ;;
    esac
    say "installing azurite $AZURITE_VERSION and node $NODE_VERSION with npm (first time only)"
    start=$SECONDS
    mkdir -p "$dir"
    npm install --prefix "$dir" --cache "$NPM_CACHE" --no-audit --no-fund --loglevel=error \
        --no-save "azurite@$AZURITE_VERSION" "node-linux-$arch@$NODE_VERSION" >&2
    # Written last: its presence says the install is complete.
    cat >"$launcher.tmp" <<LAUNCHER
#!/bin/sh
exec "$dir/node_modules/node-linux-$arch/bin/node" "$dir/node_modules/azurite/dist/src/blob/main.js" "\$@"
LAUNCHER
    chmod +x "$launcher.tmp" && mv "$launcher.tmp" "$launcher"
    say "azurite $AZURITE_VERSION installed in $((SECONDS - start))s"
fi
echo "AZURITE=$launcher"
