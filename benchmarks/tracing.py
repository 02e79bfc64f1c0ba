#!/usr/bin/env python3
"""Event throughput and tracer cost: netprobe count/trace vs perf, bpftrace and bcc's funccount.

Usage (root, from the workspace root, after `cargo build --release -p netprobe-cli`):

    python3 benchmarks/tracing.py [ROUNDS] [SECS] [WORKLOAD]   # defaults 5, 3, spin; prints a table

Workloads (`fixtures/c/tracee.c`; each prints its call count and its own user and system CPU
seconds at the end):
- `spin`: one thread calls `np_tick` as fast as it can for SECS seconds. Its first instruction is
  single-stepped at a probe (~10 us a hit), so ~100k hits/s.
- `fastspin`: two threads call `fast_tick` as fast as they can for SECS seconds. Its first instruction
  is a NOP, which the kernel emulates at a probe (~1-2 us a hit): the kernel's max hit rate here,
  ~1M hits/s. netprobe count, netprobe trace --json, perf stat, perf record + perf script and
  bpftrace count() run on it.
Under each tracer the probe costs the target a kernel trap per call, so the call rate is what the
kernel can produce; each tool must deliver every one of them (or report what it lost). Per round
every tool runs once, in turn (interleaved); medians over rounds.

- netprobe count -c / netprobe trace --json -c: launch the target with probes already live.
- perf record -e GROUP:FN -- target, then perf script (probe made with perf probe, deleted after).
- perf stat -e GROUP:FN -- target (fastspin only): a counting perf event, no record per hit.
- bpftrace uprobe count() with -c.
- funccount-bpfcc: cannot launch a command; the target starts once funccount says "Tracing".
  bcc compiles its program against kernel headers; where the running kernel has none (this VM),
  Debian's linux-headers are linked as /lib/modules/$(uname -r)/{build,source} (a uprobe-only
  program does not depend on kernel structure layouts).

Tracer CPU = the tool's user+sys (from /usr/bin/time, children included) minus the target's own;
per event = tracer CPU / events delivered. A hit counted in the kernel (netprobe count on a -c
target, perf stat, bpftrace count()) is paid in the target's own time, not the tracer's: compare
those by the target's calls/s, and by its ratio to the rate under netprobe count in the same round.
"""
import os
import re
import statistics
import subprocess
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
NP = os.path.join(ROOT, "target", "release", "netprobe")


def sh(cmd, **kw):
    return subprocess.run(cmd, shell=True, check=True, text=True, capture_output=True, **kw)


def ensure_bcc_headers():
    mod = f"/lib/modules/{os.uname().release}"
    if os.path.exists(f"{mod}/build/include/linux/kconfig.h") or os.path.exists(f"{mod}/source/include/linux/kconfig.h"):
        return
    sh("DEBIAN_FRONTEND=noninteractive apt-get install -y -qq linux-headers-amd64 >/dev/null")
    src = sorted(d for d in os.listdir("/usr/src") if d.startswith("linux-headers-"))
    arch = [d for d in src if d.endswith("-amd64")][-1]
    common = [d for d in src if d.endswith("-common")][-1]
    os.makedirs(mod, exist_ok=True)
    for name, d in (("build", arch), ("source", common)):
        if os.path.lexists(f"{mod}/{name}"):
            os.remove(f"{mod}/{name}")
        os.symlink(f"/usr/src/{d}", f"{mod}/{name}")


def timed(cmd):
    """Runs `cmd` (a list) under /usr/bin/time; returns (stdout+stderr, tool cpu seconds)."""
    p = subprocess.run(["/usr/bin/time", "-f", "TIME %U %S"] + cmd, text=True, capture_output=True)
    out = p.stdout + p.stderr
    u, s = re.findall(r"^TIME ([\d.]+) ([\d.]+)", out, re.M)[-1]
    return out, float(u) + float(s)


def target_line(text):
    """The target's summary line: calls, user s, sys s."""
    calls, u, s = re.findall(r"^(\d+) ([\d.]+) ([\d.]+)$", text, re.M)[-1]
    return int(calls), float(u) + float(s)


def run_np_count(t, secs, mode="spin", fn="np_tick"):
    out, cpu = timed([NP, "count", "--json", "-c", f"{t} {mode} {secs}", f"{t}:{fn}"])
    calls, tcpu = target_line(out)
    got = int(re.search(rf'"{fn}":(\d+)', out).group(1))
    lost = int(re.search(r'"lost":\s*(\d+)', out).group(1)) if '"lost"' in out else 0
    return calls, got, lost, cpu - tcpu


