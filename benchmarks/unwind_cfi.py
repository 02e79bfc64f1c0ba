#!/usr/bin/env python3
"""Unwinding without frame pointers: `netprobe profile` (registers and a stack copy per sample,
unwound by CFI in user space) against `perf record --call-graph dwarf` + `perf script` on the same
program in the same run, and the cost per sample and per `count --stack` hit.

Usage (root): python3 benchmarks/unwind_cfi.py NETPROBE [ROUNDS] [HZ]

Targets, built here: fixtures/c/unwind_qsort.c (`cc -O2 -fomit-frame-pointer -g`: main ->
np_sort_round -> libc's qsort -> np_cmp -> np_deep1..3 -> np_leaf) and fixtures/rust/unwind_sort.rs
(`rustc -O -g`, the same chain through `sort_by`). The right chain of a sample in np_leaf is the
one gdb prints at a breakpoint there (physical frames: no inlined or tail-call frames), compared
by the program's own functions and the count of frames between them (as
netprobe-cli/tests/stacks_cfi_e2e.rs does). Each round starts a fresh target and samples it for
4 s at HZ (default 999) with each tool in turn, the order rotated every round. Prints, per target
and tool, medians: leaf samples, the share carrying the right chain, the tool's CPU per second
sampled (perf: `perf record` plus `perf script`), netprobe's self-reported walk time per sample;
and `count --stack` on np_leaf for 3 s: hits and netprobe's CPU per hit.
"""
import json
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
SECONDS = 4


def build(tmp):
    c = os.path.join(tmp, "unwind_qsort")
    subprocess.run(["cc", "-O2", "-fomit-frame-pointer", "-g", "-o", c,
                    os.path.join(ROOT, "fixtures/c/unwind_qsort.c")], check=True)
    r = os.path.join(tmp, "unwind_sort")
    subprocess.run(["rustc", "-O", "-g", "-o", r,
                    os.path.join(ROOT, "fixtures/rust/unwind_sort.rs")], check=True)
    return {"C -O2 -fomit-frame-pointer (qsort)": c, "Rust release (sort_by)": r}


def mangled_last(name):
    """The last path segment of a legacy-mangled Rust name, else None."""
    if not name.startswith("_ZN"):
        return None
    rest, segs = name[3:], []
    while rest and not rest.startswith("E"):
        i = 0
        while i < len(rest) and rest[i].isdigit():
            i += 1
        if i == 0:
            return None
        n = int(rest[:i])
        segs.append(rest[i:i + n])
        rest = rest[i + n:]
    if segs and len(segs[-1]) == 17 and segs[-1].startswith("h"):
        segs.pop()
    return segs[-1] if segs else None


def normalize(name):
    base = name.split("@")[0].split("<")[0].split(" ")[0].split("(")[0].split("+")[0]
    last = mangled_last(base) or base.split("::")[-1]
    return last if last.startswith("np_") or last == "main" else "*"


def to_main(names):
    out = []
    for n in names:
        out.append(n)
        if n == "main":
            break
    return out


GDB_SCRIPT = ("import gdb\nf = gdb.newest_frame()\nwhile f is not None:\n"
              "    if f.type() not in (gdb.INLINE_FRAME, gdb.TAILCALL_FRAME):\n"
              "        print('NPFRAME %s' % f.name())\n    f = f.older()\n")


def gdb_chain(binary, tmp):
    script = os.path.join(tmp, "bt.py")
    with open(script, "w") as f:
        f.write(GDB_SCRIPT)
    out = subprocess.run(["gdb", "-batch", "-nx", "-ex", "set debuginfod enabled off",
                          "-ex", "break np_leaf", "-ex", "run 1", "-ex", "source " + script,
                          binary], capture_output=True, text=True).stdout
    return to_main(normalize(l[8:]) for l in out.splitlines() if l.startswith("NPFRAME "))


