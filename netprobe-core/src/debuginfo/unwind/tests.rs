//! The walker on synthetic stacks (frame-pointer chains, hostile bytes) and on a real image's
//! call-frame information (Debian's libc, built without frame pointers).

use super::*;
use proptest::prelude::*;
use std::collections::HashMap;
use std::sync::Arc;

/// A sparse stack for tests: words by address.
#[derive(Default)]
struct Words(HashMap<u64, u64>);

impl StackMemory for Words {
    fn read_u64(&self, addr: u64) -> Option<u64> {
        self.0.get(&addr).copied()
    }
}

fn no_images(_: u64) -> Option<(Arc<ImageUnwinder>, u64)> {
    None
}

/// A frame-pointer chain: frame `i` of `sizes[i]` words holds the saved rbp and the return
/// address `ret(i)`; the outermost saved rbp and return address are 0.
fn fp_stack(base: u64, sizes: &[u64]) -> (Registers, Words, Vec<u64>) {
    let ret = |i: usize| 0x40_0000 + 0x100 * i as u64;
    let mut words = Words::default();
    let mut rbp = base + 8 * sizes[0];
    let regs = Registers::new(0x41_0000, base, rbp);
    let mut expect = vec![0x41_0000];
    for (i, size) in sizes.iter().enumerate() {
        let last = i + 1 == sizes.len();
        let next = rbp + 16 + 8 * sizes.get(i + 1).copied().unwrap_or(0);
        words.0.insert(rbp, if last { 0 } else { next });
        words.0.insert(rbp + 8, if last { 0 } else { ret(i) });
        if !last {
            expect.push(ret(i));
        }
        let _ = size;
        rbp = next;
    }
    (regs, words, expect)
}

#[test]
fn a_frame_pointer_chain_walks_to_its_zero_return_address() {
    let (regs, words, expect) = fp_stack(0x7ff0_0000, &[2, 4, 0, 8]);
    let w = walk(regs, &words, &mut no_images, WalkLimits::default());
    assert_eq!(w.pcs(), expect);
    assert_eq!(w.end, WalkEnd::Outermost);
    assert_eq!(w.frames[0].1, UnwoundBy::Ip);
    assert!(w.frames[1..].iter().all(|f| f.1 == UnwoundBy::Fp));
}

#[test]
fn a_loop_in_the_chain_ends_the_walk() {
    let mut words = Words::default();
    // rbp points at itself: the caller's rsp would not be above the callee's.
    words.0.insert(0x1000, 0x1000);
    words.0.insert(0x1008, 0x40_1000);
    let regs = Registers::new(0x40_0000, 0x1000, 0x1000);
    let w = walk(regs, &words, &mut no_images, WalkLimits::default());
    assert!(w.frames.len() <= 3, "{w:?}");
    let regs = Registers::new(0x40_0000, 0x1000, 0x800);
    let w = walk(regs, &words, &mut no_images, WalkLimits::default());
    assert!(matches!(w.end, WalkEnd::OutsideStack(_)), "{w:?}");
}

proptest! {
    #[test]
    fn synthetic_frame_pointer_chains_walk_back_exactly(sizes in proptest::collection::vec(0u64..64, 1..60)) {
        let (regs, words, expect) = fp_stack(0x7ff0_0000, &sizes);
        let w = walk(regs, &words, &mut no_images, WalkLimits::default());
        prop_assert_eq!(w.pcs(), expect);
        prop_assert_eq!(w.end, WalkEnd::Outermost);
    }

    #[test]
    fn the_frame_limit_holds(sizes in proptest::collection::vec(0u64..8, 1..60), max in 1usize..20) {
        let (regs, words, _) = fp_stack(0x7ff0_0000, &sizes);
        let w = walk(regs, &words, &mut no_images, WalkLimits { max_frames: max });
        prop_assert!(w.frames.len() <= max);
    }

    #[test]
    fn hostile_stacks_end_with_rsp_rising_and_never_panic(
        bytes in proptest::collection::vec(any::<u8>(), 0..2048),
        rbp_at in 0u64..2048,
        rip in any::<u64>(),
    ) {
        let base = 0x7fff_0000_0000u64;
        let stack = CopiedStack { base, bytes: &bytes };
        let regs = Registers::new(rip, base, base + rbp_at);
        let w = walk(regs, &stack, &mut no_images, WalkLimits::default());
        prop_assert!(w.frames.len() <= 127);
        // Every frame after the first came from a frame whose stack was within the copy: at
        // most one frame per 16 bytes of it.
        prop_assert!(w.frames.len() <= 1 + bytes.len() / 16 + 1);
    }
}

