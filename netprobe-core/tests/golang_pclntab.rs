//! Pure tests of the Go readers: synthetic tables of every pclntab layout built from the format
//! description (Go's `debug/gosym/pclntab.go`, `runtime/symtab.go`), and proptest that no input
//! (arbitrary or mutated bytes) makes any reader panic. Real binaries are checked against Go's
//! own tools in `go_readers.rs` (and `go_third_party_binaries.rs`, `go_toolchain_matrix.rs`).

use netprobe_core::addr::VirtAddr;
use netprobe_core::arch::x86_64 as x86;
use netprobe_core::elf::LoadSegments;
use netprobe_core::golang::buildinfo::{self, BuildInfo};
use netprobe_core::golang::pclntab::{magic_candidates, PclntabResolver};
use netprobe_core::golang::{prologue, GoBinary, Pclntab, PclntabVersion};
use proptest::prelude::*;

/// One function for the builder: name, entry offset from text start, code size, padded size.
#[derive(Clone, Debug)]
struct F {
    name: &'static str,
    off: u64,
    code: u64,
}

fn uvarint(mut v: u64, out: &mut Vec<u8>) {
    while v >= 0x80 {
        out.push((v as u8) | 0x80);
        v >>= 7;
    }
    out.push(v as u8);
}

/// A pcsp table covering `code` bytes (quantum 1): one (value, pc) pair, then the terminator.
fn pcsp_table(code: u64) -> Vec<u8> {
    let mut t = Vec::new();
    uvarint(16, &mut t); // value delta +8 (zig-zag: even = positive, value << 1)
    uvarint(code, &mut t);
    t.push(0);
    t
}

/// Builds a little-endian, 8-byte-pointer table of `version` for `funcs` (sorted by `off`), whose
/// text starts at `text`; the last function ends at `text + end`.
fn build(version: PclntabVersion, text: u64, funcs: &[F], end: u64) -> Vec<u8> {
    let n = funcs.len() as u64;
    // Strings and pc tables, each in its own blob; offsets are fixed up per layout below.
    let mut names = Vec::new();
    let mut name_offs = Vec::new();
    for f in funcs {
        name_offs.push(names.len() as u64);
        names.extend_from_slice(f.name.as_bytes());
        names.push(0);
    }
    let mut pcs = vec![0u8]; // offset 0 means "no table"
    let mut pcsp_offs = Vec::new();
    for f in funcs {
        pcsp_offs.push(pcs.len() as u64);
        pcs.extend(pcsp_table(f.code));
    }
    let text_offsets = version >= PclntabVersion::Go118;
    let field = if text_offsets { 4u64 } else { 8 };
    let entry_size = field; // `_func.entry` is 4 bytes (1.18+) or a pointer
    let record_len = entry_size + 4 * 9;
    let functab_len = (2 * n + 1) * field;
    let push_field = |out: &mut Vec<u8>, v: u64| {
        if field == 4 {
            out.extend((v as u32).to_le_bytes());
        } else {
            out.extend(v.to_le_bytes());
        }
    };
    let entry_value = |off: u64| if text_offsets { off } else { text + off };

    let mut out = version.magic().to_le_bytes().to_vec();
    out.extend([0, 0, 1, 8]);
    match version {
        PclntabVersion::Go12 => {
            // header: nfunc; functab at 16; then filetab offset (u32); then records, names, pcs.
            out.extend(n.to_le_bytes());
            let functab_at = 16u64;
            let records_at = functab_at + functab_len + 4;
            let names_at = records_at + n * record_len;
            let pcs_at = names_at + names.len() as u64;
            for (i, f) in funcs.iter().enumerate() {
                push_field(&mut out, entry_value(f.off));
                push_field(&mut out, records_at + i as u64 * record_len);
            }
            push_field(&mut out, entry_value(end));
            out.extend(0u32.to_le_bytes());
            for (i, f) in funcs.iter().enumerate() {
                push_field(&mut out, entry_value(f.off));
                let fields = [
                    (names_at + name_offs[i]) as u32,
                    0,
                    0,
                    (pcs_at + pcsp_offs[i]) as u32,
                    0,
                    0,
                    0,
                    0,
                    0,
                ];
                fields.iter().for_each(|v| out.extend(v.to_le_bytes()));
            }
            out.extend(&names);
            out.extend(&pcs);
        }
        _ => {
            let header_words = if text_offsets { 8 } else { 7 };
            let names_at = 8 + header_words * 8;
            let cu_at = names_at + names.len() as u64;
            let files_at = cu_at;
            let pcs_at = files_at;
            let functab_at = pcs_at + pcs.len() as u64;
            out.extend(n.to_le_bytes());
            out.extend(0u64.to_le_bytes()); // nfiles
            if text_offsets {
                out.extend(text.to_le_bytes());
            }
            for w in [names_at, cu_at, files_at, pcs_at, functab_at] {
                out.extend(w.to_le_bytes());
            }
            out.extend(&names);
            out.extend(&pcs);
            for (i, f) in funcs.iter().enumerate() {
                push_field(&mut out, entry_value(f.off));
                push_field(&mut out, functab_len + i as u64 * record_len);
            }
            push_field(&mut out, entry_value(end));
            for (i, f) in funcs.iter().enumerate() {
                push_field(&mut out, entry_value(f.off));
                let fields = [
                    name_offs[i] as u32,
                    0,
                    0,
                    pcsp_offs[i] as u32,
                    0,
                    0,
                    0,
                    0,
                    0,
                ];
                fields.iter().for_each(|v| out.extend(v.to_le_bytes()));
            }
        }
    }
    out
}

