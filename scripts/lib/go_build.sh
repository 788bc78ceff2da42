# Sourced by the install scripts that build Go tools from their modules at pinned versions
# (stores, k8s, helm, prometheus). Each tool lands outside the clone, in
#   ${XDG_CACHE_HOME:-$HOME/.cache}/deltakeeper/<tool>-<version>/
# where a second run, or a fresh clone on the same machine, finds it and builds nothing. A build
# goes to a scratch path that is moved into place last, so the binaries' presence is the stamp
# and an interrupted build leaves none.

# go_build_init NAME: log as "NAME: ...", keep Go's module and build caches in the cache, and
# take NAME's lock: parallel test workers or two clones wait, then find the tools built.
go_build_init() {
    INSTALLER="$1"
    CACHE="${XDG_CACHE_HOME:-$HOME/.cache}/deltakeeper"
    # -modcacherw leaves the module downloads deletable; GOTOOLCHAIN=local builds with the Go
    # that is here instead of downloading another.
    export GOMODCACHE="$CACHE/go-mod" GOCACHE="$CACHE/go-build"
    export GOFLAGS="-modcacherw -buildvcs=false" CGO_ENABLED=0 GOTOOLCHAIN=local
    mkdir -p "$CACHE"
    exec 9>"$CACHE/.$INSTALLER-install.lock"
    flock 9
}

say() { echo "$INSTALLER: $*" >&2; }

# need COMMAND WHY: stop with an error unless COMMAND is on the PATH.
need() { command -v "$1" >/dev/null || { say "ERROR: $1 is required ($2)"; exit 1; }; }

# go_tool TOOL VERSION "BIN..." BUILD [ARG...]: the tool's folder DIR is <cache>/TOOL-VERSION;
# unless every DIR/BIN is an executable already, run BUILD DIR ARG... (Go is needed only then).
# Prints KEY=DIR/BIN for each BIN, KEY its file name in capitals with - as _: the lines the
# tests and scripts read.
go_tool() {
    local tool="$1" version="$2" bins="$3" build="$4"
    shift 4
    local dir="$CACHE/$tool-$version" bin built=1
    for bin in $bins; do [ -x "$dir/$bin" ] || built=0; done
    if [ "$built" = 1 ]; then
        say "$tool $version cached"
    else
        need go "to build $tool: https://go.dev/dl/"
        say "building $tool $version with $(go env GOVERSION) (first time only; cached after)"
        local start=$SECONDS
        "$build" "$dir" "$@"
        say "$tool $version built in $((SECONDS - start))s"
    fi
    for bin in $bins; do echo "$(basename "$bin" | tr 'a-z-' 'A-Z_')=$dir/$bin"; done
}

# go_install DIR ARG...: `go install -trimpath ARG...` (flags, then PACKAGE@VERSION...) into
# DIR.tmp, which then replaces DIR.
go_install() {
    local dir="$1"
    shift
    rm -rf "$dir.tmp" && mkdir -p "$dir.tmp"
    GOBIN="$dir.tmp" go install -trimpath "$@" >&2
    rm -rf "$dir" && mv "$dir.tmp" "$dir"
}

# go_build OUT ARG...: `go build -trimpath ARG...` (flags, then a package of the module in the
# current folder) into OUT.tmp, which then becomes OUT.
go_build() {
    local out="$1"
    shift
    go build -trimpath -o "$out.tmp" "$@" >&2
    mv "$out.tmp" "$out"
}
