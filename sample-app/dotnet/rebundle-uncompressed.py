#!/usr/bin/env python3
"""Writes the uncompressed twin of a compressed .NET single-file bundle.

usage: rebundle-uncompressed.py COMPRESSED_BUNDLE OUTPUT

The output is what `dotnet publish -p:PublishSingleFile=true -p:EnableCompressionInSingleFile=false`
writes for the same app host and files (dotnet/runtime
src/installer/managed/Microsoft.NET.HostModel/Bundle/Bundler.cs, `GenerateBundle`/`AddToBundle`):
- the app host bytes, unchanged, up to the first bundled file;
- every file in manifest order, inflated (the bundler writes raw deflate: `DeflateStream`),
  each assembly at a 16-byte aligned offset (`TargetInfo.AssemblyAlignment` for linux-x64);
- the manifest, format 6.0 (src/native/corehost/bundle/header.h, file_entry.h): same bundle id,
  deps.json/runtimeconfig.json locations and flags, each entry with its new offset and
  compressed size 0;
- the header offset written into the 8 bytes before the bundle signature
  (`HostWriter.SetAsBundle`).
Nothing else changes: no code of the app host or of any assembly is touched.
"""
import struct
import sys
import zlib

SIGNATURE = bytes.fromhex("8b1202b96a612038727b930214d7a03213f5b9e6efae3318ee3b2dce24b36aae")
ASSEMBLY = 1


def read_string(d, p):
    n, shift = 0, 0
    while True:
        b = d[p]
        p += 1
        n |= (b & 0x7F) << shift
        shift += 7
        if b < 0x80:
            return d[p:p + n], p + n


def write_string(raw):
    out, n = bytearray(), len(raw)
    while True:
        b = n & 0x7F
        n >>= 7
        if n:
            out.append(b | 0x80)
        else:
            out.append(b)
            return bytes(out) + raw


def main(src, dst):
    d = open(src, "rb").read()
    if d.count(SIGNATURE) != 1:
        sys.exit(f"{src}: not a .NET single-file bundle (signature found {d.count(SIGNATURE)} times)")
    sig = d.find(SIGNATURE)
    header = struct.unpack_from("<q", d, sig - 8)[0]
    major, minor, count = struct.unpack_from("<IIi", d, header)
    if (major, minor) != (6, 0):
        sys.exit(f"{src}: bundle format {major}.{minor}; this script rewrites 6.0 only")
    bundle_id, p = read_string(d, header + 12)
    deps_off, deps_size, rc_off, rc_size, flags = struct.unpack_from("<qqqqQ", d, p)
    p += 40
    entries = []
    for _ in range(count):
        off, size, csize = struct.unpack_from("<qqq", d, p)
        p += 24
        ftype = d[p]
        p += 1
        path, p = read_string(d, p)
        entries.append((off, size, csize, ftype, path))
    out = bytearray(d[: min(e[0] for e in entries)])
    moved = {}
    new_entries = []
    for off, size, csize, ftype, path in entries:
        if csize:
            data = zlib.decompressobj(-15).decompress(d[off:off + csize])
        else:
            data = d[off:off + size]
        if len(data) != size:
            sys.exit(f"{src}: {path.decode()} inflates to {len(data)} bytes, manifest says {size}")
        if ftype == ASSEMBLY:
            out += b"\0" * (-len(out) % 16)
        moved[off] = len(out)
        new_entries.append((len(out), size, ftype, path))
        out += data
    new_header = len(out)
    out += struct.pack("<IIi", major, minor, count) + write_string(bundle_id)
    out += struct.pack("<qqqqQ", moved.get(deps_off, 0), deps_size, moved.get(rc_off, 0), rc_size, flags)
    for off, size, ftype, path in new_entries:
        out += struct.pack("<qqqB", off, size, 0, ftype) + write_string(path)
    struct.pack_into("<q", out, sig - 8, new_header)
    with open(dst, "wb") as f:
        f.write(out)


if __name__ == "__main__":
    if len(sys.argv) != 3:
        sys.exit(__doc__.split("\n\n")[1])
    main(sys.argv[1], sys.argv[2])
