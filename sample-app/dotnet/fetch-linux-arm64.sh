#!/usr/bin/env bash
# Fetches the linux-arm64 .NET images netprobe's offline arm64 tests read on any host: real
# Microsoft-built files shipped inside registry packages.
#   npm  @azure/mcp-linux-arm64@2.0.5   package/dist/azmcp: a self-contained single-file .NET app
#        for linux-arm64 (bundle format 6.0, its assemblies stored uncompressed; trimmed, so every
#        assembly is IL only, none ReadyToRun; the registry has no other version of this package)
#        -> $NETPROBE_CACHE/linux-arm64/azmcp-2.0.5/azmcp
#   PyPI pyaniparser==0.6.1 (manylinux_2_17_aarch64 wheel)
#        pyaniparser/lib/Banned.AniParser.Native-linux-arm64.so: a NativeAOT shared library for
#        linux-arm64 -> $NETPROBE_CACHE/linux-arm64/nativeaot/Banned.AniParser.Native-linux-arm64.so
#   Debian libssl3:arm64 (apt-get download, extracted, never installed): the OpenSSL the app's
#        runtime loads at start (System.Security.Cryptography.Native aborts with "No usable
#        version of libssl was found" without one) -> $NETPROBE_CACHE/linux-arm64/libssl3/lib
# Idempotent (--force refetches). Prints one line per item: `<name> <path>`. Needs: npm, pip,
# unzip, apt-get with dpkg's arm64 architecture (scripts/install-prereqs.sh adds it). About 52 MB
# of downloads.
set -euo pipefail

force=0
for arg in "$@"; do
    case "$arg" in
        --force) force=1 ;;
        -h|--help) sed -n '2,17p' "$0"; exit 0 ;;
        *) echo "fetch-linux-arm64.sh: unknown argument '$arg' (try --help)" >&2; exit 2 ;;
    esac
done

cache="${NETPROBE_CACHE:-$HOME/.cache/netprobe}/linux-arm64"
need() { command -v "$1" >/dev/null 2>&1 || { echo "fetch-linux-arm64.sh: needs $1 ($2)" >&2; exit 1; }; }
need npm "apt-get install -y npm"
need unzip "apt-get install -y unzip"
mkdir -p "$cache"

fetch_bundle() {
    local dir="$cache/azmcp-2.0.5"
    if [[ $force -eq 1 || ! -f "$dir/azmcp" ]]; then
        local tmp
        tmp="$(mktemp -d "${TMPDIR:-/tmp}/netprobe-fetch.XXXXXX")"
        # shellcheck disable=SC2064
        trap "rm -rf '$tmp'" RETURN
        (cd "$tmp" && npm pack --silent @azure/mcp-linux-arm64@2.0.5 >/dev/null)
        tar -xzf "$tmp"/azure-mcp-linux-arm64-2.0.5.tgz -C "$tmp" package/dist/azmcp
        [[ -f "$tmp/package/dist/azmcp" ]] || {
            echo "fetch-linux-arm64.sh: @azure/mcp-linux-arm64@2.0.5 has no package/dist/azmcp" >&2; exit 1; }
        rm -rf "$dir" "$dir.partial"
        mkdir -p "$dir.partial"
        install -m 0755 "$tmp/package/dist/azmcp" "$dir.partial/azmcp"
        mv "$dir.partial" "$dir"
    fi
    echo "single-file-arm64 $dir/azmcp"
}

fetch_nativeaot() {
    local dir="$cache/nativeaot" name=Banned.AniParser.Native-linux-arm64.so
    if [[ $force -eq 1 || ! -f "$dir/$name" ]]; then
        local pip_cmd=(python3 -m pip)
        command -v pip3 >/dev/null 2>&1 && pip_cmd=(pip3)
        local tmp
        tmp="$(mktemp -d "${TMPDIR:-/tmp}/netprobe-fetch.XXXXXX")"
        # shellcheck disable=SC2064
        trap "rm -rf '$tmp'" RETURN
        "${pip_cmd[@]}" download --quiet --no-deps --only-binary=:all: \
            --platform manylinux_2_17_aarch64 --python-version 3.11 \
            pyaniparser==0.6.1 -d "$tmp/wheel" >&2
        unzip -q "$tmp"/wheel/*.whl "pyaniparser/lib/$name" -d "$tmp/u"
        mkdir -p "$dir"
        install -m 0644 "$tmp/u/pyaniparser/lib/$name" "$dir/$name.partial"
        mv "$dir/$name.partial" "$dir/$name"
    fi
    echo "nativeaot-arm64 $dir/$name"
}

fetch_libssl() {
    local dir="$cache/libssl3"
    if [[ $force -eq 1 || ! -f "$dir/lib/libssl.so.3" ]]; then
        local tmp
        tmp="$(mktemp -d "${TMPDIR:-/tmp}/netprobe-fetch.XXXXXX")"
        # shellcheck disable=SC2064
        trap "rm -rf '$tmp'" RETURN
        # apt's sandbox user must be able to write where it downloads.
        chmod 0777 "$tmp"
        (cd "$tmp" && apt-get download -q libssl3:arm64 >&2)
        dpkg-deb -x "$tmp"/libssl3_*_arm64.deb "$tmp/root"
        [[ -f "$tmp/root/usr/lib/aarch64-linux-gnu/libssl.so.3" ]] || {
            echo "fetch-linux-arm64.sh: libssl3:arm64 has no usr/lib/aarch64-linux-gnu/libssl.so.3" >&2; exit 1; }
        rm -rf "$dir" "$dir.partial"
        mkdir -p "$dir.partial"
        cp -a "$tmp/root/usr/lib/aarch64-linux-gnu" "$dir.partial/lib"
        mv "$dir.partial" "$dir"
    fi
    echo "libssl3-arm64 $dir/lib"
}

fetch_bundle
fetch_nativeaot
fetch_libssl
