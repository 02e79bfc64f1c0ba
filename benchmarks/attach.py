#!/usr/bin/env python3
"""Attach and detach time for 1 to ~70,000 uprobes: netprobe vs perf probe and bpftrace.

Usage (root, from the workspace root, after `cargo build --release -p netprobe-cli`):

    python3 benchmarks/attach.py [RUNS] [ROWS]   # default 5 runs per cell, rows 1,100,1000;
                                                 # ROWS: comma-separated of 1,100,1000,10000,dockerd

Targets: fixtures/c/many.c (functions f0..f999) and fixtures/c/many10k.c (f0..f9999), built here
with cc -O2; `dockerd`: a copy of Debian's /usr/sbin/dockerd (every function of its pclntab for
netprobe, every symbol bpftrace and perf find in its .dynsym; a copy, so the running Docker daemon
is not slowed by ~70,000 breakpoints). Patterns: `f5` (1 probe), `f*0` (f0, f10, ..., f990: 100
probes), `f*0` ... `f*9` (every function of the program; `f*` would also match crt's
frame_dummy, which bpftrace refuses), `*` for dockerd.

Measured per tool, median of RUNS:
- create only (probes registered, not enabled): `netprobe probe add` vs `perf probe --add`
  (`--max-probes` raised past its default of 128 matches); every row (for dockerd the only peer
  figure, see PEERLESS);
- live (registered and enabled, ready to record): `netprobe count` until it prints
  "probe(s) on"; `bpftrace` until its BEGIN block prints (bpftrace runs BEGIN after attaching);
  `perf probe --add` then `perf record -a -e GROUP:*` until its workload prints (perf starts the
  workload once every event is open and enabled);
- detach: from SIGINT to the tool's exit, everything removed (for perf: perf record's exit, then
  `perf probe --del`);
- peak RSS of the tool (ru_maxrss from wait4; for perf the larger of perf probe and perf record).
A peer that is not live (or not gone) after CAP seconds is killed and shown as "> CAP s"; a
capped peer is not run again for that row (the cap is what it would show again).
ATTACH_NO_PEERS=1 runs netprobe only.
ATTACH_MODES=hostwide,pid (default hostwide) also times netprobe scoped to one process, `netprobe
count -p PID`, in the same runs (host-wide, then -p, each run): PID is the row's program started
with a preloaded constructor (HOLD below) that waits on stdin, so the process maps the program
while nothing of it runs. A -p session opens its events as perf events on the target's tasks
(netprobe-cli/src/backend/per_task): `count` counts in the kernel, a filtered counting event per
probe on shared multi-probe events, when the plan has at most 16 probes (MAX_COUNTED_PROBES), else
records hits through the same shared events, as the host-wide session does; the table says which.
bpftrace runs with BPFTRACE_MAX_PROBES raised (its default limit is 512).
"""
import os
import re
import resource
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import threading
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
NP = os.path.join(ROOT, "target", "release", "netprobe")
CAP = 300.0
DIGITS = [f"f*{d}" for d in range(10)]
# Rows whose peers only create their probes (`perf probe --add`, then `--del`, capped): live,
# bpftrace and perf record would open ~70,000 uprobe perf events, and each waits for a grace
# period when closed (~50-90 ms here; 1,000 took bpftrace 89 s, 10,000 more than the cap), so a
# peer stopped at the cap would keep the shared machine busy for over an hour. Probes that were
# never enabled are removed without grace periods.
PEERLESS = {"dockerd"}


# Preloaded into the -p target: holds the process after the program is mapped, before main, until
# its stdin closes.
HOLD = r"""
#include <unistd.h>
__attribute__((constructor)) static void hold(void) {
    char c;
    write(1, "held\n", 5);
    while (read(0, &c, 1) > 0) {}
}
"""
MAX_COUNTED_PROBES = 16


class Capped(Exception):
    pass


def reap(p):
    """Waits for `p`; returns its peak RSS in MiB."""
    _, _, ru = os.wait4(p.pid, 0)
    p.returncode = 0
    return ru.ru_maxrss / 1024


def kill_group(p):
    try:
        os.killpg(p.pid, signal.SIGKILL)
    except ProcessLookupError:
        pass


def timed(cmd):
    """(seconds, peak RSS MiB) of `cmd`; None when it failed or passed the cap."""
    t = time.monotonic()
    p = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
                         start_new_session=True)
    timer = threading.Timer(CAP, kill_group, [p])
    timer.start()
    err = p.stderr.read()
    _, status, ru = os.wait4(p.pid, 0)
    timer.cancel()
    dt = time.monotonic() - t
    if dt >= CAP:
        raise Capped()
    if status != 0:
        print(f"  {cmd[0]} failed: {err.decode(errors='replace')[-300:]}", file=sys.stderr)
        return None
    return dt, ru.ru_maxrss / 1024


