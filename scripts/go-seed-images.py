#!/usr/bin/env python3
"""Small synthetic Go images for the fuzz targets that read whole Go binaries.

    scripts/go-seed-images.py DEST

writes into DEST/<target>/ (scripts/fuzz-seeds.sh calls it):

    go_pclntab       the bare function table of each layout (Go 1.2, 1.16, 1.18, 1.20 magics)
    go_binary        a few-KB x86-64 ELF executable per layout holding that table, code with
                     Go's stack-check prologues, a .go.buildinfo, a module data and, for 1.18+,
                     inline trees; plus variants that make the reader take its other paths
    symbolize_index  the same executables
    go_buildinfo     the .go.buildinfo blobs (inline strings, and pointers for Go before 1.18)

A real Go program is over a megabyte, so a fuzzer mutating one runs a few hundred inputs a
second, most of them cut-off tables. These images are a few KB and every part of them parses,
so mutations start from the deep paths. netprobe-core/tests/fuzz_seed_images.rs checks that
they do (each parses, with its functions, build info, text-start source and inline frames).

Formats (what netprobe-core/src/golang reads, with the Go sources it cites):
- function table: Go's debug/gosym/pclntab.go and runtime/symtab.go (pcHeader, functab, _func);
  inline trees: runtime/symtabinl.go, cmd/internal/objabi/funcdata.go (PCDATA_InlTreeIndex = 2,
  FUNCDATA_InlTree = 3).
- module data: runtime/symtab.go (moduledata), the word layout in
  netprobe-core/src/golang/moduledata.rs.
- build info: debug/buildinfo/buildinfo.go.
- ELF: the System V gABI (ELF64 header, program and section headers, Elf64_Sym, Elf64_Rela).
"""

import os
import struct
import sys

GO12, GO116, GO118, GO120 = "go1.2", "go1.16", "go1.18", "go1.20"
MAGIC = {GO12: 0xFFFFFFFB, GO116: 0xFFFFFFFA, GO118: 0xFFFFFFF0, GO120: 0xFFFFFFF1}
BASE = 0x400000  # link address of file offset 0 (ET_EXEC, as Go's linker on linux/amd64)
TEXT_AT = 0x100  # where .text starts in the file, after the ELF and program headers


def uvarint(v):
    out = bytearray()
    while v >= 0x80:
        out.append((v & 0x7F) | 0x80)
        v >>= 7
    out.append(v)
    return bytes(out)


def zigzag(v):
    return (v << 1) ^ (v >> 63) if v >= 0 else ((-v) << 1) - 1


def pc_value_table(runs):
    """A pc-value table: runs of (value, pc length) from value -1 (runtime/symtab.go, step)."""
    out, prev = bytearray(), -1
    for value, length in runs:
        delta = value - prev
        # The first entry may have a zero delta; a zero delta later ends the table.
        out += uvarint(zigzag(delta)) + uvarint(length)
        prev = value
    return bytes(out + b"\0")


def align(buf, n, fill=b"\0"):
    while len(buf) % n:
        buf += fill


# ---- code ----------------------------------------------------------------------------------


def stack_checked(register_abi, body, frame=0x18):
    """A function with Go's stack-check prologue (netprobe-core/src/golang/prologue.rs):
    compare rsp with g.stackguard0 (g in r14 under the register ABI, read from TLS before it),
    jbe to a block that calls morestack and jumps back to the entry."""
    if register_abi:
        check = bytes([0x49, 0x3B, 0x66, 0x10])  # cmp rsp,[r14+0x10]
    else:
        check = bytes([0x64, 0x48, 0x8B, 0x0C, 0x25, 0xF8, 0xFF, 0xFF, 0xFF])  # mov rcx,fs:[-8]
        check += bytes([0x48, 0x3B, 0x61, 0x10])  # cmp rsp,[rcx+0x10]
    inner = bytes([0x48, 0x83, 0xEC, frame]) + body + bytes([0x48, 0x83, 0xC4, frame, 0xC3])
    code = bytearray(check + bytes([0x76, len(inner)]) + inner)  # jbe morestack block
    code += bytes([0xE8, 0, 0, 0, 0])  # call runtime.morestack_noctxt (left unresolved)
    code += bytes([0xEB, (-(len(code) + 2)) & 0xFF])  # jmp entry
    return bytes(code)


