//! .NET NativeAOT images: an ELF executable or shared library whose managed code ILCompiler
//! compiled ahead of time. What marks one, per dotnet/runtime:
//! - the linker section `__modules` holds one pointer per managed module to that module's
//!   header (the runtime walks it at start-up: `src/coreclr/nativeaot/Runtime/unix/` and
//!   ILCompiler's object writer, `src/coreclr/tools/aot/ILCompiler.Compiler/Compiler/
//!   ObjectWriter/`); in a shared library the pointer is filled by a relative relocation
//!   (`R_X86_64_RELATIVE`, or `R_AARCH64_RELATIVE` in a linux-arm64 library:
//!   [`crate::arch::Arch::relative_relocation`]) whose addend is the header's address;
//! - the header is a `ReadyToRunHeader` (`src/coreclr/nativeaot/Runtime/inc/ModuleHeaders.h`):
//!   `u32 Signature = 0x00525452 ('RTR')`, `u16 MajorVersion`, `u16 MinorVersion`, `u32 Flags`,
//!   `u16 NumberOfSections`, `u8 EntrySize`, `u8 EntryType`;
//! - compiled managed code sits in a `__managedcode` section (beside `.text`, which holds the
//!   runtime's C++ code).
//!
//! NativeAOT keeps no symbol table for managed methods: exported entry points
//! (`UnmanagedCallersOnly(EntryPoint = ...)`) are in `.dynsym`; other methods have names only in
//! the compiler's compressed stack-trace metadata, which netprobe does not decode.

use crate::bytes::{u16_at, u32_at, u64_at};
use crate::elf::parser::ElfView;
use crate::elf::LoadSegments;
use goblin::elf::section_header::SHT_RELA;
use serde::Serialize;

/// `ReadyToRunHeaderConstants::Signature` (`ModuleHeaders.h`): `RTR\0` little-endian.
pub const RTR_SIGNATURE: u32 = 0x0052_5452;

/// The module header of a NativeAOT image.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct NativeAotImage {
    /// Virtual address of the `ReadyToRunHeader`.
    pub header_vaddr: u64,
    pub major_version: u16,
    pub minor_version: u16,
    pub number_of_sections: u16,
    /// `[start, end)` of the `__managedcode` section, when the image has one.
    pub managed_code: Option<(u64, u64)>,
}

/// The NativeAOT module header of `view`, when it is a NativeAOT image (64-bit little-endian
/// ELF with a `__modules` section pointing at an `RTR` header). `None` for anything else,
/// including malformed input (every read is bounds-checked).
pub fn detect(view: &ElfView<'_>) -> Option<NativeAotImage> {
    if !view.ctx.is_big() || !view.ctx.is_little_endian() {
        return None;
    }
    let modules = view
        .section_headers
        .iter()
        .find(|sh| view.section_name(sh) == Some("__modules"))?;
    let slot = modules.sh_addr;
    // The stored pointer (executables, or a linker that applied it), else the relocation's
    // addend (shared libraries with RELA relocations).
    let stored = view.section_bytes(modules).and_then(|b| u64_at(b, 0));
    let relative = view.arch()?.relative_relocation();
    let relocated = || {
        view.section_headers
            .iter()
            .filter(|sh| sh.sh_type == SHT_RELA && sh.sh_entsize == 24)
            .filter_map(|sh| view.section_bytes(sh))
            .flat_map(|b| b.chunks_exact(24))
            .find_map(|e| {
                let (offset, info, addend) = (u64_at(e, 0)?, u64_at(e, 8)?, u64_at(e, 16)?);
                (offset == slot && (info & 0xffff_ffff) as u32 == relative).then_some(addend)
            })
    };
    let header_vaddr = match stored {
        Some(p) if p != 0 => p,
        _ => relocated()?,
    };
    let segments = LoadSegments::from_program_headers(&view.program_headers);
    let at = segments
        .0
        .iter()
        .find(|s| s.contains_file_backed(crate::addr::VirtAddr(header_vaddr)))
        .and_then(|s| (header_vaddr - s.vaddr).checked_add(s.offset))?;
    let at = usize::try_from(at).ok()?;
    if u32_at(view.bytes, at)? != RTR_SIGNATURE {
        return None;
    }
    let managed_code = view
        .section_headers
        .iter()
        .find(|sh| view.section_name(sh) == Some("__managedcode"))
        .map(|sh| (sh.sh_addr, sh.sh_addr.saturating_add(sh.sh_size)));
    Some(NativeAotImage {
        header_vaddr,
        major_version: u16_at(view.bytes, at.checked_add(4)?)?,
        minor_version: u16_at(view.bytes, at.checked_add(6)?)?,
        number_of_sections: u16_at(view.bytes, at.checked_add(12)?)?,
        managed_code,
    })
}

