//! Normalization: from runtime addresses in a live process to file offsets, and back.
//!
//! A file is mapped as several mappings (one per ELF `PT_LOAD` / PE section, page-rounded). This
//! module groups a process's mappings per file ([`MappedImage`]), finds where the image's byte at
//! file offset 0 lives (its [`ImageBase`]), and converts between runtime addresses and file offsets
//! with [`formulas::normalize`].
//!
//! The image base is *not* the lowest mapping of the file (what the hand-written .NET crossgen-map
//! recipe, `MethodAddress - (ExeSectionStartAddress - FirstSectionStartAddress) + SectionOffset`
//! over `/proc/PID/maps`, takes as "FirstSectionStartAddress"): .NET 8 additionally maps each ReadyToRun image whole as a shared
//! `r--s` mapping, usually at a lower address, and the seed arithmetic then goes negative
//! (`fixtures/recorded/maps/net8-sleep.maps`). See [`MappedImage::image_base_for`] for the rule.

use crate::addr::{FileOffset, ImageBase, RuntimeAddr};
use crate::formulas;
use crate::maps::{Device, MapPath, MapsEntry};
use serde::Serialize;
use std::path::{Path, PathBuf};

/// All mappings of one file (same device and inode) in one process, by ascending address.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct MappedImage {
    /// The path as the process sees it (from its maps; may not exist in our mount namespace).
    #[serde(serialize_with = "ser_path")]
    pub path: PathBuf,
    /// The kernel marked the mapping ` (deleted)`: the file was unlinked or replaced since.
    pub deleted: bool,
    pub dev: Device,
    pub inode: u64,
    pub mappings: Vec<MapsEntry>,
}

fn ser_path<S: serde::Serializer>(p: &Path, s: S) -> Result<S::Ok, S::Error> {
    s.serialize_str(&p.to_string_lossy())
}

impl MappedImage {
    /// Groups the file-backed mappings of a maps listing per file, in order of first appearance.
    /// Anonymous and pseudo (`[vdso]`, `[heap]`...) mappings are left out.
    pub fn group(entries: &[MapsEntry]) -> Vec<MappedImage> {
        let mut images: Vec<MappedImage> = Vec::new();
        for e in entries {
            let MapPath::File { path, deleted } = &e.path else {
                continue;
            };
            // Device 0:0 with inode 0 is no real identity (some pseudo files); fall back to the path.
            let same = |img: &MappedImage| {
                if e.inode == 0 {
                    img.inode == 0 && img.path == *path
                } else {
                    img.dev == e.dev && img.inode == e.inode
                }
            };
            match images.iter_mut().find(|img| same(img)) {
                Some(img) => img.mappings.push(e.clone()),
                None => images.push(MappedImage {
                    path: path.clone(),
                    deleted: *deleted,
                    dev: e.dev,
                    inode: e.inode,
                    mappings: vec![e.clone()],
                }),
            }
        }
        for img in &mut images {
            img.mappings.sort_by_key(|m| m.start);
        }
        images
    }

    /// The executable mappings, by ascending address.
    pub fn exec_mappings(&self) -> impl Iterator<Item = &MapsEntry> {
        self.mappings.iter().filter(|m| m.perms.exec)
    }

    /// The lowest-addressed mapping of the file: what the .NET crossgen-map recipe
    /// ([`formulas::dotnet_maps_offset`]) calls the "first section".
    /// Correct as an image base on .NET Core 3.1, wrong on .NET 8 (a whole-file `r--s` mapping sits
    /// below the image). `None` only for an image without mappings.
    pub fn lowest_mapping(&self) -> Option<&MapsEntry> {
        self.mappings.first()
    }

    /// Where the byte at file offset 0 of the image that `exec` belongs to is mapped.
    ///
    /// Rule: among this file's mappings at file offset 0 that are private, not writable and start
    /// at or below `exec`, take the highest non-executable one (the read-only header mapping: an
    /// ELF's first `PT_LOAD`, a PE image's headers); if there is none, the highest executable one
    /// (old ELF layouts whose code segment starts at offset 0 and holds the headers).
    /// Why each condition:
    /// - private: .NET 8's whole-file `r--s` mapping is shared and sits below the image;
    /// - not writable: PE data sections whose raw data starts below 0x1000 are mapped at the
    ///   page-rounded offset 0 too, read-write (`fixtures/recorded/maps/dotnet22-crossgen-sample-netcore-app.maps`, the `rw-p 00000000` line);
    /// - highest at or below `exec`: a file loaded twice has a header mapping per load.
    ///
    /// Returns `None` when no mapping qualifies (then the image base cannot be known from the maps
    /// alone).
    pub fn image_base_for(&self, exec: &MapsEntry) -> Option<ImageBase> {
        self.image_base_at(exec, FileOffset(0))
    }

