#!/usr/bin/env python3
"""Off-CPU profiles at a high context-switch rate: what the profiler costs and what the target
pays, netprobe beside bcc's offcputime and `perf sched record`, in one run.

Usage (root): python3 benchmarks/offcpu.py NETPROBE [SECONDS]

Target: fixtures/c/switch_pingpong.c (built here, `-O2 -g -fno-omit-frame-pointer` so the peers'
frame-pointer user stacks are whole): two threads hand a token through a futex, paced to 10k and
100k context switches per second, and time each round trip. For each rate one target runs
throughout; each tool in turn profiles it for SECONDS (default 10):

- netprobe: `netprobe profile --off-cpu -p PID --duration SECONDSs --json`, and at 100k also
  with `--off-cpu-every=10` (one stack in ten taken, each weighed ten);
- bcc's offcputime: `/usr/sbin/offcputime -p PID SECONDS`, the libbpf build Debian ships in
  `libbpf-tools` (source package bpfcc, the same release as `bpfcc-tools`). The Python
  `offcputime-bpfcc` attaches a kprobe to finish_task_switch; on a kernel without kprobes (this
  VM's: no kprobe PMU, no kprobe_events) it cannot start, and the script says so and falls back to
  the libbpf build, which attaches to the sched_switch tracepoint through BTF;
- `perf sched record -p PID -- sleep SECONDS` (scheduler tracepoints, no stacks: no off-CPU
  profile by itself), and `perf sched record -g` followed by `perf sched timehist`, which prints
  each wait with the stack the thread left with: the equivalent answer, post-processing included.

Baseline windows without a tool run before and after the tools. The target's figures are read
from its own report (switch_pingpong prints one JSON line per window) over a window inside the
tool's run, from SETTLE seconds after the tool starts to one second before it stops, so tool
start-up and teardown are left out. Printed per rate and tool: the tool's CPU (user+sys of its
process tree for its whole run, post-processing included, and as a percentage of one core over
SECONDS), its wall time (a tool that falls behind runs past SECONDS), the events it handled per
second, lost events it reported, the off-CPU time it attributed to the target, the target's
achieved switches/s, round-trip latency and CPU per round trip, the slowdown (mean round-trip
latency with the tool over the baselines' mean) and the tool's CPU over netprobe's.
"""
import datetime
import json
import os
import platform
import re
import resource
import shutil
import subprocess
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
RATES = [10_000, 100_000]
SETTLE = 3.0
BCC_PY = "/usr/sbin/offcputime-bpfcc"
BCC_LIBBPF = "/usr/sbin/offcputime"


def build(tmp):
    exe = os.path.join(tmp, "switch_pingpong")
    subprocess.run(["cc", "-O2", "-g", "-fno-omit-frame-pointer", "-pthread", "-o", exe,
                    os.path.join(ROOT, "fixtures/c/switch_pingpong.c")], check=True)
    return exe


class Target:
    def __init__(self, exe, rate):
        self.p = subprocess.Popen([exe, str(rate)], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                  text=True)
        self.pid = int(self.p.stdout.readline().split()[1])

    def mark(self):
        """Ends the target's current window and returns its figures."""
        self.p.stdin.write("\n")
        self.p.stdin.flush()
        return json.loads(self.p.stdout.readline())

    def stop(self):
        self.p.stdin.close()
        self.p.wait()


def system_switches():
    with open("/proc/stat") as f:
        for line in f:
            if line.startswith("ctxt "):
                return int(line.split()[1])
    return 0


