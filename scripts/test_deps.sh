#!/usr/bin/env bash
# Install every tool the test suite starts or runs (see the Makefile's test-deps). Three lanes
# run side by side:
# - two Go lanes: the Go tools do not depend on each other (each install script takes its own
#   lock, and Go's module and build caches are safe to share), so the control plane and helm
#   build in one lane while the stores and Prometheus build in the other. Two, not four: each
#   build already compiles packages in parallel on every core, and two at a time fill the
#   waits (module downloads, the single-threaded links) without four builds' memory at once.
#   The lanes are balanced on the cold build times of docs/testing.md (about 11 minutes each,
#   one after another);
# - downloads (Spark with the Delta and s3a jars, the image tools, then the Debian bases of
#   both images: network- and apt-bound, and otherwise made by the first image test while the
#   suite waits), sequential since apt-get allows one caller at a time.
# On a warm cache every script only checks and returns: nothing is rebuilt unless its pinned
# version (its folder's name) changed.
set -euo pipefail
cd "$(dirname "$0")"

go_lane_control_plane() { k8s/install.sh && helm/install.sh; }
go_lane_stores() { stores/install.sh && prometheus/install.sh; }
download_lane() {
    spark/install.sh && spark/install_s3a.sh && image/install.sh \
        && image/base.sh operator && image/base.sh spark
}

declare -A failure=(
    [go_lane_control_plane]="a Go build failed (etcd, kube-apiserver, kube-controller-manager, helm or kubeconform)"
    [go_lane_stores]="a Go build or npm install failed (MinIO, fake-gcs-server, Azurite or Prometheus)"
    [download_lane]="Spark, its jars, the image tools or bases failed to install"
)
declare -A pids=()
for lane in go_lane_control_plane go_lane_stores download_lane; do
    "$lane" >/dev/null &
    pids[$lane]=$!
done

failed=0
for lane in "${!pids[@]}"; do
    wait "${pids[$lane]}" || { echo "test-deps: ${failure[$lane]} (its error is above)" >&2; failed=1; }
done
exit "$failed"
