#!/usr/bin/env bash
# Listing every function of a Go binary: netprobe's pclntab reader (examples/list_go) against the
# tools that list functions from symbol tables, side by side in one hyperfine run per binary.
#
#   benchmarks/golang.sh [OUT_DIR]      # needs go, gcc, hyperfine, binutils, linux-perf, bpftrace
#
# Binaries: the Go sample app (unstripped default variant), Go 1.19's cmd/compile built unstripped
# from the installed sources, and Debian's stripped dockerd (75 MB). Writes hyperfine JSON files
# into OUT_DIR (default: a temporary folder) and prints the summaries.
set -euo pipefail

root=$(cd "$(dirname "$0")/.." && pwd)
out=${1:-$(mktemp -d)}
mkdir -p "$out"
cargo build --release -q -p netprobe-core --example list_go --manifest-path "$root/Cargo.toml"
list_go="$root/target/release/examples/list_go"

"$root/sample-app/go/build.sh" "$out/sample" >/dev/null
(cd "$(go env GOROOT)/src" && GOFLAGS= go build -o "$out/compile-unstripped" cmd/compile)

bench() {
	local name=$1 bin=$2
	shift 2
	hyperfine -N --warmup 3 --min-runs 30 --export-json "$out/$name.json" \
		"$list_go $bin" "$@"
	python3 - "$out/$name.json" <<'PY'
import json, sys
r = json.load(open(sys.argv[1]))["results"]
ours = r[0]["median"]
for x in r:
    print(f'{x["median"]*1000:9.2f} ms  x{x["median"]/ours:6.2f}  {x["command"]}')
PY
}

b="$out/sample/sampleapp-default"
bench sample "$b" "go tool nm $b" "nm $b" "perf probe -F -x $b" "bpftrace -l uprobe:$b:*"
b="$out/compile-unstripped"
bench compile "$b" "go tool nm $b" "nm $b" "perf probe -F -x $b" "bpftrace -l uprobe:$b:*"
b=/usr/sbin/dockerd
bench dockerd "$b" "nm -D $b" "perf probe -F -x $b" "bpftrace -l uprobe:$b:*"
