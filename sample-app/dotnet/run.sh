#!/usr/bin/env bash
# Builds the .NET sample app with Debian's mcs (if needed) and runs it on a cached Microsoft
# runtime (fetch-runtimes.sh), without an SDK.
#
# usage: run.sh [--runtime 8|3.1] [--keep-r2r] [--build-only] [--] MODE [mode options]
#   --runtime 8|9|3.1  .NET 8.0.4 (default), .NET 9.0.5 (fetch-net9-nativeaot.sh) or .NET Core
#                    3.1.23 from $NETPROBE_CACHE/dotnet/
#   --keep-r2r       disable tiered compilation so ReadyToRun code is never replaced by tier-1 JIT
#                    code (COMPlus_TieredCompilation=0, read by 3.1 and 8; 8 also reads DOTNET_)
#   --build-only     build and print the path of the .dll, do not run
#   MODE             serve | sleep | strings | echo | fib (run `run.sh -- --help` for options)
#
# Environment it sets: DOTNET_SYSTEM_GLOBALIZATION_INVARIANT=1 (no ICU on this machine).
# Anything else you export (DOTNET_PerfMapEnabled=1, COMPlus_PerfMapEnabled=1, ...) passes through.
# Build output: $NETPROBE_CACHE/sample-app-dotnet/<tfm>/sample-netcore-app.dll (+ runtimeconfig).
set -euo pipefail

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
cache="${NETPROBE_CACHE:-$HOME/.cache/netprobe}"
runtime=8
keep_r2r=0
build_only=0
while [[ $# -gt 0 ]]; do
    case "$1" in
        --runtime) runtime="${2:?--runtime needs 8, 9 or 3.1}"; shift 2 ;;
        --keep-r2r) keep_r2r=1; shift ;;
        --build-only) build_only=1; shift ;;
        -h|--help) sed -n '2,17p' "$0"; exit 0 ;;
        --) shift; break ;;
        *) break ;;
    esac
done

case "$runtime" in
    8) version=8.0.4; tfm=net8.0 ;;
    9) version=9.0.5; tfm=net9.0 ;;
    3.1) version=3.1.23; tfm=netcoreapp3.1 ;;
    *) echo "run.sh: --runtime must be 8, 9 or 3.1" >&2; exit 2 ;;
esac
root="$cache/dotnet/$runtime"
if [[ ! -x "$root/dotnet" ]]; then
    echo "run.sh: no .NET $version in $root; run $here/fetch-runtimes.sh first" >&2
    exit 1
fi
command -v mcs >/dev/null 2>&1 || { echo "run.sh: needs mcs (apt-get install -y mono-mcs)" >&2; exit 1; }

out="$cache/sample-app-dotnet/$tfm"
dll="$out/sample-netcore-app.dll"
mkdir -p "$out"
# Rebuild when any source is newer than the output.
if [[ ! -f "$dll" ]] || [[ -n "$(find "$here/src" -name '*.cs' -newer "$dll")" ]]; then
    # mcs names the assembly after -out's file name, so build under the final name in a
    # temporary folder (the assembly is then `sample-netcore-app`, as in the hand recipe's walkthrough), then move.
    tmp="$(mktemp -d "$out/.build.XXXXXX")"
    mcs -nologo -warnaserror+ -out:"$tmp/sample-netcore-app.dll" "$here"/src/*.cs >&2
    mv "$tmp/sample-netcore-app.dll" "$dll"
    rmdir "$tmp"
fi
cat > "$out/sample-netcore-app.runtimeconfig.json" <<JSON
{"runtimeOptions":{"tfm":"$tfm","framework":{"name":"Microsoft.NETCore.App","version":"$version"}}}
JSON
if [[ $build_only -eq 1 ]]; then
    echo "$dll"
    exit 0
fi
export DOTNET_SYSTEM_GLOBALIZATION_INVARIANT=1
if [[ $keep_r2r -eq 1 ]]; then
    export COMPlus_TieredCompilation=0 DOTNET_TieredCompilation=0
fi
exec "$root/dotnet" "$dll" "$@"