def live_then_stop(cmd, marker, stream, env=None, cap=CAP):
    """(seconds until `marker` appears on `stream`, seconds from SIGINT to exit, peak RSS MiB).
    A tool not live within `cap` seconds is killed (Capped); one not gone `cap` seconds after
    SIGINT is killed and not waited for (detach None)."""
    t0 = time.monotonic()
    p = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                         env=env, start_new_session=True)
    src, other = (p.stdout, p.stderr) if stream == "out" else (p.stderr, p.stdout)
    # The other stream is drained so the tool never blocks on a full pipe.
    drained = []
    threading.Thread(target=lambda: drained.append(other.read()), daemon=True).start()
    timer = threading.Timer(cap, kill_group, [p])
    timer.start()
    seen = []
    for line in src:
        seen.append(line)
        if marker in line:
            break
    timer.cancel()
    live = time.monotonic() - t0
    if live >= cap:
        reap(p)
        raise Capped("live")
    if not seen or marker not in seen[-1]:
        reap(p)
        raise RuntimeError(f"{cmd[0]} ended before {marker!r}: {''.join(seen)[-500:]}")
    threading.Thread(target=src.read, daemon=True).start()
    t1 = time.monotonic()
    p.send_signal(signal.SIGINT)
    done = threading.Event()
    rss = []
    threading.Thread(target=lambda: (rss.append(reap(p)), done.set()), daemon=True).start()
    if not done.wait(cap):
        # A tool killed while it detaches keeps closing its probes in the kernel (each uprobe
        # perf event waits for a grace period on close, even after SIGKILL); it is not waited for.
        kill_group(p)
        print(f"  {cmd[0]} not gone {cap:.0f} s after SIGINT; killed, left to finish exiting",
              file=sys.stderr)
        return live, None, None
    return live, time.monotonic() - t1, rss[0]


def perf_group(binary):
    # perf probe names the group after the file: probe_<name up to the first '.', '-'>.
    return "probe_" + re.split(r"[.-]", os.path.basename(binary))[0]


def perf_live_then_stop(binary, pats, work):
    grp = perf_group(binary)
    add = ["perf", "probe", "-q", "-x", binary, "--max-probes", "1000000"]
    for p in pats:
        add += ["-a", p]
    try:
        r = timed(add)
    except Capped:
        # Killed part way: what it created is removed before anything else runs.
        subprocess.run(["perf", "probe", "-q", "-d", f"{grp}:*"], capture_output=True)
        raise
    if r is None:
        subprocess.run(["perf", "probe", "-q", "-d", f"{grp}:*"], capture_output=True)
        return None
    _, rss_add = r
    data = os.path.join(work, "perf.data")
    # perf opens every event on every CPU; it may need many descriptors (up to the hard limit).
    hard = resource.getrlimit(resource.RLIMIT_NOFILE)[1]
    cmd = ["prlimit", f"--nofile={hard}", "perf", "record", "-q", "-a", "-o", data, "-e",
           f"{grp}:*", "--", "sh", "-c", "echo live; exec sleep 100000"]
    try:
        live, stop, rss_rec = live_then_stop(cmd, "live", "out")
    except RuntimeError as e:
        print(f"  perf record: {e}", file=sys.stderr)
        subprocess.run(["perf", "probe", "-q", "-d", f"{grp}:*"], capture_output=True)
        return None
    except Capped:
        # perf record was killed at the cap (and waited for: its events close one grace period
        # at a time); the probes perf probe added are removed before anything else runs.
        subprocess.run(["perf", "probe", "-q", "-d", f"{grp}:*"], capture_output=True)
        raise
    live += r[0]  # perf probe --add, then perf record until live
    t1 = time.monotonic()
    subprocess.run(["perf", "probe", "-q", "-d", f"{grp}:*"], capture_output=True)
    deleted = time.monotonic() - t1
    if stop is None:
        # perf record is still closing its events: they cannot be deleted yet (run
        # `perf probe -d 'GROUP:*'` once it is gone).
        return live, None, None
    return live, stop + deleted, max(rss_add, rss_rec)


def create_then_remove(script, remove):
    """Seconds `sh -c script` took to create probes and remove them (None when it failed,
    "capped" past the cap); then `remove` runs, for whatever a failed or capped run left."""
    try:
        r = timed(["sh", "-c", script])
        result = r and r[0]
    except Capped:
        result = "capped"
    subprocess.run(remove, capture_output=True)
    return result


