#!/usr/bin/env python3
"""The `netprobe` commands users run, timed side by side with their peers in one run.

Usage (root, from the workspace root; needs hyperfine, linux-perf, the fetched .NET 8 runtime and
sample app, Debian's docker.io for /usr/sbin/dockerd):

    python3 benchmarks/commands.py [RUNS] [NETPROBE]   # default 30 runs, target/release/netprobe

It builds the release binary and the core-only examples (`list_r2r`, `list_go`) first, then:
- `netprobe symbols` of .NET 8 CoreLib (all, and one name) against `benchmarks/list_r2r.py`, the
  plain Python ReadyToRun reader (with `grep -F` for one name), and of Debian's dockerd (all, and
  `main.main`) against `perf probe -F` (with `--filter` for one name); one hyperfine run per
  image (`-N`, 3 warm-ups, RUNS runs), medians. The core-only column times the netprobe-core
  example that lists the same table without the CLI (no sorting, no table printing).
- `netprobe trace -p PID 'System.Threading.Thread::Sleep'` until it says its probes are on
  (stderr "probe(s) on"), then SIGINT, against the same spec with `--dry-run` (resolution,
  argument typing and the tiering guard, nothing placed); medians of RUNS/3 runs. No peer
  resolves a .NET method in a live process (bpftrace 0.17 refuses PE files; the hand recipe,
  docs/offsets.md, needs crossgen, which no SDK for this machine provides).
Prints markdown tables.
"""
import json
import os
import signal
import statistics
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from attach import live_then_stop  # noqa: E402

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
CACHE = os.environ.get("NETPROBE_CACHE", os.path.expanduser("~/.cache/netprobe"))
CORELIB = f"{CACHE}/dotnet/8/shared/Microsoft.NETCore.App/8.0.4/System.Private.CoreLib.dll"
DOTNET = f"{CACHE}/dotnet/8/dotnet"
APP = f"{CACHE}/sample-app-dotnet/net8.0/sample-netcore-app.dll"
DOCKERD = "/usr/sbin/dockerd"
SLEEP = "System.Threading.Thread::Sleep"


def hyperfine(runs, commands):
    """Median seconds of each command (one hyperfine run, commands interleaved by hyperfine)."""
    with tempfile.NamedTemporaryFile(suffix=".json") as out:
        args = ["hyperfine", "-N", "-w", "3", "-r", str(runs), "--export-json", out.name,
                "--style", "none"]
        subprocess.run(args + commands, check=True, stdout=subprocess.DEVNULL)
        return [(r["median"], r["user"] + r["system"]) for r in json.load(open(out.name))["results"]]


def row(label, np_t, peer_label, peer_t, core_t):
    """One table row from (median wall s, mean CPU s) pairs."""
    core = f"{core_t[0] * 1000:.1f} / {core_t[1] * 1000:.1f}" if core_t else "-"
    return (f"| {label} | {np_t[0] * 1000:.1f} | {np_t[1] * 1000:.1f} | {peer_label} | "
            f"{peer_t[0] * 1000:.1f} | {peer_t[1] * 1000:.1f} | {peer_t[0] / np_t[0]:.1f}x | "
            f"{peer_t[1] / np_t[1]:.1f}x | {core} |")


def symbols_rows(runs, np):
    list_r2r = f"{ROOT}/target/release/examples/list_r2r"
    list_go = f"{ROOT}/target/release/examples/list_go"
    py = f"python3 {ROOT}/benchmarks/list_r2r.py {CORELIB}"
    t = hyperfine(runs, [
        f"{np} symbols {CORELIB}",
        f"{np} symbols {CORELIB} {SLEEP}",
        py,
        f"sh -c '{py} | grep -F \"{SLEEP}(\"'",
        f"{list_r2r} {CORELIB}",
    ])
    d = hyperfine(runs, [
        f"{np} symbols {DOCKERD}",
        f"{np} symbols {DOCKERD} main.main",
        f"perf probe -F -x {DOCKERD}",
        f"perf probe -x {DOCKERD} --funcs=main.main",
        f"{list_go} {DOCKERD}",
    ])
    return [
        row("`symbols CoreLib` (35,945 methods)", t[0], "`list_r2r.py`", t[2], t[4]),
        row(f"`symbols CoreLib '{SLEEP}'`", t[1], "`list_r2r.py \\| grep`", t[3], None),
        row("`symbols dockerd` (69,597 functions)", d[0], "`perf probe -F`", d[2], d[4]),
        row("`symbols dockerd main.main`", d[1], "`perf probe --funcs=main.main`", d[3], None),
    ]


def trace_rows(runs, np):
    env = dict(os.environ, DOTNET_TieredCompilation="0")
    app = subprocess.Popen([DOTNET, APP, "sleep", "--count", "1", "--ms", "1",
                            "--delay-ms", "600000"], env=env,
                           stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        time.sleep(3)
        pid = str(app.pid)
        live, stop = [], []
        for _ in range(runs):
            a, b, _ = live_then_stop([np, "trace", "-p", pid, SLEEP], "probe(s) on", "err")
            live.append(a)
            stop.append(b)
        dry = hyperfine(runs, [f"{np} trace --dry-run -p {pid} {SLEEP}"])[0][0]
    finally:
        app.send_signal(signal.SIGKILL)
        app.wait()
    return (f"| `trace -p PID '{SLEEP}'` | {statistics.median(live) * 1000:.0f} | "
            f"{dry * 1000:.0f} | {statistics.median(stop) * 1000:.0f} |")


def main():
    runs = int(sys.argv[1]) if len(sys.argv) > 1 else 30
    np = sys.argv[2] if len(sys.argv) > 2 else f"{ROOT}/target/release/netprobe"
    subprocess.run(["cargo", "build", "--release", "-q", "-p", "netprobe-cli",
                    "-p", "netprobe-core", "--examples", "--bins"], cwd=ROOT, check=True)
    print(f"hyperfine -N, 3 warm-ups, {runs} runs: median wall ms, mean CPU (user + sys) ms; "
          "ratio = peer / netprobe\n")
    print("| command | netprobe wall | netprobe CPU | peer | peer wall | peer CPU | wall ratio "
          "| CPU ratio | core only wall / CPU |")
    print("|---|---:|---:|---|---:|---:|---:|---:|---:|")
    for r in symbols_rows(runs, np):
        print(r)
    print(f"\nmedian of {max(runs // 3, 3)} runs, ms\n")
    print("| command | until live | --dry-run (resolution only) | detach (SIGINT to exit) |")
    print("|---|---:|---:|---:|")
    print(trace_rows(max(runs // 3, 3), np))


if __name__ == "__main__":
    main()
