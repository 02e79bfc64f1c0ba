#!/usr/bin/env bash
# The metrics soak (netprobe-cli/tests/metrics_soak_e2e.rs), long run: `latency --metrics` on a
# target making a steady 10,000 calls a second (fixtures/c/paced.c), scraped every second by a
# real Prometheus (Debian's `prometheus`); fails unless Prometheus's counts equal the calls made
# (no lost event), the counter never went down, and netprobe's RSS stays flat after a warm-up.
# As root.
#
#   scripts/soak-metrics.sh [SECONDS]     # default NETPROBE_METRICS_SOAK_SECS or 600 (10 minutes)
#   NETPROBE_METRICS_SOAK_RATE=20000 scripts/soak-metrics.sh   # calls a second (multiple of 1000)
#
# The test command runs the same test for 20 s. The JSON figures (calls, counts, scrapes, RSS
# first / after warm-up / max / last) are printed and written to
# ${NETPROBE_METRICS_SOAK_REPORT:-target/soak-metrics-report.json}; RELIABILITY.md quotes them.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
cd "$root"
export NETPROBE_METRICS_SOAK_SECS=${1:-${NETPROBE_METRICS_SOAK_SECS:-600}}
export NETPROBE_METRICS_SOAK_RATE=${NETPROBE_METRICS_SOAK_RATE:-10000}
export NETPROBE_METRICS_SOAK_REPORT=${NETPROBE_METRICS_SOAK_REPORT:-${CARGO_TARGET_DIR:-$root/target}/soak-metrics-report.json}
echo "== metrics soak: ${NETPROBE_METRICS_SOAK_SECS}s at ${NETPROBE_METRICS_SOAK_RATE} calls/s (report: $NETPROBE_METRICS_SOAK_REPORT)"
cargo test --locked -p netprobe-cli --test metrics_soak_e2e -- --nocapture
cat "$NETPROBE_METRICS_SOAK_REPORT"
