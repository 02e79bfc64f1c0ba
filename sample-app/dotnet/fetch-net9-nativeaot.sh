#!/usr/bin/env bash
# Fetches the .NET 9 runtime and the .NET 10 NativeAOT library netprobe tests against: real
# Microsoft builds shipped inside registry packages (no SDK exists for this machine kind).
#   npm  @azure/mcp-linux-x64@0.5.0  a .NET 9.0.5 self-contained app, loose files under
#        package/dist/ (apphost `azmcp`, libcoreclr.so, libhostfxr.so, the R2R framework)
#        -> $NETPROBE_CACHE/azmcp-0.5.0/          (`azmcp --version` runs)
#        -> $NETPROBE_CACHE/dotnet/9/              a runtime root built from those files:
#           shared/Microsoft.NETCore.App/9.0.5/ (the files azmcp.deps.json lists for the
#           runtime pack, hard-linked), host/fxr/9.0.5/libhostfxr.so, and the `dotnet` muxer of
#           the .NET 8 root (the muxer only finds host/fxr/<highest>/ and hands over to it), so
#           framework-dependent apps (the sample app) run on 9.0.5 like on 8.0.4
#   PyPI excelreader-native==7.3.0   excelreader/_lib/ExcelReader.Native.so, a .NET 10 NativeAOT
#        shared library -> $NETPROBE_CACHE/nativeaot/ExcelReader.Native.so
# Run after fetch-runtimes.sh (the .NET 8 root gives the muxer). Idempotent (--force refetches).
# Prints one line per item: `<name> <path>`. Needs: npm, pip, unzip, python3.
set -euo pipefail

force=0
for arg in "$@"; do
    case "$arg" in
        --force) force=1 ;;
        -h|--help) sed -n '2,17p' "$0"; exit 0 ;;
        *) echo "fetch-net9-nativeaot.sh: unknown argument '$arg' (try --help)" >&2; exit 2 ;;
    esac
done

cache="${NETPROBE_CACHE:-$HOME/.cache/netprobe}"
need() { command -v "$1" >/dev/null 2>&1 || { echo "fetch-net9-nativeaot.sh: needs $1 ($2)" >&2; exit 1; }; }
need npm "apt-get install -y npm"
need unzip "apt-get install -y unzip"
need python3 "apt-get install -y python3"
mkdir -p "$cache"

