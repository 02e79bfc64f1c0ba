#!/usr/bin/env bash
# Builds the seed corpora of the fuzz targets (netprobe-core/fuzz; netprobe-cli/fuzz's
# grammars and tracefs texts need none beyond their committed ones) that are too big for git, from
# the files the tests already fetch and from tiny programs built here, into DEST/<target>/:
#
#   scripts/fuzz-seeds.sh DEST
#
# Small hand-made or recorded seeds live in git (<crate>/fuzz/seeds/, fixtures/recorded/);
# scripts/fuzz.sh passes both. Inputs missing from the cache are left out with a note (the
# committed seeds still run). Idempotent: the programs built once are kept (in DEST/.work).
#
#   elf_symbols      a tiny C program (with and without .symtab), the same without libc (an
#                    executable and a shared library of about 1 KB), a small system library
#   go_pclntab       the bare function table of each layout (Go 1.2, 1.16, 1.18, 1.20), a few
#                    hundred bytes each (scripts/go-seed-images.py)
#   go_binary        a few-KB synthetic Go executable per layout and per way the reader finds the
#                    table and its text start (scripts/go-seed-images.py)
#   go_buildinfo     the .go.buildinfo section (with the bytes after it) of the real binaries
#                    below, and synthetic ones of both formats (scripts/go-seed-images.py)
#   dotnet_assembly  small ReadyToRun framework assemblies of .NET Core 3.1 and .NET 8, the
#                    IL-only sample app (sample-app/dotnet/fetch-runtimes.sh)
#   dotnet_metadata  the ECMA-335 metadata (CLI header -> metadata directory) of those assemblies
#   bundle           the manifest of the .NET 10 single-file bundle, cut out with its signature
#   symbolize_index  the C programs without libc, the synthetic Go executables and one
#                    ReadyToRun assembly
#
# Real Go programs are over a megabyte: a target mutating one runs a few hundred inputs a second,
# most of them cut-off tables. They go to DEST/real/<target>/ instead (the tiny Go 1.19 program,
# with and without symbols, and the .gopclntab section of it and of each esbuild build of
# scripts/fetch-go-binaries.sh), which scripts/fuzz.sh passes only when asked
# (NETPROBE_FUZZ_REAL_GO=1).
set -euo pipefail
dest=$(realpath -m "${1:?usage: scripts/fuzz-seeds.sh DEST}")
cache=${NETPROBE_CACHE:-"$HOME/.cache/netprobe"}
mkdir -p "$dest"
work="$dest/.work"
mkdir -p "$work"
# What an older version of this script put here would be passed on as seeds: start over (the
# programs built in .work are kept).
find "$dest" -mindepth 1 -maxdepth 1 ! -name .work -exec rm -rf {} +

note() { echo "fuzz-seeds: $*" >&2; }

# A tiny C program and a tiny Go program, built once.
if [[ ! -s "$work/c-tiny" ]] && command -v gcc >/dev/null; then
	printf 'int add(int a, int b) { return a + b; }\nint main(int c, char **v) { (void)v; return add(c, 2); }\n' >"$work/tiny.c"
	gcc -O1 -g0 -o "$work/c-tiny" "$work/tiny.c"
	strip -o "$work/c-tiny.stripped" "$work/c-tiny"
fi
# The same without libc, start files, unwind tables or page alignment: under 2 KB with .symtab.
if [[ ! -s "$work/c-nolibc.so" ]] && command -v gcc >/dev/null; then
	printf 'int add(int a, int b) { return a + b; }\nvoid _start(void) { __asm__ volatile("mov $60, %%%%eax; xor %%%%edi, %%%%edi; syscall" ::: "memory"); }\n' >"$work/nolibc.c"
	small=(-Os -nostdlib -fno-asynchronous-unwind-tables -Wl,--build-id=none -Wl,-z,max-page-size=16 -Wl,-z,noseparate-code)
	# A linker without these options only costs these two seeds.
	gcc "${small[@]}" -static -o "$work/c-nolibc" "$work/nolibc.c" || note "gcc could not build c-nolibc"
	gcc "${small[@]}" -shared -fPIC -o "$work/c-nolibc.so" "$work/nolibc.c" || note "gcc could not build c-nolibc.so"
