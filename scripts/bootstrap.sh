#!/usr/bin/env bash
# Create .venv and install deltakeeper with its test and dev tools.
# Downloads are cached outside the clone so a fresh clone on the same machine is fast.
set -euo pipefail
cd "$(dirname "$0")/.."
CACHE="${XDG_CACHE_HOME:-$HOME/.cache}/deltakeeper"
mkdir -p "$CACHE/pip"
PY="${PYTHON:-python3}"
if [ ! -x .venv/bin/python ]; then
    echo "bootstrap: creating .venv with $($PY --version)"
    "$PY" -m venv .venv
fi
stamp=".venv/.deps-$(cat pyproject.toml scripts/bootstrap.sh | sha256sum | cut -c1-16)"
if [ ! -f "$stamp" ]; then
    echo "bootstrap: installing deltakeeper and test dependencies (cached in $CACHE/pip)"
    .venv/bin/pip install --cache-dir "$CACHE/pip" -q --upgrade pip
    .venv/bin/pip install --cache-dir "$CACHE/pip" -q -e ".[test,dev]"
    rm -f .venv/.deps-*
    touch "$stamp"
fi
# The native stats parser: built once per source version (cached), skipped with a note without Rust.
scripts/native.sh
