#!/usr/bin/env bash
# Per-call cost of a return-observing probe pair, side by side (benchmarks/golive.md):
#   entry probe + one uprobe on the RET instruction   (what netprobe places on Go functions)
#   entry probe + uretprobe                           (what netprobe places on native functions)
# on a C function (fixtures/c/golive_native.c np_tick: `lea eax,[rdi+1]; ret`) and on a Go function
# where a uretprobe does not crash (benchmarks/golive-gospin Tick: `inc rax; ret`, no stack check,
# nothing allocates).
#
# Each run: `netprobe count -c 'TARGET spin SECS' ENTRY RETURN`; the target calls the function as
# fast as it can for SECS seconds once the probes are live and prints how many calls it made.
# Per-call cost = SECS / calls (minus the same without probes). Runs are interleaved (every config
# once per round, REPS rounds); the table shows medians.
#
# Run as root from the workspace root: benchmarks/golive.sh [REPS] [SECS]
set -euo pipefail
REPS=${1:-5}
SECS=${2:-3}
cargo build --release -q -p netprobe-cli
NP=$PWD/target/release/netprobe
W=$(mktemp -d)
trap 'rm -rf "$W"' EXIT
cc -O2 -o "$W/cspin" fixtures/c/golive_native.c
(cd benchmarks/golive-gospin && GOFLAGS=-mod=mod GOPROXY=off GOTOOLCHAIN=local go build -o "$W/gospin" .)
C=$W/cspin
G=$W/gospin

# np_tick's RET: its file offset plus the RET's distance from its start (objdump).
c_entry=$("$NP" symbols --json "$C" np_tick | sed -E 's/.*"file_offset":"(0x[0-9a-f]+)".*/\1/')
c_start=$(objdump -d "$C" | awk '/<np_tick>:/ {print $1; exit}')
c_ret=$(objdump -d "$C" | awk '/<np_tick>:/ {f=1} f && /\tret/ {sub(":", "", $1); print $1; exit}')
c_ret_off=$(printf '0x%x' $((c_entry + 0x$c_ret - 0x$c_start)))
echo "C np_tick: entry file offset $c_entry, RET at file offset $c_ret_off" >&2

# name | command (calls are the target's own count: the line that is only a number)
configs=(
  "C, no probes|$C spin $SECS"
  "C, entry only|$NP count -c '$C spin $SECS' $C:np_tick"
  "C, entry + RET uprobe|$NP count -c '$C spin $SECS' $C:np_tick $C:$c_ret_off"
  "C, entry + uretprobe|$NP count -c '$C spin $SECS' $C:np_tick r:$C:np_tick"
  "Go, no probes|$G $SECS"
  "Go, entry only|$NP count -c '$G $SECS' $G:main.Tick"
  "Go, entry + RET uprobe (netprobe default)|$NP count -c '$G $SECS' $G:main.Tick r:$G:main.Tick"
  "Go, entry + uretprobe (--force-uretprobe)|$NP count --force-uretprobe -c '$G $SECS' $G:main.Tick r:$G:main.Tick"
)
for r in $(seq "$REPS"); do
  for c in "${configs[@]}"; do
    name=${c%%|*}
    cmd=${c#*|}
    out=$(eval "$cmd" 2>"$W/err") || true
    calls=$(grep -E '^[0-9]+$' <<<"$out" | head -1) || true
    if [[ -z $calls ]]; then
      echo "round $r: $name: FAILED, left out: $(tr '\n' ' ' < "$W/err")" >&2
      continue
    fi
    echo "$name|$calls" >> "$W/runs"
    echo "round $r: $name: $calls calls" >&2
  done
done

median() { sort -g | awk '{a[NR]=$1} END {if (NR%2) print a[(NR+1)/2]; else print (a[NR/2]+a[NR/2+1])/2}'; }
ns_per_call() { awk -v s="$SECS" '{printf "%.2f\n", s * 1e9 / $1}'; }
echo
echo "| configuration | calls in ${SECS} s (median of $REPS) | ns per call | probe cost per call (ns) | ratio vs entry + uretprobe |"
echo "| --- | ---: | ---: | ---: | ---: |"
for lang in C Go; do
  base=$(grep "^$lang, no probes|" "$W/runs" | cut -d'|' -f2 | ns_per_call | median)
  uret=$(grep "^$lang, entry + uretprobe" "$W/runs" | cut -d'|' -f2 | ns_per_call | median)
  for c in "${configs[@]}"; do
    name=${c%%|*}
    [[ $name == "$lang, "* ]] || continue
    calls=$(grep -F "$name|" "$W/runs" | cut -d'|' -f2 | median)
    per=$(grep -F "$name|" "$W/runs" | cut -d'|' -f2 | ns_per_call | median)
    cost=$(awk -v p="$per" -v b="$base" 'BEGIN {printf "%.0f", p - b}')
    ratio=$(awk -v p="$per" -v b="$base" -v u="$uret" 'BEGIN {if (p == b) print "-"; else printf "%.2f", (p - b) / (u - b)}')
    # The no-probe row's ns/call is the loop's own cost (1-2 ns); costs are above it.
    echo "| $name | $calls | $per | $cost | $ratio |"
  done
done
echo
echo "raw runs (config|calls):"
cat "$W/runs"