# --- .NET 9.0.5 self-contained app (azmcp) and a runtime root made of its files -------------
fetch_net9() {
    local dist="$cache/azmcp-0.5.0" root="$cache/dotnet/9" version=9.0.5
    local fw="$root/shared/Microsoft.NETCore.App/$version"
    if [[ $force -eq 1 || ! -x "$dist/azmcp" || ! -f "$dist/System.Private.CoreLib.dll" ]]; then
        local tmp
        tmp="$(mktemp -d "${TMPDIR:-/tmp}/netprobe-fetch.XXXXXX")"
        # shellcheck disable=SC2064
        trap "rm -rf '$tmp'" RETURN
        (cd "$tmp" && npm pack --silent @azure/mcp-linux-x64@0.5.0 >/dev/null)
        tar -xzf "$tmp"/azure-mcp-linux-x64-0.5.0.tgz -C "$tmp"
        [[ -f "$tmp/package/dist/azmcp" && -f "$tmp/package/dist/libcoreclr.so" ]] || {
            echo "fetch-net9-nativeaot.sh: @azure/mcp-linux-x64@0.5.0 has no package/dist/azmcp + libcoreclr.so" >&2; exit 1; }
        chmod -R go-w "$tmp/package/dist"
        chmod +x "$tmp/package/dist/azmcp" "$tmp"/package/dist/*.so
        rm -rf "$dist" "$root"
        mv "$tmp/package/dist" "$dist"
    fi
    echo "azmcp $dist/azmcp"
    if [[ $force -eq 0 && -x "$root/dotnet" && -f "$fw/System.Private.CoreLib.dll" ]]; then
        echo "9 $root $version"
        return
    fi
    [[ -x "$cache/dotnet/8/dotnet" ]] || {
        echo "fetch-net9-nativeaot.sh: needs the .NET 8 root's muxer; run fetch-runtimes.sh first" >&2; exit 1; }
    rm -rf "$root" "$root.partial"
    mkdir -p "$root.partial/shared/Microsoft.NETCore.App/$version" "$root.partial/host/fxr/$version"
    # The runtime pack's files, as the app's deps.json lists them (runtime assemblies + native),
    # and the framework's own Microsoft.NETCore.App.deps.json made from that entry: the .NET 9
    # hostfxr ignores a framework folder without one ("No frameworks were found").
    python3 - "$dist/azmcp.deps.json" "$root.partial/shared/Microsoft.NETCore.App/$version" <<'PY' > "$root.partial/files"
import json, sys
deps = json.load(open(sys.argv[1]))
for tfm, target in deps["targets"].items():
    for name, lib in target.items():
        if name.startswith("runtimepack.Microsoft.NETCore.App.Runtime."):
            pack = name[len("runtimepack."):]
            fw = {"runtimeTarget": {"name": tfm, "signature": ""}, "compilationOptions": {},
                  "targets": {tfm.split("/")[0]: {}, tfm: {pack: {
                      k: lib[k] for k in ("runtime", "native") if k in lib}}},
                  "libraries": {pack: {"type": "package", "serviceable": False, "sha512": ""}}}
            json.dump(fw, open(sys.argv[2] + "/Microsoft.NETCore.App.deps.json", "w"), indent=2)
            for kind in ("runtime", "native"):
                for f in lib.get(kind, {}):
                    print(f.rsplit("/", 1)[-1])
PY
    [[ -s "$root.partial/files" ]] || { echo "fetch-net9-nativeaot.sh: no runtime pack in azmcp.deps.json" >&2; exit 1; }
    while read -r f; do
        [[ -f "$dist/$f" ]] || continue
        ln "$dist/$f" "$root.partial/shared/Microsoft.NETCore.App/$version/$f" 2>/dev/null ||
            cp "$dist/$f" "$root.partial/shared/Microsoft.NETCore.App/$version/$f"
    done < "$root.partial/files"
    rm "$root.partial/files"
    # libhostfxr/libhostpolicy belong to the host, not the framework folder.
    mv "$root.partial/shared/Microsoft.NETCore.App/$version/libhostfxr.so" "$root.partial/host/fxr/$version/"
    cp "$cache/dotnet/8/dotnet" "$root.partial/dotnet"
    mv "$root.partial" "$root"
    echo "9 $root $version"
}

# --- .NET 10 NativeAOT shared library (excelreader-native) ----------------------------------
fetch_nativeaot() {
    local dir="$cache/nativeaot" so="$cache/nativeaot/ExcelReader.Native.so"
    if [[ $force -eq 0 && -f "$so" ]]; then
        echo "nativeaot $so"
        return
    fi
    local pip_cmd=(python3 -m pip)
    command -v pip3 >/dev/null 2>&1 && pip_cmd=(pip3)
    local tmp
    tmp="$(mktemp -d "${TMPDIR:-/tmp}/netprobe-fetch.XXXXXX")"
    # shellcheck disable=SC2064
    trap "rm -rf '$tmp'" RETURN
    "${pip_cmd[@]}" download --quiet --no-deps --only-binary=:all: excelreader-native==7.3.0 -d "$tmp/wheel" >&2
    unzip -q "$tmp"/wheel/*.whl 'excelreader/_lib/ExcelReader.Native.so' -d "$tmp/u"
    mkdir -p "$dir"
    chmod 755 "$tmp/u/excelreader/_lib/ExcelReader.Native.so"
    mv "$tmp/u/excelreader/_lib/ExcelReader.Native.so" "$so"
    echo "nativeaot $so"
}

fetch_net9
fetch_nativeaot
