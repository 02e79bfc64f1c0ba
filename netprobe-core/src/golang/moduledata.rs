//! Where a Go function table's entries start counting: the text start, and the module data that
//! records it when the table does not.
//!
//! # The text-start rule
//!
//! Function entries in tables of the Go 1.2 and 1.16 layouts are absolute addresses; nothing is
//! needed. Since the 1.18 layout they are 4-byte offsets from the module's text start
//! (`cmd/link/internal/ld/pcln.go`, `textOff`: `SymValue(s) - SymValue("runtime.text")`), and the
//! text start is taken, first that applies:
//!
//! 1. the header's `textStart` word (the third word after the 8-byte magic/pad/quantum/ptrsize
//!    prefix; `runtime/symtab.go`, `pcHeader`)
//!    when it is not zero: Go 1.18 to 1.25 write it;
//! 2. the addend of the relative relocation on that word, for a PIE whose linker left the word
//!    for the loader (`B + A`: `R_X86_64_RELATIVE` of the System V x86-64 psABI,
//!    `R_AARCH64_RELATIVE` of AAELF64; `crate::arch::Arch::relative_relocation`);
//! 3. the `text` field of the module data (`runtime.firstmoduledata`, `runtime/symtab.go`,
//!    `moduledata`): Go 1.26 and later write the header word as zero ("no longer stored as it
//!    requires a relocation. Code should use the moduledata text field instead", Go 1.26's
//!    `pcHeader`; the linker writes `0 // unused` there in `cmd/link/internal/ld/pcln.go`). The
//!    module data is found without symbols, as [`find_moduledata`] documents;
//! 4. the `runtime.text` symbol (`.symtab`), which the linker defines at the text start, when the
//!    module data is not found but the symbol table is there.
//!
//! Whatever the source, the value is accepted only when it lies in an executable `PT_LOAD` and the
//! table's first and last entries measured from it do too; module data must also have
//! `minpc == text + first entry`. A file where nothing applies has no known function addresses:
//! netprobe says so and places nothing, rather than use offsets as addresses.
//!
//! # Module data, located without symbols
//!
//! From Go 1.16 to 1.27 `moduledata` begins with pointer-sized words (`runtime/symtab.go`, read in
//! the sources of 1.19 and 1.21 to 1.27, and in copies of go1.16's and go1.17's that cite them;
//! the tests also find it in builds by Go 1.19, 1.20 and 1.21 to 1.27):
//!
//! ```text
//! word 0       pcHeader       *pcHeader     == the function table's address
//! words 1-3    funcnametab    []byte        ptr == table + funcnameOffset
//! words 4-6    cutab          []uint32
//! words 7-9    filetab        []byte
//! words 10-12  pctab          []byte        ptr == table + pctabOffset
//! words 13-15  pclntable      []byte        ptr == table + pclnOffset
//! words 16-18  ftab           []functab     len == nfunc + 1
//! word 19      findfunctab
//! words 20, 21 minpc, maxpc
//! words 22, 23 text, etext
//! ```
//!
//! (Go 1.21 and later put a zero-sized `sys.NotInHeap` first, which takes no room.) Candidates are
//! the pointer-aligned words of the file's loadable segments whose value, read from the file or,
//! where a relative relocation covers the word, from its addend (PIEs: Go's linker and
//! GNU ld write the value in both places, but only the relocation is authoritative), equals the
//! table's link-time address; a candidate is the module data when the slice pointers and the
//! `ftab` length above agree with the table's header.

use crate::bytes;
use std::collections::HashMap;

/// Word index of `text` in `moduledata` (see the module documentation).
const TEXT_WORD: u64 = 22;
/// Word index of `minpc`.
const MINPC_WORD: u64 = 20;
/// Words read from a candidate: up to and including `etext`.
const WORDS: u64 = 24;

/// The link-time image the locator reads: file-backed bytes of the loadable segments and the
/// relative relocations (target address to addend).
#[derive(Clone, Debug, Default)]
pub struct LinkImage<'a> {
    /// `(vaddr, file bytes)` of each loadable segment (its file-backed part).
    pub segments: Vec<(u64, &'a [u8])>,
    /// Relative relocations (`B + A`): address of the relocated word to its addend.
    pub relative: HashMap<u64, u64>,
}

impl LinkImage<'_> {
    /// The pointer-sized word at `vaddr` as the loader leaves it (before adding the load bias): the
    /// relocation's addend where one covers it, else the file's bytes.
    pub fn word(&self, vaddr: u64, ptr_size: u8) -> Option<u64> {
        if let Some(&a) = self.relative.get(&vaddr) {
            return Some(a);
        }
        self.segments.iter().find_map(|&(start, data)| {
            let off = vaddr.checked_sub(start)?;
            bytes::word_at(data, off, ptr_size)
        })
    }
}

