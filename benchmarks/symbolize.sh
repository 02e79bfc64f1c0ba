#!/usr/bin/env bash
# Symbolizing recorded frames with netprobe's symbolizer (netprobe-core/examples/symbolize.rs,
# reading file offsets on stdin, one image index built per file):
# 1. the user frames of a `perf record -g` of the stripped Go sample app, vs `perf script` on the
#    same recording (perf names none of them: the binary has no symbol table);
# 2. 100,000 addresses inside functions (`nm -S`, fixed seed) of the Go sample app and libc, vs
#    binutils `addr2line -f` and `llvm-symbolizer` (names and inline chains from DWARF).
# Side by side in one hyperfine run per image; medians of 10 runs; peak RSS median of 5 runs.
# Usage: benchmarks/symbolize.sh   (prints markdown tables; needs root for perf record, hyperfine,
# binutils, llvm-14 (llvm-symbolizer), linux-perf, golang-go, all from Debian)
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
cargo build --release -q -p netprobe-core --example symbolize --manifest-path "$root/Cargo.toml"
sym="$root/target/release/examples/symbolize"
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
N=${N:-100000}

# The Go sample app, with symbols and DWARF and stripped (sample-app/go/build.sh).
bash "$root/sample-app/go/build.sh" "$work/go" sampleapp-default sampleapp-stripped >/dev/null

# $1 file with symbols: writes $work/vaddrs (hex, for the peers) and $work/offsets (file
# offsets by the PT_LOAD headers, for netprobe): N addresses inside its sized functions.
sample() {
  nm -S --defined-only "$1" 2>/dev/null | awk '$3 ~ /^[Tt]$/' >"$work/nm" || true
  [ -s "$work/nm" ] || nm -D -S --defined-only "$1" | awk '$3 ~ /^[TtiW]$/' >"$work/nm"
  readelf -lW "$1" | awk '$1=="LOAD"{print $2, $3, $5}' >"$work/loads"
  python3 - "$work" "$N" <<'PY'
import random, sys
work, n = sys.argv[1], int(sys.argv[2])
funcs = [(int(f[0], 16), int(f[1], 16)) for f in (l.split() for l in open(f"{work}/nm")) if int(f[1], 16) > 0]
loads = [tuple(int(x, 16) for x in l.split()) for l in open(f"{work}/loads")]
rnd = random.Random(13)
with open(f"{work}/vaddrs", "w") as va, open(f"{work}/offsets", "w") as of:
    for _ in range(n):
        start, size = rnd.choice(funcs)
        v = start + rnd.randrange(size)
        off = next(v - lv + lo for lo, lv, sz in loads if lv <= v < lv + sz)
        va.write(f"{v:#x}\n")
        of.write(f"{off:#x}\n")
PY
}

median_rss() { # peak RSS in MiB, median of 5 runs; $1 input file, then the command
  local input=$1; shift
  for _ in 1 2 3 4 5; do /usr/bin/time -f %M "$@" <"$input" >/dev/null 2>>"$work/rss" || true; done
  grep -E '^[0-9]+$' "$work/rss" | sort -n | sed -n 3p | awk '{printf "%.1f", $1/1024}'; rm -f "$work/rss"
}

