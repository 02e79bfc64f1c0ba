#!/usr/bin/env python3
"""Stacks that miss a caller: `netprobe profile` before and after it puts back the caller a
frame-pointer walk misses, against `perf record -g` in the same run.

Usage (root): python3 benchmarks/missed_callers.py BEFORE_NETPROBE AFTER_NETPROBE [ROUNDS] [HZ]

Targets, built here with `cc -O1 -fno-omit-frame-pointer -fno-optimize-sibling-calls`:
  - fixtures/c/prologue_target.c: main -> outer -> step -> leaf; leaf() keeps no frame, step() is
    little more than its prologue and `ret`. A right stack of leaf is main;outer;step;leaf, of
    step main;outer;step.
  - fixtures/c/profile_target.c: main -> work -> hot|warm, each a loop with a frame. A right stack
    of hot/warm is main;work;hot|warm.
Each round starts the target, samples it for 4 s at HZ (default 999) with each tool in turn
(interleaved, a fresh target process each, the order rotated every round), and counts the stacks of those leaf functions that
are not right. CPU is the tool's user+sys time (perf: `perf record` plus `perf script`) per
second sampled. Prints medians over the rounds as a Markdown table.
"""
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
SECONDS = 4
RIGHT = {
    "prologue_target": {
        "leaf": ["main", "outer", "step", "leaf"],
        "step": ["main", "outer", "step"],
    },
    "profile_target": {
        "hot": ["main", "work", "hot"],
        "warm": ["main", "work", "warm"],
    },
}


def build(work, name):
    out = os.path.join(work, name)
    subprocess.run(
        ["cc", "-O1", "-fno-omit-frame-pointer", "-fno-optimize-sibling-calls", "-pthread",
         "-o", out, os.path.join(ROOT, "fixtures", "c", name + ".c")],
        check=True,
    )
    return out


def start(binary):
    p = subprocess.Popen([binary, str(SECONDS + 3)], stdout=subprocess.PIPE, text=True)
    p.stdout.readline()  # "ready pid=PID"
    return p


def cpu_of(cmd, **kw):
    """Runs cmd; returns (its stdout, user+sys seconds of it and its children)."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    out = subprocess.run(cmd, check=True, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL,
                         text=True, **kw).stdout
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    return out, (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)


def netprobe_stacks(np, pid, hz, work):
    folded = os.path.join(work, "np.folded")
    _, cpu = cpu_of([np, "profile", "-p", str(pid), "--duration", f"{SECONDS}s", "-F", str(hz),
                     "--folded", folded])
    stacks = []
    with open(folded) as f:
        for line in f:
            frames, n = line.rstrip("\n").rsplit(" ", 1)
            stacks.append((frames.split(";"), int(n)))
    return stacks, cpu


def perf_stacks(pid, hz, work):
    data = os.path.join(work, "perf.data")
    _, cpu1 = cpu_of(["perf", "record", "-q", "-F", str(hz), "-g", "-p", str(pid), "-o", data,
                      "--", "sleep", str(SECONDS)])
    text, cpu2 = cpu_of(["perf", "script", "-i", data, "-F", "ip,sym"])
    stacks = []
    for block in text.strip().split("\n\n"):
        frames = [l.split()[1].split("+")[0] for l in block.splitlines()[0:] if len(l.split()) > 1]
        # perf prints innermost first; kernel frames (interrupt entry) are left out.
        user = [f for f in frames if not f.startswith(("asm_", "irqentry", "__irq", "sysvec"))]
        stacks.append((list(reversed(user)), 1))
    return stacks, cpu1 + cpu2


def wrong_share(stacks, right):
    """(samples whose innermost frame is one of `right`'s, the % of them not exactly `right`'s
    chain from main on)."""
    total = wrong = 0
    for frames, n in stacks:
        if not frames or frames[-1] not in right:
            continue
        total += n
        if "main" not in frames or frames[frames.index("main"):] != right[frames[-1]]:
            wrong += n
    return total, 100.0 * wrong / max(total, 1)


def main():
    before, after = sys.argv[1], sys.argv[2]
    rounds = int(sys.argv[3]) if len(sys.argv) > 3 else 5
    hz = int(sys.argv[4]) if len(sys.argv) > 4 else 999
    tools = {
        "netprobe before": lambda pid, w: netprobe_stacks(before, pid, hz, w),
        "netprobe after": lambda pid, w: netprobe_stacks(after, pid, hz, w),
        "perf record -g + perf script": lambda pid, w: perf_stacks(pid, hz, w),
    }
    with tempfile.TemporaryDirectory() as work:
        results = {}
        for target in RIGHT:
            binary = build(work, target)
            order = list(tools.items())
            for r in range(rounds):
                # The tool run right after perf pays for it (its CPU time doubles here): rotate
                # the order every round so that cost falls on each tool alike.
                for tool, run in order[r % 3:] + order[:r % 3]:
                    p = start(binary)
                    try:
                        stacks, cpu = run(p.pid, work)
                    finally:
                        p.kill()
                        p.wait()
                    total, wrong = wrong_share(stacks, RIGHT[target])
                    results.setdefault((target, tool), []).append(
                        (total, wrong, 1000.0 * cpu / SECONDS))
                    time.sleep(0.2)
        print(f"{rounds} rounds, {SECONDS} s at {hz} Hz each, medians:\n")
        print("| target | tool | samples of the leaf functions | stacks missing a caller | CPU ms per s sampled |")
        print("|---|---|---:|---:|---:|")
        for (target, tool), rows in results.items():
            print(f"| `{target}` | {tool} | {statistics.median(r[0] for r in rows):.0f} | "
                  f"{statistics.median(r[1] for r in rows):.1f}% | "
                  f"{statistics.median(r[2] for r in rows):.1f} |")


if __name__ == "__main__":
    main()
