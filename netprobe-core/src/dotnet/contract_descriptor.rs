//! The .NET runtime's contract descriptor, `DotNetRuntimeContractDescriptor`: what a runtime
//! publishes of its own data structures for out-of-process readers (the "cDAC"), read from an
//! image file.
//!
//! The structure, as dotnet/runtime compiles it (`src/coreclr/debug/runtimeinfo/
//! contract-descriptor.c.in`; described in `docs/design/datacontracts/contract-descriptor.md`),
//! 40 bytes on a 64-bit target:
//!
//! | offset | field | |
//! |---|---|---|
//! | 0 | `u64 magic` | `0x0043414443434e44`, "DNCCDAC\0" |
//! | 8 | `u32 flags` | bit 0 always set; bit 1 set on a 32-bit target |
//! | 12 | `u32 descriptor_size` | bytes of JSON at `descriptor` |
//! | 16 | `char *descriptor` | the data descriptor, JSON |
//! | 24 | `u32 pointer_data_count` | |
//! | 28 | `u32 pad0` | |
//! | 32 | `uintptr_t *pointer_data` | addresses the JSON's indirect globals index into |
//!
//! Both pointers are filled at load time: in the image file they are `R_X86_64_RELATIVE`
//! relocations whose addend is the address (measured: the stored words are 0 in .NET 9.0.5's
//! `libcoreclr.so` and in a .NET 10.0.13 single-file app), so they are read through the image's
//! relocations, or as stored when the linker wrote them.
//!
//! The JSON is the data descriptor's compact form (`docs/design/datacontracts/
//! data_descriptor.md`, written by `src/coreclr/debug/runtimeinfo/datadescriptor.cpp`):
//! `{"version":0,"baseline":"empty","types":{TYPE:{"!":SIZE,FIELD:OFFSET|[OFFSET,"type"]}},
//! "globals":{NAME:VALUE|[VALUE,"type"]|[[INDEX],"type"]},"contracts":{NAME:VERSION}}`, where
//! `[[INDEX],"type"]` is a global whose address is `pointer_data[INDEX]`.
//!
//! netprobe reads it to say what a runtime publishes of the structures that lead from a JIT code
//! address to its method (docs/dotnet.md, "JIT names without a perf map"); it does not read any
//! process's memory with it. Every read is bounds-checked, sizes and counts are capped, and bad
//! input is an error, never a panic.

use crate::bytes::{u32_at, u64_at};
use crate::elf::parser::ElfView;
use crate::elf::LoadSegments;
use crate::error::{Error, Result};
use serde_json::Value as Json;
use std::collections::BTreeMap;
use std::path::Path;

/// The exported symbol that names the descriptor.
pub const SYMBOL: &str = "DotNetRuntimeContractDescriptor";
/// `magic`: "DNCCDAC\0" read as a little-endian `u64`.
pub const MAGIC: u64 = 0x0043_4144_4343_4e44;
/// Bytes of the structure on a 64-bit target.
pub const HEADER_SIZE: usize = 40;
/// Largest JSON accepted (the .NET 10.0.13 one has 10,563 bytes).
pub const MAX_DESCRIPTOR_SIZE: u32 = 1 << 20;
/// Most pointer-data slots accepted (the .NET 10.0.13 descriptor has 24).
pub const MAX_POINTER_DATA: u32 = 1 << 16;

/// The fixed part of the descriptor, as stored.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ContractDescriptorHeader {
    pub flags: u32,
    pub descriptor_size: u32,
    /// The `descriptor` word as stored (0 when a relocation fills it).
    pub descriptor: u64,
    pub pointer_data_count: u32,
    /// The `pointer_data` word as stored (0 when a relocation fills it).
    pub pointer_data: u64,
}

