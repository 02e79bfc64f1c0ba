#!/usr/bin/env python3
"""`netprobe trace -p PID SPEC`: time until live and detach, for one or more netprobe binaries,
alternating run by run (A, B, A, B, ...) so the machine's drifting load and the kernel's varying
grace periods fall on all alike.

Usage (root, from the workspace root):

    python3 benchmarks/trace_live.py RUNS [--dockerd] NETPROBE [NETPROBE...]

The target is the .NET 8 sample app as `benchmarks/commands.py` runs it (tiered compilation off,
one `Thread.Sleep` call, then idle) traced at 'System.Threading.Thread::Sleep' (needs the fetched
runtime and sample app); with `--dockerd`, the running Docker daemon (`scripts/docker-up.sh`)
traced at 'net/http.(*conn).serve' (a Go method; its `*` makes the name a glob, matched against
all 70,000 names). "live" is from the start of netprobe until it prints "probe(s) on", "detach"
from SIGINT to its exit (`live_then_stop` of `benchmarks/attach.py`). Prints the median (and
minimum) of each binary.
"""
import os
import statistics
import subprocess
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from attach import live_then_stop  # noqa: E402
from commands import APP, DOTNET, SLEEP  # noqa: E402


def main():
    runs, binaries = int(sys.argv[1]), sys.argv[2:]
    dockerd = binaries[:1] == ["--dockerd"]
    if dockerd:
        binaries = binaries[1:]
        pid = subprocess.run(["pidof", "dockerd"], capture_output=True, text=True,
                             check=True).stdout.split()[0]
        spec, app = "net/http.(*conn).serve", None
    else:
        env = dict(os.environ, DOTNET_TieredCompilation="0")
        app = subprocess.Popen([DOTNET, APP, "sleep", "--count", "1", "--ms", "1",
                                "--delay-ms", "600000"], env=env,
                               stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        pid, spec = str(app.pid), SLEEP
        time.sleep(3)
    times = {b: ([], []) for b in binaries}
    try:
        for _ in range(runs):
            for b in binaries:
                live, stop, _ = live_then_stop([b, "trace", "-p", pid, spec],
                                               "probe(s) on", "err")
                times[b][0].append(live)
                times[b][1].append(stop)
    finally:
        if app:
            app.kill()
            app.wait()
    print(f"`trace -p {pid} '{spec}'`, {runs} alternations; ms, median (min)\n")
    print("| netprobe | live | detach |")
    print("|---|---:|---:|")
    for b, (live, stop) in times.items():
        print(f"| `{b}` | {statistics.median(live) * 1000:.0f} ({min(live) * 1000:.0f}) | "
              f"{statistics.median(stop) * 1000:.0f} |")


if __name__ == "__main__":
    main()
