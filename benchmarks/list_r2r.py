#!/usr/bin/env python3
"""Benchmark peer for netprobe's ReadyToRun reader: a straightforward Python script that lists
every METHODDEF_ENTRYPOINTS method of a ReadyToRun assembly with RVA, size (incl. funclets), file
offset and crossgen-style name, the same parse netprobe-core does (PE -> CLI header -> metadata
tables + signatures -> READYTORUN_HEADER -> RUNTIME_FUNCTIONS -> NativeArray).

Formats: ECMA-335 II.22-II.24, dotnet/runtime docs/design/coreclr/botr/readytorun-format.md.
It does NOT list INSTANCE_METHOD_ENTRYPOINTS (generic instantiations), which netprobe also does,
but it reads them to bound funclets exactly like netprobe. Usage: list_r2r.py PATH.dll
"""
import struct
import sys


def main(path):
    d = open(path, 'rb').read()
    u16 = lambda o: struct.unpack_from('<H', d, o)[0]
    u32 = lambda o: struct.unpack_from('<I', d, o)[0]
    pe = u32(0x3c)
    nsec = u16(pe + 6)
    optsz = u16(pe + 20)
    opt = pe + 24
    dirs = opt + (112 if u16(opt) == 0x20b else 96)
    secs = []
    for i in range(nsec):
        h = pe + 24 + optsz + 40 * i
        vsize, va, rawsz, raw = struct.unpack_from('<IIII', d, h + 8)
        secs.append((va, max(vsize, rawsz), raw))

    def off(rva):
        for va, size, raw in secs:
            if va <= rva < va + size:
                return rva - va + raw
        return None

    cli = off(u32(dirs + 14 * 8))
    md_rva = u32(cli + 8)
    mnh = u32(cli + 64)
    md = off(md_rva)
    # metadata root and streams
    vlen = u32(md + 12)
    p = md + 16 + vlen
    nstreams = u16(p + 2)
    p += 4
    streams = {}
    for _ in range(nstreams):
        so, ss = u32(p), u32(p + 4)
        e = d.index(b'\0', p + 8)
        name = d[p + 8:e].decode()
        streams[name] = (md + so, ss)
        p += 8 + ((e - (p + 8)) + 4) // 4 * 4
    tb = streams.get('#~', streams.get('#-'))[0]
    strings_at = streams['#Strings'][0]
    blob_at = streams['#Blob'][0]
    heap = d[tb + 6]
    valid = struct.unpack_from('<Q', d, tb + 8)[0]
    rows = [0] * 64
    q = tb + 24
    for i in range(64):
        if valid >> i & 1:
            rows[i] = u32(q)
            q += 4
    if heap & 0x20:
        q += 4
    sw = 4 if heap & 1 else 2
    gw = 4 if heap & 2 else 2
    bw = 4 if heap & 4 else 2
    coded = {
        'tdor': (2, [2, 1, 0x1b]), 'hc': (2, [4, 8, 0x17]),
        'hca': (5, [6, 4, 1, 2, 8, 9, 0xa, 0, 0xe, 0x17, 0x14, 0x11, 0x1a, 0x1b, 0x20, 0x23, 0x26, 0x27, 0x28, 0x2a, 0x2c, 0x2b]),
        'hfm': (1, [4, 8]), 'hds': (2, [2, 6, 0x20]), 'mrp': (3, [2, 1, 0x1a, 6, 0x1b]), 'hs': (1, [0x14, 0x17]),
        'mdor': (1, [6, 0xa]), 'mf': (1, [4, 6]), 'impl': (2, [0x26, 0x23, 0x27]), 'cat': (3, [6, 0xa]),
        'rs': (2, [0, 0x1a, 0x23, 1]), 'tomd': (1, [2, 6]),
    }

    def width(c):
        if c == 2 or c == 4:
            return c
        if c == 's':
            return sw
        if c == 'g':
            return gw
        if c == 'b':
            return bw
        if isinstance(c, int) or c.startswith('t'):
            pass
        if c in coded:
            bits, tabs = coded[c]
            return 2 if max(rows[t] for t in tabs) < 1 << (16 - bits) else 4
        return 2 if rows[int(c[1:], 16)] < 65536 else 4

    schema = {
        0: [2, 's', 'g', 'g', 'g'], 1: ['rs', 's', 's'], 2: [4, 's', 's', 'tdor', 't04', 't06'], 3: ['t04'],
        4: [2, 's', 'b'], 5: ['t06'], 6: [4, 2, 2, 's', 'b', 't08'], 7: ['t08'], 8: [2, 2, 's'], 9: ['t02', 'tdor'],
        0xa: ['mrp', 's', 'b'], 0xb: [2, 'hc', 'b'], 0xc: ['hca', 'cat', 'b'], 0xd: ['hfm', 'b'], 0xe: [2, 'hds', 'b'],
        0xf: [2, 4, 't02'], 0x10: [4, 't04'], 0x11: ['b'], 0x12: ['t02', 't14'], 0x13: ['t14'], 0x14: [2, 's', 'tdor'],
        0x15: ['t02', 't17'], 0x16: ['t17'], 0x17: [2, 's', 'b'], 0x18: [2, 't06', 'hs'], 0x19: ['t02', 'mdor', 'mdor'],
        0x1a: ['s'], 0x1b: ['b'], 0x1c: [2, 'mf', 's', 't1a'], 0x1d: [4, 't04'], 0x1e: [4, 4], 0x1f: [4],
        0x20: [4, 2, 2, 2, 2, 4, 'b', 's', 's'], 0x21: [4], 0x22: [4, 4, 4], 0x23: [2, 2, 2, 2, 4, 'b', 's', 's', 'b'],
        0x24: [4, 't23'], 0x25: [4, 4, 4, 't23'], 0x26: [4, 's', 'b'], 0x27: [4, 4, 's', 's', 'impl'],
        0x28: [4, 4, 's', 'impl'], 0x29: ['t02', 't02'], 0x2a: [2, 2, 'tomd', 's'], 0x2b: ['mdor', 'b'], 0x2c: ['t2a', 'tdor'],
    }
    tables = {}
    pos = q
    for t in range(0x2d):
        cols = schema[t]
        ws = [width(c) for c in cols]
        offs = [sum(ws[:i]) for i in range(len(ws))]
        tables[t] = (pos, sum(ws), offs, ws)
        pos += rows[t] * sum(ws)

    def cell(t, rid, c):
        start, rs, offs, ws = tables[t]
        o = start + (rid - 1) * rs + offs[c]
        return u16(o) if ws[c] == 2 else u32(o)

    def string(i):
        e = d.index(b'\0', strings_at + i)
        return d[strings_at + i:e].decode('utf-8')

    def blob(i):
        o = blob_at + i
        b0 = d[o]
        if b0 & 0x80 == 0:
            return d[o + 1:o + 1 + b0]
        if b0 & 0xc0 == 0x80:
            n = (b0 & 0x3f) << 8 | d[o + 1]
            return d[o + 2:o + 2 + n]
        n = (b0 & 0x1f) << 24 | d[o + 1] << 16 | d[o + 2] << 8 | d[o + 3]
        return d[o + 4:o + 4 + n]

    enclosing = {}
    for r in range(1, rows[0x29] + 1):
        enclosing[cell(0x29, r, 0)] = cell(0x29, r, 1)

    def typedef_name(rid, sep):
        chain = []
        while rid:
            chain.append(rid)
            rid = enclosing.get(rid, 0)
        out = ''
        for i, t in enumerate(reversed(chain)):
            name, ns = string(cell(2, t, 1)), string(cell(2, t, 2))
            out += ((ns + '.') if ns else '') + name if i == 0 else sep + name
        return out

    def typeref_name(rid):
        scope = cell(1, rid, 0)
        tag, srid = scope & 3, scope >> 2
        name, ns = string(cell(1, rid, 1)), string(cell(1, rid, 2))
        if tag == 3:
            return typeref_name(srid) + '/' + name
        pre = '[' + string(cell(0x23, srid, 6)) + ']' if tag == 2 else ''
        return pre + ((ns + '.') if ns else '') + name

    prim = {1: 'void', 2: 'bool', 3: 'char', 4: 'int8', 5: 'uint8', 6: 'int16', 7: 'uint16', 8: 'int32',
            9: 'uint32', 0xa: 'int64', 0xb: 'uint64', 0xc: 'float32', 0xd: 'float64', 0xe: 'string',
            0x16: 'typedref', 0x18: 'native int', 0x19: 'native uint', 0x1c: 'object'}

    class Sig:
        def __init__(self, b):
            self.b, self.p = b, 0

        def u(self):
            b0 = self.b[self.p]
            if b0 & 0x80 == 0:
                self.p += 1
                return b0
            if b0 & 0xc0 == 0x80:
                v = (b0 & 0x3f) << 8 | self.b[self.p + 1]
                self.p += 2
                return v
            v = (b0 & 0x1f) << 24 | self.b[self.p + 1] << 16 | self.b[self.p + 2] << 8 | self.b[self.p + 3]
            self.p += 4
            return v

        def s(self):
            b0 = self.b[self.p]
            raw = self.u()
            bits = 7 if b0 & 0x80 == 0 else 14 if b0 & 0xc0 == 0x80 else 29
            return raw >> 1 if raw & 1 == 0 else (raw >> 1) - (1 << (bits - 1))

        def tok(self):
            v = self.u()
            tag, rid = v & 3, v >> 2
            if tag == 0:
                return typedef_name(rid, '/')
            if tag == 1:
                return typeref_name(rid)
            return Sig(blob(cell(0x1b, rid, 0))).type()

        def type(self):
            et = self.b[self.p]
            self.p += 1
            if et in prim:
                return prim[et]
            if et == 0x0f:
                return self.type() + '*'
            if et == 0x10:
                return self.type() + '&'
            if et == 0x11:
                return 'valuetype ' + self.tok()
            if et == 0x12:
                return 'class ' + self.tok()
            if et == 0x13:
                return '!%d' % self.u()
            if et == 0x1e:
                return '!!%d' % self.u()
            if et == 0x1d:
                return self.type() + '[]'
            if et == 0x14:
                el = self.type()
                rank = self.u()
                sizes = [self.u() for _ in range(self.u())]
                los = [self.s() for _ in range(self.u())]
                if rank == 1 and not sizes and not los:
                    return el + '[...]'
                dims = []
                for i in range(rank):
                    lo = los[i] if i < len(los) else None
                    sz = sizes[i] if i < len(sizes) else None
                    if (lo is None or lo == 0) and sz is not None:
                        dims.append(str(sz))
                    elif lo is not None:
                        dims.append('%d...' % lo + ('' if sz is None else str(lo + sz - 1)))
                    else:
                        dims.append('')
                return el + '[' + ','.join(dims) + ']'
            if et == 0x15:
                kind = self.b[self.p]
                self.p += 1
                g = self.tok()
                args = [self.type() for _ in range(self.u())]
                return ('valuetype ' if kind == 0x11 else 'class ') + g + '<' + ','.join(args) + '>'
            if et == 0x1b:
                return 'method ' + self.method('*')
            if et in (0x1f, 0x20):
                m = self.tok()
                return self.type() + (' modreq(' if et == 0x1f else ' modopt(') + m + ')'
            if et == 0x45:
                return self.type() + ' pinned'
            raise ValueError('element type %#x' % et)

        def method(self, name):
            cc = self.b[self.p]
            self.p += 1
            if cc & 0x10:
                self.u()
            n = self.u()
            ret = self.type()
            params = []
            for _ in range(n):
                if self.b[self.p] == 0x41:
                    self.p += 1
                    params.append('...')
                params.append(self.type())
            conv = {1: 'unmanaged cdecl ', 2: 'unmanaged stdcall ', 3: 'unmanaged thiscall ',
                    4: 'unmanaged fastcall ', 5: 'vararg ', 9: 'unmanaged '}.get(cc & 0xf, '')
            return ('instance ' if cc & 0x20 else '') + ('explicit ' if cc & 0x40 else '') + conv + \
                ret + ' ' + name + '(' + ','.join(params) + ')'

    # owner type of each method
    ntd, nmd = rows[2], rows[6]
    owner = [0] * (nmd + 2)
    for t in range(1, ntd + 1):
        start = cell(2, t, 5)
        end = cell(2, t + 1, 5) if t < ntd else nmd + 1
        for m in range(start, min(end, nmd + 1)):
            owner[m] = t
    asm_name = string(cell(0x20, 1, 7))

    # ReadyToRun header and sections
    h = off(mnh)
    nsect = u32(h + 12)
    sections = {u32(h + 16 + 12 * i): (u32(h + 20 + 12 * i), u32(h + 24 + 12 * i)) for i in range(nsect)}
    rf_rva, rf_size = sections[102]
    rfo = off(rf_rva)
    funcs = [struct.unpack_from('<III', d, rfo + 12 * i) for i in range(rf_size // 12)]

    def dec_u(o):
        b0 = d[o]
        if b0 & 1 == 0:
            return b0 >> 1, o + 1
        if b0 & 2 == 0:
            return (b0 | d[o + 1] << 8) >> 2, o + 2
        if b0 & 4 == 0:
            return (b0 | d[o + 1] << 8 | d[o + 2] << 16) >> 3, o + 3
        if b0 & 8 == 0:
            return (b0 | d[o + 1] << 8 | d[o + 2] << 16 | d[o + 3] << 24) >> 4, o + 4
        return u32(o + 1), o + 5

    def dec_s(o):
        v, n = dec_u(o)
        bits = {1: 7, 2: 14, 3: 21, 4: 28, 5: 32}[n - o]
        if v >= 1 << (bits - 1):
            v -= 1 << bits
        return v, n

    def entry(o):
        v, _ = dec_u(o)
        return v >> 2 if v & 1 else v >> 1

    # METHODDEF_ENTRYPOINTS: NativeArray
    arr = off(sections[103][0])
    hdr, base = dec_u(arr)
    count, esz = hdr >> 2, hdr & 3
    defs = []
    for i in range(count):
        blk = i // 16
        bo = d[base + blk] if esz == 0 else u16(base + 2 * blk) if esz == 1 else u32(base + 4 * blk)
        o = base + bo
        bit = 8
        found = True
        while bit:
            v, nxt = dec_u(o)
            if i & bit and v & 2:
                o += v >> 2
            elif not i & bit and v & 1:
                o = nxt
            elif v & 3 == 0 and v >> 2 == i & 15:
                o = nxt
                break
            else:
                found = False
                break
            bit >>= 1
        if found:
            defs.append((i + 1, entry(o)))
    is_entry = [False] * len(funcs)
    for _, rf in defs:
        is_entry[rf] = True
    # INSTANCE_METHOD_ENTRYPOINTS: only their runtime function indices (funclet bounds)
    if 109 in sections:
        ht = off(sections[109][0])
        hb = d[ht]
        hbase, nb, es = ht + 1, 1 << (hb >> 2), hb & 3
        cellf = (lambda i: d[hbase + i]) if es == 0 else (lambda i: u16(hbase + 2 * i)) if es == 1 else (lambda i: u32(hbase + 4 * i))
        for b in range(nb):
            o, end = hbase + cellf(b), hbase + cellf(b + 1)
            while o < end:
                delta, nxt = dec_s(o + 1)
                sig = Sig(d[o + 1 + delta:o + 1 + delta + 4096])
                flags = sig.u()
                if flags & 0x80:
                    sig.u()
                if flags & 0x40:
                    skip_type(sig)
                sig.u()
                if flags & 0x04:
                    for _ in range(sig.u()):
                        skip_type(sig)
                if flags & 0x20:
                    skip_type(sig)
                is_entry[entry(o + 1 + delta + sig.p)] = True
                o = nxt

    out = []
    for rid, rf in defs:
        begin, end, _ = funcs[rf]
        total = end - begin
        j = rf + 1
        while j < len(funcs) and not is_entry[j]:
            total += funcs[j][1] - funcs[j][0]
            j += 1
        name = string(cell(6, rid, 3))
        text = Sig(blob(cell(6, rid, 4))).method('\0')
        ret_part, args = text.split(' \0')
        owner_name = typedef_name(owner[rid], '+')
        out.append('%08x %x %x %s [%s] %s::%s%s' % (begin, total, off(begin), ret_part, asm_name, owner_name, name, args))
    sys.stdout.write('\n'.join(out) + '\n')


def skip_type(sig):
    """Skips one R2R type signature (ECMA types plus CANON 0x3e / MODULE 0x3f zapsigs)."""
    et = sig.b[sig.p]
    sig.p += 1
    if et in (0x0f, 0x10, 0x1d, 0x45, 0x3d):
        skip_type(sig)
    elif et in (0x11, 0x12):
        sig.u()
    elif et in (0x13, 0x1e):
        sig.u()
    elif et == 0x3f:
        sig.u()
        skip_type(sig)
    elif et == 0x14:
        skip_type(sig)
        sig.u()
        for _ in range(sig.u()):
            sig.u()
        for _ in range(sig.u()):
            sig.s()
    elif et == 0x15:
        sig.p += 1
        sig.u()
        for _ in range(sig.u()):
            skip_type(sig)
    elif et in (0x1f, 0x20):
        sig.u()
        skip_type(sig)
    elif et == 0x1b:
        cc = sig.b[sig.p]
        sig.p += 1
        if cc & 0x10:
            sig.u()
        n = sig.u()
        for _ in range(n + 1):
            skip_type(sig)


if __name__ == '__main__':
    main(sys.argv[1])
