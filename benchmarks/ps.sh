#!/usr/bin/env bash
# `netprobe ps` on a host with hundreds of processes, beside `ps -e` and `ps -eo pid,comm`
# (dotnet-trace ps needs the .NET SDK, which does not exist for this machine kind).
#
# Starts N (default 300) `sleep` processes, two .NET 8 sample apps (tiering on and off) and two
# Go sample apps, so every kind's code path runs; then hyperfine, then stops what it started.
# usage: benchmarks/ps.sh [N]   (root; release build of netprobe; the .NET runtime and Go app of
# scripts/install-prereqs.sh)
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cache="${NETPROBE_CACHE:-$HOME/.cache/netprobe}"
n="${1:-300}"
np="$here/target/release/netprobe"
[[ -x $np ]] || { echo "ps.sh: build it first: cargo build --release -p netprobe-cli" >&2; exit 1; }

pids=()
cleanup() { kill "${pids[@]}" 2>/dev/null || true; wait 2>/dev/null || true; }
trap cleanup EXIT

for _ in $(seq "$n"); do sleep 600 & pids+=($!); done
app="$cache/sample-app-dotnet/net8.0/sample-netcore-app.dll"
if [[ -f $app ]]; then
    sleep 600 | DOTNET_SYSTEM_GLOBALIZATION_INVARIANT=1 "$cache/dotnet/8/dotnet" "$app" sleep --wait >/dev/null & pids+=($!)
    sleep 600 | DOTNET_SYSTEM_GLOBALIZATION_INVARIANT=1 DOTNET_TieredCompilation=0 "$cache/dotnet/8/dotnet" "$app" sleep --wait >/dev/null & pids+=($!)
fi
gobin="$(ls -d "$here"/target/fixtures-bin/go-sampleapp-*/sampleapp-default 2>/dev/null | head -1 || true)"
if [[ -n $gobin ]]; then
    sleep 600 | "$gobin" workload -n 1 -wait >/dev/null & pids+=($!)
    sleep 600 | "$gobin" workload -n 1 -wait >/dev/null & pids+=($!)
fi
sleep 3 # let the runtimes start
echo "processes: $(ls -d /proc/[0-9]* | wc -l) (netprobe ps lists $("$np" ps --json | wc -l); kinds: $("$np" ps --json | grep -o '"kind":"[a-z]*"' | sort | uniq -c | tr '\n' ' '))"
hyperfine -N --warmup 3 --runs 30 \
    "$np ps" "$np ps --json" "ps -e" "ps -eo pid,comm"