def run_np_trace(t, secs, work, mode="spin", fn="np_tick"):
    path = os.path.join(work, "trace.jsonl")
    # The target's summary goes to its own file: in netprobe's stdout it could be spliced into one
    # of netprobe's large (non-atomic) writes. `exec` keeps the pid -c traces.
    summary = os.path.join(work, "target.out")
    with open(path, "w") as f:
        p = subprocess.run(["/usr/bin/time", "-f", "TIME %U %S", NP, "trace", "--json", "-c",
                            f"sh -c 'exec {t} {mode} {secs} > {summary}'", f"{t}:{fn} a=s32"],
                           stdout=f, stderr=subprocess.PIPE, text=True)
    u, s = re.findall(r"^TIME ([\d.]+) ([\d.]+)", p.stderr, re.M)[-1]
    text = open(path).read()
    calls, tcpu = target_line(open(summary).read())
    got = text.count('"event":"entry"')
    lost = 0 if "lost" not in p.stderr else int(re.search(r"(\d+) (?:hit\(s\)|hits|events) (?:were )?lost", p.stderr).group(1))
    return calls, got, lost, float(u) + float(s) - tcpu


def perf_probe(t, fn):
    """Makes the event GROUP:fn with perf probe; returns GROUP."""
    sh(f"perf probe -q -x {t} -a {fn}")
    return re.search(rf"^p:(probe_[^/ ]+)/{fn} ", open("/sys/kernel/tracing/uprobe_events").read(),
                     re.M).group(1)


def run_perf(t, secs, work, mode="spin", fn="np_tick"):
    grp = perf_probe(t, fn)
    try:
        data = os.path.join(work, "perf.data")
        out, cpu = timed(["perf", "record", "-q", "-o", data, "-e", f"{grp}:{fn}", "--", t, mode, str(secs)])
        calls, tcpu = target_line(out)
        script, cpu2 = timed(["sh", "-c", f"perf script -i {data} | grep -c ' [^ ]*:{fn}: '"])
        got = int(script.split()[0])
        # What perf lost: `perf report --stats` counts the samples of its LOST_SAMPLES records
        # (the largest figure on those lines; the others count the records).
        stats = subprocess.run(["perf", "report", "-i", data, "--stats"], text=True,
                               capture_output=True).stdout
        lost = max((int(n) for n in re.findall(r"LOST_SAMPLES events:\s+(\d+)", stats)), default=0)
        os.remove(data)
        return calls, got, lost, cpu - tcpu + cpu2
    finally:
        sh(f"perf probe -q -d '{grp}:*'")


def run_perf_stat(t, secs, mode="spin", fn="np_tick"):
    """perf stat counts the event in the kernel (a counting perf event on the command it starts)."""
    grp = perf_probe(t, fn)
    try:
        out, cpu = timed(["perf", "stat", "-x,", "-e", f"{grp}:{fn}", "--", t, mode, str(secs)])
        calls, tcpu = target_line(out)
        got = int(re.search(rf"^(\d+),[^,]*,{grp}:{fn}", out, re.M).group(1))
        return calls, got, 0, cpu - tcpu
    finally:
        sh(f"perf probe -q -d '{grp}:*'")


def run_bpftrace(t, secs, mode="spin", fn="np_tick"):
    out, cpu = timed(["bpftrace", "-c", f"{t} {mode} {secs}", "-e",
                      f"uprobe:{t}:{fn} /pid == cpid/ {{ @n = count(); }}"])
    calls, tcpu = target_line(out)
    got = int(re.search(r"@n: (\d+)", out).group(1))
    lost = int(m.group(1)) if (m := re.search(r"(\d+) (?:events )?lost", out)) else 0
    return calls, got, lost, cpu - tcpu


def run_funccount(t, secs, work):
    log = os.path.join(work, "fc.out")
    with open(log, "w") as f:
        fc = subprocess.Popen(["/usr/bin/time", "-f", "TIME %U %S", "funccount-bpfcc", f"{t}:np_tick"],
                              stdout=f, stderr=subprocess.STDOUT, text=True, start_new_session=True)
        deadline = time.monotonic() + 120
        while "Tracing" not in open(log).read():
            if time.monotonic() > deadline or fc.poll() is not None:
                raise RuntimeError("funccount-bpfcc did not start: " + open(log).read())
            time.sleep(0.05)
        tgt = subprocess.run([t, "spin", str(secs)], text=True, capture_output=True)
        # Ctrl-C to the group: /usr/bin/time ignores SIGINT and waits; funccount prints and exits.
        os.killpg(fc.pid, 2)
        fc.wait(timeout=60)
    out = open(log).read()
    calls, _ = target_line(tgt.stdout)
    got = int(re.search(r"^np_tick\s+(\d+)", out, re.M).group(1))
    u, s = re.findall(r"^TIME ([\d.]+) ([\d.]+)", out, re.M)[-1]
    return calls, got, 0, float(u) + float(s)


