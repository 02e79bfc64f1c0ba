#!/usr/bin/env bash
# Fetches real, stripped third-party Go binaries, one per pclntab layout, for netprobe's Go tests:
# esbuild's Linux x86-64 builds from the npm registry (the package ships the binary).
#
#   scripts/fetch-go-binaries.sh            # into ${NETPROBE_CACHE:-~/.cache/netprobe}/go-binaries
#
#   esbuild-0.7.22   go1.15    pclntab 1.2 layout,  stack ABI, TLS g
#   esbuild-0.8.57   go1.16    pclntab 1.16 layout, stack ABI
#   esbuild-0.13.15  go1.17.2  pclntab 1.16 layout, register ABI
#   esbuild-0.17.19  go1.20.4  pclntab 1.20 layout
#   esbuild-0.28.2   go1.26.5  pclntab 1.20 layout, header textStart zero (text start from the
#                              module data); no .go.buildinfo (the version is the runtime's
#                              `go1.26.5` string)
#
# Needs npm. Idempotent: a binary already in place is kept.
set -euo pipefail

cache=${NETPROBE_CACHE:-"$HOME/.cache/netprobe"}
dest="$cache/go-binaries"
mkdir -p "$dest"

fetch() {
	local package=$1 version=$2 name=$3
	[[ -x "$dest/$name" ]] && return 0
	local tmp
	tmp=$(mktemp -d)
	(cd "$tmp" && npm pack --silent "$package@$version" >/dev/null 2>&1)
	tar -xzf "$tmp"/*.tgz -C "$tmp"
	install -m 0755 "$tmp/package/bin/esbuild" "$dest/.$name.tmp"
	mv -f "$dest/.$name.tmp" "$dest/$name"
	rm -rf "$tmp"
}

fetch esbuild-linux-64 0.7.22 esbuild-0.7.22
fetch esbuild-linux-64 0.8.57 esbuild-0.8.57
fetch esbuild-linux-64 0.13.15 esbuild-0.13.15
fetch @esbuild/linux-x64 0.17.19 esbuild-0.17.19
fetch @esbuild/linux-x64 0.28.2 esbuild-0.28.2

ls -1 "$dest"