def functions(version):
    """(name, code, inlined callee or None) of the image's functions, in address order."""
    reg = version != GO12 and version != GO116
    nop_call = bytes([0x48, 0x01, 0xD8, 0x90])  # add rax,rbx; nop: where the inlined body runs
    return [
        ("runtime.main", stack_checked(reg, nop_call + bytes([0x31, 0xC0])), "runtime.lock"),
        ("main.add", bytes([0x48, 0x8D, 0x04, 0x18, 0xC3]), None),  # lea rax,[rax+rbx]; ret
        ("main.(*T).Get", stack_checked(reg, nop_call), "main.add"),
        # A tail call: jmp rel32 to main.add (filled in by layout_code).
        ("main.tail", bytes([0x90, 0xE9, 0, 0, 0, 0]), None),
        ("main.main", stack_checked(reg, nop_call + bytes([0x90, 0x90])), "main.(*T).Get"),
    ]


def layout_code(funcs):
    """The .text bytes (functions 32-byte aligned, padded with int3 as Go's linker pads) and
    each function's offset from the text start."""
    text, offs = bytearray(), []
    for _, code, _ in funcs:
        align(text, 32, b"\xcc")
        offs.append(len(text))
        text += code
    tail = [n for n, _, _ in funcs].index("main.tail")
    target = offs[[n for n, _, _ in funcs].index("main.add")]
    jmp_at = offs[tail] + 1
    struct.pack_into("<i", text, jmp_at + 1, target - (jmp_at + 5))
    align(text, 32, b"\xcc")
    return bytes(text), offs


# ---- function table ------------------------------------------------------------------------


