#!/usr/bin/env python3
"""What the other processes pay when one process is traced: an idle target is traced on a
shared-library function, and an unrelated process that calls the same function of the same file
in a loop times itself. netprobe -p vs perf stat -p, perf record -p and bpftrace -p.

Usage (root, from the workspace root, after `cargo build --release -p netprobe-cli`):

    python3 benchmarks/scoping.py [ROUNDS] [WORKLOAD=CALLS,...]
        # defaults 5, malloc=2000000,np_add=200000; prints a table per workload

CALLS is how many calls the other process makes. np_add's first instruction reads a global
RIP-relative, which the kernel single-steps at a probe (~20 us a trap here, against malloc's
`push %r12`, which it emulates: under 1 us), hence fewer calls.

Workloads (built here with cc -O2 into a temporary directory):
- `malloc`: libc's malloc. The target (`mhost`, a C string below) waits on stdin; each line it
  reads makes it call malloc(16)/free 1000 times (read(2)/write(2), no stdio: nothing else of it
  calls malloc). The other process (`mloop CALLS`, also a C string below) calls malloc(16)/free
  CALLS times and prints
  its own elapsed seconds (CLOCK_MONOTONIC around the loop).
- `np_add`: np_add of fixtures/c/np_lib.c, built as np_lib.so. The target is
  fixtures/c/hostile_host.c (1000 np_add calls per stdin line), the other process
  fixtures/c/lib_loop.c (`lib_loop np_lib.so CALLS`, prints its own seconds).

Per round, every tool runs once, in turn (interleaved; medians over rounds):
- no tracer (baseline);
- `netprobe count -p TARGET FILE:FN` (live when it prints "Ctrl-C to stop");
- `netprobe trace --json -p TARGET FILE:FN > file` (same);
- `perf stat -x, -e GROUP:FN -p TARGET` and `perf record -e GROUP:FN -p TARGET -o FILE`, the
  event made once with `perf probe -x FILE -a FN` and deleted at the end (live: once perf holds a
  perf_event descriptor, plus 1 s);
- `bpftrace -p TARGET -e 'uprobe:FILE:FN { @ = count(); } BEGIN { printf("live\\n"); }'`;
- `netprobe count FILE:FN` host-wide, for reference: what a breakpoint in every process that maps
  the file costs the other process (SCOPING_HOSTWIDE=0 leaves this row out: while it runs, every
  process of the machine that calls the function traps).
Once the tool is live the other process runs and times itself; then the target is sent one line
(1000 calls of its own), and the tool is stopped with SIGINT and its count read. A tool scoped to
the target counts exactly 1000: more means it counted the other process's calls, fewer that it
missed the target's. The host-wide row counts every process's calls (the machine's own mallocs
too), and what it could not read in time it reports as lost (last column).
"""
import os
import re
import signal
import statistics
import subprocess
import sys
import tempfile
import threading
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
NP = os.path.join(ROOT, "target", "release", "netprobe")
LIBC = "/usr/lib/x86_64-linux-gnu/libc.so.6"
TARGET_CALLS = 1000

# The target of the malloc workload: 1000 malloc(16)/free per line on stdin; no stdio, so that
# nothing else it does calls malloc.
MHOST = r"""
#include <stdlib.h>
#include <unistd.h>
int main(void) {
    char buf[256];
    ssize_t n;
    write(1, "ready\n", 6);
    while ((n = read(0, buf, sizeof buf)) > 0) {
        for (ssize_t k = 0; k < n; k++) {
            if (buf[k] != '\n')
                continue;
            for (int i = 0; i < 1000; i++) {
                void *volatile p = malloc(16);
                free(p);
            }
            write(1, "done\n", 5);
        }
    }
    return 0;
}
"""

# The other process of the malloc workload: CALLS malloc(16)/free, then its own elapsed seconds.
MLOOP = r"""
#include <stdio.h>
#include <stdlib.h>
#include <time.h>
int main(int argc, char **argv) {
    long n = argc > 1 ? atol(argv[1]) : 2000000;
    struct timespec a, b;
    clock_gettime(CLOCK_MONOTONIC, &a);
    for (long i = 0; i < n; i++) {
        void *volatile p = malloc(16);
        free(p);
    }
    clock_gettime(CLOCK_MONOTONIC, &b);
    printf("calls=%ld seconds=%.6f\n", n, (b.tv_sec - a.tv_sec) + (b.tv_nsec - a.tv_nsec) / 1e9);
    return 0;
}
"""


def sh(cmd):
    return subprocess.run(cmd, shell=True, check=True, text=True, capture_output=True)


def cc(work, name, src=None, path=None, flags=""):
    out = os.path.join(work, name)
    if src is not None:
        path = os.path.join(work, name + ".c")
        with open(path, "w") as f:
            f.write(src)
    sh(f"cc -O2 {flags} -o {out} {path}")
    return out


