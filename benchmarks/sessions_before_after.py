#!/usr/bin/env python3
"""Two netprobe binaries side by side, interleaved: 10,000 probes live/detach, and count's CPU at
the kernel's max hit rate.

Usage (root, from the workspace root, after `cargo build --release -p netprobe-cli`):

    python3 benchmarks/sessions_before_after.py BEFORE_NETPROBE [RUNS]   # default 3 runs

- 10k: `netprobe count` on every function of fixtures/c/many10k.c (`f*0` ... `f*9`): seconds until
  it says its probes are on, seconds from SIGINT to exit, peak RSS (benchmarks/attach.py's way).
- fast: `/usr/bin/time netprobe count --json -c 'tracee fast 1500000' tracee:fast_tick` (two
  threads, 3M hits on a NOP-entry function); netprobe's CPU = user + sys of the whole command minus
  the target's own (it prints them); the count and lost figures are checked (3M and 0).
"""
import os
import re
import statistics
import subprocess
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import attach  # noqa: E402


def main():
    before = sys.argv[1]
    runs = int(sys.argv[2]) if len(sys.argv) > 2 else 3
    bins = {"before": before, "after": attach.NP}
    work = tempfile.mkdtemp()
    many = attach.build(work, "many10k")
    tracee = attach.build(work, "tracee")
    pats = [f"{many}:{p}" for p in attach.DIGITS]
    live = {k: [] for k in bins}
    cpu = {k: [] for k in bins}
    for _ in range(runs):
        for k, b in bins.items():
            live[k].append(attach.live_then_stop([b, "count"] + pats, "probe(s) on", "err", cap=3600))
    for _ in range(runs):
        for k, b in bins.items():
            p = subprocess.run(["/usr/bin/time", "-f", "TIME %U %S", b, "count", "--json", "-c",
                                f"{tracee} fast 1500000", f"{tracee}:fast_tick"],
                               capture_output=True, text=True)
            out = p.stdout + p.stderr
            u, s = map(float, re.findall(r"^TIME ([\d.]+) ([\d.]+)", out, re.M)[-1])
            calls, tu, ts = re.findall(r"^(\d+) ([\d.]+) ([\d.]+)$", out, re.M)[-1]
            got = int(re.search(r'"fast_tick":(\d+)', out).group(1))
            lost = int(re.search(r'"lost":(\d+)', out).group(1))
            if int(calls) != 3_000_000 or got != 3_000_000 or lost != 0:
                print(f"{k}: {calls} calls, {got} counted, {lost} lost", file=sys.stderr)
            cpu[k].append(u + s - float(tu) - float(ts))
    print(f"Median of {runs} interleaved runs.\n")
    print("| binary | 10k live s | 10k detach s | 10k peak RSS MiB | count CPU s, 3M hits at max rate |")
    print("|---|---:|---:|---:|---:|")
    for k in bins:
        m = [statistics.median(x[i] for x in live[k]) for i in range(3)]
        print(f"| {k} | {m[0]:.2f} | {m[1]:.2f} | {m[2]:.1f} | {statistics.median(cpu[k]):.3f} |")


if __name__ == "__main__":
    main()
