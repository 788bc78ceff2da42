#!/usr/bin/env bash
# Build the real Kubernetes control plane the e2e tests and the operator benchmark start:
# kube-apiserver, kube-controller-manager (its garbage collector deletes what an owner leaves
# behind) and etcd, from their Go modules at pinned versions. Idempotent; binaries land
# outside the clone, in ${XDG_CACHE_HOME:-$HOME/.cache}/deltakeeper/<tool>-<version>/, so a
# second run or a fresh clone on the same machine finds them and does nothing.
# Prints KUBE_APISERVER=PATH and ETCD=PATH on stdout (progress goes to stderr).
set -euo pipefail

KUBE_VERSION="v1.35.4"
ETCD_VERSION="v3.6.6"

CACHE="${XDG_CACHE_HOME:-$HOME/.cache}/deltakeeper"
export GOMODCACHE="$CACHE/go-mod" GOCACHE="$CACHE/go-build" GOFLAGS="-modcacherw"
export CGO_ENABLED=0 GOTOOLCHAIN=local

say() { echo "k8s: $*" >&2; }
command -v go >/dev/null || { say "ERROR: Go is required (https://go.dev/dl/)"; exit 1; }

mkdir -p "$CACHE"
exec 9>"$CACHE/.k8s-install.lock"
flock 9

# k8s.io/kubernetes replaces its staging modules (k8s.io/api, client-go, ...) with local
# folders at v0.0.0, so `go install ...@version` refuses it; a throwaway module that requires
# it and pins every staging module to the matching v0.x.y release builds it instead.
build_kube() {
    local cmd="$1"
    local out="$CACHE/$cmd-$KUBE_VERSION/$cmd"
    [ -x "$out" ] && { echo "$out"; return; }
    local work="$CACHE/$cmd-$KUBE_VERSION/build"
    local staging="v0.${KUBE_VERSION#v1.}"
    rm -rf "$work" && mkdir -p "$work" && cd "$work"
    say "building $cmd $KUBE_VERSION (cold: several minutes; cached after)"
    go mod init deltakeeper.local/kubebuild >/dev/null 2>&1
    local gomod
    gomod="$(go mod download -json "k8s.io/kubernetes@$KUBE_VERSION" | sed -n 's/.*"GoMod": "\(.*\)".*/\1/p')"
    grep -o 'k8s.io/[a-z0-9-]* => ./staging' "$gomod" | awk '{print $1}' | sort -u | while read -r mod; do
        go mod edit -replace "$mod=$mod@$staging"
    done
    go mod edit -require "k8s.io/kubernetes@$KUBE_VERSION"
    go get "k8s.io/kubernetes/cmd/$cmd@$KUBE_VERSION" >&2
    go build -trimpath -ldflags="-s -w -X k8s.io/component-base/version.gitVersion=$KUBE_VERSION -X k8s.io/client-go/pkg/version.gitVersion=$KUBE_VERSION" \
        -o "$out.tmp" "k8s.io/kubernetes/cmd/$cmd"
    mv "$out.tmp" "$out"
    cd / && rm -rf "$work"
    echo "$out"
}

# etcd's server module also carries replace directives; the same wrapper trick builds it.
build_etcd() {
    local out="$CACHE/etcd-$ETCD_VERSION/etcd"
    [ -x "$out" ] && { echo "$out"; return; }
    local work="$CACHE/etcd-$ETCD_VERSION/build"
    rm -rf "$work" && mkdir -p "$work" && cd "$work"
    say "building etcd $ETCD_VERSION"
    go mod init deltakeeper.local/etcdbuild >/dev/null 2>&1
    go get "go.etcd.io/etcd/server/v3@$ETCD_VERSION" >&2
    go build -trimpath -ldflags="-s -w" -o "$out.tmp" go.etcd.io/etcd/server/v3
    mv "$out.tmp" "$out"
    cd / && rm -rf "$work"
    echo "$out"
}

etcd="$(build_etcd)"
apiserver="$(build_kube kube-apiserver)"
controller_manager="$(build_kube kube-controller-manager)"
echo "ETCD=$etcd"
echo "KUBE_APISERVER=$apiserver"
echo "KUBE_CONTROLLER_MANAGER=$controller_manager"
