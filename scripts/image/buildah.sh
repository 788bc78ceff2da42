#!/usr/bin/env bash
# buildah with the project's image store: vfs (no overlay or fuse needed) under
# ${XDG_CACHE_HOME:-$HOME/.cache}/deltakeeper/buildah, so bases and builds survive between
# runs. Every script and test calls buildah through this file; it is the one place for that.
set -euo pipefail
STORE="${DELTAKEEPER_BUILDAH_STORE:-${XDG_CACHE_HOME:-$HOME/.cache}/deltakeeper/buildah}"
exec buildah --storage-driver vfs --root "$STORE/root" --runroot "$STORE/run" "$@"