def run_tool(target, cmd, secs, out_path):
    """Runs `cmd` while the target runs; returns (target window, tool CPU s, stdout, stderr,
    system-wide switches during the run)."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    sw0 = system_switches()
    t0 = time.monotonic()
    with open(out_path, "w") as out, open(out_path + ".err", "w") as err:
        p = subprocess.Popen(cmd, stdout=out, stderr=err)
        time.sleep(SETTLE)
        target.mark()
        time.sleep(secs - SETTLE - 1.0)
        window = target.mark()
        p.wait()
    window["tool_wall_s"] = time.monotonic() - t0
    sw1 = system_switches()
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    with open(out_path) as f:
        stdout = f.read()
    with open(out_path + ".err") as f:
        stderr = f.read()
    return window, cpu, stdout, stderr, sw1 - sw0


def cpu_of(cmd, out_path):
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    with open(out_path, "w") as out:
        p = subprocess.run(cmd, stdout=out, stderr=subprocess.PIPE, text=True)
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    return (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime), p.stderr


def netprobe_cmd(np, pid, secs, every):
    return [np, "profile", "--off-cpu", "-p", str(pid), "--duration", f"{secs}s", "--json"] + \
        ([f"--off-cpu-every={every}"] if every > 1 else [])


def netprobe_row(np, target, secs, tmp, every=1):
    window, cpu, out, err, _ = run_tool(target, netprobe_cmd(np, target.pid, secs, every), secs,
                                        os.path.join(tmp, "netprobe.json"))
    try:
        v = json.loads(out)
    except ValueError:
        sys.stderr.write("netprobe printed no JSON:\n" + err[-2000:])
        return dict(window=window, cpu=cpu, events=None, lost="?", off_s=None)
    lost = f"{v.get('lost', 0)} lost, {v.get('throttled', 0)} throttled"
    return dict(window=window, cpu=cpu, events=v.get("switches", 0) / secs, lost=lost,
                off_s=v.get("total", 0) / 1e6, note="waits paired / s")


def bcc_works(pid):
    """Whether the Python offcputime-bpfcc starts here (it needs kprobes)."""
    if not os.path.exists(BCC_PY):
        return False, "not installed"
    p = subprocess.run([BCC_PY, "-p", str(pid), "-f", "1"], capture_output=True, text=True)
    if p.returncode == 0:
        return True, ""
    return False, (p.stderr.strip().splitlines() or ["exit status %d" % p.returncode])[-1]


def bcc_row(target, secs, tmp, python_bcc):
    if not python_bcc and not os.path.exists(BCC_LIBBPF):
        sys.exit(f"{BCC_LIBBPF} is needed here: apt-get install libbpf-tools")
    if python_bcc:
        cmd = [BCC_PY, "-p", str(target.pid), "-f", str(secs)]
    else:
        cmd = [BCC_LIBBPF, "-p", str(target.pid), str(secs)]
    window, cpu, out, err, sysw = run_tool(target, cmd, secs, os.path.join(tmp, "bcc.txt"))
    if python_bcc:
        total_us = sum(int(l.rsplit(" ", 1)[1]) for l in out.splitlines() if " " in l)
    else:
        # Blocks of frames, "-  comm (pid)", then the total in microseconds on its own line.
        total_us = sum(int(l) for l in (l.strip() for l in out.splitlines()) if l.isdigit())
    lost = "; ".join(l.strip() for l in err.splitlines() if re.search(r"lost|miss|drop", l, re.I))
    return dict(window=window, cpu=cpu, events=sysw / secs, lost=lost or "none reported",
                off_s=total_us / 1e6, note="every switch on the host / s")


def perf_row(target, secs, tmp, stacks):
    data = os.path.join(tmp, "perf.data")
    cmd = ["perf", "sched", "record", "-o", data] + (["-g"] if stacks else []) + \
        ["-p", str(target.pid), "--", "sleep", str(secs)]
    window, cpu, _, err, _ = run_tool(target, cmd, secs, os.path.join(tmp, "perf.out"))
    m = re.search(r"\((\d+) samples\)", err)
    records = int(m.group(1)) if m else 0
    lost = [l.strip() for l in err.splitlines() if re.search(r"lost|drop", l, re.I)]
    off_s = None
    if stacks:
        th = os.path.join(tmp, "timehist.txt")
        post, perr = cpu_of(["perf", "sched", "timehist", "-i", data], th)
        cpu += post
        lost += [l.strip() for l in perr.splitlines() if re.search(r"lost|drop", l, re.I)]
        off_us = 0.0
        # wait time (switched out until woken) + sch delay (woken until running), in ms.
        pat = re.compile(r"\[(\d+)(?:/(\d+))?\]\s+([\d.]+)\s+([\d.]+)\s+[\d.]+")
        with open(th) as f:
            for line in f:
                m = pat.search(line)
                if m and int(m.group(2) or m.group(1)) == target.pid:
                    off_us += (float(m.group(3)) + float(m.group(4))) * 1000.0
        off_s = off_us / 1e6
    os.remove(data)
    return dict(window=window, cpu=cpu, events=records / secs,
                lost="; ".join(lost) or "none reported", off_s=off_s,
                note="records written / s")


def baseline(target, secs):
    target.mark()
    time.sleep(secs - SETTLE - 1.0)
    return target.mark()


def fmt(x, spec):
    return "-" if x is None else format(x, spec)


def machine():
    model = ""
    for line in subprocess.run(["lscpu"], capture_output=True, text=True).stdout.splitlines():
        if line.startswith("Model name:"):
            model = line.split(":", 1)[1].strip()
    perf = subprocess.run(["perf", "--version"], capture_output=True, text=True).stdout.strip()
    return (f"{datetime.date.today()}, {os.cpu_count()} cores ({model}), Linux "
            f"{platform.release()}, {perf}")


def main():
    np = sys.argv[1]
    secs = int(sys.argv[2]) if len(sys.argv) > 2 else 10
    print(f"Measured {machine()}; {secs} s per tool, target window {SETTLE:.0f} s to "
          f"{secs - 1} s into each run.")
    with tempfile.TemporaryDirectory() as tmp:
        exe = build(tmp)
        rows = []
        notes = []
        python_bcc = None
        for rate in RATES:
            t = Target(exe, rate)
            time.sleep(1.0)
            if python_bcc is None:
                python_bcc, why = bcc_works(t.pid)
                if not python_bcc:
                    notes.append(f"{BCC_PY} cannot start on this kernel ({why}); "
                                 f"{BCC_LIBBPF} (libbpf-tools) measured instead.")
            bcc_name = "offcputime-bpfcc -f" if python_bcc else "bcc offcputime (libbpf-tools)"
            base = [baseline(t, secs)]
            res = [("netprobe profile --off-cpu", netprobe_row(np, t, secs, tmp)),
                   (bcc_name, bcc_row(t, secs, tmp, python_bcc)),
                   ("perf sched record (no stacks)", perf_row(t, secs, tmp, False)),
                   ("perf sched record -g + timehist", perf_row(t, secs, tmp, True))]
            if rate >= 100_000:
                res.append(("netprobe profile --off-cpu --off-cpu-every=10",
                            netprobe_row(np, t, secs, tmp, 10)))
            base.append(baseline(t, secs))
            t.stop()
            lat0 = sum(b["latency_mean_us"] for b in base) / len(base)
            cpu_np = res[0][1]["cpu"]
            for b in base:
                rows.append((rate, "none (baseline)", None, b, None, "-", None, None, None))
            for name, r in res:
                w = r["window"]
                slow = 100.0 * (w["latency_mean_us"] / lat0 - 1.0)
                ratio = r["cpu"] / cpu_np if cpu_np > 0 else None
                rows.append((rate, name, r["cpu"], w, r["events"], r["lost"], r["off_s"], slow,
                             ratio))
        print()
        print("| switches/s asked | tool | tool CPU s | tool CPU % | events/s | lost | "
              "off-CPU s attributed | tool wall s | target switches/s | round trip µs (p99) | "
              "target CPU µs/trip | slowdown % | CPU vs netprobe |")
        print("|---:|---|---:|---:|---:|---|---:|---:|---:|---:|---:|---:|---:|")
        for rate, name, cpu, w, ev, lost, off_s, slow, ratio in rows:
            pct = None if cpu is None else 100.0 * cpu / secs
            print(f"| {rate // 1000}k | {name} | {fmt(cpu, '.2f')} | {fmt(pct, '.1f')} | "
                  f"{fmt(ev, ',.0f')} | {lost} | {fmt(off_s, '.2f')} | "
                  f"{fmt(w.get('tool_wall_s'), '.1f')} | "
                  f"{w['switches_per_s']:,.0f} | {w['latency_mean_us']:.1f} "
                  f"({w['latency_p99_us']:.0f}) | {w['cpu_us_per_round_trip']:.1f} | "
                  f"{fmt(slow, '+.1f')} | {fmt(ratio, '.2f') + ('x' if ratio else '')} |")
        notes.append("events/s: for netprobe, waits paired; for bcc, every context switch on "
                     "the host (its program runs on each); for perf, records written.")
        for n in notes:
            print("- " + n)


if __name__ == "__main__":
    if shutil.which("perf") is None:
        sys.exit("perf is not installed")
    if not os.path.exists(BCC_PY) and not os.path.exists(BCC_LIBBPF):
        sys.exit("bcc's offcputime is not installed: apt-get install bpfcc-tools libbpf-tools")
    main()
