#!/usr/bin/env bash
# Build the chart tools the chart tests use: helm v3 and kubeconform, from their Go modules at
# pinned versions. Idempotent; binaries land outside the clone, in
# ${XDG_CACHE_HOME:-$HOME/.cache}/deltakeeper/<tool>-<version>/, so a second run finds them and
# does nothing (the Go builds through scripts/lib/go_build.sh).
# Prints HELM=PATH and KUBECONFORM=PATH on stdout (progress goes to stderr).
set -euo pipefail

HELM_VERSION="v3.22.0"
KUBECONFORM_VERSION="v0.8.0"

source "$(dirname "$0")/../lib/go_build.sh"
go_build_init helm

# helm's own release build stamps the Kubernetes version it renders for (.Capabilities) from
# its client-go module, v0.MINOR.x = 1.MINOR; without it helm assumes v1.20.
build_helm() {
    local gomod minor stamp pkg
    gomod="$(go mod download -json "helm.sh/helm/v3@$HELM_VERSION" | sed -n 's/.*"GoMod": "\(.*\)".*/\1/p')"
    minor="$(sed -n 's/^[[:space:]]*k8s.io\/client-go v0\.\([0-9]*\)\..*/\1/p' "$gomod")"
    [ -n "$minor" ] || { say "ERROR: cannot read client-go's version from helm's go.mod"; exit 1; }
    stamp="-X helm.sh/helm/v3/internal/version.version=$HELM_VERSION"
    for pkg in pkg/lint/rules pkg/chartutil; do
        stamp="$stamp -X helm.sh/helm/v3/$pkg.k8sVersionMajor=1 -X helm.sh/helm/v3/$pkg.k8sVersionMinor=$minor"
    done
    go_install "$1" -ldflags="-s -w $stamp" "helm.sh/helm/v3/cmd/helm@$HELM_VERSION"
}

go_tool helm "$HELM_VERSION" helm build_helm
go_tool kubeconform "$KUBECONFORM_VERSION" kubeconform go_install \
    -ldflags="-s -w -X main.version=$KUBECONFORM_VERSION" \
    "github.com/yannh/kubeconform/cmd/kubeconform@$KUBECONFORM_VERSION"