    /// [`image_base_for`](Self::image_base_for) for an image whose byte 0 lies at `image_start`
    /// in the mapped file: an assembly inside a .NET single-file bundle, mapped from the bundle
    /// at its entry's offset. The runtime's PAL maps such an image's headers from the page that
    /// holds `image_start`, at the start of the image's reservation plus `image_start`'s offset
    /// within its page (`MAPMapPEFile`, `src/coreclr/pal/src/map/map.cpp`), so the image base is
    /// that header mapping's start plus `image_start - map.offset`. Same conditions as above,
    /// with "at file offset 0" read as "holds file offset `image_start`". For `image_start` 0
    /// this is exactly [`image_base_for`](Self::image_base_for).
    pub fn image_base_at(&self, exec: &MapsEntry, image_start: FileOffset) -> Option<ImageBase> {
        let candidates = || {
            self.mappings.iter().filter(|m| {
                m.offset <= image_start.0
                    && image_start.0 - m.offset < m.len()
                    && !m.perms.shared
                    && !m.perms.write
                    && m.start <= exec.start
            })
        };
        let base = |m: &MapsEntry| m.start + (image_start.0 - m.offset);
        candidates()
            .filter(|m| !m.perms.exec)
            .map(base)
            .max()
            .or_else(|| candidates().map(base).max())
            .map(ImageBase)
    }

    /// The image base for the first executable mapping; `None` without an executable mapping or
    /// when [`image_base_for`](Self::image_base_for) finds none.
    pub fn image_base(&self) -> Option<ImageBase> {
        self.image_base_for(self.exec_mappings().next()?)
    }

    /// The mapping that contains `addr`; `None` when no mapping of this file does.
    pub fn mapping_at(&self, addr: RuntimeAddr) -> Option<&MapsEntry> {
        self.mappings.iter().find(|m| m.contains(addr.0))
    }

    /// File offset of a runtime address, over the mapping that contains it; `None` when no mapping
    /// of this file contains it.
    pub fn file_offset_of(&self, addr: RuntimeAddr) -> Option<FileOffset> {
        let m = self.mapping_at(addr)?;
        formulas::normalize(addr, m.start, m.offset)
    }

    /// The executable mapping that holds file offset `off`; `None` when that byte is not mapped
    /// executable in this process (not code, or not loaded).
    pub fn exec_mapping_of_offset(&self, off: FileOffset) -> Option<&MapsEntry> {
        self.exec_mappings()
            .find(|m| off.0 >= m.offset && off.0 - m.offset < m.len())
    }

    /// Runtime address of the code at file offset `off` (through the executable mapping holding
    /// it); `None` when no executable mapping holds it.
    pub fn runtime_addr_of(&self, off: FileOffset) -> Option<RuntimeAddr> {
        let m = self.exec_mapping_of_offset(off)?;
        Some(RuntimeAddr(m.start + (off.0 - m.offset)))
    }
}

/// Offset of a method given by its RVA, from the live maps alone: normalize `image_base + rva`
/// over the executable mapping that contains it. This is the .NET crossgen-map formula
/// ([`formulas::dotnet_maps_offset`]) with the image base chosen right (see [`MappedImage::image_base_for`]).
///
/// Returns the file offset and the runtime address, or `None` when there is no image base or
/// `image_base + rva` lies in no executable mapping of the image.
pub fn rva_to_file_offset(
    image: &MappedImage,
    rva: crate::addr::Rva,
) -> Option<(FileOffset, RuntimeAddr)> {
    rva_to_file_offset_at(image, rva, FileOffset(0))
}

/// [`rva_to_file_offset`] for an image whose byte 0 lies at `image_start` in the mapped file
/// (a bundled assembly; see [`MappedImage::image_base_at`]).
pub fn rva_to_file_offset_at(
    image: &MappedImage,
    rva: crate::addr::Rva,
    image_start: FileOffset,
) -> Option<(FileOffset, RuntimeAddr)> {
    for exec in image.exec_mappings() {
        let Some(base) = image.image_base_at(exec, image_start) else {
            continue;
        };
        let addr = RuntimeAddr(base.0.checked_add(rva.0)?);
        if exec.contains(addr.0) {
            return Some((formulas::normalize(addr, exec.start, exec.offset)?, addr));
        }
    }
    None
}