impl ContractDescriptorHeader {
    /// Parses the first [`HEADER_SIZE`] bytes of `bytes`: a 64-bit little-endian descriptor with
    /// the magic, flag bit 0 set, and sizes within [`MAX_DESCRIPTOR_SIZE`] and
    /// [`MAX_POINTER_DATA`]; anything else is an error saying which check failed.
    pub fn parse(bytes: &[u8]) -> std::result::Result<Self, String> {
        let short = || format!("{} bytes, fewer than {HEADER_SIZE}", bytes.len());
        let magic = u64_at(bytes, 0usize).ok_or_else(short)?;
        if magic != MAGIC {
            return Err(format!("magic {magic:#x}, not {MAGIC:#x} (\"DNCCDAC\\0\")"));
        }
        let word = |at: usize| u32_at(bytes, at).ok_or_else(short);
        let flags = word(8)?;
        if flags & 1 == 0 {
            return Err(format!("flags {flags:#x} without bit 0"));
        }
        if flags & 2 != 0 {
            return Err("a 32-bit target's descriptor (flags bit 1)".into());
        }
        let descriptor_size = word(12)?;
        if descriptor_size > MAX_DESCRIPTOR_SIZE {
            return Err(format!(
                "descriptor_size {descriptor_size} over {MAX_DESCRIPTOR_SIZE}"
            ));
        }
        let pointer_data_count = word(24)?;
        if pointer_data_count > MAX_POINTER_DATA {
            return Err(format!(
                "pointer_data_count {pointer_data_count} over {MAX_POINTER_DATA}"
            ));
        }
        Ok(ContractDescriptorHeader {
            flags,
            descriptor_size,
            descriptor: u64_at(bytes, 16usize).ok_or_else(short)?,
            pointer_data_count,
            pointer_data: u64_at(bytes, 32usize).ok_or_else(short)?,
        })
    }
}

/// A type of the data descriptor: its size when determinate, and its fields' offsets.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct TypeLayout {
    pub size: Option<u64>,
    pub fields: BTreeMap<String, u64>,
}

/// A global of the data descriptor.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum GlobalValue {
    /// An integer constant (a count, a mask, a size).
    Value(u64),
    /// A string constant (`"x64"`).
    Text(String),
    /// A global whose address is `pointer_data[index]`.
    Indirect(u32),
}

/// The data descriptor (the JSON): types, globals and the contracts (by version) the runtime
/// implements.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct DataDescriptor {
    pub version: u64,
    pub baseline: String,
    pub types: BTreeMap<String, TypeLayout>,
    pub globals: BTreeMap<String, GlobalValue>,
    pub contracts: BTreeMap<String, u64>,
}

impl DataDescriptor {
    /// Parses the compact JSON form (module docs). A trailing NUL is allowed; members of a
    /// shape this reader does not know are errors, not guesses.
    pub fn parse(json: &[u8]) -> std::result::Result<Self, String> {
        let json = json.strip_suffix(b"\0").unwrap_or(json);
        let doc: Json = serde_json::from_slice(json).map_err(|e| format!("JSON: {e}"))?;
        let obj = doc.as_object().ok_or("JSON: not an object")?;
        let member = |name: &str| obj.get(name).ok_or_else(|| format!("JSON: no \"{name}\""));
        let version = member("version")?
            .as_u64()
            .ok_or("JSON: \"version\" is not a count")?;
        let baseline = member("baseline")?
            .as_str()
            .ok_or("JSON: \"baseline\" is not a string")?
            .to_string();
        let mut types = BTreeMap::new();
        for (name, fields) in object(member("types")?, "types")? {
            types.insert(name.clone(), type_layout(name, fields)?);
        }
        let mut globals = BTreeMap::new();
        for (name, value) in object(member("globals")?, "globals")? {
            globals.insert(name.clone(), global(name, value)?);
        }
        let mut contracts = BTreeMap::new();
        for (name, v) in object(member("contracts")?, "contracts")? {
            let v = v
                .as_u64()
                .ok_or_else(|| format!("contract {name}: version {v} is not a count"))?;
            contracts.insert(name.clone(), v);
        }
        Ok(DataDescriptor {
            version,
            baseline,
            types,
            globals,
            contracts,
        })
    }

    /// The offset of `field` in `type_name`, when the descriptor gives one.
    pub fn field_offset(&self, type_name: &str, field: &str) -> Option<u64> {
        self.types.get(type_name)?.fields.get(field).copied()
    }
}

fn object<'a>(
    v: &'a Json,
    what: &str,
) -> std::result::Result<&'a serde_json::Map<String, Json>, String> {
    v.as_object()
        .ok_or_else(|| format!("JSON: \"{what}\" is not an object"))
}

