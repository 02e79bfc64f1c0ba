# Used by scripts/arch-metrics.sh: gdb -batch -x THIS --args BIN ARGS... runs the walk with one
# temporary breakpoint on each function listed in $WALK_FUNCS ("hexaddr name" lines, link-time
# addresses of the executable) and writes the functions that were reached to $WALK_OUT.
import gdb, os
funcs = [l.split()[0] for l in open(os.environ["WALK_FUNCS"]) if l.strip()]
gdb.execute("set pagination off")
gdb.execute("set confirm off")
gdb.execute("set detach-on-fork on")
gdb.execute("set follow-fork-mode parent")
gdb.execute("starti", to_string=True)
pid = gdb.selected_inferior().pid
exe = os.path.realpath("/proc/%d/exe" % pid)
base = None
for line in open("/proc/%d/maps" % pid):
    parts = line.split()
    if len(parts) >= 6 and os.path.realpath(parts[5]) == exe and int(parts[2], 16) == 0:
        base = int(parts[0].split("-")[0], 16)
        break
hit = set()
bps = {}
for f in funcs:
    a = base + int(f, 16)
    bp = gdb.Breakpoint("*%#x" % a, internal=True, temporary=True)
    bp.silent = True
    bps[bp.number] = f
def on_stop(ev):
    if isinstance(ev, gdb.BreakpointEvent):
        for b in ev.breakpoints:
            if b.number in bps:
                hit.add(bps[b.number])
gdb.events.stop.connect(on_stop)
while True:
    try:
        gdb.execute("continue", to_string=True)
    except gdb.error:
        break
    if not gdb.selected_inferior().pid:
        break
with open(os.environ["WALK_OUT"], "w") as out:
    for h in sorted(hit):
        out.write(h + "\n")