impl NativeAotImage {
    /// What `symbols` says about the image (one line).
    pub fn describe(&self) -> String {
        let code = match self.managed_code {
            Some((a, b)) => format!("; managed code in __managedcode {a:#x}-{b:#x}"),
            None => String::new(),
        };
        format!(
            ".NET NativeAOT image (module header 'RTR' {}.{} at {:#x}, {} sections{code}): exported entry points are listed and probe by name; any other address probes as FILE:0xOFFSET; names of other managed methods are not available (NativeAOT keeps them only in compressed stack-trace metadata, which netprobe does not decode)",
            self.major_version, self.minor_version, self.header_vaddr, self.number_of_sections
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::path::Path;

    /// A minimal 64-bit ELF: one PT_LOAD over the whole file, a `__modules` section at 0x100
    /// whose pointer (0x140) leads to an `RTR` header 16.0 with 34 sections, `.shstrtab`.
    fn tiny_nativeaot_elf() -> Vec<u8> {
        let mut b = vec![0u8; 0x2c0];
        let put = |b: &mut Vec<u8>, at: usize, v: &[u8]| b[at..at + v.len()].copy_from_slice(v);
        put(&mut b, 0, b"\x7fELF\x02\x01\x01");
        put(&mut b, 16, &3u16.to_le_bytes()); // ET_DYN
        put(&mut b, 18, &62u16.to_le_bytes()); // EM_X86_64
        put(&mut b, 20, &1u32.to_le_bytes());
        put(&mut b, 32, &64u64.to_le_bytes()); // e_phoff
        put(&mut b, 40, &0x200u64.to_le_bytes()); // e_shoff
        for (at, v) in [(52, 64u16), (54, 56), (56, 1), (58, 64), (60, 3), (62, 2)] {
            put(&mut b, at, &v.to_le_bytes());
        }
        // PT_LOAD, RW, offset 0 = vaddr 0, the whole file.
        put(&mut b, 64, &1u32.to_le_bytes());
        put(&mut b, 68, &6u32.to_le_bytes());
        put(&mut b, 64 + 32, &0x2c0u64.to_le_bytes());
        put(&mut b, 64 + 40, &0x2c0u64.to_le_bytes());
        put(&mut b, 0x100, &0x140u64.to_le_bytes());
        put(&mut b, 0x140, &RTR_SIGNATURE.to_le_bytes());
        put(&mut b, 0x144, &16u16.to_le_bytes());
        put(&mut b, 0x14c, &34u16.to_le_bytes());
        put(&mut b, 0x180, b"\0__modules\0.shstrtab\0");
        // Section 1: __modules (PROGBITS); section 2: .shstrtab (STRTAB).
        let sh = |b: &mut Vec<u8>, i: usize, name: u32, ty: u32, addr: u64, off: u64, size: u64| {
            let at = 0x200 + 64 * i;
            put(b, at, &name.to_le_bytes());
            put(b, at + 4, &ty.to_le_bytes());
            put(b, at + 16, &addr.to_le_bytes());
            put(b, at + 24, &off.to_le_bytes());
            put(b, at + 32, &size.to_le_bytes());
        };
        sh(&mut b, 1, 1, 1, 0x100, 0x100, 8);
        sh(&mut b, 2, 11, 3, 0, 0x180, 21);
        b
    }

    #[test]
    fn module_header_found_through_modules_section() {
        let bytes = tiny_nativeaot_elf();
        let view = ElfView::parse(Path::new("x"), &bytes).unwrap();
        let aot = detect(&view).unwrap();
        assert_eq!(
            (
                aot.header_vaddr,
                aot.major_version,
                aot.minor_version,
                aot.number_of_sections
            ),
            (0x140, 16, 0, 34)
        );
        assert!(aot.describe().contains("'RTR' 16.0"));
        // Without the signature it is not NativeAOT.
        let mut bad = bytes.clone();
        bad[0x140] = b'X';
        assert_eq!(detect(&ElfView::parse(Path::new("x"), &bad).unwrap()), None);
    }

    proptest::proptest! {
        /// Any corruption of a NativeAOT-shaped file never panics the detector.
        #[test]
        fn detect_never_panics_on_corrupted_images(
            flips in proptest::collection::vec((0usize..0x2c0, proptest::prelude::any::<u8>()), 1..16)
        ) {
            let mut bytes = tiny_nativeaot_elf();
            for (at, v) in flips {
                bytes[at] = v;
            }
            if let Ok(view) = ElfView::parse(Path::new("x"), &bytes) {
                let _ = detect(&view);
            }
        }

        /// Hostile bytes after a valid-looking ELF magic never panic the detector.
        #[test]
        fn detect_never_panics(tail in proptest::collection::vec(proptest::prelude::any::<u8>(), 0..4096)) {
            let mut bytes = b"\x7fELF\x02\x01\x01\0".to_vec();
            bytes.extend(tail);
            if let Ok(view) = ElfView::parse(Path::new("x"), &bytes) {
                let _ = detect(&view);
            }
        }
    }
}
