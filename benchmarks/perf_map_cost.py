#!/usr/bin/env python3
"""What a .NET program pays while its runtime writes a perf map (/tmp/perf-PID.map), turned on in
the running process through its diagnostics socket, as `netprobe profile` does for a session.

Usage (root for the profile phase): python3 benchmarks/perf_map_cost.py [NETPROBE] [RUNS]

Target: the IL sample app (sample-app/dotnet, built by run.sh; .NET 8.0.4 from fetch-runtimes.sh).

- Steady throughput: `spin --report-ms 500` (String.Replace in a loop, its code compiled long
  since) prints the calls done in each half second. One process per run; after a 4 s warm-up
  the script cycles through the states, 3 s each, several times: perf map off; perf map on
  (EnablePerfMap, type 3 = perf map only, through the socket); off; with NETPROBE, on plus a whole
  `NETPROBE profile -p PID` session (99 Hz, JSON to /dev/null). A half second counts for a state
  when no switch fell inside it. Interleaving keeps the slow drift of a shared machine out of
  the ratio.
- JIT-heavy: `jit --count 6 --methods 10000 --delay-ms 1500` (each round emits 10,000
  DynamicMethods and calls each once: 10,000 JIT compilations) in a fresh process per state and
  run: perf map off; turned on through the socket during the delay; on from start-up
  (DOTNET_PerfMapEnabled=1, for comparison). Round 1 (the emit machinery warming up) is left out;
  a run's figure is the median of rounds 2-6.

Printed: per state the median (over all its half seconds, or over runs) and the ratio to off,
by wall time and by the process's own CPU time (the app reads it from /proc through
Process.TotalProcessorTime, 10 ms ticks), which other work on a shared machine disturbs less.
The client of the diagnostics protocol is here, 30 lines (the .NET runtime's
`src/native/eventpipe/ds-protocol.h`: magic `DOTNET_IPC_V1\\0`, u16 size, u8 command set, u8
command, u16 reserved; process command set 0x04, EnablePerfMap 0x05 with a u32 type,
DisablePerfMap 0x06; the reply's command set 0xFF, 0x00 = OK).
"""
import datetime
import glob
import os
import platform
import socket
import statistics
import struct
import subprocess
import sys
import threading
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
CACHE = os.environ.get("NETPROBE_CACHE", os.path.expanduser("~/.cache/netprobe"))
DOTNET = os.path.join(CACHE, "dotnet", "8", "dotnet")

ENABLE, DISABLE, PERF_MAP = 0x05, 0x06, 3
METHODS = 10000


def ipc(pid, command, payload=b""):
    """Sends one process command to the runtime of `pid`; True when it answers OK."""
    socks = glob.glob(f"/tmp/dotnet-diagnostic-{pid}-*-socket")
    if not socks:
        raise RuntimeError(f"no diagnostics socket for {pid}")
    msg = b"DOTNET_IPC_V1\0" + struct.pack("<HBBH", 20 + len(payload), 0x04, command, 0) + payload
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as s:
        s.settimeout(5)
        s.connect(socks[0])
        s.sendall(msg)
        reply = s.recv(24)
    return len(reply) >= 20 and reply[16] == 0xFF and reply[17] == 0x00


def perf_map(pid, on):
    ok = ipc(pid, ENABLE, struct.pack("<I", PERF_MAP)) if on else ipc(pid, DISABLE)
    if not ok:
        raise RuntimeError(f"the runtime refused {'EnablePerfMap' if on else 'DisablePerfMap'}")


def app():
    out = subprocess.run([os.path.join(ROOT, "sample-app/dotnet/run.sh"), "--build-only"],
                         check=True, capture_output=True, text=True).stdout
    return out.strip().splitlines()[-1]


def start(dll, args, env=None):
    e = dict(os.environ, DOTNET_SYSTEM_GLOBALIZATION_INVARIANT="1")
    e.pop("DOTNET_PerfMapEnabled", None)
    e.update(env or {})
    p = subprocess.Popen([DOTNET, dll] + args, stdout=subprocess.PIPE, text=True, env=e)
    p.stdout.readline()  # pid=... mode=...
    return p


def cleanup(pid):
    for f in (f"/tmp/perf-{pid}.map", f"/tmp/perfinfo-{pid}.map", f"/tmp/jit-{pid}.dump"):
        try:
            os.unlink(f)
        except FileNotFoundError:
            pass