class Target:
    """The idle traced process: started, waiting on stdin; `poke` makes its 1000 calls."""

    def __init__(self, argv):
        self.p = subprocess.Popen(argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
        if self.p.stdout.readline().strip() != "ready":
            raise RuntimeError(f"{argv[0]} did not start")
        self.pid = self.p.pid

    def poke(self):
        self.p.stdin.write("\n")
        self.p.stdin.flush()
        line = self.p.stdout.readline()
        if not line.startswith("done"):
            raise RuntimeError(f"target answered {line!r}")

    def stop(self):
        self.p.stdin.close()
        self.p.wait(timeout=10)


def perf_event_fds(pid):
    try:
        return sum(1 for fd in os.listdir(f"/proc/{pid}/fd")
                   if os.readlink(f"/proc/{pid}/fd/{fd}") == "anon_inode:[perf_event]")
    except OSError:
        return 0


class Tool:
    """A tracer started on the target and waited for until it is live."""

    def __init__(self, argv, marker=None, stdout_path=None):
        self.out_file = open(stdout_path, "w") if stdout_path else None
        self.p = subprocess.Popen(argv, stdout=self.out_file or subprocess.PIPE,
                                  stderr=subprocess.PIPE, text=True, start_new_session=True)
        self.chunks = {"out": [], "err": []}
        self.threads = []
        streams = [("err", self.p.stderr)] + ([] if self.out_file else [("out", self.p.stdout)])
        self.live = threading.Event()
        for name, s in streams:
            t = threading.Thread(target=self._drain, args=(name, s, marker), daemon=True)
            t.start()
            self.threads.append(t)
        deadline = time.monotonic() + 120
        if marker:
            while not self.live.wait(0.05):
                if self.p.poll() is not None or time.monotonic() > deadline:
                    raise RuntimeError(f"{argv[0]} not live: {self.text()[-500:]}")
        else:
            while perf_event_fds(self.p.pid) == 0:
                if self.p.poll() is not None or time.monotonic() > deadline:
                    raise RuntimeError(f"{argv[0]} not live: {self.text()[-500:]}")
                time.sleep(0.05)
            time.sleep(1.0)

    def _drain(self, name, stream, marker):
        for line in stream:
            self.chunks[name].append(line)
            if marker and marker in line:
                self.live.set()

    def text(self):
        return "".join(self.chunks["out"]) + "".join(self.chunks["err"])

    def stop(self):
        os.killpg(self.p.pid, signal.SIGINT)
        self.p.wait(timeout=120)
        for t in self.threads:
            t.join(timeout=10)
        if self.out_file:
            self.out_file.close()
        return self.text()


def other_seconds(argv):
    out = subprocess.run(argv, check=True, text=True, capture_output=True).stdout
    return float(re.search(r"seconds=([\d.]+)", out).group(1))


def lost_reported(text):
    """What the tool said it lost: netprobe's "N hit(s) were lost", perf's "lost N chunks",
    bpftrace's "Lost N events"; "?" for netprobe's "some hits were lost"."""
    m = re.search(r"(\d+) hit\(s\) were lost|lost (\d+) chunks|Lost (\d+) events", text)
    if m:
        return int(next(g for g in m.groups() if g))
    return "?" if "hits were lost" in text else 0


def run_round(tool, w, work, target, calls):
    """(other process's seconds, tool's count or None, what the tool said it lost)."""
    fn, file, grp = w["fn"], w["file"], w["group"]
    spec = f"{file}:{fn}"
    pid = str(target.pid)
    if tool == "no tracer":
        secs = other_seconds(w["other"])
        target.poke()
        return secs, None, 0
    if tool == "netprobe count -p":
        t = Tool([NP, "count", "--json", "-p", pid, spec], "Ctrl-C to stop")
    elif tool == "netprobe count, host-wide":
        t = Tool([NP, "count", "--json", spec], "Ctrl-C to stop")
    elif tool == "netprobe trace --json -p":
        path = os.path.join(work, "trace.jsonl")
        t = Tool([NP, "trace", "--json", "-p", pid, spec], "Ctrl-C to stop", stdout_path=path)
    elif tool == "perf stat -p":
        t = Tool(["perf", "stat", "-x,", "-e", f"{grp}:{fn}", "-p", pid])
    elif tool == "perf record -p":
        data = os.path.join(work, "perf.data")
        t = Tool(["perf", "record", "-e", f"{grp}:{fn}", "-p", pid, "-o", data])
    elif tool == "bpftrace -p":
        t = Tool(["bpftrace", "-p", pid, "-e",
                  f"uprobe:{file}:{fn} {{ @n = count(); }} BEGIN {{ printf(\"live\\n\"); }}"],
                 "live")
    else:
        raise ValueError(tool)
    try:
        secs = other_seconds(w["other"])
        target.poke()
        time.sleep(0.3)  # netprobe count reads its counters each interval; a margin for all
    finally:
        text = t.stop()
    if tool.startswith("netprobe count"):
        # {"...":{"fn":N}} or similar: the sum of every number keyed by a name holding fn.
        got = sum(int(n) for n in re.findall(rf'"[^"]*{fn}[^"]*":\s*(\d+)', text))
    elif tool.startswith("netprobe trace"):
        got = open(path).read().count('"event":"entry"')
    elif tool == "perf stat -p":
        got = int(re.search(rf"^(\d+),[^,]*,{grp}:{fn}", text, re.M).group(1))
    elif tool == "perf record -p":
        got = int(re.search(r"\((\d+) samples\)", text).group(1))
    else:
        got = int(re.search(r"@n: (\d+)", text).group(1))
    return secs, got, lost_reported(text)


def workloads(work, names):
    out = {}
    if "malloc" in names:
        out["malloc"] = {
            "fn": "malloc", "file": LIBC,
            "target": [cc(work, "mhost", MHOST)],
            "other_bin": cc(work, "mloop", MLOOP),
        }
    if "np_add" in names:
        lib = cc(work, "np_lib.so", path=f"{ROOT}/fixtures/c/np_lib.c", flags="-shared -fPIC")
        host = cc(work, "hostile_host", path=f"{ROOT}/fixtures/c/hostile_host.c", flags="-ldl")
        loop = cc(work, "lib_loop", path=f"{ROOT}/fixtures/c/lib_loop.c", flags="-ldl")
        out["np_add"] = {"fn": "np_add", "file": lib, "target": [host, lib], "loop": loop}
    return out


def main():
    rounds = int(sys.argv[1]) if len(sys.argv) > 1 else 5
    spec = sys.argv[2] if len(sys.argv) > 2 else "malloc=2000000,np_add=200000"
    calls_of = {k: int(v) for k, v in (kv.split("=") for kv in spec.split(","))}
    names = list(calls_of)
    work = tempfile.mkdtemp()
    tools = ["no tracer", "netprobe count -p", "netprobe trace --json -p", "perf stat -p",
             "perf record -p", "bpftrace -p"]
    if os.environ.get("SCOPING_HOSTWIDE", "1") != "0":
        tools.append("netprobe count, host-wide")
    with open("/proc/loadavg") as f:
        print(f"load average at start: {' '.join(f.read().split()[:3])}")
    for name, w in workloads(work, names).items():
        calls = calls_of[name]
        w["other"] = [w.get("other_bin") or w["loop"]] + ([] if "other_bin" in w else [w["file"]]) + [str(calls)]
        sh(f"perf probe -q -x {w['file']} -a {w['fn']}")
        defs = open("/sys/kernel/tracing/uprobe_events").read()
        w["group"] = re.search(rf"^p:(probe_[^/ ]+)/{w['fn']} ", defs, re.M).group(1)
        res = {t: [] for t in tools}
        try:
            target = Target(w["target"])
            try:
                for r in range(rounds):
                    for tool in tools:
                        res[tool].append(run_round(tool, w, work, target, calls))
                        print(f"  {name} round {r + 1} {tool}: {res[tool][-1]}", file=sys.stderr)
            finally:
                target.stop()
        finally:
            sh(f"perf probe -q -d '{w['group']}:{w['fn']}'")
        print(f"\n{name}: the other process makes {calls:,} calls; {rounds} rounds, medians; "
              f"the target makes {TARGET_CALLS} calls once the other process is done.\n")
        print("| tool | other process's time, s | slowdown vs no tracer | tool's count "
              "(min-max over rounds) | other process's calls counted | lost reported (max) |")
        print("|---|---:|---:|---:|---|---:|")
        for tool, rows in res.items():
            secs = statistics.median(r[0] for r in rows)
            # Ratio within each round (the same minutes), then the median over rounds.
            slow = statistics.median(r[0] / b[0] for r, b in zip(rows, res["no tracer"]))
            counts = [r[1] for r in rows if r[1] is not None]
            losts = [r[2] for r in rows]
            lost = "?" if "?" in losts else f"{max(losts):,}"
            if counts:
                lo, hi = min(counts), max(counts)
                cnt = f"{lo:,}" if lo == hi else f"{lo:,}-{hi:,}"
                counted = "yes" if hi >= calls else ("no" if hi <= TARGET_CALLS * 2 else "partly")
            else:
                cnt, counted = "-", "-"
            print(f"| {tool} | {secs:.3f} | {slow:.2f}x | {cnt} | {counted} | {lost} |")
    with open("/proc/loadavg") as f:
        print(f"\nload average at end: {' '.join(f.read().split()[:3])}")


if __name__ == "__main__":
    main()
