#!/usr/bin/env bash
# A hit filtered out in the kernel (--filter) vs a hit delivered, at ~100k calls/s.
#
#   benchmarks/filter.sh [ROUNDS] [SECONDS]     # as root; default 3 rounds of 5 s per case
#
# The target (fixtures/c/filtered.c `rate 100000 SECONDS`) calls np_rate(i % 10) 100,000 times a
# second; np_rate starts with a NOP, so a probe hit costs the target ~1 us, not a single-step.
# `netprobe count -c TARGET 'TARGET:np_rate s32'` runs it under four cases: no probe at all, no
# filter (every hit delivered), --filter 'arg0 > 4' (half delivered), --filter 'arg0 > 100'
# (none delivered). Per case, medians over the rounds of: the target's calls, the calls netprobe
# counted, the events the session's ring buffers took (`entries` + `read events` of the
# instance's per_cpu/cpuN/stats, sampled every 50 ms while it runs; the target waits 0.5 s after its
# last call, so the last sample has them all), netprobe's CPU (user +
# system from its /proc/PID/stat, last sample before it exits: start-up and the run), and the
# target's system CPU (where the kernel charges the probe hit and the filter test).
set -euo pipefail
rounds=${1:-3}
secs=${2:-5}
rate=100000
root=$(cd "$(dirname "$0")/.." && pwd)
cargo build --release -q -p netprobe-cli --manifest-path "$root/Cargo.toml"
np="$root/target/release/netprobe"
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
cc -O2 -pthread -o "$work/filtered" "$root/fixtures/c/filtered.c"
target="$work/filtered"
tracefs=/sys/kernel/tracing
pidns=$(readlink /proc/self/ns/pid | tr -dc 0-9)
hz=$(getconf CLK_TCK)

# One run: prints "calls counted buffered np_cpu target_sys".
run() { # $1: "none" (no netprobe) or the netprobe filter args
  if [ "$1" = none ]; then
    read -r _ calls _ _ _ sys < <("$target" rate $rate "$secs")
    echo "$calls 0 0 0 $sys"
    return
  fi
  local args=()
  [ -n "$1" ] && args=(--filter "$1")
  "$np" count --json -c "$target rate $rate $secs" "$target:np_rate s32" "${args[@]}" \
    >"$work/out" 2>"$work/err" &
  local pid=$! buffered=0 n cpu=0
  local inst="$tracefs/instances/netprobe_${pidns}_$pid"
  while kill -0 "$pid" 2>/dev/null; do
    if [ -d "$inst/per_cpu" ]; then
      n=$(cat "$inst"/per_cpu/cpu*/stats 2>/dev/null |
        awk -F: '$1=="entries"||$1=="read events"{s+=$2} END{print s+0}' || true)
      [ "$n" -gt "$buffered" ] && buffered=$n
      # utime + stime (fields 14, 15 of /proc/PID/stat), kept while the process is there.
      cpu=$(awk -v hz="$hz" '{printf "%.3f", ($14+$15)/hz}' "/proc/$pid/stat" 2>/dev/null || echo "$cpu")
    fi
    sleep 0.05
  done
  wait "$pid" || { cat "$work/err" >&2; exit 1; }
  local calls sys counted
  read -r _ calls _ _ _ sys < <(grep '^calls ' "$work/out")
  counted=$(grep '^{' "$work/out" | python3 -c 'import json,sys; print(sum(json.loads(l)["counts"].get("np_rate",0) for l in sys.stdin))')
  echo "$calls $counted $buffered $cpu $sys"
}

median() { sort -g | awk '{a[NR]=$1} END{print a[int((NR+1)/2)]}'; }

echo "Measured $(date -u +%Y-%m-%d) on $(nproc) cores, $(uname -r); $rounds rounds of $secs s per case, medians."
echo
echo "| case | target calls | counted | events in the ring buffer | netprobe CPU s | target system CPU s |"
echo "|---|---:|---:|---:|---:|---:|"
for case in none "" "arg0 > 4" "arg0 > 100"; do
  : >"$work/rows"
  for _ in $(seq "$rounds"); do run "$case" >>"$work/rows"; done
  col() { awk -v c="$1" '{print $c}' "$work/rows" | median; }
  case "$case" in
    none) label="target alone (no probe)" ;;
    "") label="count, no filter (every hit delivered)" ;;
    *) label="count --filter '$case'" ;;
  esac
  printf '| %s | %s | %s | %s | %s | %s |\n' "$label" "$(col 1)" "$(col 2)" "$(col 3)" "$(col 4)" "$(col 5)"
done
