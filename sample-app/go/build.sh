#!/usr/bin/env bash
# Builds the Go sample app in every variant netprobe must handle, into OUT_DIR (default ./bin).
#
#   sample-app/go/build.sh [OUT_DIR [VARIANT...]]     (default: every variant)
#
# Variants (file names in OUT_DIR):
#   sampleapp-default        internal link, ET_EXEC, with .symtab
#   sampleapp-pie            -buildmode=pie (ET_DYN, internal link)
#   sampleapp-stripped       -ldflags='-s -w' (no .symtab; the pclntab stays)
#   sampleapp-stripped-pie   both
#   sampleapp-extlink        -ldflags=-linkmode=external (cgo off; gcc links)
#   sampleapp-extlink-pie    external link + PIE: no .gopclntab section, the table sits in .data.rel.ro
#
# Uses `go` from PATH (Debian's golang-go), or the toolchain named by GO (a `go` binary; its
# GOROOT is set from it), e.g. GO=~/.cache/netprobe/go-toolchains/1.26.6/go/bin/go from
# scripts/fetch-go-toolchains.sh. The external-link variants need gcc. Writes nothing outside
# OUT_DIR except Go's build cache. Nothing built here belongs in git.
#
# GOARCH=arm64 cross-builds the same variants for linux/arm64 (Go needs nothing more); the
# external-link variants then link with CC (default aarch64-linux-gnu-gcc, Debian's
# gcc-aarch64-linux-gnu).
set -euo pipefail

src_dir=$(cd "$(dirname "$0")" && pwd)
out_dir=${1:-"$src_dir/bin"}
mkdir -p "$out_dir"
out_dir=$(cd "$out_dir" && pwd)

# Offline, reproducible, no module downloads: the app has no dependencies.
export GOFLAGS=-mod=mod GOPROXY=off GOTOOLCHAIN=local GO111MODULE=on
export CGO_ENABLED=0
go=${GO:-go}
if [[ "${GOARCH:-}" == arm64 ]]; then
	export GOOS=linux GOARCH=arm64
	export CC=${CC:-aarch64-linux-gnu-gcc}
fi
if [[ -n "${GO:-}" ]]; then
	GOROOT=$(cd "$(dirname "$GO")/.." && pwd)
	export GOROOT
fi

shift || true
wanted=" $* "
build() {
	local name=$1
	shift
	[[ "$wanted" == "  " || "$wanted" == *" $name "* ]] || return 0
	(cd "$src_dir" && "$go" build -trimpath -o "$out_dir/.$name.tmp" "$@" .)
	mv -f "$out_dir/.$name.tmp" "$out_dir/$name"
}

build sampleapp-default
build sampleapp-pie -buildmode=pie
build sampleapp-stripped -ldflags='-s -w'
build sampleapp-stripped-pie -buildmode=pie -ldflags='-s -w'
# External linking needs cgo's linker driver even without cgo code.
CGO_ENABLED=1 build sampleapp-extlink -ldflags='-linkmode=external'
CGO_ENABLED=1 build sampleapp-extlink-pie -buildmode=pie -ldflags='-linkmode=external'

ls -1 "$out_dir"/sampleapp-*
