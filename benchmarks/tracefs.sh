#!/usr/bin/env bash
# Side-by-side measurements for benchmarks/tracefs.md (run as root from the workspace root after
# `cargo build --release -p netprobe-cli`). Needs perf (linux-perf), bpftrace, bpfcc-tools, hyperfine.
set -u
NP=${NP:-$PWD/target/release/netprobe}
W=$(mktemp -d)
cc -O2 -o "$W/tracee" fixtures/c/tracee.c
cc -O2 -o "$W/many" fixtures/c/many.c
T=$W/tracee
SECS=${SECS:-3}
REPS=${REPS:-3}
echo "## throughput: target calls np_tick as fast as it can for ${SECS}s under each tool"
echo "tool | calls made | events delivered | lost | tracer CPU s (tool+target - target)"
for r in $(seq "$REPS"); do
  # netprobe count
  out=$( { /usr/bin/time -f "TIME %U %S" "$NP" count --json -c "$T spin $SECS" "$T:np_tick"; } 2>&1 )
  read -r calls tu ts <<<"$(echo "$out" | grep -E '^[0-9]+ ' | head -1)"
  got=$(echo "$out" | grep -o '"np_tick":[0-9]*' | cut -d: -f2)
  read -r _ u s <<<"$(echo "$out" | grep '^TIME')"
  echo "netprobe count | $calls | $got | $((calls-got)) | $(echo "$u + $s - $tu - $ts" | bc)"
  # netprobe trace (every event printed)
  out=$( { /usr/bin/time -f "TIME %U %S" "$NP" trace --json -c "$T spin $SECS" "$T:np_tick a=s32" > "$W/trace.out"; } 2>&1 )
  calls=$(grep -E '^[0-9]+ ' "$W/trace.out" | cut -d' ' -f1); read -r _ tu ts <<<"$(grep -E '^[0-9]+ ' "$W/trace.out")"
  got=$(grep -c '"event":"entry"' "$W/trace.out")
  read -r _ u s <<<"$(echo "$out" | grep '^TIME')"
  echo "netprobe trace --json | $calls | $got | $((calls-got)) | $(echo "$u + $s - $tu - $ts" | bc)"
  # perf record + perf script
  perf probe -q -x "$T" -a np_tick >/dev/null 2>&1
  grp=$(grep "$T" /sys/kernel/tracing/uprobe_events | head -1 | cut -d: -f2 | cut -d/ -f1)
  out=$( { /usr/bin/time -f "TIME %U %S" perf record -q -o "$W/perf.data" -e "$grp:np_tick" -- "$T" spin "$SECS"; } 2>&1 )
  calls=$(echo "$out" | grep -E '^[0-9]+ ' | cut -d' ' -f1); read -r _ tu ts <<<"$(echo "$out" | grep -E '^[0-9]+ ')"
  read -r _ u s <<<"$(echo "$out" | grep '^TIME')"
  s2=$( { /usr/bin/time -f "TIME %U %S" perf script -i "$W/perf.data" > "$W/perf.txt"; } 2>&1 | grep '^TIME')
  read -r _ u2 st2 <<<"$s2"
  got=$(grep -c np_tick "$W/perf.txt")
  echo "perf record + perf script | $calls | $got | $((calls-got)) | $(echo "$u + $s - $tu - $ts + $u2 + $st2" | bc)"
  perf probe -q -d "$grp:*"
  # bpftrace count
  out=$( { /usr/bin/time -f "TIME %U %S" bpftrace -c "$T spin $SECS" -e "uprobe:$T:np_tick /pid == cpid/ { @n = count(); }"; } 2>&1 )
  calls=$(echo "$out" | grep -E '^[0-9]+ [0-9.]+ ' | cut -d' ' -f1); read -r _ tu ts <<<"$(echo "$out" | grep -E '^[0-9]+ [0-9.]+ ')"
  got=$(echo "$out" | grep '@n:' | awk '{print $2}')
  read -r _ u s <<<"$(echo "$out" | grep '^TIME')"
  echo "bpftrace count() | $calls | $got | $((calls-got)) | $(echo "$u + $s - $tu - $ts" | bc)"
  # funccount-bpfcc (counts every process; target started by hand)
  ( sleep 1.5; "$T" spin "$SECS" > "$W/fc.target" ) &
  out=$( { /usr/bin/time -f "TIME %U %S" timeout -s INT $((SECS + 4)) funccount-bpfcc -d $((SECS + 3)) "$T:np_tick"; } 2>&1 )
  wait
  read -r calls tu ts < "$W/fc.target"
  got=$(echo "$out" | grep -E '^np_tick' | awk '{print $2}')
  read -r _ u s <<<"$(echo "$out" | grep '^TIME')"
  echo "funccount-bpfcc | $calls | $got | $((calls-${got:-0})) | $(echo "$u + $s" | bc) (target not included)"
done
echo
echo "## attach + detach time (hyperfine), functions f5 (1), f1* (111), f* (1001) of fixtures/c/many.c"
for pat in 'f5' 'f1*' 'f*'; do
  hyperfine -N -w 2 -r 10 --export-markdown "$W/h.md" \
    -n "netprobe count (session: instance+attach+enable+teardown)" "$NP count --duration 1ms $W/many:$pat" \
    -n "netprobe probe add + remove" "sh -c '$NP probe add --group nptest_tracefs_bench $W/many:$pat >/dev/null && $NP probe remove --group nptest_tracefs_bench >/dev/null'" \
    -n "perf probe --add + --del" "sh -c 'perf probe -q -x $W/many -a \"$pat\" && perf probe -q -d \"probe_many:*\"'" \
    -n "bpftrace attach + exit" "bpftrace -e 'uprobe:$W/many:$pat { @ = count(); } BEGIN { exit(); }'" >/dev/null 2>&1
  echo "### pattern $pat"; cat "$W/h.md"
done
rm -rf "$W"
