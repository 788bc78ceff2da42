#!/usr/bin/env bash
# Build Prometheus 3 and promtool, which tests/monitoring uses to check the alert rules and to
# scrape a live deltakeeper, from the Go module github.com/prometheus/prometheus at a pinned
# release (its Go tags are v0.3MM.P for Prometheus 3.MM.P). Idempotent; the binaries land in
# ${XDG_CACHE_HOME:-$HOME/.cache}/deltakeeper/prometheus-<version>/, so a second run does nothing.
# Tags: netgo (no cgo resolver), remove_all_sd (only static, file and HTTP discovery: the tests
# need no cloud SDKs); no builtinassets, as only the HTTP API is used, not the web UI.
# Prints PROMETHEUS=PATH and PROMTOOL=PATH on stdout (progress goes to stderr).
set -euo pipefail

PROMETHEUS_VERSION="3.16.0"
MODULE_VERSION="v0.316.0"

CACHE="${XDG_CACHE_HOME:-$HOME/.cache}/deltakeeper"
export GOMODCACHE="$CACHE/go-mod" GOCACHE="$CACHE/go-build" GOFLAGS="-modcacherw"
export CGO_ENABLED=0 GOTOOLCHAIN=local

say() { echo "prometheus: $*" >&2; }
command -v go >/dev/null || { say "ERROR: Go is required (https://go.dev/dl/)"; exit 1; }

mkdir -p "$CACHE"
exec 9>"$CACHE/.prometheus-install.lock"
flock 9

dir="$CACHE/prometheus-$PROMETHEUS_VERSION"
if [ ! -x "$dir/prometheus" ] || [ ! -x "$dir/promtool" ]; then
    say "building prometheus and promtool $PROMETHEUS_VERSION (cold: several minutes; cached after)"
    rm -rf "$dir.tmp" && mkdir -p "$dir.tmp"
    GOBIN="$dir.tmp" go install -trimpath -tags "netgo remove_all_sd" \
        -ldflags="-s -w -X github.com/prometheus/common/version.Version=$PROMETHEUS_VERSION" \
        "github.com/prometheus/prometheus/cmd/prometheus@$MODULE_VERSION" \
        "github.com/prometheus/prometheus/cmd/promtool@$MODULE_VERSION" >&2
    rm -rf "$dir" && mv "$dir.tmp" "$dir"
fi
echo "PROMETHEUS=$dir/prometheus"
echo "PROMTOOL=$dir/promtool"
