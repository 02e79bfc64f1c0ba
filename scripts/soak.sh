#!/usr/bin/env bash
# The kill soak (netprobe-cli/tests/soak_e2e.rs), long run: trace/count sessions of 1 and 1,000
# probes on a busy self-checking target (fixtures/c/busy.c), each SIGKILLed at a random moment,
# `netprobe clean` at once; fails if anything of a killed session is left after clean, or the
# target dies, stops advancing or computes wrong. As root.
#
#   scripts/soak.sh [KILLS]              # default NETPROBE_SOAK_KILLS or 500 (about 8 minutes)
#   NETPROBE_SOAK_SEED=N scripts/soak.sh # replay a run's random delays (the seed is printed)
#
# The test command runs the same test with 20 kills. The JSON summary (kills per configuration
# and per phase hit, leftovers, slowest clean) is printed and written to
# ${NETPROBE_SOAK_REPORT:-target/soak-report.json}; RELIABILITY.md quotes it.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
cd "$root"
export NETPROBE_SOAK_KILLS=${1:-${NETPROBE_SOAK_KILLS:-500}}
export NETPROBE_SOAK_REPORT=${NETPROBE_SOAK_REPORT:-${CARGO_TARGET_DIR:-$root/target}/soak-report.json}
echo "== kill soak: $NETPROBE_SOAK_KILLS kills (report: $NETPROBE_SOAK_REPORT)"
cargo test --locked -p netprobe-cli --test soak_e2e -- --nocapture
cat "$NETPROBE_SOAK_REPORT"