/// The file offset of the table `runtime.firstmoduledata` points at, when the file's `.dynsym`
/// names that symbol (Debian's dockerd exports every Go symbol; found through `.gnu.hash`) and
/// the pointer is stored in the file (GNU ld writes a `R_X86_64_RELATIVE` relocation's addend
/// into the word as well): the module data's first word is `pcHeader` (Go 1.16+) or the data
/// pointer of the `pclntable` slice (Go 1.2-1.15), the table's first byte either way
/// (`runtime/symtab.go`, `type moduledata`). Only a magic candidate
/// ([`crate::golang::pclntab::parser::magic_candidates_iter`]) is returned; `None` otherwise.
pub fn table_named_by_dynamic_symbol(
    elf: &crate::elf::parser::ElfView<'_>,
    bytes: &[u8],
    segments: &crate::elf::LoadSegments,
) -> Option<u64> {
    let moduledata = elf.dynamic_symbol_value("runtime.firstmoduledata")?;
    let word_at = segments.file_offset(crate::addr::VirtAddr(moduledata))?;
    let table = bytes::word_at(bytes, word_at.0, 8)?;
    let at = segments.file_offset(crate::addr::VirtAddr(table))?.0;
    let head = bytes::slice(bytes, at, 8)?;
    crate::golang::pclntab::parser::magic_candidates_iter(head)
        .next()
        .filter(|&c| c == 0)
        .map(|_| at)
}

/// What the table's header says, as far as the locator checks it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct TableFacts {
    /// Link-time address of the table's first byte (the `pcHeader`).
    pub vaddr: u64,
    pub ptr_size: u8,
    pub nfunc: u64,
    pub funcname_offset: u64,
    pub pctab_offset: u64,
    pub functab_offset: u64,
}

/// The fields of a located `moduledata` that netprobe uses.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ModuleData {
    /// Link-time address of the structure.
    pub vaddr: u64,
    pub minpc: u64,
    pub maxpc: u64,
    pub text: u64,
    pub etext: u64,
}

/// Finds the module data of the table `table` in `image` (see the module documentation for the
/// layout and the checks). `None` when no candidate passes them. Never panics, whatever the bytes.
pub fn find_moduledata(image: &LinkImage<'_>, table: &TableFacts) -> Option<ModuleData> {
    let p = table.ptr_size;
    if !matches!(p, 4 | 8) {
        return None;
    }
    let needle = &table.vaddr.to_le_bytes()[..usize::from(p)];
    let from_file = image.segments.iter().flat_map(|&(start, data)| {
        memchr::memmem::find_iter(data, needle)
            .filter(move |at| at % usize::from(p) == 0)
            .filter_map(move |at| start.checked_add(at as u64))
    });
    let from_relocs = image
        .relative
        .iter()
        .filter(|&(_, &addend)| addend == table.vaddr)
        .map(|(&at, _)| at);
    let mut candidates: Vec<u64> = from_file.chain(from_relocs).collect();
    candidates.sort_unstable();
    candidates.dedup();
    candidates
        .into_iter()
        .find_map(|at| check_candidate(image, table, at))
}

