#!/usr/bin/env python3
# Used by scripts/arch-metrics.sh: the walk of one request through netprobe's source files, from
# the first calls arch-metrics-walk.py recorded (WALK_CALLS: "THREAD FUNC CALLER..." lines).
#
# usage: arch-metrics-calls.py BIN CALLS LAYERS
#   BIN     the debug binary the walk ran (its symbols and line tables)
#   CALLS   the recorded first calls, in the order they happened
#   LAYERS  `NETPROBE_LAYERS_REPORT` of netprobe-cli/tests/layers.rs: "INDEX:LAYER<TAB>FILE" lines
#
# Each frame is mapped to the file its function is defined in (the function that holds the
# address, from `nm -n`, then `addr2line` on that function's start); frames outside the two
# crates' sources (std, dependencies) are skipped, and consecutive frames of one file merge. At
# each first call, the thread's stack of files is compared with the one at its previous first
# call: control returned down to their common part, landing in each caller's file on the way,
# then called up to the new one. That sequence of stays in files is the walk; from it:
#   files entered   distinct files of every thread's walk;
#   entries         stays (a file entered again after another counts again);
#   returns         stays in a file the same thread had already left;
#   calls up        calls from a file of a lower layer into one of a higher layer (LAYERS).
# Only first calls stop the program, so these are what the first call of each function shows:
# repeated calls of functions already run are not seen (a lower bound for entries and returns).
import bisect, collections, re, subprocess, sys

bin_path, calls_path, layers_path = sys.argv[1:4]

layer = {}
for line in open(layers_path):
    m = re.match(r"^(\d+):(\S+)\t(\S+)$", line.rstrip("\n"))
    if m:
        layer[m.group(3)] = (int(m.group(1)), m.group(2))

syms = []
for line in subprocess.run(["nm", "-n", "--defined-only", bin_path], capture_output=True, text=True).stdout.splitlines():
    parts = line.split()
    if len(parts) >= 3 and parts[1] in "tTwW":
        syms.append(int(parts[0], 16))
syms = sorted(set(syms))

records = []
for line in open(calls_path):
    parts = line.split()
    if len(parts) >= 2:
        records.append((parts[0], [int(a, 16) for a in parts[1:]]))


def start_of(addr):
    i = bisect.bisect_right(syms, addr) - 1
    return syms[i] if i >= 0 else addr


starts = sorted({start_of(a) for _, addrs in records for a in addrs})
lines = subprocess.run(
    ["addr2line", "-e", bin_path], input="".join("%x\n" % s for s in starts), capture_output=True, text=True
).stdout.splitlines()
file_of_start = {}
for s, l in zip(starts, lines):
    m = re.search(r"/(netprobe-(?:cli|core)/src/[^:]+):", l)
    file_of_start[s] = m.group(1) if m else None

walks = collections.OrderedDict()
prev = {}
calls_up = collections.Counter()
calls_unlayered = collections.Counter()
for tid, addrs in records:
    # addrs: the function entered, then its callers innermost first: the stack is the reverse.
    stack = []
    for a in reversed(addrs):
        f = file_of_start.get(start_of(a))
        if f and (not stack or stack[-1] != f):
            stack.append(f)
    before = prev.get(tid, [])
    k = 0
    while k < min(len(before), len(stack)) and before[k] == stack[k]:
        k += 1
    steps = [(before[i], None) for i in range(len(before) - 2, k - 2, -1) if i >= 0]
    steps += [(stack[i], stack[i - 1] if i > 0 else None) for i in range(k, len(stack))]
    walk = walks.setdefault(tid, [])
    for f, caller in steps:
        if caller is not None:
            lc, lf = layer.get(caller), layer.get(f)
            if lc is None or lf is None:
                calls_unlayered[(caller, f)] += 1
            elif lf[0] > lc[0]:
                calls_up[(caller, f)] += 1
        if not walk or walk[-1] != f:
            walk.append(f)
    prev[tid] = stack

files = set()
entries = returns = 0
for walk in walks.values():
    seen = set()
    for f in walk:
        entries += 1
        if f in seen:
            returns += 1
        seen.add(f)
    files |= seen
top = {f.split("/src/")[0] + "/" + f.split("/src/")[1].split("/")[0].removesuffix(".rs") for f in files}
print("- threads: %d; files entered: %d (%d top-level modules); entries: %d; returns to a file already left: %d"
      % (len(walks), len(files), len(top), entries, returns))
print("- calls that run back up a layer: %d distinct (caller file -> called file), %d calls seen"
      % (len(calls_up), sum(calls_up.values())))
for (c, f), n in sorted(calls_up.items()):
    print("  - `%s` (%s) -> `%s` (%s): %d" % (c, layer[c][1], f, layer[f][1], n))
if calls_unlayered:
    print("- calls between files of which one has no layer in LAYERS yet: %d distinct, %d calls"
          % (len(calls_unlayered), sum(calls_unlayered.values())))
    for (c, f), n in sorted(calls_unlayered.items()):
        print("  - `%s` -> `%s`: %d" % (c, f, n))
for tid, walk in walks.items():
    print("- thread %s walk (%d stays): %s" % (tid, len(walk), " > ".join(w.replace("netprobe-", "").replace("/src/", ":") for w in walk)))
