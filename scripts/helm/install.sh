#!/usr/bin/env bash
# Build the chart tools the chart tests use: helm v3 and kubeconform, from their Go modules at
# pinned versions. Idempotent; binaries land outside the clone, in
# ${XDG_CACHE_HOME:-$HOME/.cache}/deltakeeper/<tool>-<version>/, so a second run finds them and
# does nothing. Prints HELM=PATH and KUBECONFORM=PATH on stdout (progress goes to stderr).
set -euo pipefail

HELM_VERSION="v3.22.0"
KUBECONFORM_VERSION="v0.8.0"

CACHE="${XDG_CACHE_HOME:-$HOME/.cache}/deltakeeper"
export GOMODCACHE="$CACHE/go-mod" GOCACHE="$CACHE/go-build" GOFLAGS="-modcacherw"
export CGO_ENABLED=0 GOTOOLCHAIN=local

say() { echo "helm: $*" >&2; }
command -v go >/dev/null || { say "ERROR: Go is required (https://go.dev/dl/)"; exit 1; }

mkdir -p "$CACHE"
exec 9>"$CACHE/.helm-install.lock"
flock 9

# build NAME VERSION PACKAGE [LDFLAGS]: `go install PACKAGE@VERSION` into the tool's folder.
build() {
    local name="$1" version="$2" package="$3" ldflags="${4:-}"
    local dir="$CACHE/$name-$version"
    [ -x "$dir/$name" ] && { echo "$dir/$name"; return; }
    say "building $name $version (cold: a few minutes; cached after)"
    mkdir -p "$dir/bin.tmp"
    GOBIN="$dir/bin.tmp" go install -trimpath -ldflags="-s -w $ldflags" "$package@$version" >&2
    mv "$dir/bin.tmp/$name" "$dir/$name"
    rmdir "$dir/bin.tmp"
    echo "$dir/$name"
}

# helm's own release build stamps the Kubernetes version it renders for (.Capabilities) from
# its client-go module, v0.MINOR.x = 1.MINOR; without it helm assumes v1.20.
helm_kube_minor() {
    local gomod
    gomod="$(go mod download -json "helm.sh/helm/v3@$HELM_VERSION" | sed -n 's/.*"GoMod": "\(.*\)".*/\1/p')"
    sed -n 's/^[[:space:]]*k8s.io\/client-go v0\.\([0-9]*\)\..*/\1/p' "$gomod"
}
if [ ! -x "$CACHE/helm-$HELM_VERSION/helm" ]; then
    minor="$(helm_kube_minor)"
    [ -n "$minor" ] || { say "ERROR: cannot read client-go's version from helm's go.mod"; exit 1; }
    stamp="-X helm.sh/helm/v3/internal/version.version=$HELM_VERSION"
    for pkg in pkg/lint/rules pkg/chartutil; do
        stamp="$stamp -X helm.sh/helm/v3/$pkg.k8sVersionMajor=1 -X helm.sh/helm/v3/$pkg.k8sVersionMinor=$minor"
    done
fi
helm="$(build helm "$HELM_VERSION" helm.sh/helm/v3/cmd/helm "${stamp:-}")"
kubeconform="$(build kubeconform "$KUBECONFORM_VERSION" \
    github.com/yannh/kubeconform/cmd/kubeconform "-X main.version=$KUBECONFORM_VERSION")"
echo "HELM=$helm"
echo "KUBECONFORM=$kubeconform"