fn check_candidate(image: &LinkImage<'_>, table: &TableFacts, at: u64) -> Option<ModuleData> {
    let p = table.ptr_size;
    let mut w = [0u64; WORDS as usize];
    for (i, slot) in w.iter_mut().enumerate() {
        let addr = at.checked_add((i as u64).checked_mul(u64::from(p))?)?;
        *slot = image.word(addr, p)?;
    }
    let rel = |off: u64| table.vaddr.checked_add(off);
    let agrees = w[0] == table.vaddr
        && Some(w[1]) == rel(table.funcname_offset)
        && Some(w[10]) == rel(table.pctab_offset)
        && Some(w[13]) == rel(table.functab_offset)
        && Some(w[17]) == table.nfunc.checked_add(1);
    let (minpc, maxpc) = (w[MINPC_WORD as usize], w[MINPC_WORD as usize + 1]);
    let (text, etext) = (w[TEXT_WORD as usize], w[TEXT_WORD as usize + 1]);
    let ordered = text <= minpc && minpc <= maxpc && maxpc <= etext && text != 0;
    (agrees && ordered).then_some(ModuleData {
        vaddr: at,
        minpc,
        maxpc,
        text,
        etext,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn facts() -> TableFacts {
        TableFacts {
            vaddr: 0x4d_57a8,
            ptr_size: 8,
            nfunc: 0x794,
            funcname_offset: 0x48,
            pctab_offset: 0x1_9300,
            functab_offset: 0x5_9138,
        }
    }

    /// The first 24 words of the module data of a Go 1.26.6 build (`go tool nm`:
    /// `runtime.firstmoduledata` at 0x57b3c0; bytes read with `xxd`).
    fn real_words(t: &TableFacts) -> Vec<u64> {
        let mut w = vec![0u64; 24];
        w[0] = t.vaddr;
        w[1] = t.vaddr + t.funcname_offset;
        w[2] = 0x1_4028;
        w[3] = 0x1_4028;
        w[10] = t.vaddr + t.pctab_offset;
        w[13] = t.vaddr + t.functab_offset;
        w[16] = t.vaddr + t.functab_offset;
        w[17] = t.nfunc + 1;
        w[18] = t.nfunc + 1;
        w[19] = 0x57_9198;
        w[20] = 0x40_1000;
        w[21] = 0x49_e221;
        w[22] = 0x40_1000;
        w[23] = 0x49_e231;
        w
    }

    fn bytes_of(words: &[u64]) -> Vec<u8> {
        words.iter().flat_map(|w| w.to_le_bytes()).collect()
    }

    #[test]
    fn finds_module_data_planted_after_noise() {
        let t = facts();
        // Noise first: a stray copy of the table address that is not module data.
        let mut data = bytes_of(&[0, t.vaddr, 7, 7]);
        data.extend(bytes_of(&real_words(&t)));
        let image = LinkImage {
            segments: vec![(0x57_b3a0, &data)],
            relative: HashMap::new(),
        };
        let md = find_moduledata(&image, &t).expect("found");
        assert_eq!(md.vaddr, 0x57_b3c0);
        assert_eq!(md.text, 0x40_1000);
        assert_eq!(md.minpc, 0x40_1000);
        assert_eq!(md.etext, 0x49_e231);
    }

    #[test]
    fn pie_words_come_from_relocations() {
        let t = facts();
        let words = real_words(&t);
        // The file holds zeros where the loader writes; the relocations carry the values.
        let zeros = vec![0u8; words.len() * 8];
        let relative: HashMap<u64, u64> = words
            .iter()
            .enumerate()
            .map(|(i, &w)| (0x60_0000 + 8 * i as u64, w))
            .collect();
        let image = LinkImage {
            segments: vec![(0x60_0000, &zeros)],
            relative,
        };
        assert_eq!(find_moduledata(&image, &t).map(|m| m.text), Some(0x40_1000));
    }

    #[test]
    fn disagreeing_header_is_not_module_data() {
        let t = facts();
        let mut words = real_words(&t);
        words[17] = t.nfunc; // ftab length must be nfunc + 1
        let data = bytes_of(&words);
        let image = LinkImage {
            segments: vec![(0x1000, &data)],
            relative: HashMap::new(),
        };
        assert_eq!(find_moduledata(&image, &t), None);
    }

    proptest::proptest! {
        /// Hostile bytes and relocations never panic; a planted module data is found wherever it
        /// sits (pointer-aligned) among random words.
        #[test]
        fn never_panics_and_finds_planted(
            noise in proptest::collection::vec(proptest::prelude::any::<u8>(), 0..2048),
            slot in 0usize..256,
            base in proptest::prelude::any::<u64>(),
            relocs in proptest::collection::vec(
                (proptest::prelude::any::<u64>(), proptest::prelude::any::<u64>()), 0..16),
            ptr_size in proptest::sample::select(vec![0u8, 4, 8, 3]),
            plant in proptest::prelude::any::<bool>(),
        ) {
            let mut t = facts();
            t.ptr_size = ptr_size;
            let mut data = noise.clone();
            let at = (slot * 8).min(data.len()) & !7;
            if plant {
                t.ptr_size = 8;
                let md = bytes_of(&real_words(&t));
                data.splice(at..at, md);
            }
            let base = base & !7;
            let image = LinkImage {
                segments: vec![(base, &data)],
                relative: if plant { HashMap::new() } else { relocs.into_iter().collect() },
            };
            let found = find_moduledata(&image, &t);
            if plant && base.checked_add(data.len() as u64).is_some() {
                let md = found.expect("planted module data found");
                proptest::prop_assert_eq!(md.text, 0x40_1000);
                // The first valid candidate wins; noise before the plant could only match by
                // repeating all the checked words, which random bytes do not.
                proptest::prop_assert!(md.vaddr <= base + at as u64);
            }
        }
    }
}