def steady(dll, netprobe, cycles):
    states = ["off", "perf map on", "off"] + (["perf map on + netprobe profile"] if netprobe else [])
    seconds = 4 + cycles * len(states) * 3 + 2
    p = start(dll, ["spin", "--ms", str(seconds * 1000), "--report-ms", "500"])
    lines = []

    def read():
        for line in p.stdout:
            if line.startswith("rate "):
                kv = dict(x.split("=") for x in line.split()[1:])
                lines.append((time.monotonic(), int(kv["ms"]) / 1000,
                              int(kv["calls"]) * 1000 / int(kv["ms"]),
                              int(kv["calls"]) * 1000 / max(1, int(kv["cpu_ms"]))))

    t = threading.Thread(target=read, daemon=True)
    t.start()
    time.sleep(4)
    spans = []  # (state, from, to)
    on = False
    for _ in range(cycles):
        for state in states:
            want = state != "off"
            if want != on:
                perf_map(p.pid, want)
                on = want
            t0 = time.monotonic()
            if state.endswith("netprobe profile"):
                subprocess.run([netprobe, "profile", "-p", str(p.pid), "--duration", "3s", "--json"],
                               stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, check=False)
            else:
                time.sleep(3)
            spans.append((state, t0, time.monotonic()))
    if on:
        perf_map(p.pid, False)
    p.wait()
    t.join()
    cleanup(p.pid)
    rates = {s: [] for s in states}
    for end, length, per_s, per_cpu_s in lines:
        for state, a, b in spans:
            if a + 0.05 <= end - length and end <= b:
                rates[state].append((per_s, per_cpu_s))
    return rates


def jit_run(dll, state):
    env = {"DOTNET_PerfMapEnabled": "1"} if state == "on from start-up (env)" else {}
    p = start(dll, ["jit", "--count", "6", "--methods", str(METHODS), "--delay-ms", "1500"], env)
    if state == "perf map on (socket)":
        time.sleep(0.5)
        perf_map(p.pid, True)
    ms = []
    for line in p.stdout:
        if line.startswith("jit round="):
            kv = dict(x.split("=") for x in line.split()[1:])
            if kv["round"] != "1":
                ms.append((float(kv["ms"]), float(kv["cpu_ms"])))
    p.wait()
    size = os.path.getsize(f"/tmp/perf-{p.pid}.map") if os.path.exists(f"/tmp/perf-{p.pid}.map") else 0
    cleanup(p.pid)
    return tuple(statistics.median(x[i] for x in ms) for i in (0, 1)), size


def main():
    netprobe = sys.argv[1] if len(sys.argv) > 1 else None
    runs = int(sys.argv[2]) if len(sys.argv) > 2 else 5
    dll = app()
    print(f"# {datetime.date.today()} {platform.node()} {os.cpu_count()} CPUs, Linux {platform.release()}, "
          f".NET 8.0.4, netprobe {netprobe or '(none)'}, {runs} runs")
    steady_rates = {}
    for _ in range(max(1, runs // 2)):
        for k, v in steady(dll, netprobe, 3).items():
            steady_rates.setdefault(k, []).extend(v)
    col = lambda v, i: [x[i] for x in v]
    base = [statistics.median(col(steady_rates["off"], i)) for i in (0, 1)]
    print("\nsteady (spin): String.Replace calls per second and per CPU second of the process, median over half seconds")
    print("| state | half seconds | calls/s (quartiles) | vs off | calls per CPU s (quartiles) | vs off |")
    print("|---|---:|---:|---:|---:|---:|")
    for k, v in steady_rates.items():
        cells = []
        for i in (0, 1):
            m = statistics.median(col(v, i))
            q = statistics.quantiles(col(v, i), n=4)
            cells.append(f"{m:,.0f} ({q[0]:,.0f} - {q[2]:,.0f}) | {m / base[i]:.3f}x")
        print(f"| {k} | {len(v)} | {' | '.join(cells)} |")
    states = ["off", "perf map on (socket)", "on from start-up (env)"]
    jit = {s: [] for s in states}
    sizes = {s: [] for s in states}
    for i in range(runs):
        for s in states[i % 3:] + states[:i % 3]:
            ms, size = jit_run(dll, s)
            jit[s].append(ms)
            sizes[s].append(size)
    base = [statistics.median(col(jit["off"], i)) for i in (0, 1)]
    print(f"\nJIT-heavy (jit): one round = {METHODS:,} methods compiled; a run's median of rounds 2-6, median over runs")
    print("| state | runs | wall ms per round | vs off | CPU ms per round | CPU µs per method | vs off | perf map bytes |")
    print("|---|---:|---:|---:|---:|---:|---:|---:|")
    for s in states:
        w, c = (statistics.median(col(jit[s], i)) for i in (0, 1))
        print(f"| {s} | {len(jit[s])} | {w:.1f} | {w / base[0]:.3f}x | {c:.1f} | {c * 1000 / METHODS:.1f} "
              f"| {c / base[1]:.3f}x | {statistics.median(sizes[s]):,.0f} |")
        print(f"<!-- {s} (wall, cpu): {', '.join(f'{a:.0f}/{b:.0f}' for a, b in jit[s])} -->")

if __name__ == "__main__":
    main()
