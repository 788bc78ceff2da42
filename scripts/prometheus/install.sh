#!/usr/bin/env bash
# Build Prometheus 3 and promtool, which tests/monitoring uses to check the alert rules and to
# scrape a live deltakeeper, from the Go module github.com/prometheus/prometheus at a pinned
# release (its Go tags are v0.3MM.P for Prometheus 3.MM.P). Idempotent; the binaries land in
# ${XDG_CACHE_HOME:-$HOME/.cache}/deltakeeper/prometheus-<version>/, so a second run does nothing
# (the Go build through scripts/lib/go_build.sh).
# Tags: netgo (no cgo resolver), remove_all_sd (only static, file and HTTP discovery: the tests
# need no cloud SDKs); no builtinassets, as only the HTTP API is used, not the web UI.
# Prints PROMETHEUS=PATH and PROMTOOL=PATH on stdout (progress goes to stderr).
set -euo pipefail

PROMETHEUS_VERSION="3.16.0"
MODULE_VERSION="v0.316.0"

source "$(dirname "$0")/../lib/go_build.sh"
go_build_init prometheus

go_tool prometheus "$PROMETHEUS_VERSION" "prometheus promtool" go_install \
    -tags "netgo remove_all_sd" \
    -ldflags="-s -w -X github.com/prometheus/common/version.Version=$PROMETHEUS_VERSION" \
    "github.com/prometheus/prometheus/cmd/prometheus@$MODULE_VERSION" \
    "github.com/prometheus/prometheus/cmd/promtool@$MODULE_VERSION"