def pclntab(version, text_start, funcs, offs, text_len, header_text_start=True):
    """The table of `version` for `funcs` at text_start + offs (the text ends at text_start +
    text_len), and their inline trees: returns (table, trees), trees being the go:func.* blob
    the 1.18+ funcdata offsets count from (empty before 1.18), for the caller to place."""
    n = len(funcs)
    text_offsets = version in (GO118, GO120)
    field = 4 if text_offsets else 8

    names = bytearray()
    name_off = {}
    for name in [f[0] for f in funcs] + [f[2] for f in funcs if f[2]] + ["main.go"]:
        if name not in name_off:
            name_off[name] = len(names)
            names += name.encode() + b"\0"

    # pc-value tables: pcsp, pcfile, pcln per function, and (1.18+, whose funcdata netprobe
    # reads) an inline index table for those with an inlined call: the callee's body runs on the
    # 4 bytes after the prologue's sub.
    pcs = bytearray(b"\0")  # offset 0 means "no table"
    tabs = []
    for (_, code, callee) in funcs:
        size = len(code)
        t = {}
        t["pcsp"] = len(pcs)
        pcs += pc_value_table([(0, 1), (0x18, size - 1)] if size > 1 else [(0, size)])
        t["pcfile"] = len(pcs)
        pcs += pc_value_table([(0, size)])
        t["pcln"] = len(pcs)
        pcs += pc_value_table([(10, size // 2), (11, size - size // 2)])
        if callee and text_offsets:
            body = 4 + 2 + 4  # cmp rsp,[r14+0x10]; jbe; sub rsp
            t["inl"] = len(pcs)
            pcs += pc_value_table([(-1, body), (0, 4), (-1, size - body - 4)])
            t["call_pc"] = body - 1
        tabs.append(t)

    # Inline trees (go:func.*), one node per function with an inlined call.
    trees = bytearray()
    tree_off = []
    for (_, _, callee), t in zip(funcs, tabs):
        if "inl" not in t:
            tree_off.append(None)
            continue
        align(trees, 4)
        tree_off.append(len(trees))
        if version == GO118:  # parent, funcID, _, file, line, func_, parentPc: 20 bytes
            trees += struct.pack("<hBBiiii", -1, 0, 0, 0, 12, name_off[callee], t["call_pc"])
        else:  # funcID, _[3], nameOff, parentPc, startLine: 16 bytes
            trees += struct.pack("<B3xiii", 0, name_off[callee], t["call_pc"], 11)

    def record(i):
        t = tabs[i]
        entry = offs[i] if text_offsets else text_start + offs[i]
        rec = bytearray(struct.pack("<I" if text_offsets else "<Q", entry))
        has_inl = tree_off[i] is not None
        npcdata = 3 if has_inl else 2
        nfuncdata = 4 if has_inl else 2
        if version in (GO12, GO116):
            # nameoff, args, deferreturn, pcsp, pcfile, pcln, npcdata, funcID, nfuncdata
            rec += struct.pack("<IiIIIIiBxxB", 0, 0x10, 0, t["pcsp"], t["pcfile"], t["pcln"], 2,
                               0, 0)
            pcdata = [0, 0]
            funcdata = []
        else:
            rec += struct.pack("<IiIIIIII", 0, 0x10, 0, t["pcsp"], t["pcfile"], t["pcln"],
                               npcdata, 0)
            if version == GO120:
                rec += struct.pack("<I", 10)  # startLine
            rec += struct.pack("<BBBB", 0, 0, 0, nfuncdata)
            pcdata = [0, 0] + ([t["inl"]] if has_inl else [])
            # gclocals/argptrs absent (^0), then for inlined functions FUNCDATA_InlTree.
            funcdata = [0xFFFFFFFF] * nfuncdata
            if has_inl:
                funcdata[3] = tree_off[i]
        for p in pcdata:
            rec += struct.pack("<I", p)
        for f in funcdata:
            rec += struct.pack("<I", f)
        align(rec, 8)
        return rec

    records = [record(i) for i in range(n)]
    ptr = lambda v: struct.pack("<I" if field == 4 else "<Q", v)  # noqa: E731
    entry = lambda off: off if text_offsets else text_start + off  # noqa: E731

    head = struct.pack("<IBBBB", MAGIC[version], 0, 0, 1, 8)
    if version == GO12:
        # nfunc; the function table at 8 + ptrsize; names and pc tables addressed from byte 0.
        functab_at = 16
        records_at = functab_at + (2 * n + 1) * field + 4  # then the file table offset
        rec_offs, at = [], records_at
        for r in records:
            rec_offs.append(at)
            at += len(r)
        names_at = at
        pcs_at = names_at + len(names)
        out = bytearray(head + struct.pack("<Q", n))
        for i in range(n):
            out += ptr(entry(offs[i])) + ptr(rec_offs[i])
        out += ptr(entry(text_len)) + struct.pack("<I", 0)
        for i, r in enumerate(records):
            r = bytearray(r)
            struct.pack_into("<I", r, 8, names_at + name_off[funcs[i][0]])
            for k, key in ((3, "pcsp"), (4, "pcfile"), (5, "pcln")):
                struct.pack_into("<I", r, 8 + 4 * k, pcs_at + tabs[i][key])
            out += r
        out += names + pcs
        return bytes(out), bytes(trees)

    words = 8 if text_offsets else 7
    names_at = 8 + words * 8
    cu_at = names_at + len(names)
    cutab = struct.pack("<I", 0)  # compilation unit 0 -> file 0
    files_at = cu_at + len(cutab)
    filetab = b"main.go\0"
    pcs_at = files_at + len(filetab)
    functab_at = pcs_at + len(pcs)
    out = bytearray(head + struct.pack("<QQ", n, 1))
    if text_offsets:
        out += struct.pack("<Q", text_start if header_text_start else 0)
    out += struct.pack("<QQQQQ", names_at, cu_at, files_at, pcs_at, functab_at)
    out += names + cutab + filetab + pcs
    # The records follow the function table, 8-byte aligned; their offsets count from its start.
    functab_len = (2 * n + 1) * field
    align_to = functab_len + (-functab_len % 8)
    rec_offs, at = [], align_to
    for r in records:
        rec_offs.append(at)
        at += len(r)
    for i in range(n):
        out += ptr(entry(offs[i])) + ptr(rec_offs[i])
    out += ptr(entry(text_len))
    out += bytes(align_to - functab_len)
    for i, r in enumerate(records):
        r = bytearray(r)
        struct.pack_into("<I", r, 4 if text_offsets else 8, name_off[funcs[i][0]])
        out += r
    return bytes(out), bytes(trees)


def table_facts(table, version):
    """The header offsets the module data repeats: (funcnametab, pctab, functab), nfunc."""
    words = struct.unpack_from("<8Q", table, 8)
    if version == GO12:
        return 0, 0, 16, words[0]
    fn, pcs, ft = (words[3], words[6], words[7]) if version in (GO118, GO120) else (
        words[2], words[5], words[6])
    return fn, pcs, ft, words[0]


# ---- build info ----------------------------------------------------------------------------

BUILDINFO_MAGIC = b"\xff Go buildinf:"
SENTINEL_START = bytes.fromhex("3077af0c9274080241e1c107e6d618e6")
SENTINEL_END = bytes.fromhex("f932433186182072008242104116d8f2")


def mod_info():
    return (SENTINEL_START + b"path\texample.com/tiny\n"
            b"mod\texample.com/tiny\t(devel)\t\n"
            b"dep\tgolang.org/x/sys\tv0.1.0\th1:abc=\n"
            b"build\t-compiler=gc\n" + SENTINEL_END)


def buildinfo_inline(go_version):
    """Go 1.18+: the header with flags 2 (strings inline), then two uvarint-prefixed strings."""
    out = bytearray(BUILDINFO_MAGIC + bytes([8, 2]) + bytes(16))
    for s in (go_version.encode(), mod_info()):
        out += uvarint(len(s)) + s
    align(out, 16)
    return bytes(out)


def buildinfo_pointers(go_version, at_vaddr):
    """Before Go 1.18: the header holds pointers to two Go string headers {ptr, len}, laid out
    here after it (at link address at_vaddr)."""
    version, info = go_version.encode(), mod_info()
    hdrs = at_vaddr + 32
    data = hdrs + 32
    out = bytearray(BUILDINFO_MAGIC + bytes([8, 0]) + struct.pack("<QQ", hdrs, hdrs + 16))
    out += struct.pack("<QQQQ", data, len(version), data + len(version), len(info))
    out += version + info
    align(out, 16)
    return bytes(out)


# ---- ELF -----------------------------------------------------------------------------------

PF_X, PF_W, PF_R = 1, 2, 4
SHT_PROGBITS, SHT_SYMTAB, SHT_STRTAB, SHT_RELA = 1, 2, 3, 4
SHF_WRITE, SHF_ALLOC, SHF_EXEC = 1, 2, 4


class Image:
    """An ELF64 executable laid out so that file offset o is at link address BASE + o."""

    def __init__(self):
        self.data = bytearray(TEXT_AT)  # headers are written last
        self.sections = []  # (name, type, flags, offset, size, link, info, entsize)
        self.symbols = []  # (name, value, size, is_func)

    def add(self, name, blob, flags, sh_type=SHT_PROGBITS, alignment=16, entsize=0, link=0):
        align(self.data, alignment)
        at = len(self.data)
        self.data += blob
        self.sections.append((name, sh_type, flags, at, len(blob), link, 0, entsize))
        return at

    def vaddr(self, off):
        return BASE + off

    def finish(self, segments, with_sections=True):
        # .symtab / .strtab
        strtab = bytearray(b"\0")
        syms = bytearray(bytes(24))
        text_index = 1
        for name, value, size, is_func in self.symbols:
            syms += struct.pack("<IBBHQQ", len(strtab), 0x12 if is_func else 0x10, 0, text_index,
                                value, size)
            strtab += name.encode() + b"\0"
        if self.symbols:
            n = len(self.sections) + 1
            self.add(".symtab", bytes(syms), 0, SHT_SYMTAB, 8, 24, link=n + 1)
            self.sections[-1] = self.sections[-1][:6] + (1,) + self.sections[-1][7:]
            self.add(".strtab", bytes(strtab), 0, SHT_STRTAB, 1)
        shstr = bytearray(b"\0")
        name_at = []
        for s in self.sections + [(".shstrtab",)]:
            name_at.append(len(shstr))
            shstr += s[0].encode() + b"\0"
        self.add(".shstrtab", bytes(shstr), 0, SHT_STRTAB, 1)
        align(self.data, 8)
        shoff = len(self.data)
        if with_sections:
            self.data += bytes(64)
            for (name, t, flags, off, size, link, info, entsize), at in zip(self.sections, name_at):
                addr = self.vaddr(off) if flags & SHF_ALLOC else 0
                self.data += struct.pack("<IIQQQQIIQQ", at, t, flags, addr, off, size, link, info,
                                         8, entsize)
        shnum = len(self.sections) + 1 if with_sections else 0
        ehdr = bytearray(b"\x7fELF" + bytes([2, 1, 1, 0]) + bytes(8))
        ehdr += struct.pack("<HHIQQQIHHHHHH", 2, 62, 1, BASE + TEXT_AT, 64,
                            shoff if with_sections else 0, 0, 64, 56, len(segments), 64, shnum,
                            shnum - 1 if with_sections else 0)
        self.data[:64] = ehdr
        ph = bytearray()
        for flags, lo, hi in segments:
            ph += struct.pack("<IIQQQQQQ", 1, flags, lo, self.vaddr(lo), self.vaddr(lo), hi - lo,
                              hi - lo, 16)
        self.data[64:64 + len(ph)] = ph
        return bytes(self.data)


def go_image(version, variant="plain"):
    """An executable of `version`. Variants: "plain" (table in .gopclntab, header textStart),
    "moduledata" (1.18+: header textStart zero, so the text start comes from the module data),
    "symbol" (1.18+: textStart zero and no module data: from the runtime.text symbol),
    "relocation" (1.18+: textStart zero, a R_X86_64_RELATIVE relocation on it),
    "data-rel-ro" (the table inside .data.rel.ro, found by its magic),
    "no-sections" (no section headers: the table and build info found by scanning)."""
    funcs = functions(version)
    text, offs = layout_code(funcs)
    img = Image()
    text_at = img.add(".text", text, SHF_ALLOC | SHF_EXEC, alignment=32)
    assert text_at == TEXT_AT
    text_start = img.vaddr(text_at)
    exec_end = len(img.data)
    zero_start = variant in ("moduledata", "symbol", "relocation")
    table, trees = pclntab(version, text_start, funcs, offs, len(text),
                           header_text_start=not zero_start)
    table_name = ".data.rel.ro" if variant == "data-rel-ro" else ".gopclntab"
    rodata_at = len(img.data)
    table_at = img.add(table_name, table, SHF_ALLOC, alignment=32)
    gofunc_at = img.add(".rodata.gofunc", trees or b"\0" * 4, SHF_ALLOC, alignment=32)
    ro_end = len(img.data)
    data_at = ro_end + (-ro_end % 32)
    go_version = {GO12: "go1.15.15", GO116: "go1.16.15", GO118: "go1.19.13", GO120: "go1.22.5"}
    if version in (GO12, GO116):
        bi = buildinfo_pointers(go_version[version], img.vaddr(data_at))
    else:
        bi = buildinfo_inline(go_version[version])
    bi_at = img.add(".go.buildinfo", bi, SHF_ALLOC | SHF_WRITE, alignment=32)
    assert bi_at == data_at
    # Module data (runtime/symtab.go moduledata; word layout in moduledata.rs): the table's
    # slices, ftab's length, minpc/maxpc, text/etext, then gofunc among the words after etext.
    fn, pcs, ft, nfunc = table_facts(table, version)
    t = img.vaddr(table_at)
    words = [0] * 40
    words[0] = t
    words[1], words[2], words[3] = t + fn, pcs - fn, pcs - fn
    words[10], words[11], words[12] = t + pcs, ft - pcs, ft - pcs
    words[13], words[14], words[15] = t + ft, len(table) - ft, len(table) - ft
    words[16], words[17], words[18] = t + ft, nfunc + 1, nfunc + 1
    words[20], words[21] = text_start + offs[0], text_start + len(text)
    words[22], words[23] = text_start, text_start + len(text)
    words[26] = img.vaddr(gofunc_at)  # gofunc
    if variant != "symbol":
        md_at = img.add(".noptrdata", struct.pack("<40Q", *words), SHF_ALLOC | SHF_WRITE,
                        alignment=32)
    if variant == "relocation":
        field = img.vaddr(table_at) + 8 + 2 * 8  # textStart word: magic/pad, nfunc, nfiles
        rela = struct.pack("<QQq", field, 8, text_start)  # R_X86_64_RELATIVE (8)
        img.add(".rela.dyn", rela, SHF_ALLOC, SHT_RELA, 8, 24)
    data_end = len(img.data)
    if variant != "no-sections":
        for (name, code, _), off in zip(funcs, offs):
            img.symbols.append((name, text_start + off, len(code), True))
        img.symbols.append(("runtime.text", text_start, 0, False))
    segments = [(PF_R | PF_X, 0, exec_end), (PF_R, rodata_at, ro_end),
                (PF_R | PF_W, data_at, data_end)]
    return img.finish(segments, with_sections=variant != "no-sections"), table, bi


def main():
    dest = sys.argv[1]
    for t in ("go_binary", "go_pclntab", "symbolize_index", "go_buildinfo"):
        os.makedirs(os.path.join(dest, t), exist_ok=True)

    def put(target, name, blob):
        with open(os.path.join(dest, target, name), "wb") as f:
            f.write(blob)

    for version in (GO12, GO116, GO118, GO120):
        variants = ["plain", "data-rel-ro", "no-sections"]
        if version in (GO118, GO120):
            variants += ["moduledata", "symbol", "relocation"]
        for variant in variants:
            image, table, bi = go_image(version, variant)
            put("go_binary", f"synthetic-{version}-{variant}", image)
            if variant == "plain":
                put("go_pclntab", f"synthetic-{version}.gopclntab", table)
                put("go_buildinfo", f"synthetic-{version}.buildinfo", bi)
                put("symbolize_index", f"synthetic-{version}", image)


if __name__ == "__main__":
    main()
