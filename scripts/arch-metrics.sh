#!/usr/bin/env bash
# The figures of ARCHITECTURE.md's "Measured" section, reproducible:
#   1. source files over 700 lines (netprobe-core/src, netprobe-cli/src);
#   2. import circles between files (netprobe-cli/tests/layers.rs, NETPROBE_LAYERS_REPORT);
#   3. for two walks, the netprobe source files whose functions run: gdb (not netprobe) stops once at
#      every function of netprobe's debug binary from netprobe_cli/netprobe_core, the walk runs, and
#      addr2line maps each function reached to its source file (debug build: nothing inlined, so a
#      file that ran code shows up); at each stop gdb also records the thread and the call stack,
#      from which scripts/arch-metrics-calls.py counts entries into files, returns to a file
#      already left and calls that run back up a layer (the layers of tests/layers.rs);
#   4. (if the `duplicates` tool is installed) pairs of places sharing six or more lines.
# Needs root, gdb, binutils (addr2line, nm), the .NET 8 runtime and sample app
# (sample-app/dotnet/fetch-runtimes.sh, run.sh) and the Go sample (Go toolchain).
#
# usage: scripts/arch-metrics.sh            (prints a Markdown fragment)
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$root"
cache="${NETPROBE_CACHE:-$HOME/.cache/netprobe}"
work="$(mktemp -d /tmp/arch-metrics.XXXXXX)"
pids=()
cleanup() { for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done; [[ -n "${KEEP_WORK:-}" ]] || rm -rf "$work"; }
trap cleanup EXIT

echo "### Files over 700 lines"
echo
find netprobe-core/src netprobe-cli/src -name '*.rs' -print0 | xargs -0 wc -l | grep -v ' total$' |
    awk '$1 > 700 { printf "- `%s`: %d\n", $2, $1 }' | sort -t: -k2 -rn
echo
echo "### Test files over 700 lines"
echo
# Test files: the crates' tests/ folders and the test-support crates (fixtures, harness).
find netprobe-core/tests netprobe-cli/tests fixtures harness -name '*.rs' -print0 | xargs -0 wc -l | grep -v ' total$' |
    awk '$1 > 700 { printf "- `%s`: %d\n", $2, $1 }' | sort -t: -k2 -rn
echo

echo "### Import circles between files"
echo
NETPROBE_LAYERS_REPORT="$work/layers.txt" cargo test -q -p netprobe-cli --test layers \
    each_module_names_only_what_its_layer_may_see > /dev/null 2>&1 || true
sed '/^layer\t/,$d' "$work/layers.txt" | sed 's/^/    /'
echo

cargo build -q -p netprobe-cli --bin netprobe
# A copy: a rebuild while the walks run must not move the functions under the breakpoints.
cp "${CARGO_TARGET_DIR:-$root/target}/debug/netprobe" "$work/netprobe"
bin="$work/netprobe"

# Every function of the two crates (and generic code instantiated with their types; addr2line
# keeps only those whose source is in the crates).
nm --defined-only "$bin" | awk '$2 ~ /^[tT]$/ && $3 ~ /netprobe_(cli|core)/ { print $1 }' > "$work/funcs"

walk() { # walk NAME COMMAND...: runs COMMAND, prints the files it ran code in
    local name="$1"; shift
    # gdb (not netprobe) stops once at each function's first instruction: a temporary breakpoint
    # per function, so the walk costs one stop per function reached, not one per call.
    WALK_FUNCS="$work/funcs" WALK_OUT="$work/$name.names" WALK_CALLS="$work/$name.calls" \
        gdb -q -batch -x "$root/scripts/arch-metrics-walk.py" --args "$@" > "$work/$name.out" 2>&1 || true
    sed 's/^/0x/' "$work/$name.names" | addr2line -e "$bin" | sed 's/:.*//' |
        { grep -E '/netprobe-(cli|core)/src/' || true; } |
        sed -E 's#.*/(netprobe-(cli|core)/src/)#\1#' | sort -u > "$work/$name.files"
    echo "#### $name"
    echo
    echo "\`$*\` (the walk's target, then the command): $(wc -l < "$work/$name.files") source files, $(wc -l < "$work/$name.names") functions."
    echo
    echo '<details><summary>files</summary>'
    echo
    sed 's/^/- /' "$work/$name.files"
    echo
    echo '</details>'
    echo
    python3 "$root/scripts/arch-metrics-calls.py" "$bin" "$work/$name.calls" "$work/layers.txt"
    echo
}

echo "### Source files a request runs code in"
echo
# Walk 1: a .NET 8 process sleeping in a loop; trace Thread::Sleep for 2 s.
sample-app/dotnet/run.sh --build-only > /dev/null
DOTNET_SYSTEM_GLOBALIZATION_INVARIANT=1 "$cache/dotnet/8/dotnet" "$cache/sample-app-dotnet/net8.0/sample-netcore-app.dll" sleep --ms 200 --count 100000 > /dev/null &
pids+=($!)
sleep 2
walk dotnet "$bin" trace -p "${pids[0]}" 'System.Threading.Thread::Sleep' --duration 2s
# Walk 2: the Go sample app (stripped) serving requests; trace main.Echo with its argument for 2 s.
sample-app/go/build.sh "$work/go" sampleapp-stripped > /dev/null
"$work/go/sampleapp-stripped" serve -addr 127.0.0.1:18431 > /dev/null 2>&1 &
pids+=($!)
( while sleep 0.1; do curl -s 'http://127.0.0.1:18431/echo?msg=hi' > /dev/null || true; done ) &
pids+=($!)
sleep 1
walk go "$bin" trace -p "${pids[1]}" 'main.Echo' --duration 2s

if command -v duplicates > /dev/null; then
    echo "### Duplicated blocks (six or more lines)"
    echo
    echo '```'
    duplicates --most 200 --seconds 120 | head -3
    echo '```'
fi