def build(work, name):
    """Builds fixtures/c/NAME.c with cc -O2 into `work`."""
    out = os.path.join(work, name)
    subprocess.run(["cc", "-O2", "-o", out, os.path.join(ROOT, f"fixtures/c/{name}.c")],
                   check=True)
    return out


def held(binary, work):
    """`binary` started and held before main (see HOLD); the Popen."""
    so = os.path.join(work, "hold.so")
    if not os.path.exists(so):
        src = os.path.join(work, "hold.c")
        with open(src, "w") as f:
            f.write(HOLD)
        subprocess.run(["cc", "-O2", "-shared", "-fPIC", "-o", so, src], check=True)
    p = subprocess.Popen([binary, "1"], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                         env=dict(os.environ, LD_PRELOAD=so), text=True)
    if p.stdout.readline().strip() != "held":
        raise RuntimeError(f"{binary} not held")
    return p


def row_spec(row, work):
    if row == "dockerd":
        d = os.path.join(work, "dockerd")
        shutil.copy2("/usr/sbin/dockerd", d)
        return "every function of dockerd", d, ["*"], True
    n = int(row)
    binary = build(work, "many10k" if n == 10000 else "many")
    pats = {1: ["f5"], 100: ["f*0"], 1000: DIGITS, 10000: DIGITS}[n]
    return f"{n:,} (`{' '.join(pats)}`)", binary, pats, True


def fmt(v, scale=1000, digits=0):
    if v is None:
        return "-"
    if v == "capped":
        return f"> {CAP:.0f} s"
    return f"{v * scale:,.{digits}f}"


def med(vals):
    if not vals:
        return None
    if "capped" in vals:
        return "capped"
    if None in vals:
        return None
    return statistics.median(vals)


