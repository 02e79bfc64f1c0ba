#!/usr/bin/env bash
# Listing every function of large real ELF files: netprobe vs nm, readelf, perf probe -F.
# Side by side in one hyperfine run per file; medians of 30 runs; peak RSS median of 5 runs.
# Usage: benchmarks/elf_symbols.sh   (prints a markdown table; needs hyperfine, binutils, linux-perf,
# golang-go and libllvm15, all from Debian)
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
cargo build --release -q -p netprobe-cli --manifest-path "$root/Cargo.toml"
np="$root/target/release/netprobe"
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

llvm=/usr/lib/x86_64-linux-gnu/libLLVM-15.so.1
[ -e "$llvm" ] || apt-get install -y -qq libllvm15 >/dev/null
# An unstripped Go binary: the go command, built from the Go toolchain's own sources.
(cd "$work" && go build -o "$work/gocmd" cmd/go)

median_rss() { # peak RSS in MiB, median of 5 runs
  for _ in 1 2 3 4 5; do /usr/bin/time -f %M "$@" >/dev/null 2>>"$work/rss" || true; done
  sort -n "$work/rss" | sed -n 3p | awk '{printf "%.1f", $1/1024}'; rm -f "$work/rss"
}

bench() { # $1 label, $2 file, then the peer commands
  local label=$1 file=$2; shift 2
  hyperfine -N --warmup 3 --runs 30 --output=null --export-json "$work/h.json" \
    "$np symbols $file" "$@" >/dev/null 2>&1
  local n
  n=$("$np" symbols "$file" | tail -n +2 | wc -l)
  echo
  echo "#### $label: \`$file\` ($(du -m "$file" | cut -f1) MB, $n functions listed by netprobe)"
  echo
  echo "| command | median ms | time ÷ netprobe's | peak RSS MiB |"
  echo "|---|---:|---:|---:|"
  python3 - "$work/h.json" <<'PY' | while IFS=$'\t' read -r cmd ms ratio; do
import json, sys
r = json.load(open(sys.argv[1]))["results"]
base = r[0]["median"]
for x in r:
    print(f'{x["command"]}\t{x["median"]*1000:.1f}\t{x["median"]/base:.2f}x')
PY
    # shellcheck disable=SC2086
    echo "| \`${cmd/$root\/target\/release\//}\` | $ms | $ratio | $(median_rss $cmd) |"
  done
}

echo "Measured $(date -u +%Y-%m-%d) on $(nproc) cores, $(uname -r); hyperfine $(hyperfine --version | cut -d' ' -f2)."
bench "C++ shared library, .dynsym only" "$llvm" \
  "nm -D --defined-only $llvm" "readelf -sW --dyn-syms $llvm" "perf probe -F -x $llvm"
bench "Go binary with .symtab" "$work/gocmd" \
  "nm $work/gocmd" "readelf -sW $work/gocmd" "perf probe -F -x $work/gocmd"