def main():
    rounds = int(sys.argv[1]) if len(sys.argv) > 1 else 5
    secs = int(sys.argv[2]) if len(sys.argv) > 2 else 3
    workload = sys.argv[3] if len(sys.argv) > 3 else "spin"
    work = tempfile.mkdtemp()
    t = os.path.join(work, "tracee")
    sh(f"cc -O2 -o {t} {ROOT}/fixtures/c/tracee.c")
    if workload == "fastspin":
        tools = {
            "netprobe count": lambda: run_np_count(t, secs, "fastspin", "fast_tick"),
            "netprobe trace --json": lambda: run_np_trace(t, secs, work, "fastspin", "fast_tick"),
            "perf stat": lambda: run_perf_stat(t, secs, "fastspin", "fast_tick"),
            "perf record + perf script": lambda: run_perf(t, secs, work, "fastspin", "fast_tick"),
            "bpftrace count()": lambda: run_bpftrace(t, secs, "fastspin", "fast_tick"),
        }
    else:
        ensure_bcc_headers()
        tools = {
            "netprobe count": lambda: run_np_count(t, secs),
            "netprobe trace --json": lambda: run_np_trace(t, secs, work),
            "perf record + perf script": lambda: run_perf(t, secs, work),
            "bpftrace count()": lambda: run_bpftrace(t, secs),
            "funccount-bpfcc": lambda: run_funccount(t, secs, work),
        }
    with open("/proc/loadavg") as f:
        print(f"load average at start: {' '.join(f.read().split()[:3])}")
    res = {k: [] for k in tools}
    for i in range(rounds):
        for name, fn in tools.items():
            res[name].append(fn())
            print(f"  round {i + 1} {name}: {res[name][-1]}", file=sys.stderr)
    base_cpu = statistics.median(r[3] for r in res["netprobe count"])
    print(f"{rounds} rounds x {secs} s, medians. events/s = events delivered / {secs} s; "
          "missed = target calls - events delivered.\n")
    print("| tool | target calls | target calls/s | events delivered | events/s | missed (max over rounds) | lost reported (max) | delivered + lost = calls, every round | tracer CPU s | tracer CPU ns per event | CPU vs netprobe count | target calls vs under netprobe count, same round (min-max) |")
    print("|---|---:|---:|---:|---:|---:|---:|---|---:|---:|---:|---:|")
    for name, rows in res.items():
        calls = statistics.median(r[0] for r in rows)
        got = statistics.median(r[1] for r in rows)
        missed = max(r[0] - r[1] for r in rows)
        lost = max(r[2] for r in rows)
        # /usr/bin/time counts CPU in 10 ms ticks: a tool's own CPU below that reads as 0 (or
        # as a tick's noise either side), and so does its ratio.
        cpu = max(statistics.median(r[3] for r in rows), 0.0)
        exact = "yes" if all(r[1] + r[2] == r[0] for r in rows) else "no"
        per_hit = statistics.median(max(r[3], 0.0) / r[1] * 1e9 for r in rows if r[1])
        tick = 0.01 / max(got, 1) * 1e9
        per_hit_s = f"< {tick:.0f}" if cpu < 0.01 else f"{per_hit:.0f}"
        cpu_s = "< 0.01" if cpu < 0.01 else f"{cpu:.3f}"
        vs_cpu = f"{cpu / base_cpu:.1f}x" if base_cpu >= 0.01 and cpu >= 0.01 else "-"
        # The target's rate under this tool over its rate under netprobe count in the same round
        # (the same minutes of a noisy machine), median over rounds.
        ratios = [r[0] / n[0] for r, n in zip(rows, res["netprobe count"])]
        vs_np = statistics.median(ratios)
        print(f"| {name} | {calls:,.0f} | {calls / secs / 1000:.1f}k | {got:,.0f} | {got / secs / 1000:.1f}k | "
              f"{missed} | {lost} | {exact} | {cpu_s} | {per_hit_s} | {vs_cpu} | {vs_np:.2f} "
              f"({min(ratios):.2f}-{max(ratios):.2f}) |")
    with open("/proc/loadavg") as f:
        print(f"\nload average at end: {' '.join(f.read().split()[:3])}")


if __name__ == "__main__":
    main()
