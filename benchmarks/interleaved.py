#!/usr/bin/env python3
"""Two netprobe binaries timed on the same commands, alternating run by run (A, B, then B, A: the
order flips each round, so neither always runs second), so that the machine's load, which drifts
over minutes here, falls on both alike. hyperfine runs all
runs of one command before the next; on a noisy VM that alone can move a median by 30%.

Usage: python3 benchmarks/interleaved.py BEFORE AFTER [RUNS]   (default 40 alternations)

Prints, per command, the median wall time of each binary (ms) with its quartiles, their ratio,
and the share of alternations in which AFTER was faster. Output to /dev/null; 3 warm-up runs of each first.
"""
import os
import statistics
import subprocess
import sys
import time

CACHE = os.environ.get("NETPROBE_CACHE", os.path.expanduser("~/.cache/netprobe"))
CORELIB = f"{CACHE}/dotnet/8/shared/Microsoft.NETCore.App/8.0.4/System.Private.CoreLib.dll"
COMMANDS = [
    ("symbols CoreLib", ["symbols", CORELIB]),
    ("symbols CoreLib 'System.Threading.Thread::Sleep'",
     ["symbols", CORELIB, "System.Threading.Thread::Sleep"]),
    ("symbols dockerd", ["symbols", "/usr/sbin/dockerd"]),
    ("symbols dockerd main.main", ["symbols", "/usr/sbin/dockerd", "main.main"]),
    ("symbols libc.so.6", ["symbols", "/lib/x86_64-linux-gnu/libc.so.6"]),
]


def once(binary, args):
    start = time.perf_counter()
    subprocess.run([binary] + args, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                   check=True)
    return time.perf_counter() - start


def main():
    before, after = sys.argv[1], sys.argv[2]
    runs = int(sys.argv[3]) if len(sys.argv) > 3 else 40
    print(f"alternating {runs} runs each; median wall ms")
    print()
    print("| command | before (p25-p75) | after (p25-p75) | after / before | after faster in |")
    print("|---|---:|---:|---:|---:|")
    for label, args in COMMANDS:
        for _ in range(3):
            once(before, args)
            once(after, args)
        a, b = [], []
        for i in range(runs):
            if i % 2 == 0:
                a.append(once(before, args))
                b.append(once(after, args))
            else:
                b.append(once(after, args))
                a.append(once(before, args))
        wins = sum(1 for x, y in zip(a, b) if y < x)
        ma, mb = statistics.median(a) * 1000, statistics.median(b) * 1000
        qa = [q * 1000 for q in statistics.quantiles(a, n=4)]
        qb = [q * 1000 for q in statistics.quantiles(b, n=4)]
        print(f"| `{label}` | {ma:.1f} ({qa[0]:.1f}-{qa[2]:.1f}) | {mb:.1f} ({qb[0]:.1f}-{qb[2]:.1f}) "
              f"| {mb / ma:.2f} | {wins}/{runs} |")


if __name__ == "__main__":
    main()
