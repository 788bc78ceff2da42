#!/usr/bin/env bash
# Install every tool the test suite starts or runs (see the Makefile's test-deps). Two lanes run
# side by side: Go builds (CPU-bound) and downloads (Spark with the Delta and s3a jars, the
# image tools, then the Debian bases of both images: network- and apt-bound, and otherwise made
# by the first image test while the suite waits). Each lane stays sequential, since apt-get allows one
# caller at a time. On a cold cache the downloads overlap the Go builds; on a warm one every
# script only checks and returns.
set -euo pipefail
cd "$(dirname "$0")"

go_lane() { stores/install.sh && k8s/install.sh && helm/install.sh && prometheus/install.sh; }
download_lane() {
    spark/install.sh && spark/install_s3a.sh && image/install.sh \
        && image/base.sh operator && image/base.sh spark
}

go_lane >/dev/null &
go_pid=$!
download_lane >/dev/null &
download_pid=$!

failed=0
go_failed="test-deps: a Go build failed (stores, k8s, helm or prometheus; its error is above)"
download_failed="test-deps: Spark, its jars, the image tools or bases failed to install (error above)"
wait "$go_pid" || { echo "$go_failed" >&2; failed=1; }
wait "$download_pid" || { echo "$download_failed" >&2; failed=1; }
exit "$failed"