def start(binary):
    p = subprocess.Popen([binary], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    assert p.stdout.readline().startswith("ready")
    p.stdin.write("go\n")
    p.stdin.flush()
    assert p.stdout.readline().startswith("going")
    return p


def stop(p):
    p.stdin.close()
    p.wait()


def cpu_of(cmd):
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    out = subprocess.run(cmd, capture_output=True, text=True)
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    return out, (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)


def netprobe_round(np, binary, hz, expect):
    p = start(binary)
    out, cpu = cpu_of([np, "profile", "-p", str(p.pid), "--duration", f"{SECONDS}s",
                       "-F", str(hz), "--json"])
    stop(p)
    v = json.loads(out.stdout)
    leaf = right = 0
    for s in v["stacks"]:
        # Physical frames, as gdb's chain: DWARF's inlined frames have no return address.
        names = [normalize(f["function"]) for f in reversed(s["frames"]) if not f.get("inlined")]
        if names and names[0] == "np_leaf":
            leaf += s["count"]
            right += s["count"] if to_main(names) == expect else 0
    return leaf, right, cpu / SECONDS, v["unwinding"]["per_sample_us"]


def perf_round(binary, hz, expect, tmp):
    p = start(binary)
    data = os.path.join(tmp, "perf.data")
    _, cpu1 = cpu_of(["perf", "record", "-q", "--call-graph", "dwarf", "-F", str(hz),
                      "-o", data, "-p", str(p.pid), "--", "sleep", str(SECONDS)])
    stop(p)
    out, cpu2 = cpu_of(["perf", "script", "-i", data, "-F", "ip,sym"])
    leaf = right = 0
    for sample in out.stdout.split("\n\n"):
        # perf prints a return address's inlined functions (`(inlined)`, from DWARF) before the
        # function holding it, each with the same ip: one physical frame per run of one ip,
        # named by its last line (gdb's physical frame).
        frames = []
        for line in sample.strip().splitlines():
            parts = line.split(None, 1)
            if len(parts) != 2:
                continue
            if frames and frames[-1][0] == parts[0]:
                frames[-1] = (parts[0], parts[1])
            else:
                frames.append((parts[0], parts[1]))
        names = [normalize(f[1]) for f in frames]
        if names and names[0] == "np_leaf":
            leaf += 1
            right += 1 if to_main(names) == expect else 0
    return leaf, right, (cpu1 + cpu2) / SECONDS


def count_round(np, binary):
    p = start(binary)
    out, cpu = cpu_of([np, "count", "--stack", "--json", "-p", str(p.pid),
                       "--duration", "3s", f"{binary}:np_leaf"])
    stop(p)
    v = json.loads(out.stdout.strip().splitlines()[-1])
    hits = sum(s["count"] for s in v.get("stacks", []))
    return hits, cpu


def main():
    np = sys.argv[1]
    rounds = int(sys.argv[2]) if len(sys.argv) > 2 else 5
    hz = int(sys.argv[3]) if len(sys.argv) > 3 else 999
    with tempfile.TemporaryDirectory() as tmp:
        targets = build(tmp)
        print("| target | tool | leaf samples | with gdb's chain | CPU ms per s sampled | walk µs per sample |")
        print("|---|---|---:|---:|---:|---:|")
        hits_rows = []
        for label, binary in targets.items():
            expect = gdb_chain(binary, tmp)
            res = {"netprobe": [], "perf": []}
            for r in range(rounds):
                order = ["netprobe", "perf"] if r % 2 == 0 else ["perf", "netprobe"]
                for tool in order:
                    if tool == "netprobe":
                        res[tool].append(netprobe_round(np, binary, hz, expect))
                    else:
                        res[tool].append(perf_round(binary, hz, expect, tmp))
                    time.sleep(0.5)
            for tool, rows in res.items():
                leaf = statistics.median(r[0] for r in rows)
                share = statistics.median(100.0 * r[1] / max(r[0], 1) for r in rows)
                cpu = statistics.median(1000 * r[2] for r in rows)
                walk = statistics.median(r[3] for r in rows) if tool == "netprobe" else None
                shown = "perf record --call-graph dwarf + perf script" if tool == "perf" else "netprobe profile"
                walk_s = f"{walk:.1f}" if walk is not None else "-"
                print(f"| {label} | {shown} | {leaf:.0f} | {share:.1f}% | {cpu:.1f} | {walk_s} |")
            counts = [count_round(np, binary) for _ in range(max(1, rounds // 2))]
            hits = statistics.median(c[0] for c in counts)
            cpu = statistics.median(c[1] for c in counts)
            hits_rows.append((label, hits, 1e6 * cpu / max(hits, 1)))
        print()
        print("| target | `count --stack` hits in 3 s | netprobe CPU µs per hit |")
        print("|---|---:|---:|")
        for label, hits, per in hits_rows:
            print(f"| {label} | {hits:.0f} | {per:.1f} |")


if __name__ == "__main__":
    main()
