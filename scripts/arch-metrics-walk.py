# Used by scripts/arch-metrics.sh: gdb -batch -x THIS --args BIN ARGS... runs the walk with one
# temporary breakpoint on each function listed in $WALK_FUNCS ("hexaddr name" lines, link-time
# addresses of the executable) and writes the functions that were reached to $WALK_OUT.
# With $WALK_CALLS set, it also writes there, in the order they happened, one line per first call
# of a function: "THREAD FUNC CALLER...", link-time hex addresses, FUNC the function entered and
# CALLER... the return addresses (minus one: inside the calling instruction) of the frames of
# the executable that called it, innermost first. scripts/arch-metrics-calls.py reads it.
import gdb, os
funcs = [l.split()[0] for l in open(os.environ["WALK_FUNCS"]) if l.strip()]
calls_path = os.environ.get("WALK_CALLS")
gdb.execute("set pagination off")
gdb.execute("set confirm off")
gdb.execute("set detach-on-fork on")
gdb.execute("set follow-fork-mode parent")
gdb.execute("starti", to_string=True)
pid = gdb.selected_inferior().pid
exe = os.path.realpath("/proc/%d/exe" % pid)
base = None
lo, hi = None, None
for line in open("/proc/%d/maps" % pid):
    parts = line.split()
    if len(parts) >= 6 and os.path.realpath(parts[5]) == exe:
        start, end = (int(x, 16) for x in parts[0].split("-"))
        lo = start if lo is None else min(lo, start)
        hi = end if hi is None else max(hi, end)
        if int(parts[2], 16) == 0 and base is None:
            base = start
hit = set()
bps = {}
for f in funcs:
    a = base + int(f, 16)
    bp = gdb.Breakpoint("*%#x" % a, internal=True, temporary=True)
    bp.silent = True
    bps[bp.number] = f
calls = open(calls_path, "w", buffering=1) if calls_path else None


def callers():
    out = []
    frame = gdb.newest_frame().older()
    while frame is not None and len(out) < 512:
        pc = frame.pc()
        if lo <= pc < hi:
            out.append("%x" % (pc - base - 1))
        try:
            frame = frame.older()
        except gdb.error:
            break
    return out


def on_stop(ev):
    if isinstance(ev, gdb.BreakpointEvent):
        for b in ev.breakpoints:
            if b.number in bps:
                hit.add(bps[b.number])
                if calls:
                    tid = gdb.selected_thread().ptid[1]
                    calls.write(" ".join([str(tid), bps[b.number]] + callers()) + "\n")


gdb.events.stop.connect(on_stop)
# Breakpoints stay in the program while it is stopped: otherwise gdb takes out and puts back
# every one of the thousands of breakpoints at each stop. (Set after they are made: made with it
# on, each new one makes gdb go over all the others.)
gdb.execute("set breakpoint always-inserted on")
while True:
    try:
        gdb.execute("continue", to_string=True)
    except gdb.error:
        break
    if not gdb.selected_inferior().pid:
        break
if calls:
    calls.close()
with open(os.environ["WALK_OUT"], "w") as out:
    for h in sorted(hit):
        out.write(h + "\n")
