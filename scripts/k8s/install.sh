#!/usr/bin/env bash
# Build the real Kubernetes control plane the e2e tests and the operator benchmark start:
# kube-apiserver, kube-controller-manager (its garbage collector deletes what an owner leaves
# behind) and etcd, from their Go modules at pinned versions. Idempotent; binaries land
# outside the clone, in ${XDG_CACHE_HOME:-$HOME/.cache}/deltakeeper/<tool>-<version>/, so a
# second run or a fresh clone on the same machine finds them and does nothing (the Go builds
# through scripts/lib/go_build.sh).
# Prints ETCD=PATH, KUBE_APISERVER=PATH and KUBE_CONTROLLER_MANAGER=PATH on stdout (progress
# goes to stderr).
set -euo pipefail

KUBE_VERSION="v1.35.4"
ETCD_VERSION="v3.6.6"

source "$(dirname "$0")/../lib/go_build.sh"
go_build_init k8s

# wrapper_module DIR NAME: an empty module deltakeeper.local/NAME in DIR (made anew), as the
# current folder; the callers run it in a subshell and remove DIR after.
wrapper_module() {
    rm -rf "$1" && mkdir -p "$1" && cd "$1"
    go mod init "deltakeeper.local/$2" >/dev/null 2>&1
}

# k8s.io/kubernetes replaces its staging modules (k8s.io/api, client-go, ...) with local
# folders at v0.0.0, so `go install ...@version` refuses it; a throwaway module that requires
# it and pins every staging module to the matching v0.x.y release builds it instead.
build_kube() {
    local dir="$1" cmd="$2"
    (
        wrapper_module "$dir/build" kubebuild
        local gomod staging="v0.${KUBE_VERSION#v1.}"
        gomod="$(go mod download -json "k8s.io/kubernetes@$KUBE_VERSION" | sed -n 's/.*"GoMod": "\(.*\)".*/\1/p')"
        grep -o 'k8s.io/[a-z0-9-]* => ./staging' "$gomod" | awk '{print $1}' | sort -u | while read -r mod; do
            go mod edit -replace "$mod=$mod@$staging"
        done
        go mod edit -require "k8s.io/kubernetes@$KUBE_VERSION"
        go get "k8s.io/kubernetes/cmd/$cmd@$KUBE_VERSION" >&2
        go_build "$dir/$cmd" -ldflags="-s -w -X k8s.io/component-base/version.gitVersion=$KUBE_VERSION -X k8s.io/client-go/pkg/version.gitVersion=$KUBE_VERSION" \
            "k8s.io/kubernetes/cmd/$cmd"
    )
    rm -rf "$dir/build"
}

# etcd's server module also carries replace directives; the same wrapper trick builds it.
build_etcd() {
    local dir="$1"
    (
        wrapper_module "$dir/build" etcdbuild
        go get "go.etcd.io/etcd/server/v3@$ETCD_VERSION" >&2
        go_build "$dir/etcd" -ldflags="-s -w" go.etcd.io/etcd/server/v3
    )
    rm -rf "$dir/build"
}

go_tool etcd "$ETCD_VERSION" etcd build_etcd
go_tool kube-apiserver "$KUBE_VERSION" kube-apiserver build_kube kube-apiserver
go_tool kube-controller-manager "$KUBE_VERSION" kube-controller-manager \
    build_kube kube-controller-manager
