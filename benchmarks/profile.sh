#!/usr/bin/env bash
# `netprobe profile` vs the hand-run perf pipeline it replaces (run from a Docker sidecar with
# `docker run --pid=container:ID --privileged`: `perf record -F HZ -g -p PID -- sleep 10`,
# `perf script`, inferno-collapse-perf, inferno-flamegraph) on the same 10 s workloads:
#   - the stripped Go sample app (sample-app/go) serving CPU-bound GET /spin?n=10000000 to two
#     client threads, at 99 Hz and 999 Hz;
#   - fixtures/c/profile_target.c (75% hot(), 25% warm(), -O1 -fno-omit-frame-pointer), 99 Hz.
# Per tool: wall time from start to the finished flame graph SVG (10 s of sampling included),
# CPU time of the tool (user+sys of every process of its pipeline), the Go target's requests
# during the 10 s against 10 s without a profiler (slowdown), and the share of frames the folded
# stacks leave unnamed (netprobe: `[unknown] (...)`; perf/inferno: `[unknown]` or `[module]`).
# perf records kernel frames too (the pipeline's `-g`), netprobe user frames only; perf reads
# detached debug symbols (/usr/lib/debug, e.g. libc6-dbg), netprobe's symbolizer does not.
# Usage: benchmarks/profile.sh   (root; linux-perf, golang-go, gcc, python3 from Debian;
# inferno-collapse-perf and inferno-flamegraph from `cargo install inferno --root
# ${NETPROBE_CACHE:-~/.cache/netprobe}/inferno`)
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
cargo build --release -q -p netprobe-cli --manifest-path "$root/Cargo.toml"
np="$root/target/release/netprobe"
inferno="${NETPROBE_CACHE:-$HOME/.cache/netprobe}/inferno/bin"
for t in perf "$inferno/inferno-collapse-perf" "$inferno/inferno-flamegraph"; do
  command -v "$t" >/dev/null || { echo "missing $t (see the usage line)" >&2; exit 1; }
done
work=$(mktemp -d)
pids=()
cleanup() { for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done; rm -rf "$work"; }
trap cleanup EXIT

bash "$root/sample-app/go/build.sh" "$work/go" sampleapp-stripped >/dev/null
cc -O1 -fno-omit-frame-pointer -fno-optimize-sibling-calls -pthread \
  -o "$work/profile_target" "$root/fixtures/c/profile_target.c"

# Two client threads requesting /spin for $2 seconds; prints the requests completed.
load() {
  python3 - "$1" "$2" <<'PY'
import sys, threading, time, urllib.request
port, secs = int(sys.argv[1]), float(sys.argv[2])
end, done = time.time() + secs, [0, 0]
def client(i):
    while time.time() < end:
        urllib.request.urlopen(f"http://127.0.0.1:{port}/spin?n=10000000").read()
        done[i] += 1
ts = [threading.Thread(target=client, args=(i,)) for i in range(2)]
[t.start() for t in ts]; [t.join() for t in ts]
print(sum(done))
PY
}

# Unknown frames / all frames (weighted by count) of a folded file, as a percentage (perf's
# folded counts are cpu-clock periods, a constant per sample, so the ratio is per sample too).
unknown_pct() {
  awk '{ n = $NF; sub(/ [0-9]+$/, ""); k = split($0, f, ";");
         for (i = 1; i <= k; i++) { all += n; if (f[i] ~ /^\[/) unk += n } }
       END { if (all) printf "%.1f%%", 100 * unk / all; else print "-" }' "$1"
}

# $1 label, $2 pid, $3 frequency; sets the row variables.
run_netprobe() {
  /usr/bin/time -f '%e %U %S' -o "$work/np.time" \
    "$np" profile -p "$2" --duration 10s -F "$3" --folded "$work/np.folded" --svg "$work/np.svg" >/dev/null 2>"$work/np.err"
  read -r wall user sys <"$work/np.time"
  np_row="| netprobe profile | $wall s | $(echo "$user + $sys" | bc) s | $(unknown_pct "$work/np.folded")"
}

run_perf() {
  /usr/bin/time -f '%e %U %S' -o "$work/rec.time" \
    perf record -q -F "$3" -g -p "$2" -o "$work/perf.data" -- sleep 10 2>/dev/null
  /usr/bin/time -f '%e %U %S' -o "$work/post.time" bash -c \
    "perf script -i '$work/perf.data' 2>/dev/null | '$inferno/inferno-collapse-perf' >'$work/perf.folded' && '$inferno/inferno-flamegraph' <'$work/perf.folded' >'$work/perf.svg'"
  read -r w1 u1 s1 <"$work/rec.time"
  read -r w2 u2 s2 <"$work/post.time"
  perf_row="| perf record -g + perf script + inferno | $(echo "$w1 + $w2" | bc) s | $(echo "$u1 + $s1 + $u2 + $s2" | bc) s | $(unknown_pct "$work/perf.folded")"
}

port=18123
"$work/go/sampleapp-stripped" serve -addr "127.0.0.1:$port" >/dev/null &
app=$!; pids+=("$app")
for _ in $(seq 50); do curl -fs "http://127.0.0.1:$port/echo?msg=up" >/dev/null && break; sleep 0.1; done

for hz in 99 999; do
  base=$(load $port 10)
  load $port 10 >"$work/np.req" & lp=$!
  run_netprobe go "$app" $hz; wait $lp
  load $port 10 >"$work/perf.req" & lp=$!
  run_perf go "$app" $hz; wait $lp
  echo
  echo "#### Stripped Go sample app, /spin requests, $hz Hz ($base requests in 10 s without a profiler)"
  echo
  echo "| pipeline | wall time to the SVG | CPU time | unknown frames | target's requests in 10 s |"
  echo "|---|---|---|---|---|"
  echo "$np_row | $(cat "$work/np.req") |"
  echo "$perf_row | $(cat "$work/perf.req") |"
done

"$work/profile_target" 25 >/dev/null & c=$!; pids+=("$c")
sleep 0.5
run_netprobe c "$c" 99
run_perf c "$c" 99
echo
echo "#### C program (75% hot, 25% warm), 99 Hz"
echo
echo "| pipeline | wall time to the SVG | CPU time | unknown frames | hot share |"
echo "|---|---|---|---|---|"
share() { awk '{ n = $NF; all += n; if ($0 ~ /;hot [0-9]+$/) h += n } END { printf "%.1f%%", 100 * h / all }' "$1"; }
echo "$np_row | $(share "$work/np.folded") |"
echo "$perf_row | $(share "$work/perf.folded") |"
