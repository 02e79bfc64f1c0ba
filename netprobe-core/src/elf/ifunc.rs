//! GNU indirect functions (`STT_GNU_IFUNC`) in a live process: which implementation the
//! resolver chose.
//!
//! An IFUNC symbol's address is its *resolver*: the dynamic loader calls it once, when it binds a
//! reference, and stores the address it returns in the referencing image's GOT slot; every call
//! then goes to that implementation (glibc `elf/dl-runtime.c`, `elf_ifunc_invoke`; System V
//! x86-64 psABI, "Relocation Types": `R_X86_64_IRELATIVE` = "indirect (B + A)", the loader
//! calls the function at `B + A` and stores its result). A uprobe on the symbol therefore fires
//! at bind time, not on calls. The implementation's address can be read back from the process:
//! 1. in the image that defines the IFUNC, an `R_X86_64_IRELATIVE` relocation whose addend is the
//!    resolver's address (the image's own calls go through it; glibc has one for most of its
//!    IFUNCs);
//! 2. in any mapped image, an `R_X86_64_JUMP_SLOT` / `R_X86_64_GLOB_DAT` relocation naming the
//!    symbol (a lazily bound `JUMP_SLOT` that was not called yet still points into its own PLT,
//!    and is skipped).
//!
//! The slot is read from `/proc/PID/mem` (`proc(5)`; needs ptrace access, i.e. root) at
//! `load bias + r_offset`, and the value is turned into a file offset through the maps.

use crate::addr::{FileOffset, RuntimeAddr, VirtAddr};
use crate::elf::parser::parse_elf;
use crate::elf::LoadSegments;
use crate::error::{Error, Result};
use crate::normalize::MappedImage;
use crate::process::Process;
use crate::resolve::open_path;
use crate::symbol::SymbolKind;
use goblin::elf::reloc::{R_X86_64_GLOB_DAT, R_X86_64_IRELATIVE, R_X86_64_JUMP_SLOT};
use serde::Serialize;
use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};

/// How the implementation's address was found.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum SlotKind {
    /// `R_X86_64_IRELATIVE` in the defining image, addend = the resolver.
    Irelative,
    /// `R_X86_64_JUMP_SLOT` naming the symbol (a PLT entry's GOT slot).
    JumpSlot,
    /// `R_X86_64_GLOB_DAT` naming the symbol (a GOT entry for address-taken uses).
    GlobDat,
}

/// The implementation an IFUNC resolved to in one process.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct IfuncTarget {
    /// The image holding the implementation, as the process names it.
    pub image: PathBuf,
    /// Where netprobe (and `uprobe_events`) opens that image.
    pub probe_path: PathBuf,
    /// The implementation's first byte in that file: where a probe that fires on calls goes.
    pub file_offset: FileOffset,
    /// The implementation's address in the process.
    pub runtime_addr: RuntimeAddr,
    /// The function symbol that starts there, when the image names it (glibc's implementations,
    /// e.g. `__strlen_avx2`, are local symbols that stripped libraries do not keep).
    pub name: Option<String>,
    /// The image whose GOT slot held the address, and the relocation kind.
    pub slot_image: PathBuf,
    pub slot: SlotKind,
}

/// Where the implementation of the IFUNC `symbol` (its resolver at link-time address `resolver`
/// in the mapped file that the process calls `image`) is, in process `process`.
///
/// Returns `Ok(None)` when no bound GOT slot points at an implementation (the process has not
/// bound the symbol yet: lazily bound and never called; or the image is not mapped).
/// Errors: reading the maps or `/proc/PID/mem` fails (no such process, permission).
pub fn resolve_ifunc(
    process: &Process,
    image: &Path,
    symbol: &str,
    resolver: VirtAddr,
) -> Result<Option<IfuncTarget>> {
    let maps = process.maps()?;
    let images = MappedImage::group(&maps);
    let Some(def) = images.iter().find(|i| i.path == image) else {
        return Ok(None);
    };
    let base_name = symbol.split('@').next().unwrap_or(symbol);
    // The defining image first (IRELATIVE, then its own GOT), then every other ELF image.
    let mut order: Vec<&MappedImage> = vec![def];
    order.extend(
        images
            .iter()
            .filter(|i| i.path != image && i.exec_mappings().next().is_some()),
    );
    let mem_path = process.dir().join("mem");
    let mem = std::fs::File::open(&mem_path).map_err(|e| Error::io(&mem_path, e))?;
    for (n, img) in order.iter().enumerate() {
        let Ok(path) = open_path(process, img) else {
            continue;
        };
        // Opened once per run ([`crate::image::cached`]), shared with the symbol readers.
        let Ok(image) = crate::image::cached::image(&path) else {
            continue;
        };
        let Ok(elf) = parse_elf(&path, image.bytes()) else {
            continue;
        };
        let Some(bias) = load_bias(img, &LoadSegments::from_elf(&elf)) else {
            continue;
        };
        let slots = got_slots(&elf, base_name, (n == 0).then_some(resolver));
        for (slot_vaddr, kind) in slots {
            let slot_addr = bias.wrapping_add(slot_vaddr);
            let mut word = [0u8; 8];
            if mem.read_exact_at(&mut word, slot_addr).is_err() {
                continue;
            }
            let value = RuntimeAddr(u64::from_le_bytes(word));
            if let Some(target) = place(process, &images, img, &elf, bias, value)? {
                return Ok(Some(IfuncTarget {
                    slot_image: img.path.clone(),
                    slot: kind,
                    ..target
                }));
            }
        }
    }
    Ok(None)
}

