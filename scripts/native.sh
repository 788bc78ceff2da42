#!/usr/bin/env bash
# Build and install the native stats parser (native/, a Rust extension) into .venv.
# The wheel is cached under ${XDG_CACHE_HOME:-~/.cache}/deltakeeper/native/<key>, the key a hash
# of native/'s sources, Cargo.lock, the Rust compiler and the Python version: a fresh clone on a
# warm machine installs it without compiling. Cargo's build files stay in native-target there.
set -euo pipefail
cd "$(dirname "$0")/.."
CACHE="${XDG_CACHE_HOME:-$HOME/.cache}/deltakeeper"
PY=.venv/bin/python
if ! command -v cargo >/dev/null; then
    echo "native: cargo not found; install Rust (https://rustup.rs) to build native/" >&2
    exit 1
fi
key=$(
    {
        (cd native && find Cargo.toml Cargo.lock pyproject.toml src -type f | LC_ALL=C sort | xargs sha256sum)
        rustc --version
        "$PY" -c 'import sys; print(sys.implementation.cache_tag)'
    } | sha256sum | cut -c1-16
)
wheels="$CACHE/native/$key"
if ! compgen -G "$wheels/*.whl" >/dev/null; then
    echo "native: building the stats parser (cold: a minute or two; cached in $wheels)"
    started=$(date +%s)
    rm -rf "$wheels.tmp" && mkdir -p "$wheels.tmp"
    CARGO_TARGET_DIR="$CACHE/native-target" .venv/bin/pip wheel --cache-dir "$CACHE/pip" -q \
        --no-deps --wheel-dir "$wheels.tmp" ./native
    rm -rf "$wheels" && mv "$wheels.tmp" "$wheels"
    echo "native: built in $(($(date +%s) - started)) s"
fi
stamp=".venv/.native-$key"
if [ ! -f "$stamp" ]; then
    .venv/bin/pip install -q --no-deps --force-reinstall "$wheels"/*.whl
    rm -f .venv/.native-*
    touch "$stamp"
fi
"$PY" -c 'import deltakeeper_native' || {
    echo "native: deltakeeper_native does not import after install" >&2
    exit 1
}
