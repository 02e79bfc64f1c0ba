#!/usr/bin/env bash
# The project's test command (README, second line; .ci/run calls it): installs every missing
# prerequisite, then builds and runs every check: formatting, clippy, and all tests, end-to-end
# ones included. Run as root on a Debian bookworm x86_64 machine. Under CI=true an end-to-end test
# whose prerequisite is missing fails instead of being skipped.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
cd "$root"
start=$(date +%s)

"$root/scripts/install-prereqs.sh"

echo "== cargo fmt --check"
cargo fmt --all --check
# The fuzz crates (one per crate they test) are not workspace members and have their own lock
# files: check them now, not after the tests.
for fuzz in netprobe-core/fuzz netprobe-cli/fuzz; do
	cargo fmt --manifest-path $fuzz/Cargo.toml --check
	cargo metadata --locked --format-version 1 --manifest-path $fuzz/Cargo.toml >/dev/null
done
echo "== cargo clippy --all-targets -- -D warnings"
cargo clippy --workspace --all-targets --locked -- -D warnings
echo "== the engine without the command line: netprobe-cli --no-default-features (no clap)"
cargo clippy -p netprobe-cli --no-default-features --lib --examples --locked -- -D warnings
echo "== cargo test --workspace"
cargo test --workspace --locked --no-fail-fast

# Coverage-guided fuzzing of every parser (netprobe-core/fuzz and netprobe-cli/fuzz, figures in RELIABILITY.md), the
# short run: NETPROBE_FUZZ_SECONDS per target (here 5 unless set: under 2 minutes for the 20
# targets, plus about 2 minutes to build them the first time, which keeps the whole command under
# 30 minutes); 0 skips it, 600 is the long run.
export NETPROBE_FUZZ_SECONDS=${NETPROBE_FUZZ_SECONDS:-5}
echo "== fuzz: every parser, ${NETPROBE_FUZZ_SECONDS} s per target (scripts/fuzz.sh)"
"$root/scripts/fuzz.sh"

# Nothing of netprobe's may stay registered (DEVELOPERS.md): check the kernel after the run.
tr=/sys/kernel/tracing
[ -e $tr/uprobe_events ] || tr=/sys/kernel/debug/tracing
if grep -E '^[pr]:(netprobe|nptest)' "$tr/uprobe_events"; then
  echo "FAIL: probes of netprobe or its tests are still registered (above)" >&2
  exit 1
fi
if ls "$tr/instances" 2>/dev/null | grep -E '^(netprobe|nptest)'; then
  echo "FAIL: tracefs instances of netprobe or its tests are still there (above)" >&2
  exit 1
fi
echo "scripts/test.sh: all checks passed in $(( $(date +%s) - start ))s"
