#!/usr/bin/env bash
# Per-hit cost of the entry probe points netprobe picks, before (--exact-entry: the function's
# first instruction, after Go's stack check) and after (the cheapest equivalent instruction,
# netprobe's default), on the C and Go benchmark targets (BENCHMARKS.md, "Cheaper entry hits"):
#   C  fixtures/c/golive_native.c np_tick   lea eax,[rdi+1]; ret     (nothing to move to: kept)
#   C  fixtures/c/probepoint.c    pp_sum    mov rax,rdi; push rbx ... (moves to the push)
#   Go benchmarks/golive-gospin   main.Tick inc rax; ret             (kept)
#   Go fixtures/go/probepoint     main.Fib  xor ecx,ecx; mov edx,1; xor ebx,ebx; jmp ... (moves to the jmp)
#   .NET 8 sample app `spin`      System.String::Replace(string,string) in CoreLib (ReadyToRun):
#                                 push rbp; mov rbp,rsp ... (already emulated: kept; tiering off so
#                                 the precompiled code stays the one that runs)
#
# Each run: `netprobe count [--exact-entry] -c 'TARGET spin SECS' FUNCTION`; the target calls the
# function as fast as it can for SECS seconds once the probe is live and prints its call count
# (the .NET app prints `done calls=N`).
# Per-hit cost = SECS / calls minus the same without probes. Runs are interleaved (every config
# once per round, REPS rounds); the table shows medians. The probe point each row used is the
# one `--dry-run` names (printed before the runs).
#
# Run as root from the workspace root: benchmarks/probepoint.sh [REPS] [SECS]
# (NP=path/to/netprobe uses that binary instead of building the release one.)
set -euo pipefail
REPS=${1:-5}
SECS=${2:-2}
if [[ -z ${NP:-} ]]; then
  cargo build --release -q -p netprobe-cli
  NP=$PWD/target/release/netprobe
fi
W=$(mktemp -d)
trap 'rm -rf "$W"' EXIT
cc -O2 -o "$W/cspin" fixtures/c/golive_native.c
cc -O2 -o "$W/cpp" fixtures/c/probepoint.c
export GOFLAGS=-mod=mod GOPROXY=off GOTOOLCHAIN=local CGO_ENABLED=0
(cd benchmarks/golive-gospin && go build -o "$W/gospin" .)
(cd fixtures/go/probepoint && go build -o "$W/gopp" .)
CACHE=${NETPROBE_CACHE:-$HOME/.cache/netprobe}
# Tiering off for every run (only the .NET target reads it): with it on, the runtime replaces
# the precompiled String.Replace by JIT code after 30 calls, and the probe stops counting.
export DOTNET_TieredCompilation=0
DOTNET_SPIN="$CACHE/dotnet/8/dotnet $CACHE/sample-app-dotnet/net8.0/sample-netcore-app.dll spin --ms $((SECS * 1000))"

# name | target command | probe
targets=(
  "C np_tick|$W/cspin spin $SECS|$W/cspin:np_tick"
  "C pp_sum|$W/cpp spin $SECS|$W/cpp:pp_sum"
  "Go main.Tick|$W/gospin $SECS|$W/gospin:main.Tick"
  "Go main.Fib|$W/gopp spin $SECS|$W/gopp:main.Fib"
  ".NET String::Replace|$DOTNET_SPIN|System.String::Replace(string,string)"
)
for t in "${targets[@]}"; do
  IFS='|' read -r name cmd probe <<<"$t"
  for flag in --exact-entry ""; do
    where=$("$NP" count --dry-run $flag -c "$cmd" "$probe" 2>/dev/null | grep -m1 '^perf probe -x' | sed -E "s/.*=([^ ']+).*/\1/")
    note=$("$NP" count --dry-run $flag -c "$cmd" "$probe" 2>/dev/null | grep -m1 '^perf probe -x' | sed -nE 's/.*  # (.*)/\1/p')
    echo "$name ${flag:-default}: probe at $where${note:+ ($note)}" >&2
  done
done

for r in $(seq "$REPS"); do
  for t in "${targets[@]}"; do
    IFS='|' read -r name cmd probe <<<"$t"
    for cfg in "no probe" "--exact-entry" "default"; do
      case $cfg in
        "no probe") run=$cmd ;;
        "--exact-entry") run="$NP count --exact-entry -c '$cmd' '$probe'" ;;
        default) run="$NP count -c '$cmd' '$probe'" ;;
      esac
      out=$(eval "$run" 2>"$W/err") || true
      calls=$(grep -oE '^[0-9]+$|^done calls=[0-9]+$' <<<"$out" | head -1 | sed 's/^done calls=//') || true
      if [[ -z $calls ]]; then
        echo "round $r: $name $cfg: FAILED, left out: $(tr '\n' ' ' < "$W/err")" >&2
        continue
      fi
      echo "$name|$cfg|$calls" >> "$W/runs"
      echo "round $r: $name $cfg: $calls calls" >&2
    done
  done
done

median() { sort -g | awk '{a[NR]=$1} END {if (NR%2) print a[(NR+1)/2]; else print (a[NR/2]+a[NR/2+1])/2}'; }
ns_per_call() { awk -v s="$SECS" '{printf "%.2f\n", s * 1e9 / $1}'; }
cost() { grep -F "$1|$2|" "$W/runs" | cut -d'|' -f3 | ns_per_call | median; }
echo
echo "| function | before: --exact-entry (µs/hit) | after: netprobe's default (µs/hit) | ratio |"
echo "| --- | ---: | ---: | ---: |"
for t in "${targets[@]}"; do
  IFS='|' read -r name _ _ <<<"$t"
  base=$(cost "$name" "no probe")
  before=$(cost "$name" "--exact-entry")
  after=$(cost "$name" "default")
  awk -v n="$name" -v b="$base" -v x="$before" -v y="$after" \
    'BEGIN {printf "| %s | %.2f | %.2f | %.1fx |\n", n, (x - b) / 1000, (y - b) / 1000, (x - b) / (y - b)}'
done
echo
echo "raw runs (function|config|calls):"
cat "$W/runs"
