#!/usr/bin/env python3
"""Attach and detach time for 1, 100 and 1,000 uprobes: netprobe vs perf probe and bpftrace.

Usage (root, from the workspace root, after `cargo build --release -p netprobe-cli`):

    python3 benchmarks/attach.py [RUNS]      # default 5 runs per cell; prints a markdown table

Target: fixtures/c/many.c (functions f0..f999), built here with cc -O2. Patterns: `f5` (1 probe),
`f*0` (f0, f10, ..., f990: 100 probes), `f*0` ... `f*9` (f0..f999: 1,000 probes; `f*` would
also match crt's frame_dummy, which bpftrace refuses).

Measured per tool, median of RUNS:
- create only (probes registered, not enabled): `netprobe probe add` vs `perf probe --add`;
- live (registered and enabled, ready to record): `netprobe count` until it prints
  "probe(s) on" vs `bpftrace` until its BEGIN block prints (bpftrace runs BEGIN after attaching);
- bpftrace runs with BPFTRACE_MAX_PROBES=4096 (its default limit is 512); perf probe refuses
  more than 128 matches in one command (reported as such);
- detach: from SIGINT to the tool's exit, everything removed (bpftrace and netprobe both pay the
  kernel's one grace period per enabled uprobe event; perf probe --del removes unenabled ones).
"""
import os
import signal
import statistics
import subprocess
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
NP = os.path.join(ROOT, "target", "release", "netprobe")
PATTERNS = [(["f5"], 1), (["f*0"], 100), ([f"f*{d}" for d in range(10)], 1000)]


def timed(cmd, **kw):
    """Seconds `cmd` took; None when it failed (perf probe refuses more than 128 matches)."""
    t = time.monotonic()
    p = subprocess.run(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, **kw)
    return time.monotonic() - t if p.returncode == 0 else None


def live_then_stop(cmd, marker, stream):
    """Seconds until `marker` appears on `stream` ('out'/'err'), then seconds from SIGINT to exit."""
    t0 = time.monotonic()
    # bpftrace refuses more than 512 probes unless told otherwise.
    env = dict(os.environ, BPFTRACE_MAX_PROBES="4096")
    p = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env)
    src = p.stdout if stream == "out" else p.stderr
    for line in src:
        if marker in line:
            break
    else:
        raise RuntimeError(f"{cmd[0]} ended before {marker!r}: {p.stderr.read()}")
    live = time.monotonic() - t0
    t1 = time.monotonic()
    p.send_signal(signal.SIGINT)
    p.communicate(timeout=600)
    return live, time.monotonic() - t1


def main():
    runs = int(sys.argv[1]) if len(sys.argv) > 1 else 5
    work = tempfile.mkdtemp()
    many = os.path.join(work, "many")
    subprocess.run(["cc", "-O2", "-o", many, os.path.join(ROOT, "fixtures/c/many.c")], check=True)
    rows = []
    for pats, n in PATTERNS:
        pat = " ".join(pats)
        cells = {k: [] for k in ("np_add", "perf_add", "np_live", "np_stop", "bt_live", "bt_stop")}
        for _ in range(runs):
            cells["np_add"].append(timed(["sh", "-c",
                f"{NP} probe add --group nptest_attach "
                + " ".join(f"'{many}:{p}'" for p in pats) + " && "
                f"{NP} probe remove --group nptest_attach"]))
            cells["perf_add"].append(timed(["sh", "-c",
                f"perf probe -q -x {many} " + " ".join(f"-a '{p}'" for p in pats)
                + " && perf probe -q -d 'probe_many:*'"]))
            subprocess.run(["perf", "probe", "-q", "-d", "probe_many:*"],
                           stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
            live, stop = live_then_stop([NP, "count"] + [f"{many}:{p}" for p in pats],
                                        "probe(s) on", "err")
            cells["np_live"].append(live)
            cells["np_stop"].append(stop)
            live, stop = live_then_stop(
                ["bpftrace", "-e", ", ".join(f"uprobe:{many}:{p}" for p in pats)
                 + " { @ = count(); } BEGIN { printf(\"live\\n\"); }"], "live", "out")
            cells["bt_live"].append(live)
            cells["bt_stop"].append(stop)
        med = {k: (statistics.median(v) * 1000 if None not in v else None)
               for k, v in cells.items()}
        rows.append((pat, n, med))
    print(f"Median of {runs} runs, ms; ratio = peer / netprobe.\n")
    print("| probes | netprobe probe add+remove | perf probe --add+--del | ratio "
          "| netprobe live | bpftrace live | ratio | netprobe detach | bpftrace detach | ratio |")
    print("|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|")
    for pat, n, m in rows:
        perf = ("refused (over 128 matches)", "-") if m["perf_add"] is None else (
            f"{m['perf_add']:.0f}", f"{m['perf_add'] / m['np_add']:.1f}")
        print(f"| {n} (`{pat}`) | {m['np_add']:.0f} | {perf[0]} | {perf[1]} | "
              f"{m['np_live']:.0f} | {m['bt_live']:.0f} | {m['bt_live'] / m['np_live']:.1f} | "
              f"{m['np_stop']:.0f} | {m['bt_stop']:.0f} | {m['bt_stop'] / m['np_stop']:.2f} |")


if __name__ == "__main__":
    main()
