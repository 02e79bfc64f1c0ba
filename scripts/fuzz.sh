#!/usr/bin/env bash
# Coverage-guided fuzzing of netprobe's parsers (one libFuzzer target per parser, kept with the
# crate it tests: netprobe-core/fuzz for the core's, netprobe-cli/fuzz for the CLI engine's
# grammars and the tracefs and perf_event parsers) on the stable toolchain: builds the targets, builds the big seeds
# (scripts/fuzz-seeds.sh), runs each target for SECONDS and prints a table of executions,
# coverage and crashes per target. Exits non-zero when any target crashed (the input that did
# is kept under TARGET_DIR/fuzz/artifacts/<target>/).
#
#   scripts/fuzz.sh [SECONDS_PER_TARGET] [TARGET...]     # default 10 s, every target
#   NETPROBE_FUZZ_SECONDS=600 scripts/fuzz.sh             # a long run, by time
#   NETPROBE_FUZZ_RUNS=1000000 scripts/fuzz.sh [SECONDS_PER_TARGET] [TARGET...]
#                                                          # the long campaign (RELIABILITY.md)
#   scripts/fuzz.sh --list                                 # the target names
#
# NETPROBE_FUZZ_RUNS=N runs each target until it has executed N inputs (libFuzzer's -runs=N);
# SECONDS_PER_TARGET, when given with it, caps each target's time, and a target the cap stops
# short gets a note with its rate and the time N inputs would take. The table's exec/s is
# executions over the measured time of each target's run.
#
# The targets that read whole Go binaries (go_binary, go_pclntab, symbolize_index) are seeded
# with few-KB synthetic images (scripts/go-seed-images.py). NETPROBE_FUZZ_REAL_GO=1 adds the
# real Go programs (megabytes each; a few hundred inputs a second instead of thousands).
#
# Stable rustc has no `-Zsanitizer`; the SanitizerCoverage instrumentation libFuzzer feeds on is
# LLVM's `sancov-module` pass, which `-Cpasses` runs and `-Cllvm-args` configures (LLVM's
# SanitizerCoverage.cpp options: inline 8-bit counters, the PC table, comparison tracing), and
# `--cfg fuzzing` is what cargo-fuzz sets. libfuzzer-sys compiles libFuzzer itself with the C++
# compiler (g++). The RUSTFLAGS apply to the target triple only (`--target`), so build scripts
# and proc macros stay uninstrumented. Debug assertions and overflow checks are on.
#
# Corpora grow across runs in TARGET_DIR/fuzz/corpus/<target> (never in git); the seeds are the
# committed <crate>/fuzz/seeds/<target>, fixtures/recorded/, the built ones, and every input that
# once crashed a target (<crate>/fuzz/regressions/<target>/, which <crate>/tests/fuzz_regressions.rs
# replays in the test suite).
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
crates=("$root/netprobe-core/fuzz" "$root/netprobe-cli/fuzz")
# The targets of a fuzz crate: its [[bin]] names.
crate_targets() { sed -n '/^\[\[bin\]\]$/,/^$/s/^name = "\(.*\)"$/\1/p' "$1/Cargo.toml"; }
# The fuzz crate that holds target $1.
crate_of() {
	local c
	for c in "${crates[@]}"; do
		crate_targets "$c" | grep -qx "$1" && echo "$c" && return
	done
	echo "fuzz: no target named $1 (scripts/fuzz.sh --list)" >&2
	return 1
}
targets_all=$(for c in "${crates[@]}"; do crate_targets "$c"; done)
if [[ ${1:-} == --list ]]; then
	echo "$targets_all"
	exit 0
fi
runs=${NETPROBE_FUZZ_RUNS:-}
if [[ -n $runs && ! $runs =~ ^[1-9][0-9]*$ ]]; then
	echo "fuzz: NETPROBE_FUZZ_RUNS=$runs is not a positive number of executions per target" >&2
	exit 2
fi
# By runs, time is no limit unless given (libFuzzer's -max_total_time=0).
seconds=${NETPROBE_FUZZ_SECONDS:-${runs:+0}}
seconds=${seconds:-10}
if [[ ${1:-} =~ ^[0-9]+$ ]]; then
	seconds=$1
	shift
fi
targets=${*:-$targets_all}
for t in $targets; do crate_of "$t" >/dev/null || exit 2; done
if [[ $seconds -eq 0 && -z $runs ]]; then
	echo "== fuzz: skipped (NETPROBE_FUZZ_SECONDS=0)"
	exit 0
fi

# libfuzzer-sys compiles libFuzzer (C++) with the cc crate.
if ! command -v "${CXX:-c++}" >/dev/null; then
	echo "fuzz: no C++ compiler (${CXX:-c++}) to build libFuzzer with: apt-get install g++" >&2
	exit 1
