#!/usr/bin/env bash
# Install every tool the test suite starts or runs (see the Makefile's test-deps). Two lanes run
# side by side: Go builds (CPU-bound) and downloads (Spark with Delta jars, image tools: network-
# and apt-bound). Each lane stays sequential, since apt-get allows one caller at a time. On a cold
# cache this saves the downloads' minutes; on a warm one every script only checks and returns.
set -euo pipefail
cd "$(dirname "$0")"

go_lane() { stores/install.sh && k8s/install.sh && helm/install.sh && prometheus/install.sh; }
download_lane() { spark/install.sh && image/install.sh; }

go_lane >/dev/null &
go_pid=$!
download_lane >/dev/null &
download_pid=$!

failed=0
wait "$go_pid" || { echo "test-deps: a Go build failed (stores, k8s, helm or prometheus; its error is above)" >&2; failed=1; }
wait "$download_pid" || { echo "test-deps: the Spark or image tools failed to install (their error is above)" >&2; failed=1; }
exit "$failed"
