//! .NET single-file bundle structures (dotnet/runtime `src/native/corehost/bundle/header.h`,
//! `file_entry.h`, `src/installer/managed/Microsoft.NET.HostModel/Bundle/FileType.cs`,
//! `Manifest.cs`, `TargetInfo.cs`).

use crate::addr::FileOffset;
use serde::Serialize;

/// The bundle signature: SHA-256 of ".net core bundle". The app host is built with this
/// placeholder preceded by an 8-byte header offset (zero in a plain app host); the bundler
/// writes the offset of the bundle header there (`Bundler.BundleHeaderPlaceholder`,
/// `src/installer/managed/Microsoft.NET.HostModel/Bundle/Bundler.cs`).
pub const SIGNATURE: [u8; 32] = [
    0x8b, 0x12, 0x02, 0xb9, 0x6a, 0x61, 0x20, 0x38, 0x72, 0x7b, 0x93, 0x02, 0x14, 0xd7, 0xa0, 0x32,
    0x13, 0xf5, 0xb9, 0xe6, 0xef, 0xae, 0x33, 0x18, 0xee, 0x3b, 0x2d, 0xce, 0x24, 0xb3, 0x6a, 0xae,
];

/// Bundle format major versions netprobe reads (`TargetInfo.BundleMajorVersion`):
/// 1 = .NET Core 3.x (everything is extracted to disk at startup), 2 = .NET 5 (adds the v2
/// header: deps.json and runtimeconfig.json locations, flags), 6 = .NET 6 and later (adds each
/// entry's compressed size). Minor is 0 in all of them.
pub const KNOWN_MAJOR_VERSIONS: [u32; 3] = [1, 2, 6];

/// `header_flags_t::netcoreapp3_compat_mode` (header.h): every file is extracted to disk at
/// startup, as .NET Core 3.x did (`IncludeAllContentForSelfExtract`).
pub const FLAG_NETCOREAPP3_COMPAT_MODE: u64 = 1;

/// What a bundled file is (`FileType`, one byte in the manifest).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum BundleFileType {
    Unknown,
    /// IL or ReadyToRun assembly: loaded straight from the bundle (mapped when stored
    /// uncompressed).
    Assembly,
    /// Native library: extracted to disk before use.
    NativeBinary,
    DepsJson,
    RuntimeConfigJson,
    /// PDB files.
    Symbols,
}

impl BundleFileType {
    /// The type for manifest byte `b`; `None` for values past `Symbols` (the host rejects them:
    /// `file_entry_t::is_valid`, file_entry.cpp).
    pub fn from_byte(b: u8) -> Option<BundleFileType> {
        Some(match b {
            0 => BundleFileType::Unknown,
            1 => BundleFileType::Assembly,
            2 => BundleFileType::NativeBinary,
            3 => BundleFileType::DepsJson,
            4 => BundleFileType::RuntimeConfigJson,
            5 => BundleFileType::Symbols,
            _ => return None,
        })
    }

    /// Short name for listings.
    pub fn label(self) -> &'static str {
        match self {
            BundleFileType::Unknown => "other",
            BundleFileType::Assembly => "assembly",
            BundleFileType::NativeBinary => "native",
            BundleFileType::DepsJson => "deps.json",
            BundleFileType::RuntimeConfigJson => "runtimeconfig",
            BundleFileType::Symbols => "pdb",
        }
    }
}

/// A file's location in the bundle as the v2 header records it (`location_t`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
pub struct BundleLocation {
    pub offset: FileOffset,
    pub size: u64,
}

/// The bundle header (`header_fixed_t` + bundle id + `header_fixed_v2_t`).
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct BundleHeader {
    /// Where the header starts in the file (the value stored before the signature).
    pub offset: FileOffset,
    pub major_version: u32,
    pub minor_version: u32,
    /// The bundle id: names the extraction folder (`$DOTNET_BUNDLE_EXTRACT_BASE_DIR` or
    /// `~/.net/<app>/<id>/`).
    pub bundle_id: String,
    /// v2+: where deps.json is (`None` when absent or before v2).
    pub deps_json: Option<BundleLocation>,
    /// v2+: where runtimeconfig.json is.
    pub runtimeconfig_json: Option<BundleLocation>,
    /// v2+: `header_flags_t`.
    pub flags: u64,
}

/// One bundled file (`file_entry_fixed_t` + relative path).
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct BundleEntry {
    /// First byte of the stored (possibly compressed) data in the bundle file.
    pub offset: FileOffset,
    /// Size of the file itself (uncompressed).
    pub size: u64,
    /// Size of the stored deflate stream; 0 when the file is stored uncompressed (always 0
    /// before format 6).
    pub compressed_size: u64,
    pub file_type: BundleFileType,
    /// Path relative to the app (`System.Private.CoreLib.dll`, `runtimes/linux-x64/...`).
    pub path: String,
}

impl BundleEntry {
    /// Whether the file is stored as a deflate stream (`EnableCompressionInSingleFile`).
    pub fn is_compressed(&self) -> bool {
        self.compressed_size != 0
    }

    /// Bytes the entry occupies in the bundle file.
    pub fn stored_size(&self) -> u64 {
        if self.is_compressed() {
            self.compressed_size
        } else {
            self.size
        }
    }

    /// The last path component (`System.Private.CoreLib.dll`).
    pub fn file_name(&self) -> &str {
        self.path.rsplit('/').next().unwrap_or(&self.path)
    }
}

/// How the runtime gets at a bundled file's bytes, which decides whether uprobes can reach it.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Placement {
    /// An uncompressed assembly: the runtime maps it from the bundle file at its offset
    /// (`PEImageLayout::Load`, `src/coreclr/vm/peimagelayout.cpp`; the PAL's `MAPMapPEFile`
    /// maps each section from `offset + PointerToRawData`). Its code is file-backed: probe-able.
    Mapped,
    /// Stored compressed: decompressed into anonymous memory at load time (`FlatImageLayout`,
    /// peimagelayout.cpp). No file backs the code: not probe-able.
    Compressed,
    /// Extracted to disk before use (native libraries; every file of a .NET Core 3.x bundle or
    /// of a bundle in .NET Core 3 compatibility mode): probe the extracted file.
    Extracted,
    /// Read by the host, never run (deps.json, runtimeconfig.json, pdb, other files).
    Data,
}

/// The whole manifest: the header and every entry, in manifest order.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct BundleManifest {
    pub header: BundleHeader,
    pub entries: Vec<BundleEntry>,
}

impl BundleManifest {
    /// How the runtime reaches `entry` (see [`Placement`]).
    pub fn placement(&self, entry: &BundleEntry) -> Placement {
        let extract_all =
            self.header.major_version == 1 || self.header.flags & FLAG_NETCOREAPP3_COMPAT_MODE != 0;
        match entry.file_type {
            _ if entry.is_compressed() => Placement::Compressed,
            _ if extract_all => Placement::Extracted,
            BundleFileType::Assembly => Placement::Mapped,
            BundleFileType::NativeBinary => Placement::Extracted,
            _ => Placement::Data,
        }
    }

    /// The entry `name` names: its bundle-relative path, or its file name when that is unique.
    pub fn entry(&self, name: &str) -> Option<&BundleEntry> {
        self.entries.iter().find(|e| e.path == name).or_else(|| {
            let mut by_name = self.entries.iter().filter(|e| e.file_name() == name);
            let first = by_name.next()?;
            by_name.next().is_none().then_some(first)
        })
    }
}