fi
if [[ ! -s "$work/go-tiny" ]] && command -v go >/dev/null; then
	mkdir -p "$work/gosrc"
	printf 'package main\n\nfunc add(a, b int) int { return a + b }\n\nfunc main() { println(add(1, 2)) }\n' >"$work/gosrc/main.go"
	printf 'module tiny\n\ngo 1.19\n' >"$work/gosrc/go.mod"
	(cd "$work/gosrc" && GOFLAGS=-mod=mod GOCACHE="$work/gocache" go build -o "$work/go-tiny" . &&
		GOCACHE="$work/gocache" go build -ldflags=-s -o "$work/go-tiny.stripped" .)
fi

dotnet8="$cache/dotnet/8/shared/Microsoft.NETCore.App/8.0.4"
dotnet31=$(ls -d "$cache"/dotnet/3.1/shared/Microsoft.NETCore.App/3.1.* 2>/dev/null | head -1 || true)
assemblies=(
	"$dotnet8/System.ComponentModel.EventBasedAsync.dll"
	"$dotnet8/System.Net.Ping.dll"
	"${dotnet31:-/nonexistent}/System.Collections.NonGeneric.dll"
	"$cache/sample-app-dotnet/net8.0/sample-netcore-app.dll"
)
bundle=$(ls "$cache"/dotnet/single-file/*/uncompressed/* 2>/dev/null | head -1 || true)

put() { # put TARGET FILE...: copy the files that exist into DEST/TARGET
	local t=$1
	shift
	mkdir -p "$dest/$t"
	for f in "$@"; do
		local dir
		dir=$(basename "$(dirname "$f")")
		if [[ -s "$f" ]]; then cp -f "$f" "$dest/$t/${dir#.}-$(basename "$f")"; else note "$t: no $f"; fi
	done
}

put elf_symbols "$work/c-tiny" "$work/c-tiny.stripped" "$work/c-nolibc" "$work/c-nolibc.so" \
	/usr/lib/x86_64-linux-gnu/libdl.so.2
put real/go_binary "$work/go-tiny" "$work/go-tiny.stripped"
put dotnet_assembly "${assemblies[@]}"
put symbolize_index "$work/c-nolibc" "$work/c-nolibc.so" "$dotnet8/System.Net.Ping.dll"
put real/symbolize_index "$work/c-tiny" "$work/go-tiny.stripped"
python3 "$(dirname "$0")/go-seed-images.py" "$dest"

# Slices: ELF sections by name, PE metadata, the bundle manifest (python3, standard library).
mkdir -p "$dest/real/go_pclntab" "$dest/go_buildinfo" "$dest/dotnet_metadata" "$dest/bundle"
python3 - "$dest" "$bundle" "${assemblies[@]}" -- "$work/go-tiny" "$cache"/go-binaries/esbuild-* <<'EOF'
import os, struct, sys

dest, bundle = sys.argv[1], sys.argv[2]
rest = sys.argv[3:]
split = rest.index("--")
assemblies, gobins = rest[:split], rest[split + 1:]

def elf_sections(b):
    # ELF64 little-endian section headers (System V gABI, "Sections").
    if b[:4] != b"\x7fELF" or b[4] != 2:
        return {}
    shoff, = struct.unpack_from("<Q", b, 0x28)
    shentsize, shnum, shstrndx = struct.unpack_from("<HHH", b, 0x3A)
    hdrs = [struct.unpack_from("<IIQQQQIIQQ", b, shoff + i * shentsize) for i in range(shnum)]
    strtab = hdrs[shstrndx][4]
    out = {}
    for h in hdrs:
        end = b.index(b"\0", strtab + h[0])
        out[b[strtab + h[0]:end].decode()] = (h[4], h[5])
    return out

for path in gobins:
    if not os.path.isfile(path):
        continue
    b = open(path, "rb").read()
    name = os.path.basename(path)
    secs = elf_sections(b)
    if ".gopclntab" in secs:
        off, size = secs[".gopclntab"]
        open(f"{dest}/real/go_pclntab/{name}.gopclntab", "wb").write(b[off:off + size])
    if ".go.buildinfo" in secs:
        off, size = secs[".go.buildinfo"]
        open(f"{dest}/go_buildinfo/{name}.buildinfo", "wb").write(b[off:off + max(size, 64) + 512])

def rva_to_off(b, rva):
    # PE/COFF: e_lfanew at 0x3C, COFF header, optional header, section table.
    pe = struct.unpack_from("<I", b, 0x3C)[0]
    nsec, = struct.unpack_from("<H", b, pe + 6)
    opt_size, = struct.unpack_from("<H", b, pe + 20)
    sec = pe + 24 + opt_size
    for i in range(nsec):
        vsize, va, rawsize, rawptr = struct.unpack_from("<IIII", b, sec + i * 40 + 8)
        if va <= rva < va + max(vsize, rawsize):
            return rva - va + rawptr
    return None

for path in assemblies:
    if not os.path.isfile(path):
        continue
    b = open(path, "rb").read()
    pe = struct.unpack_from("<I", b, 0x3C)[0]
    magic, = struct.unpack_from("<H", b, pe + 24)
    dirs = pe + 24 + (96 if magic == 0x10B else 112)
    cli_rva, _ = struct.unpack_from("<II", b, dirs + 14 * 8)  # CLI header (ECMA-335 II.25.3.3)
    cli = rva_to_off(b, cli_rva)
    md_rva, md_size = struct.unpack_from("<II", b, cli + 8)
    md = rva_to_off(b, md_rva)
    tag = os.path.basename(os.path.dirname(path)) + "-" + os.path.basename(path)
    open(f"{dest}/dotnet_metadata/{tag}.metadata", "wb").write(b[md:md + md_size])

# The bundle: the 8-byte header offset and the 32-byte signature as the app host stores them
# (src/installer/managed/Microsoft.NET.HostModel/Bundle/Bundler.cs), followed by the manifest
# from the real bundle, its header offset rewritten to follow the signature.
SIGNATURE = bytes([0x8b, 0x12, 0x02, 0xb9, 0x6a, 0x61, 0x20, 0x38, 0x72, 0x7b, 0x93, 0x02, 0x14, 0xd7, 0xa0, 0x32,
                   0x13, 0xf5, 0xb9, 0xe6, 0xef, 0xae, 0x33, 0x18, 0xee, 0x3b, 0x2d, 0xce, 0x24, 0xb3, 0x6a, 0xae])
if bundle and os.path.isfile(bundle):
    b = open(bundle, "rb").read()
    sig = b.find(SIGNATURE)
    while sig >= 8:
        hoff, = struct.unpack_from("<Q", b, sig - 8)
        if sig < hoff < len(b):
            manifest = b[hoff:]
            open(f"{dest}/bundle/manifest-only", "wb").write(struct.pack("<Q", 40) + SIGNATURE + manifest)
            break
        sig = b.find(SIGNATURE, sig + 1)

# A small well-formed bundle (format 6, .NET 6+) as the bundler lays one out: a stand-in app host
# with the placeholder, the files 16-byte aligned, then the manifest (Manifest.cs: version,
# file count, bundle id, the deps.json and runtimeconfig.json locations, flags; per file its
# offset, size, compressed size, type and path).
def put_string(out, s):
    n = len(s)
    while True:
        b = n & 0x7F
        n >>= 7
        out += bytes([b | (0x80 if n else 0)])
        if not n:
            break
    out += s.encode()

files = [("app.runtimeconfig.json", 4, b'{"runtimeOptions":{"tfm":"net8.0"}}')]
for path in assemblies[:1]:
    if os.path.isfile(path):
        files.append((os.path.basename(path), 1, open(path, "rb").read()))
out = bytearray(b"\x7fELF" + bytes(60))
placeholder = len(out)
out += bytes(8) + SIGNATURE
offsets = []
for _, _, data in files:
    while len(out) % 16:
        out.append(0)
    offsets.append(len(out))
    out += data
header = len(out)
out += struct.pack("<IIi", 6, 0, len(files))
put_string(out, "fuzzseed")
out += struct.pack("<qqqq", 0, 0, offsets[0], len(files[0][2])) + struct.pack("<Q", 0)
for (path, ty, data), off in zip(files, offsets):
    out += struct.pack("<qqq", off, len(data), 0) + bytes([ty])
    put_string(out, path)
out[placeholder:placeholder + 8] = struct.pack("<Q", header)
open(f"{dest}/bundle/synthetic-v6", "wb").write(out)
EOF
rm -rf "$work/gocache"
for d in "$dest"/*/ "$dest"/real/*/; do
	[[ $d == "$dest/real/" ]] && continue
	d=${d%/}
	echo "fuzz-seeds: ${d#"$dest"/}: $(find "$d" -type f | wc -l) files, $(du -sh "$d" | cut -f1)" >&2
done