/// A number, or a string holding a decimal or `0x` hexadecimal one.
fn integer(v: &Json) -> Option<u64> {
    match v {
        Json::Number(n) => n.as_u64(),
        Json::String(s) => match s.strip_prefix("0x").or_else(|| s.strip_prefix("0X")) {
            Some(hex) => u64::from_str_radix(hex, 16).ok(),
            None => s.parse().ok(),
        },
        _ => None,
    }
}

fn type_layout(name: &str, v: &Json) -> std::result::Result<TypeLayout, String> {
    let mut layout = TypeLayout::default();
    for (field, spec) in object(v, name)? {
        // A field is OFFSET or [OFFSET, "type"]; "!" is the type's size.
        let offset = match spec {
            Json::Array(a) if a.len() == 2 && a[1].is_string() => integer(&a[0]),
            other => integer(other),
        }
        .ok_or_else(|| format!("type {name}: field {field} has no offset ({spec})"))?;
        if field == "!" {
            layout.size = Some(offset);
        } else {
            layout.fields.insert(field.clone(), offset);
        }
    }
    Ok(layout)
}

fn global(name: &str, v: &Json) -> std::result::Result<GlobalValue, String> {
    let bad = || format!("global {name}: unknown form {v}");
    let (value, ty) = match v {
        Json::Array(a) if a.len() == 2 => (&a[0], a[1].as_str().ok_or_else(bad)?),
        other => (other, ""),
    };
    match value {
        Json::Array(index) if index.len() == 1 => index[0]
            .as_u64()
            .and_then(|i| u32::try_from(i).ok())
            .map(GlobalValue::Indirect)
            .ok_or_else(bad),
        Json::String(s) if ty == "string" => Ok(GlobalValue::Text(s.clone())),
        other => integer(other).map(GlobalValue::Value).ok_or_else(bad),
    }
}

/// Where the reader finds the descriptor's bytes: a virtual address to bytes, and to the
/// pointer a word at that address holds once the image is loaded (unrelocated).
pub trait ImageMemory {
    /// `len` bytes at `vaddr`; `None` when not all of them are in the image.
    fn bytes(&self, vaddr: u64, len: usize) -> Option<&[u8]>;
    /// The pointer stored at `vaddr` after relocation, relative to the image's load address.
    fn pointer(&self, vaddr: u64) -> Option<u64>;
}

/// A contract descriptor read out of an image.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ContractDescriptor {
    /// The symbol's address.
    pub vaddr: u64,
    pub header: ContractDescriptorHeader,
    /// Where the JSON is (relocated).
    pub descriptor_vaddr: u64,
    pub data: DataDescriptor,
    /// `pointer_data`, each slot relocated (0 = null).
    pub pointer_data: Vec<u64>,
}

impl ContractDescriptor {
    /// Reads the descriptor at `vaddr` of `image`: header, JSON and pointer data, each checked.
    pub fn read_at(image: &impl ImageMemory, vaddr: u64) -> std::result::Result<Self, String> {
        let header = ContractDescriptorHeader::parse(
            image
                .bytes(vaddr, HEADER_SIZE)
                .ok_or_else(|| format!("descriptor at {vaddr:#x} outside the image"))?,
        )?;
        let slot = |at: u64| {
            vaddr
                .checked_add(at)
                .and_then(|a| image.pointer(a))
                .ok_or_else(|| format!("descriptor at {vaddr:#x}: word {at} unreadable"))
        };
        let descriptor_vaddr = slot(16)?;
        let pointer_data_vaddr = slot(32)?;
        let json = image
            .bytes(descriptor_vaddr, header.descriptor_size as usize)
            .ok_or_else(|| {
                format!(
                    "JSON of {} bytes at {descriptor_vaddr:#x} outside the image",
                    header.descriptor_size
                )
            })?;
        let data = DataDescriptor::parse(json)?;
        let pointer_data = (0..u64::from(header.pointer_data_count))
            .map(|i| {
                i.checked_mul(8)
                    .and_then(|off| pointer_data_vaddr.checked_add(off))
                    .and_then(|a| image.pointer(a))
                    .ok_or_else(|| format!("pointer_data[{i}] unreadable"))
            })
            .collect::<std::result::Result<Vec<_>, _>>()?;
        if let Some((name, i)) = data.globals.iter().find_map(|(n, g)| match g {
            GlobalValue::Indirect(i) if *i as usize >= pointer_data.len() => Some((n, i)),
            _ => None,
        }) {
            return Err(format!(
                "global {name} indexes pointer_data[{i}] of {}",
                pointer_data.len()
            ));
        }
        Ok(ContractDescriptor {
            vaddr,
            header,
            descriptor_vaddr,
            data,
            pointer_data,
        })
    }