/// Debian's libc, built without frame pointers: what CFI exists for.
const LIBC: &str = "/lib/x86_64-linux-gnu/libc.so.6";

fn libc() -> Option<ImageUnwinder> {
    if !std::path::Path::new(LIBC).exists() {
        eprintln!("SKIPPED: {LIBC} is missing");
        return None;
    }
    Some(ImageUnwinder::open(std::path::Path::new(LIBC), None).expect("libc parses"))
}

/// Start addresses of libc's FDEs, read from `.eh_frame_hdr`'s table by gimli, of functions
/// libc exports (called by `call`: not a signal trampoline or `_start`, whose CFA differs).
fn fde_starts() -> Vec<u64> {
    let bytes = std::fs::read(LIBC).unwrap();
    let elf = goblin::elf::Elf::parse(&bytes).unwrap();
    let exported: std::collections::HashSet<u64> = elf
        .dynsyms
        .iter()
        .filter(|s| s.st_type() == goblin::elf::sym::STT_FUNC && s.st_value != 0)
        .map(|s| s.st_value)
        .collect();
    let s = crate::debuginfo::DebugSections::parse(std::path::Path::new(LIBC), &bytes).unwrap();
    let (_, bases) = s.eh_frame().unwrap();
    let hdr = s.eh_frame_hdr().unwrap().parse(&bases, 8).unwrap();
    let table = hdr.table().unwrap();
    let mut it = table.iter(&bases);
    let mut out = Vec::new();
    while let Ok(Some((start, _))) = it.next() {
        if let gimli::Pointer::Direct(a) = start {
            if exported.contains(&a) {
                out.push(a);
            }
        }
    }
    out
}

#[test]
fn libc_has_call_frames_through_its_eh_frame_hdr() {
    let Some(img) = libc() else { return };
    let cfi = img.cfi.as_ref().expect("libc has .eh_frame");
    let starts = fde_starts();
    assert!(starts.len() > 500, "{} FDEs", starts.len());
    assert!(starts.iter().take(200).all(|&a| cfi.covers(a)));
    assert!(img.go.is_none());
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(64))]
    /// At any function's first instruction the return address is at rsp and the CFA is rsp + 8
    /// (psABI §3.2.2: the call pushed it), whatever the function does later: CFI must say so.
    #[test]
    fn at_every_libc_function_entry_the_caller_is_the_word_at_rsp(pick in any::<prop::sample::Index>(), ret in 0x1000u64..0x7fff_0000_0000) {
        let Some(img) = libc() else { return Ok(()) };
        let starts = fde_starts();
        let entry = starts[pick.index(starts.len())];
        let rsp = 0x7ffd_0000_1000u64;
        let mut words = Words::default();
        words.0.insert(rsp, ret);
        let regs = Registers::new(entry, rsp, 0xdead_0000);
        let caller = img.cfi.as_ref().unwrap().step(entry, &regs, &words).unwrap();
        prop_assert_eq!(caller.rip(), Some(ret));
        prop_assert_eq!(caller.rsp(), Some(rsp + 8));
        prop_assert_eq!(caller.rbp(), Some(0xdead_0000));
    }
}

/// Every executable `PT_LOAD` of `path`, mapped at `base` plus its page-aligned address the
/// way the kernel maps it, has bias `base`: for libc (offsets equal addresses) and for a Rust
/// binary linked by lld (each segment's address a page beyond its offset).
fn biases_hold(path: &std::path::Path) {
    let bytes = std::fs::read(path).unwrap();
    let elf = goblin::elf::Elf::parse(&bytes).unwrap();
    let img = ImageUnwinder::open(path, None).unwrap();
    let base = 0x7f00_0000_0000u64;
    let mut seen = 0;
    for ph in elf
        .program_headers
        .iter()
        .filter(|p| p.p_type == goblin::elf::program_header::PT_LOAD && p.is_executable())
    {
        let map_start = base + (ph.p_vaddr & !0xfff);
        assert_eq!(
            img.bias(map_start, ph.p_offset & !0xfff),
            Some(base),
            "{}",
            path.display()
        );
        seen += 1;
    }
    assert!(seen > 0);
}

#[test]
fn a_mapping_bias_is_runtime_minus_link_time() {
    if libc().is_some() {
        biases_hold(std::path::Path::new(LIBC));
    }
    if std::process::Command::new("rustc")
        .arg("--version")
        .output()
        .is_ok()
    {
        biases_hold(&fixtures::rust::build("unwind_sort", &["-O", "-g"]));
    } else {
        eprintln!("SKIPPED: no rustc to build an lld-linked binary");
    }
}