def main():
    runs = int(sys.argv[1]) if len(sys.argv) > 1 else 5
    rows = (sys.argv[2] if len(sys.argv) > 2 else "1,100,1000").split(",")
    modes = os.environ.get("ATTACH_MODES", "hostwide").split(",")
    work = tempfile.mkdtemp()
    env = dict(os.environ, BPFTRACE_MAX_PROBES="200000")
    out = []
    for row in rows:
        label, binary, pats, create = row_spec(row, work)
        cells = {k: [] for k in ("np_add", "perf_add", "np_live", "np_stop", "np_rss", "bt_live",
                                 "bt_stop", "bt_rss", "pf_live", "pf_stop", "pf_rss", "probes",
                                 "pid_live", "pid_stop", "pid_rss")}
        target = held(binary, work) if "pid" in modes and row not in PEERLESS else None
        capped = set()
        for i in range(runs):
            print(f"row {row} netprobe run {i + 1}/{runs}", file=sys.stderr)
            if create:
                cells["np_add"].append(create_then_remove(
                    f"{NP} probe add --group nptest_attach "
                    + " ".join(f"'{binary}:{p}'" for p in pats)
                    + f" >/dev/null && {NP} probe remove --group nptest_attach",
                    [NP, "probe", "remove", "--group", "nptest_attach"]))
            p = subprocess.run([NP, "count", "--dry-run"] + [f"{binary}:{p}" for p in pats],
                               capture_output=True, text=True)
            cells["probes"].append(p.stdout.count("'p:"))
            # netprobe itself is not capped: its figure is the point of the row.
            live, stop, rss = live_then_stop([NP, "count"] + [f"{binary}:{p}" for p in pats],
                                             "probe(s) on", "err", cap=3600)
            cells["np_live"].append(live)
            cells["np_stop"].append(stop)
            cells["np_rss"].append(rss)
            print(f"  netprobe: live {live:.3f} s, detach {stop}, RSS {rss} MiB", file=sys.stderr)
            if target:
                live, stop, rss = live_then_stop(
                    [NP, "count", "-p", str(target.pid)] + [f"{binary}:{p}" for p in pats],
                    "probe(s) on", "err", cap=3600)
                cells["pid_live"].append(live)
                cells["pid_stop"].append(stop)
                cells["pid_rss"].append(rss)
                print(f"  netprobe -p: live {live:.3f} s, detach {stop}, RSS {rss} MiB",
                      file=sys.stderr)
        if target:
            target.stdin.close()
            target.wait(timeout=60)
        # Peers after netprobe: a peer killed at the cap may keep the kernel busy for a while.
        peers = not os.environ.get("ATTACH_NO_PEERS")
        for i in range(runs if peers else 0):
            print(f"row {row} peers run {i + 1}/{runs}", file=sys.stderr)
            if create and "perf_add" not in capped:
                grp = perf_group(binary)
                cells["perf_add"].append(create_then_remove(
                    f"perf probe -q -x {binary} --max-probes 1000000 "
                    + " ".join(f"-a '{p}'" for p in pats)
                    + f" && perf probe -q -d '{grp}:*'",
                    ["perf", "probe", "-q", "-d", f"{grp}:*"]))
                if cells["perf_add"][-1] == "capped":
                    capped.add("perf_add")
                print(f"  perf probe add+del: {cells['perf_add'][-1]}", file=sys.stderr)
            if row in PEERLESS:
                continue
            for tool, fn in (
                ("bt", lambda: live_then_stop(
                    ["bpftrace", "-e", ", ".join(f"uprobe:{binary}:{p}" for p in pats)
                     + " { @ = count(); } BEGIN { printf(\"live\\n\"); }"], "live", "out", env)),
                ("pf", lambda: perf_live_then_stop(binary, pats, work)),
            ):
                if tool in capped:
                    continue
                try:
                    r = fn()
                except Capped:
                    cells[f"{tool}_live"].append("capped")
                    capped.add(tool)
                    print(f"  {tool}: not live after {CAP:.0f} s", file=sys.stderr)
                    continue
                except RuntimeError as e:
                    print(f"  {tool}: {e}", file=sys.stderr)
                    r = None
                if r is None:
                    cells[f"{tool}_live"].append(None)
                    continue
                live, stop, rss = r
                print(f"  {tool}: live {live:.3f} s, detach {stop}, RSS {rss} MiB", file=sys.stderr)
                cells[f"{tool}_live"].append(live)
                cells[f"{tool}_stop"].append("capped" if stop is None else stop)
                if rss is not None:
                    cells[f"{tool}_rss"].append(rss)
                if stop is None:
                    capped.add(tool)
        m = {k: med(v) for k, v in cells.items()}
        m["runs"] = {k: len(v) for k, v in cells.items()}
        out.append((label, m))
        print(f"  {label}: {m}", file=sys.stderr)

    def ratio(peer, np_):
        if peer == "capped":
            return f"> {CAP / np_:.0f}" if np_ else "-"
        if peer is None or not np_:
            return "-"
        return f"{peer / np_:.1f}"

    print(f"Median of {runs} runs (peers: of the runs made, see below), ms unless marked; "
          "ratio = peer / netprobe; RSS in MiB.\n")
    print("| probes | netprobe probe add+remove | perf probe --add+--del | netprobe live "
          "| bpftrace live | ratio | perf probe + record live | ratio | netprobe detach "
          "| bpftrace detach | ratio | perf detach | ratio | RSS netprobe / bpftrace / perf |")
    print("|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|")
    for label, m in out:
        print(f"| {label} ({m['probes']:,} uprobes) | {fmt(m['np_add'])} | {fmt(m['perf_add'])} | "
              f"{fmt(m['np_live'])} | {fmt(m['bt_live'])} | {ratio(m['bt_live'], m['np_live'])} | "
              f"{fmt(m['pf_live'])} | {ratio(m['pf_live'], m['np_live'])} | "
              f"{fmt(m['np_stop'])} | {fmt(m['bt_stop'])} | {ratio(m['bt_stop'], m['np_stop'])} | "
              f"{fmt(m['pf_stop'])} | {ratio(m['pf_stop'], m['np_stop'])} | "
              f"{fmt(m['np_rss'], 1, 1)} / {fmt(m['bt_rss'], 1, 1)} / {fmt(m['pf_rss'], 1, 1)} |")
    if "pid" in modes:
        print("\nnetprobe count host-wide vs scoped to one process (`-p PID`), same runs; "
              "ratio = -p / host-wide.\n")
        print("| probes | host-wide live | -p live | ratio | host-wide detach | -p detach | ratio "
              "| RSS host-wide / -p | -p recording |")
        print("|---|---:|---:|---:|---:|---:|---:|---:|---|")
        for label, m in out:
            how = ("counted in the kernel"
                   if m["probes"] <= MAX_COUNTED_PROBES else "records, shared multi-probe events")
            print(f"| {label} ({m['probes']:,} uprobes) | {fmt(m['np_live'])} | "
                  f"{fmt(m['pid_live'])} | {ratio(m['pid_live'], m['np_live'])} | "
                  f"{fmt(m['np_stop'])} | {fmt(m['pid_stop'])} | "
                  f"{ratio(m['pid_stop'], m['np_stop'])} | {fmt(m['np_rss'], 1, 1)} / "
                  f"{fmt(m['pid_rss'], 1, 1)} | {how} |")
    print("\nRuns per cell: " + "; ".join(
        f"{label.split(' ')[0]}: netprobe {m['runs']['np_live']}, bpftrace {m['runs']['bt_live']}, "
        f"perf {m['runs']['pf_live']}" for label, m in out))


if __name__ == "__main__":
    main()
