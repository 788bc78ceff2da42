#!/usr/bin/env bash
# The native stats parser (native/, a Rust extension for stats_parsed).
#   scripts/native.sh          build it (or take it from the cache) and install it into .venv
#   scripts/native.sh wheel    the same, then print the cached wheel's path (the image stages it)
#   scripts/native.sh lint     cargo fmt --check and clippy -D warnings on native/ and native/bench
# The wheel is cached under ${XDG_CACHE_HOME:-~/.cache}/deltakeeper/native/<key>, the key a hash
# of native/'s sources, Cargo.lock, the Rust compiler and the Python version: a fresh clone on a
# warm machine installs it without compiling. Crates and cargo's build files stay in that cache
# too. Without Rust, deltakeeper works (the Arrow JSON path parses stats, about 4x slower), so
# this says so and exits 0, unless DELTAKEEPER_REQUIRE_NATIVE=1 (CI) makes it an error.
set -euo pipefail
cd "$(dirname "$0")/.."
CACHE="${XDG_CACHE_HOME:-$HOME/.cache}/deltakeeper"
PY=.venv/bin/python
export CARGO_HOME="$CACHE/cargo-home" CARGO_TARGET_DIR="$CACHE/native-target"
mode="${1:-install}"

if ! command -v cargo >/dev/null; then
    if [ "${DELTAKEEPER_REQUIRE_NATIVE:-}" = 1 ]; then
        echo "native: cargo not found and DELTAKEEPER_REQUIRE_NATIVE=1; install Rust (https://rustup.rs)" >&2
        exit 1
    fi
    echo "native: Rust not found, so the native stats parser is not built; checkpoints that" \
        "write stats_parsed parse stats about 4x slower. Install Rust (https://rustup.rs) and" \
        "run make setup again to build it." >&2
    exit 0
fi

if [ "$mode" = lint ]; then
    for dir in native native/bench; do
        (cd "$dir" && cargo fmt --check && cargo clippy --quiet --all-targets -- -D warnings)
    done
    exit 0
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
    echo "native: building the stats parser (cold: about a minute; cached in $wheels)" >&2
    started=$(date +%s)
    rm -rf "$wheels.tmp" && mkdir -p "$wheels.tmp"
    .venv/bin/pip wheel --cache-dir "$CACHE/pip" -q --no-deps --wheel-dir "$wheels.tmp" ./native >&2
    rm -rf "$wheels" && mv "$wheels.tmp" "$wheels"
    echo "native: built in $(($(date +%s) - started)) s" >&2
fi
stamp=".venv/.native-$key"
if [ ! -f "$stamp" ]; then
    .venv/bin/pip install -q --no-deps --force-reinstall "$wheels"/*.whl >&2
    rm -f .venv/.native-*
    touch "$stamp"
fi
"$PY" -c 'import deltakeeper_native' || {
    echo "native: deltakeeper_native does not import after install" >&2
    exit 1
}
if [ "$mode" = wheel ]; then
    compgen -G "$wheels/*.whl"
fi