fn sample_funcs() -> Vec<F> {
    vec![
        F {
            name: "runtime.main",
            off: 0,
            code: 0x1d0,
        },
        F {
            name: "main.(*Calc).Add",
            off: 0x1e0,
            code: 7,
        },
        F {
            name: "net/http.(*conn).serve",
            off: 0x200,
            code: 0x12d0,
        },
    ]
}

const TEXT: u64 = 0x40_1000;
const END: u64 = 0x14e0;

#[test]
fn every_layout_round_trips() {
    for version in PclntabVersion::ALL {
        let bytes = build(version, TEXT, &sample_funcs(), END);
        let table = Pclntab::parse(&bytes).unwrap_or_else(|e| panic!("{version}: {e}"));
        assert_eq!(table.version(), version);
        assert_eq!(table.len(), 3);
        let got: Vec<_> = table
            .functions()
            .map(|f| (f.name.to_string(), f.entry.0, f.end.0, f.code_size))
            .collect();
        assert_eq!(
            got,
            vec![
                ("runtime.main".into(), TEXT, TEXT + 0x1e0, Some(0x1d0)),
                (
                    "main.(*Calc).Add".into(),
                    TEXT + 0x1e0,
                    TEXT + 0x200,
                    Some(7)
                ),
                (
                    "net/http.(*conn).serve".into(),
                    TEXT + 0x200,
                    TEXT + END,
                    Some(0x12d0)
                ),
            ],
            "{version}"
        );
        assert_eq!(table.end_of_text(), Some(VirtAddr(TEXT + END)));
        if version >= PclntabVersion::Go118 {
            assert_eq!(table.text_start(), TEXT);
        }
    }
}

#[test]
fn text_start_override_moves_1_18_entries_only() {
    let bytes18 = build(PclntabVersion::Go118, 0, &sample_funcs(), END);
    let new18 = Pclntab::parse(&bytes18).unwrap().with_text_start(0x67_3e0);
    assert_eq!(new18.entry(1), Some(VirtAddr(0x67_3e0 + 0x1e0)));
    let bytes16 = build(PclntabVersion::Go116, TEXT, &sample_funcs(), END);
    let old = Pclntab::parse(&bytes16).unwrap().with_text_start(0x1234);
    assert_eq!(old.entry(1), Some(VirtAddr(TEXT + 0x1e0)));
}