    /// The descriptor of an ELF image (`libcoreclr.so`, a single-file app), found by its
    /// exported symbol; `Ok(None)` when the image exports none (.NET 8 and earlier).
    pub fn from_elf(path: &Path, view: &ElfView<'_>) -> Result<Option<Self>> {
        let Some(vaddr) = view.dynamic_symbol_value(SYMBOL) else {
            return Ok(None);
        };
        let image = ElfImage {
            bytes: view.bytes,
            segments: LoadSegments::from_program_headers(&view.program_headers),
            relocations: view.relative_relocations(),
        };
        Self::read_at(&image, vaddr)
            .map(Some)
            .map_err(|what| Error::malformed(path, format!("{SYMBOL}: {what}")))
    }
}

/// An ELF file as [`ImageMemory`]: file-backed bytes of its `PT_LOAD` segments, pointers from
/// `R_X86_64_RELATIVE` relocations or else as stored.
struct ElfImage<'a> {
    bytes: &'a [u8],
    segments: LoadSegments,
    relocations: std::collections::HashMap<u64, u64>,
}

impl ImageMemory for ElfImage<'_> {
    fn bytes(&self, vaddr: u64, len: usize) -> Option<&[u8]> {
        if len == 0 {
            return Some(&[]);
        }
        let last = vaddr.checked_add(len as u64 - 1)?;
        let start = self.segments.file_offset(crate::addr::VirtAddr(vaddr))?;
        // The whole range must lie in one segment's file bytes.
        let end = self.segments.file_offset(crate::addr::VirtAddr(last))?;
        if end.0.checked_sub(start.0)? != last - vaddr {
            return None;
        }
        let start = usize::try_from(start.0).ok()?;
        self.bytes.get(start..start.checked_add(len)?)
    }

    fn pointer(&self, vaddr: u64) -> Option<u64> {
        match self.relocations.get(&vaddr) {
            Some(&addend) => Some(addend),
            None => u64_at(self.bytes(vaddr, 8)?, 0usize),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    /// Test helper: `bytes` loaded at `base`, pointers as stored.
    struct Flat {
        base: u64,
        bytes: Vec<u8>,
    }

    impl ImageMemory for Flat {
        fn bytes(&self, vaddr: u64, len: usize) -> Option<&[u8]> {
            let at = usize::try_from(vaddr.checked_sub(self.base)?).ok()?;
            self.bytes.get(at..at.checked_add(len)?)
        }
        fn pointer(&self, vaddr: u64) -> Option<u64> {
            u64_at(self.bytes(vaddr, 8)?, 0usize)
        }
    }

    /// Test helper: an image at 0x1000 holding a descriptor at its start, then `json`, then
    /// `slots` pointer-data words.
    fn image(json: &str, slots: &[u64]) -> Flat {
        let base = 0x1000u64;
        let json_at = base + HEADER_SIZE as u64;
        let data_at = json_at + json.len() as u64;
        let mut b = Vec::new();
        b.extend(MAGIC.to_le_bytes());
        b.extend(1u32.to_le_bytes());
        b.extend((json.len() as u32).to_le_bytes());
        b.extend(json_at.to_le_bytes());
        b.extend((slots.len() as u32).to_le_bytes());
        b.extend(0u32.to_le_bytes());
        b.extend(data_at.to_le_bytes());
        b.extend(json.as_bytes());
        for s in slots {
            b.extend(s.to_le_bytes());
        }
        Flat { base, bytes: b }
    }

    const SAMPLE: &str = r#"{"version":0,"baseline":"empty","types":{"MethodDescChunk":{"!":24,"MethodTable":0,"FlagsAndTokenRange":18},"Thread":{"GCHandle":[304,"GCHandle"]}},"globals":{"MethodDescAlignment":["0x8","uint64"],"ThreadStore":[[1],"pointer"],"Architecture":["x64","string"]},"contracts":{"Loader":1,"ExecutionManager":2}}"#;

    #[test]
    fn reads_header_json_and_pointer_data() {
        let d = ContractDescriptor::read_at(&image(SAMPLE, &[0, 0x7000]), 0x1000).unwrap();
        assert_eq!(d.header.descriptor_size as usize, SAMPLE.len());
        assert_eq!(d.pointer_data, vec![0, 0x7000]);
        assert_eq!(d.data.contracts.get("ExecutionManager"), Some(&2));
        let chunk = &d.data.types["MethodDescChunk"];
        assert_eq!(chunk.size, Some(24));
        assert_eq!(
            d.data.field_offset("MethodDescChunk", "FlagsAndTokenRange"),
            Some(18)
        );
        assert_eq!(d.data.field_offset("Thread", "GCHandle"), Some(304));
        assert_eq!(d.data.types["Thread"].size, None);
        assert_eq!(d.data.globals["MethodDescAlignment"], GlobalValue::Value(8));
        assert_eq!(d.data.globals["ThreadStore"], GlobalValue::Indirect(1));
        assert_eq!(
            d.data.globals["Architecture"],
            GlobalValue::Text("x64".into())
        );
    }

    #[test]
    fn refuses_bad_headers_and_dangling_indices() {
        let mut wrong_magic = image(SAMPLE, &[0, 0]);
        wrong_magic.bytes[0] ^= 1;
        let e = ContractDescriptor::read_at(&wrong_magic, 0x1000).unwrap_err();
        assert!(e.contains("magic"), "{e}");
        let mut narrow = image(SAMPLE, &[0, 0]);
        narrow.bytes[8] = 3;
        let e = ContractDescriptor::read_at(&narrow, 0x1000).unwrap_err();
        assert!(e.contains("32-bit"), "{e}");
        let e = ContractDescriptor::read_at(&image(SAMPLE, &[0]), 0x1000).unwrap_err();
        assert!(e.contains("pointer_data[1] of 1"), "{e}");
        let mut long = image(SAMPLE, &[0, 0]);
        long.bytes[12..16].copy_from_slice(&(SAMPLE.len() as u32 + 100).to_le_bytes());
        assert!(ContractDescriptor::read_at(&long, 0x1000).is_err());
    }

    proptest! {
        #[test]
        fn never_panics_on_arbitrary_bytes(
            bytes in proptest::collection::vec(any::<u8>(), 0..512),
            at in 0u64..0x1200,
        ) {
            let _ = ContractDescriptor::read_at(&Flat { base: 0x1000, bytes }, at);
        }

        #[test]
        fn never_panics_with_a_valid_header_over_arbitrary_data(
            tail in proptest::collection::vec(any::<u8>(), 0..512),
            size in any::<u32>(),
            count in any::<u32>(),
            json_at in any::<u64>(),
            data_at in any::<u64>(),
        ) {
            let mut img = image("", &[]);
            img.bytes[12..16].copy_from_slice(&size.to_le_bytes());
            img.bytes[16..24].copy_from_slice(&json_at.to_le_bytes());
            img.bytes[24..28].copy_from_slice(&count.to_le_bytes());
            img.bytes[32..40].copy_from_slice(&data_at.to_le_bytes());
            img.bytes.extend(tail);
            let _ = ContractDescriptor::read_at(&img, 0x1000);
        }

        #[test]
        fn never_panics_on_a_mutated_descriptor(
            edits in proptest::collection::vec((any::<prop::sample::Index>(), any::<u8>()), 0..8),
        ) {
            let mut json = SAMPLE.as_bytes().to_vec();
            for (at, b) in edits {
                let i = at.index(json.len());
                json[i] = b;
            }
            let _ = DataDescriptor::parse(&json);
        }
    }
}