# $1 label, $2 file netprobe reads, $3 file the peers read
bench() {
  local label=$1 ours=$2 theirs=$3
  sample "$theirs"
  cp "$work/vaddrs" "$work/in.vaddrs"; cp "$work/offsets" "$work/in.offsets"
  local cmds=(
    "$sym --quiet file $ours"
    "addr2line -f -e $theirs"
    "llvm-symbolizer --obj=$theirs"
  )
  hyperfine --warmup 1 --runs 10 --output=null --export-json "$work/h.json" \
    "${cmds[0]} < $work/in.offsets" "${cmds[1]} < $work/in.vaddrs" "${cmds[2]} < $work/in.vaddrs" >/dev/null 2>&1
  echo
  echo "#### $label: netprobe reads \`$(basename "$ours")\`, the peers \`$(basename "$theirs")\` ($N frames)"
  echo
  echo "| command | median ms | time ÷ netprobe's | frames/s | peak RSS MiB |"
  echo "|---|---:|---:|---:|---:|"
  local i=0
  python3 - "$work/h.json" "$N" <<'PY' | while IFS=$'\t' read -r ms ratio rate; do
import json, sys
r = json.load(open(sys.argv[1]))["results"]
base = r[0]["median"]
for x in r:
    print(f'{x["median"]*1000:.1f}\t{x["median"]/base:.2f}x\t{int(sys.argv[2]) / x["median"]:,.0f}')
PY
    local input="$work/in.vaddrs"
    [ $i = 0 ] && input="$work/in.offsets"
    # shellcheck disable=SC2086
    local shown=${cmds[$i]//$root\/target\/release\/examples\//}
    shown=${shown//$work\/go\//}
    echo "| \`$shown < $(basename "$input")\` | $ms | $ratio | $rate | $(median_rss "$input" ${cmds[$i]}) |"
    i=$((i + 1))
  done
}

# 1. A recording: ~100k user frames of the stripped Go binary (Recurse(64) gives deep stacks).
recorded() {
  local app=$work/go/sampleapp-stripped
  perf record -q -F 999 -g -o "$work/go.data" "$app" workload -n "${ROUNDS:-85000}" >/dev/null 2>&1
  perf script -i "$work/go.data" -F ip,sym,dso 2>/dev/null >"$work/perf.txt"
  # perf prints an unnamed user frame as its address in the mapped file: the file offset.
  grep -F "($app)" "$work/perf.txt" | awk '{print "0x"$1}' >"$work/rec.offsets"
  local frames named ours
  frames=$(wc -l <"$work/rec.offsets")
  named=$(grep -F "($app)" "$work/perf.txt" | grep -vc '\[unknown\]' || true)
  ours=$("$sym" file "$app" <"$work/rec.offsets" 2>/dev/null | grep -vc '\[unknown\]' || true)
  hyperfine --warmup 1 --runs 10 --output=null --export-json "$work/h.json" \
    "$sym --quiet file $app < $work/rec.offsets" \
    "perf script -i $work/go.data -F ip,sym,dso" >/dev/null 2>&1
  echo
  echo "#### perf record -g of the stripped Go sample app: $frames frames in the app's code"
  echo
  echo "| command | median ms | time ÷ netprobe's | frames named | peak RSS MiB |"
  echo "|---|---:|---:|---:|---:|"
  python3 - "$work/h.json" <<'PY' >"$work/rows"
import json, sys
r = json.load(open(sys.argv[1]))["results"]
base = r[0]["median"]
for x in r:
    print(f'{x["median"]*1000:.1f}\t{x["median"]/base:.2f}x')
PY
  { read -r ms1 r1; read -r ms2 r2; } <"$work/rows"
  echo "| \`symbolize --quiet file sampleapp-stripped < rec.offsets\` | $ms1 | $r1 | $ours of $frames | $(median_rss "$work/rec.offsets" "$sym" --quiet file "$app") |"
  echo "| \`perf script -F ip,sym,dso\` (all $(grep -c . "$work/perf.txt") frames of the recording, kernel included) | $ms2 | $r2 | $named of $frames | $(median_rss /dev/null perf script -i "$work/go.data" -F ip,sym,dso) |"
}

echo "Measured $(date -u +%Y-%m-%d) on $(nproc) cores, $(uname -r); hyperfine $(hyperfine --version | cut -d' ' -f2), $(addr2line --version | head -1), $(llvm-symbolizer --version | grep -i version | head -1 | xargs)."
recorded
bench "Go sample app (stripped for netprobe: pclntab with inline trees)" "$work/go/sampleapp-stripped" "$work/go/sampleapp-default"
bench "Go sample app, the same file for all" "$work/go/sampleapp-default" "$work/go/sampleapp-default"
bench "libc (.dynsym only)" /lib/x86_64-linux-gnu/libc.so.6 /lib/x86_64-linux-gnu/libc.so.6