#[test]
fn lookups_by_address_and_name() {
    let bytes = build(PclntabVersion::Go120, TEXT, &sample_funcs(), END);
    let table = Pclntab::parse(&bytes).unwrap();
    assert_eq!(table.find_index(VirtAddr(TEXT - 1)), None);
    assert_eq!(table.find_index(VirtAddr(TEXT)), Some(0));
    assert_eq!(table.find_index(VirtAddr(TEXT + 0x1ff)), Some(1));
    assert_eq!(table.find_index(VirtAddr(TEXT + END - 1)), Some(2));
    assert_eq!(table.find_index(VirtAddr(TEXT + END)), None);
    let r = PclntabResolver::new(table);
    let f = r.by_name("main.(*Calc).Add");
    assert_eq!(f.len(), 1);
    assert_eq!(f[0].entry, VirtAddr(TEXT + 0x1e0));
    assert!(r.by_name("main.(*Calc)").is_empty());
    assert_eq!(
        r.at(VirtAddr(TEXT + 0x300)).map(|f| f.name.to_string()),
        Some("net/http.(*conn).serve".into())
    );
}

#[test]
fn a_table_is_found_by_magic_inside_other_bytes() {
    let table = build(PclntabVersion::Go118, TEXT, &sample_funcs(), END);
    let mut blob = vec![0x5a; 4099];
    blob.extend(&table);
    blob.extend([0u8; 64]);
    let at = magic_candidates(&blob);
    assert_eq!(at, vec![4099]);
    assert!(Pclntab::parse(&blob[at[0]..]).is_ok());
}

#[test]
fn unsorted_entries_and_records_that_disagree_are_rejected() {
    let mut funcs = sample_funcs();
    funcs.swap(0, 2);
    assert!(Pclntab::parse(&build(PclntabVersion::Go118, TEXT, &funcs, END)).is_err());

    // A record whose entry differs from its table slot: a stray magic, not a table.
    let mut bytes = build(PclntabVersion::Go116, TEXT, &sample_funcs(), END);
    let table = Pclntab::parse(&bytes).unwrap();
    let functab = table.header().functab_offset as usize;
    let first_record =
        functab + u64::from_le_bytes(bytes[functab + 8..functab + 16].try_into().unwrap()) as usize;
    bytes[first_record] ^= 1;
    assert!(Pclntab::parse(&bytes).is_err());
}

#[test]
fn short_or_foreign_bytes_are_errors() {
    assert!(Pclntab::parse(&[]).is_err());
    assert!(Pclntab::parse(&[0xfb, 0xff, 0xff, 0xff, 0, 0, 1]).is_err());
    assert!(Pclntab::parse(b"\x7fELF\x02\x01\x01\0\0\0\0\0\0\0\0\0").is_err());
    // nfunc so large that the table would not fit
    let mut bytes = build(PclntabVersion::Go12, TEXT, &sample_funcs(), END);
    bytes[8..16].copy_from_slice(&u64::MAX.to_le_bytes());
    assert!(Pclntab::parse(&bytes).is_err());
}

#[test]
fn a_rust_elf_is_not_a_go_binary() {
    let exe = std::fs::read("/proc/self/exe").unwrap();
    assert!(GoBinary::parse("/proc/self/exe", &exe).unwrap().is_none());
}

#[test]
fn not_elf_is_not_a_go_binary() {
    assert!(GoBinary::parse("x", b"MZ\x90\0").unwrap().is_none());
    assert!(GoBinary::parse("x", b"").unwrap().is_none());
}