fi
tdir="${CARGO_TARGET_DIR:-$root/target}/fuzz"
triple=$(rustc -vV | sed -n 's/^host: //p')
export RUSTFLAGS="-Cpasses=sancov-module -Cllvm-args=-sanitizer-coverage-level=4 \
-Cllvm-args=-sanitizer-coverage-inline-8bit-counters -Cllvm-args=-sanitizer-coverage-pc-table \
-Cllvm-args=-sanitizer-coverage-trace-compares --cfg fuzzing -Cdebug-assertions -Coverflow-checks"
echo "== fuzz: building $(wc -w <<<"$targets") targets (libfuzzer-sys, sancov via -Cpasses; $(rustc --version))"
for c in "${crates[@]}"; do
	bins=()
	for t in $targets; do
		[[ $(crate_of "$t") == "$c" ]] && bins+=(--bin "$t")
	done
	[[ ${#bins[@]} -eq 0 ]] && continue
	(cd "$c" && cargo build --release --locked --target "$triple" --target-dir "$tdir" "${bins[@]}")
done
"$root/scripts/fuzz-seeds.sh" "$tdir/seeds" 2>"$tdir/seeds.log" || {
	cat "$tdir/seeds.log" >&2
	exit 1
}

# Recorded inputs the tests already use, per target.
recorded() {
	case $1 in
	maps) echo "$root/fixtures/recorded/maps" ;;
	perfmap) echo "$root/fixtures/recorded/mapfiles" ;;
	perfinfo) echo "$root/fixtures/recorded/perfinfo" ;;
	esac
}

# Where a target that needs its input as a file (symbolize_index) writes it, once per input: in
# memory (tmpfs) when there is one, since rewriting a file on a disk filesystem waits for the
# disk (ext4 truncating a file discards its blocks): 250 inputs a second instead of 8,000.
if [[ -d /dev/shm && -w /dev/shm ]]; then
	scratch_root=$(mktemp -d /dev/shm/netprobe-fuzz.XXXXXX)
else
	scratch_root="$tdir/scratch"
fi
trap 'rm -rf "$scratch_root"' EXIT

printf '\n%-16s %8s %12s %10s %14s %8s\n' target seconds executions exec/s "cov (start>end)" crashes
failed=0
notes=()
for t in $targets; do
	corpus="$tdir/corpus/$t"
	artifacts="$tdir/artifacts/$t"
	mkdir -p "$corpus" "$artifacts"
	seeds=()
	real=
	[[ ${NETPROBE_FUZZ_REAL_GO:-} == 1 ]] && real="$tdir/seeds/real/$t"
	crate=$(crate_of "$t")
	for d in "$crate/seeds/$t" "$crate/regressions/$t" "$tdir/seeds/$t" $real $(recorded "$t"); do
		[[ -d $d ]] && seeds+=("$d")
	done
	# Never shorter than the biggest seed (libFuzzer's default cap of 1 MiB would cut the Go
	# tables of the real binaries short, and a cut table is only an error path). Inputs of the
	# corpus longer than that (grown from real Go programs by an earlier run) are cut to it when
	# libFuzzer loads them, rather than slowing every run down.
	max_len=$(find "${seeds[@]}" -type f -printf '%s\n' | sort -n | tail -1)
	max_len=$((${max_len:-0} > 4096 ? max_len : 4096))
	log="$tdir/logs/$t.log"
	mkdir -p "$(dirname "$log")"
	scratch="$scratch_root/$t"
	mkdir -p "$scratch"
	before=$(find "$artifacts" -type f | wc -l)
	status=0
	started=$(date +%s%N)
	NETPROBE_FUZZ_SCRATCH="$scratch" "$tdir/$triple/release/$t" "$corpus" "${seeds[@]}" -max_total_time="$seconds" \
		${runs:+-runs="$runs"} -max_len="$max_len" -timeout=10 \
		-rss_limit_mb=2048 -print_final_stats=1 -artifact_prefix="$artifacts/" >"$log" 2>&1 || status=$?
	took_ms=$((($(date +%s%N) - started) / 1000000))
	rm -rf "$scratch"
	after=$(find "$artifacts" -type f | wc -l)
	execs=$(sed -n 's/^stat::number_of_executed_units: *//p' "$log" | tail -1)
	cov_start=$(grep -m1 -E 'INITED cov:' "$log" | sed -E 's/.*cov: ([0-9]+).*/\1/' || true)
	cov_end=$(grep -E '^#[0-9]+.*cov:' "$log" | tail -1 | sed -E 's/.*cov: ([0-9]+).*/\1/' || true)
	crashes=$((after - before))
	if [[ $status -ne 0 ]]; then
		crashes=$((crashes > 0 ? crashes : 1))
		failed=1
		echo "fuzz: $t crashed (exit $status); input under $artifacts/, log $log:" >&2
		grep -E -m5 'panicked|ERROR|SUMMARY' "$log" >&2 || tail -5 "$log" >&2
	fi
	execs=${execs:-0}
	rate=$((execs * 1000 / (took_ms > 0 ? took_ms : 1)))
	printf '%-16s %8s %12s %10s %14s %8s\n' "$t" "$((took_ms / 1000))" "$execs" "$rate" \
		"${cov_start:-?}>${cov_end:-?}" "$crashes"
	if [[ -n $runs && $status -eq 0 && $execs -lt $runs ]]; then
		minutes=$((runs / (rate > 0 ? rate : 1) / 60))
		notes+=("$t: the ${seconds} s cap stopped it at $execs of $runs executions ($rate/s): $runs take about $minutes min")
	fi
done
for n in "${notes[@]}"; do echo "fuzz: $n"; done
exit $failed
