#!/usr/bin/env bash
# Install the object-store emulators the integration tests start: MinIO (S3), fake-gcs-server
# (GCS) and Azurite (Azure Blob and Queue); and ElasticMQ (SQS, install_elasticmq.sh). Idempotent; everything lands outside the clone, in
#   ${XDG_CACHE_HOME:-$HOME/.cache}/deltakeeper/<tool>-<version>/
# so a second run, or a fresh clone on the same machine, finds it there and does nothing (the Go
# builds through scripts/lib/go_build.sh).
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

source "$(dirname "$0")/../lib/go_build.sh"
go_build_init stores
NPM_CACHE="$CACHE/npm"

# The emulators' binaries sit in bin/ inside their folders.
install_bin() { go_install "$1/bin" "${@:2}"; }
go_tool minio "$MINIO_VERSION" bin/minio install_bin "github.com/minio/minio@$MINIO_VERSION"
go_tool fake-gcs-server "$FAKE_GCS_VERSION" bin/fake-gcs-server \
    install_bin "github.com/fsouza/fake-gcs-server@$FAKE_GCS_VERSION"

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

# Azurite's Queue service (the azqueue:// event source's tests), from the same install.
queue_launcher="$dir/azurite-queue"
if [ ! -x "$queue_launcher" ]; then
    node="$(sed -n 's/^exec "\([^"]*\)".*/\1/p' "$launcher")"
    cat >"$queue_launcher.tmp" <<LAUNCHER
#!/bin/sh
exec "$node" "$dir/node_modules/azurite/dist/src/queue/main.js" "\$@"
LAUNCHER
    chmod +x "$queue_launcher.tmp" && mv "$queue_launcher.tmp" "$queue_launcher"
fi
echo "AZURITE_QUEUE=$queue_launcher"

# ElasticMQ (the sqs:// event source's tests), resolved with Maven.
"$(dirname "$0")/install_elasticmq.sh"