fn layouts() -> impl Strategy<Value = PclntabVersion> {
    prop::sample::select(PclntabVersion::ALL.to_vec())
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 512, ..ProptestConfig::default() })]

    #[test]
    fn arbitrary_bytes_never_panic_the_table_reader(bytes in prop::collection::vec(any::<u8>(), 0..512), version in layouts()) {
        // Half the cases start with a real magic so the reader gets past the first check.
        let mut data = bytes.clone();
        if data.len() >= 8 && data[0] & 1 == 0 {
            data[..4].copy_from_slice(&version.magic().to_le_bytes());
            data[4] = 0; data[5] = 0; data[6] = 1; data[7] = 8;
        }
        if let Ok(t) = Pclntab::parse(&data) {
            for f in t.functions() {
                prop_assert!(f.entry <= f.end);
                prop_assert!(f.size() <= f.padded_size());
            }
            let _ = t.find_index(VirtAddr(TEXT));
        }
        let _ = magic_candidates(&data);
    }

    #[test]
    fn mutated_tables_never_panic_and_keep_invariants(
        version in layouts(),
        flips in prop::collection::vec((any::<prop::sample::Index>(), any::<u8>()), 1..8),
        cut in any::<prop::sample::Index>(),
        truncate in any::<bool>(),
    ) {
        let mut bytes = build(version, TEXT, &sample_funcs(), END);
        for (at, v) in flips {
            let i = at.index(bytes.len());
            bytes[i] = v;
        }
        if truncate {
            bytes.truncate(cut.index(bytes.len() + 1));
        }
        if let Ok(t) = Pclntab::parse(&bytes) {
            let r = PclntabResolver::new(t.clone());
            for f in t.functions() {
                prop_assert!(f.entry <= f.end);
                prop_assert!(f.code_end() <= f.end);
                if f.entry < f.end {
                    prop_assert!(r.at(f.entry).is_some());
                }
            }
        }
    }

    #[test]
    fn buildinfo_reader_never_panics(tail in prop::collection::vec(any::<u8>(), 0..200), flags in any::<u8>(), ptr in prop::sample::select(vec![4u8, 8, 0, 255])) {
        let mut blob = buildinfo::MAGIC.to_vec();
        blob.push(ptr);
        blob.push(flags);
        blob.extend(&tail);
        let _ = BuildInfo::parse(&blob, &blob, &LoadSegments::default());
        let _ = BuildInfo::locate(&blob, Some((0, blob.len() as u64 + 7)));
        let _ = BuildInfo::locate(&blob, Some((u64::MAX, 16)));
    }

    #[test]
    fn elf_prefixed_junk_never_panics_go_binary(tail in prop::collection::vec(any::<u8>(), 0..400)) {
        let mut bytes = b"\x7fELF\x02\x01\x01\0".to_vec();
        bytes.extend(tail);
        let _ = GoBinary::parse("junk", &bytes);
    }

    #[test]
    fn decoding_arbitrary_code_never_panics_and_stays_inside(code in prop::collection::vec(any::<u8>(), 0..256), entry in 0u64..u64::MAX / 2) {
        let end = entry + code.len() as u64;
        let scan = x86::scan(&code, VirtAddr(entry));
        for r in &scan.rets {
            prop_assert!(r.0 >= entry && r.0 < end);
            // The whole RET instruction is inside too, and decodes as a RET from there.
            let at = (r.0 - entry) as usize;
            let instr = x86::instructions(&code[at..], *r).next();
            prop_assert!(instr.is_some_and(|i| i.mnemonic() == iced_x86::Mnemonic::Ret
                && !i.is_invalid()
                && i.next_ip() <= end));
        }
        for j in &scan.tail_jumps {
            prop_assert!(j.0 >= entry && j.0 < end);
        }
        if let Some(check) = prologue::stack_check(netprobe_core::arch::Arch::X86_64, &code, VirtAddr(entry)) {
            prop_assert!(check.jbe.0 >= entry && check.after.0 > check.jbe.0 && check.after.0 <= end);
            prop_assert!(check.morestack_block.0 > check.jbe.0 && check.morestack_block.0 < end);
        }
        let probe = prologue::entry_probe_address(netprobe_core::arch::Arch::X86_64, &code, VirtAddr(entry));
        prop_assert!(probe.0 >= entry && probe.0 <= end);
    }
}
