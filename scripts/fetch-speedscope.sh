#!/usr/bin/env bash
# Fetches speedscope (https://github.com/jlfwong/speedscope), the web flame graph viewer, from the
# npm registry: the profile tests load netprobe's `profile --pprof` file into its importer in
# headless Chromium (netprobe-cli/tests/profile_pprof/trials.rs).
#
#   scripts/fetch-speedscope.sh     # into ${NETPROBE_CACHE:-~/.cache/netprobe}/speedscope-1.25.0
#
# The package ships the built viewer (dist/release/index.html and its bundles), which runs from
# file:// with no server. Needs npm. Idempotent: a release already in place is kept.
set -euo pipefail

version=1.25.0
cache=${NETPROBE_CACHE:-"$HOME/.cache/netprobe"}
dest="$cache/speedscope-$version"
[[ -f "$dest/dist/release/index.html" ]] && { echo "$dest"; exit 0; }
mkdir -p "$cache"
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
(cd "$tmp" && npm pack --silent "speedscope@$version" >/dev/null 2>&1)
tar -xzf "$tmp"/speedscope-*.tgz -C "$tmp"
rm -rf "$dest.tmp"
mv "$tmp/package" "$dest.tmp"
mv "$dest.tmp" "$dest"
echo "$dest"