/// `runtime address - link-time address` for every segment of the image (they are mapped
/// together): from its first executable mapping and the executable `PT_LOAD` holding that
/// mapping's file offset. `None` without one.
pub fn load_bias(img: &MappedImage, segments: &LoadSegments) -> Option<u64> {
    img.exec_mappings().find_map(|m| {
        let seg = segments
            .0
            .iter()
            .find(|s| s.executable && m.offset >= s.offset && m.offset - s.offset < s.filesz)?;
        // runtime(vaddr) = m.start + (file_offset(vaddr) - m.offset)
        //               = (m.start - m.offset + seg.offset - seg.vaddr) + vaddr
        // Wrapping: the difference is a two's-complement offset (ET_EXEC: 0).
        Some(
            m.start
                .wrapping_sub(m.offset)
                .wrapping_add(seg.offset)
                .wrapping_sub(seg.vaddr),
        )
    })
}

/// The link-time addresses of GOT slots that hold `symbol`'s implementation once bound:
/// IRELATIVE relocations with addend `resolver` (when given), then JUMP_SLOT / GLOB_DAT
/// relocations naming `symbol`.
fn got_slots(
    elf: &goblin::elf::Elf<'_>,
    symbol: &str,
    resolver: Option<VirtAddr>,
) -> Vec<(u64, SlotKind)> {
    let relocs = || elf.dynrelas.iter().chain(elf.pltrelocs.iter());
    let mut out = Vec::new();
    if let Some(r) = resolver {
        out.extend(
            relocs()
                .filter(|x| {
                    x.r_type == R_X86_64_IRELATIVE
                        && x.r_addend.and_then(|a| u64::try_from(a).ok()) == Some(r.0)
                })
                .map(|x| (x.r_offset, SlotKind::Irelative)),
        );
    }
    for x in relocs() {
        let kind = match x.r_type {
            R_X86_64_JUMP_SLOT => SlotKind::JumpSlot,
            R_X86_64_GLOB_DAT => SlotKind::GlobDat,
            _ => continue,
        };
        let Some(sym) = elf.dynsyms.get(x.r_sym) else {
            continue;
        };
        let name = elf.dynstrtab.get_at(sym.st_name).unwrap_or("");
        if name == symbol {
            out.push((x.r_offset, kind));
        }
    }
    out
}

/// The implementation at runtime address `value`, when it is code of a mapped image and not a
/// PLT entry of the slot's own image (an unbound lazy slot).
fn place(
    process: &Process,
    images: &[MappedImage],
    slot_img: &MappedImage,
    slot_elf: &goblin::elf::Elf<'_>,
    slot_bias: u64,
    value: RuntimeAddr,
) -> Result<Option<IfuncTarget>> {
    let Some(owner) = images
        .iter()
        .find(|i| i.exec_mappings().any(|m| m.contains(value.0)))
    else {
        return Ok(None);
    };
    if owner.path == slot_img.path {
        let in_plt = slot_elf.section_headers.iter().any(|sh| {
            let name = slot_elf.shdr_strtab.get_at(sh.sh_name).unwrap_or("");
            name.starts_with(".plt")
                && sh.sh_addr != 0
                && value.0.wrapping_sub(slot_bias).wrapping_sub(sh.sh_addr) < sh.sh_size
        });
        if in_plt {
            return Ok(None);
        }
    }
    let Some(file_offset) = owner.file_offset_of(value) else {
        return Ok(None);
    };
    let probe_path = open_path(process, owner)?;
    // Several names may start there (aliases): the shortest, then alphabetical, for a stable
    // answer.
    let name = crate::image::load_symbols(&probe_path)
        .ok()
        .and_then(|syms| {
            syms.into_iter()
                .filter(|s| s.file_offset == Some(file_offset) && s.kind != SymbolKind::Ifunc)
                .map(|s| s.name)
                .min_by(|a, b| (a.len(), a).cmp(&(b.len(), b)))
        });
    Ok(Some(IfuncTarget {
        image: owner.path.clone(),
        probe_path,
        file_offset,
        runtime_addr: value,
        name,
        slot_image: PathBuf::new(),
        slot: SlotKind::Irelative,
    }))
}
