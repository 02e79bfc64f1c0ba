//! The ECMA-335 metadata reader: the metadata root and stream headers (II.24.2.1-2), the
//! `#Strings`, `#Blob` and `#GUID` heaps (II.24.2.3-5), and the `#~` tables stream (II.24.2.6)
//! with the row layout of every table II.22 defines.
//!
//! The reader keeps the metadata bytes borrowed and computes each column's position once; a cell
//! is read on demand. Every access is bounds-checked: a corrupt table gives `None`/`Err`, never a
//! panic.

use super::types::{table, MethodSig, TypeSig, TypeToken};
use crate::bytes::{cstr_at, slice, u16_at, u32_at, u64_at, us};

/// A column of a metadata table (ECMA-335 II.22: each table's columns).
#[derive(Clone, Copy)]
enum Col {
    U16,
    U32,
    Str,
    Guid,
    Blob,
    /// Simple index into table N.
    Table(u8),
    /// Coded index (II.24.2.6).
    Cx(Coded),
}

/// Coded index kinds: tag bits and the tables they select (II.24.2.6). `0xff` = unused tag.
#[derive(Clone, Copy)]
enum Coded {
    TypeDefOrRef,
    HasConstant,
    HasCustomAttribute,
    HasFieldMarshal,
    HasDeclSecurity,
    MemberRefParent,
    HasSemantics,
    MethodDefOrRef,
    MemberForwarded,
    Implementation,
    CustomAttributeType,
    ResolutionScope,
    TypeOrMethodDef,
}

impl Coded {
    fn tables(self) -> (u32, &'static [u8]) {
        match self {
            Coded::TypeDefOrRef => (2, &[0x02, 0x01, 0x1b]),
            Coded::HasConstant => (2, &[0x04, 0x08, 0x17]),
            Coded::HasCustomAttribute => (
                5,
                &[
                    0x06, 0x04, 0x01, 0x02, 0x08, 0x09, 0x0a, 0x00, 0x0e, 0x17, 0x14, 0x11, 0x1a,
                    0x1b, 0x20, 0x23, 0x26, 0x27, 0x28, 0x2a, 0x2c, 0x2b,
                ],
            ),
            Coded::HasFieldMarshal => (1, &[0x04, 0x08]),
            Coded::HasDeclSecurity => (2, &[0x02, 0x06, 0x20]),
            Coded::MemberRefParent => (3, &[0x02, 0x01, 0x1a, 0x06, 0x1b]),
            Coded::HasSemantics => (1, &[0x14, 0x17]),
            Coded::MethodDefOrRef => (1, &[0x06, 0x0a]),
            Coded::MemberForwarded => (1, &[0x04, 0x06]),
            Coded::Implementation => (2, &[0x26, 0x23, 0x27]),
            Coded::CustomAttributeType => (3, &[0xff, 0xff, 0x06, 0x0a, 0xff]),
            Coded::ResolutionScope => (2, &[0x00, 0x1a, 0x23, 0x01]),
            Coded::TypeOrMethodDef => (1, &[0x02, 0x06]),
        }
    }
}

use Coded as C;
use Col::*;

/// Columns of every table II.22 defines, by table number (0x00..=0x2c). `None` = no such table.
fn schema(t: u8) -> Option<&'static [Col]> {
    Some(match t {
        0x00 => &[U16, Str, Guid, Guid, Guid],       // Module
        0x01 => &[Cx(C::ResolutionScope), Str, Str], // TypeRef
        0x02 => &[U32, Str, Str, Cx(C::TypeDefOrRef), Table(0x04), Table(0x06)], // TypeDef
        0x03 => &[Table(0x04)],                      // FieldPtr
        0x04 => &[U16, Str, Blob],                   // Field
        0x05 => &[Table(0x06)],                      // MethodPtr
        0x06 => &[U32, U16, U16, Str, Blob, Table(0x08)], // MethodDef
        0x07 => &[Table(0x08)],                      // ParamPtr
        0x08 => &[U16, U16, Str],                    // Param
        0x09 => &[Table(0x02), Cx(C::TypeDefOrRef)], // InterfaceImpl
        0x0a => &[Cx(C::MemberRefParent), Str, Blob], // MemberRef
        0x0b => &[U16, Cx(C::HasConstant), Blob],    // Constant
        0x0c => &[Cx(C::HasCustomAttribute), Cx(C::CustomAttributeType), Blob],
        0x0d => &[Cx(C::HasFieldMarshal), Blob], // FieldMarshal
        0x0e => &[U16, Cx(C::HasDeclSecurity), Blob], // DeclSecurity
        0x0f => &[U16, U32, Table(0x02)],        // ClassLayout
        0x10 => &[U32, Table(0x04)],             // FieldLayout
        0x11 => &[Blob],                         // StandAloneSig
        0x12 => &[Table(0x02), Table(0x14)],     // EventMap
        0x13 => &[Table(0x14)],                  // EventPtr
        0x14 => &[U16, Str, Cx(C::TypeDefOrRef)], // Event
        0x15 => &[Table(0x02), Table(0x17)],     // PropertyMap
        0x16 => &[Table(0x17)],                  // PropertyPtr
        0x17 => &[U16, Str, Blob],               // Property
        0x18 => &[U16, Table(0x06), Cx(C::HasSemantics)], // MethodSemantics
        0x19 => &[Table(0x02), Cx(C::MethodDefOrRef), Cx(C::MethodDefOrRef)], // MethodImpl
        0x1a => &[Str],                          // ModuleRef
        0x1b => &[Blob],                         // TypeSpec
        0x1c => &[U16, Cx(C::MemberForwarded), Str, Table(0x1a)], // ImplMap
        0x1d => &[U32, Table(0x04)],             // FieldRVA
        0x1e => &[U32, U32],                     // EncLog
        0x1f => &[U32],                          // EncMap
        0x20 => &[U32, U16, U16, U16, U16, U32, Blob, Str, Str], // Assembly
        0x21 => &[U32],                          // AssemblyProcessor
        0x22 => &[U32, U32, U32],                // AssemblyOS
        0x23 => &[U16, U16, U16, U16, U32, Blob, Str, Str, Blob], // AssemblyRef
        0x24 => &[U32, Table(0x23)],             // AssemblyRefProcessor
        0x25 => &[U32, U32, U32, Table(0x23)],   // AssemblyRefOS
        0x26 => &[U32, Str, Blob],               // File
        0x27 => &[U32, U32, Str, Str, Cx(C::Implementation)], // ExportedType
        0x28 => &[U32, U32, Str, Cx(C::Implementation)], // ManifestResource
        0x29 => &[Table(0x02), Table(0x02)],     // NestedClass
        0x2a => &[U16, U16, Cx(C::TypeOrMethodDef), Str], // GenericParam
        0x2b => &[Cx(C::MethodDefOrRef), Blob],  // MethodSpec
        0x2c => &[Table(0x2a), Cx(C::TypeDefOrRef)], // GenericParamConstraint
        _ => return None,
    })
}

const N_TABLES: usize = 0x2d;
const MAX_COLS: usize = 9;

/// Where each table lives and how its rows are laid out. Owned, no borrow: pair it with the
/// metadata bytes through [`Metadata`].
#[derive(Clone, Debug)]
pub struct MetadataLayout {
    /// Runtime version string of the metadata root (e.g. `v4.0.30319`).
    pub version: String,
    strings: (usize, usize),
    blob: (usize, usize),
    guid: (usize, usize),
    str_wide: bool,
    guid_wide: bool,
    blob_wide: bool,
    rows: [u32; N_TABLES],
    table_start: [usize; N_TABLES],
    row_size: [usize; N_TABLES],
    col_offset: [[u8; MAX_COLS]; N_TABLES],
    col_width: [[u8; MAX_COLS]; N_TABLES],
}

/// Metadata bytes plus their layout: the view every reader works through.
#[derive(Clone, Copy)]
pub struct Metadata<'a> {
    pub layout: &'a MetadataLayout,
    pub bytes: &'a [u8],
    /// The `#Strings` heap when it is valid UTF-8 as a whole (checked once, so each string
    /// lookup only checks that it starts on a character boundary).
    strings_utf8: Option<&'a str>,
}

impl MetadataLayout {
    /// Parses the metadata root at the start of `md` (the bytes the CLI header's `MetaData`
    /// directory points to). `Err(what)` names the structure that is missing or inconsistent.
    pub fn parse(md: &[u8]) -> Result<MetadataLayout, String> {
        if u32_at(md, 0) != Some(0x424a_5342) {
            return Err("metadata root signature is not BSJB".into());
        }
        let ver_len = us(u32_at(md, 12).ok_or("metadata root cut short")?);
        let ver = slice(md, 16, ver_len).ok_or("metadata version string cut short")?;
        let ver_end = ver.iter().position(|&b| b == 0).unwrap_or(ver.len());
        let version = String::from_utf8_lossy(&ver[..ver_end]).into_owned();
        let mut p = 16usize
            .checked_add(ver_len)
            .ok_or("metadata root cut short")?;
        let n_streams = u16_at(md, p + 2).ok_or("metadata root cut short")?;
        p += 4;
        let (mut tables, mut strings, mut blob, mut guid) = (None, (0, 0), (0, 0), (0, 0));
        for _ in 0..n_streams {
            let off = us(u32_at(md, p).ok_or("stream header cut short")?);
            let size = us(u32_at(md, p + 4).ok_or("stream header cut short")?);
            let name = cstr_at(md, p + 8).ok_or("stream name cut short")?;
            if name.len() > 32 {
                return Err("stream name too long".into());
            }
            p += 8 + (name.len() + 4) / 4 * 4;
            let end = off.checked_add(size).ok_or("stream outside metadata")?;
            if end > md.len() {
                return Err(format!(
                    "stream {} outside metadata",
                    String::from_utf8_lossy(name)
                ));
            }
            match name {
                b"#~" | b"#-" => tables = Some((off, size)),
                b"#Strings" => strings = (off, size),
                b"#Blob" => blob = (off, size),
                b"#GUID" => guid = (off, size),
                _ => {}
            }
        }
        let (t_off, t_size) = tables.ok_or("no #~ tables stream")?;
        let t = slice(md, t_off, t_size).ok_or("#~ stream outside metadata")?;
        let heap_sizes = *t.get(6).ok_or("#~ header cut short")?;
        let valid = u64_at(t, 8).ok_or("#~ header cut short")?;
        let mut rows = [0u32; N_TABLES];
        let mut q = 24usize;
        for bit in 0..64u32 {
            if valid & (1u64 << bit) == 0 {
                continue;
            }
            let n = u32_at(t, q).ok_or("#~ row counts cut short")?;
            q += 4;
            match rows.get_mut(bit as usize) {
                Some(slot) if schema(bit as u8).is_some() => *slot = n,
                _ if n == 0 => {}
                _ => return Err(format!("unknown metadata table {bit:#x} with {n} rows")),
            }
        }
        // II.24.2.6: bit 0x20 ("extra data") adds 4 bytes after the row counts (EnC images).
        if heap_sizes & 0x20 != 0 {
            q += 4;
        }
        let mut layout = MetadataLayout {
            version,
            strings,
            blob,
            guid,
            str_wide: heap_sizes & 1 != 0,
            guid_wide: heap_sizes & 2 != 0,
            blob_wide: heap_sizes & 4 != 0,
            rows,
            table_start: [0; N_TABLES],
            row_size: [0; N_TABLES],
            col_offset: [[0; MAX_COLS]; N_TABLES],
            col_width: [[0; MAX_COLS]; N_TABLES],
        };
        let mut pos = t_off + q;
        for (t, &n_rows) in rows.iter().enumerate() {
            let Some(cols) = schema(t as u8) else {
                continue;
            };
            let mut off = 0usize;
            for (c, col) in cols.iter().enumerate() {
                let w = layout.col_width(*col);
                layout.col_offset[t][c] = off as u8;
                layout.col_width[t][c] = w;
                off += usize::from(w);
            }
            layout.row_size[t] = off;
            layout.table_start[t] = pos;
            let bytes = (n_rows as usize)
                .checked_mul(off)
                .ok_or("table size overflows")?;
            pos = pos.checked_add(bytes).ok_or("table size overflows")?;
        }
        if pos > t_off + t_size {
            return Err("metadata tables run past the #~ stream".into());
        }
        Ok(layout)
    }

    fn col_width(&self, col: Col) -> u8 {
        match col {
            U16 => 2,
            U32 => 4,
            Str => 2 + 2 * u8::from(self.str_wide),
            Guid => 2 + 2 * u8::from(self.guid_wide),
            Blob => 2 + 2 * u8::from(self.blob_wide),
            Table(t) => {
                if self.rows[usize::from(t)] < 1 << 16 {
                    2
                } else {
                    4
                }
            }
            Cx(c) => {
                let (bits, tables) = c.tables();
                let max = tables
                    .iter()
                    .filter(|&&t| t != 0xff)
                    .map(|&t| self.rows[usize::from(t)])
                    .max()
                    .unwrap_or(0);
                if max < 1 << (16 - bits) {
                    2
                } else {
                    4
                }
            }
        }
    }

    /// Number of rows of table `t` (0 for tables the image does not have).
    pub fn rows(&self, t: u8) -> u32 {
        self.rows.get(usize::from(t)).copied().unwrap_or(0)
    }
}

/// A string from `#Strings`.
pub type StrRef<'a> = &'a str;

impl<'a> Metadata<'a> {
    /// The view of `bytes` (the metadata the layout was parsed from).
    pub fn new(layout: &'a MetadataLayout, bytes: &'a [u8]) -> Metadata<'a> {
        Metadata {
            layout,
            bytes,
            strings_utf8: None,
        }
    }

    /// The same view with the whole `#Strings` heap checked for UTF-8 once (about 0.2 ms for
    /// CoreLib), so that string lookups skip per-string validation: for bulk work such as
    /// naming every method. Unchanged when the heap is not valid UTF-8 as a whole.
    pub fn with_validated_strings(mut self) -> Metadata<'a> {
        let (off, size) = self.layout.strings;
        self.strings_utf8 = slice(self.bytes, off, size).and_then(|h| std::str::from_utf8(h).ok());
        self
    }

    /// The whole `#Strings` heap (II.24.2.3); `None` when it lies outside the metadata.
    pub fn strings_heap(&self) -> Option<&'a [u8]> {
        let (off, size) = self.layout.strings;
        slice(self.bytes, off, size)
    }

    /// Number of rows of table `t`.
    pub fn rows(&self, t: u8) -> u32 {
        self.layout.rows(t)
    }

    /// Raw cell `col` of row `rid` (1-based) of table `t`, widened to u32. `None` when the row
    /// does not exist or its bytes are outside the metadata.
    pub fn cell(&self, t: u8, rid: u32, col: usize) -> Option<u32> {
        let ti = usize::from(t);
        if rid == 0 || rid > *self.layout.rows.get(ti)? || col >= MAX_COLS {
            return None;
        }
        let row = self.layout.table_start[ti] + (rid as usize - 1) * self.layout.row_size[ti];
        let at = row + usize::from(self.layout.col_offset[ti][col]);
        match self.layout.col_width[ti][col] {
            2 => u16_at(self.bytes, at).map(u32::from),
            4 => u32_at(self.bytes, at),
            _ => None,
        }
    }

    /// A coded-index cell decoded to `(table, rid)`; `None` on a bad tag or missing row.
    fn coded_cell(&self, t: u8, rid: u32, col: usize, kind: Coded) -> Option<(u8, u32)> {
        let v = self.cell(t, rid, col)?;
        let (bits, tables) = kind.tables();
        let tag = (v & ((1 << bits) - 1)) as usize;
        let table = *tables.get(tag)?;
        if table == 0xff {
            return None;
        }
        Some((table, v >> bits))
    }

    /// The `#Strings` entry at `index` (II.24.2.3); `None` when outside the heap or not UTF-8.
    pub fn string(&self, index: u32) -> Option<StrRef<'a>> {
        if let Some(heap) = self.strings_utf8 {
            let rest = heap.get(us(index)..)?;
            let end = memchr::memchr(0, rest.as_bytes())?;
            return rest.get(..end);
        }
        let (off, size) = self.layout.strings;
        let heap = slice(self.bytes, off, size)?;
        let s = cstr_at(heap, us(index))?;
        std::str::from_utf8(s).ok()
    }

    /// The `#Blob` entry at `index`, without its length prefix (II.24.2.4); `None` when outside.
    pub fn blob(&self, index: u32) -> Option<&'a [u8]> {
        let (off, size) = self.layout.blob;
        let heap = slice(self.bytes, off, size)?;
        let mut p = us(index);
        let len = decode_compressed(heap, &mut p)?;
        slice(heap, p, us(len))
    }

    /// The `#GUID` entry `index` (1-based, II.24.2.5); `None` when 0 or outside.
    pub fn guid(&self, index: u32) -> Option<[u8; 16]> {
        let (off, size) = self.layout.guid;
        let heap = slice(self.bytes, off, size)?;
        let g = slice(heap, us(index.checked_sub(1)?).checked_mul(16)?, 16)?;
        let mut out = [0u8; 16];
        out.copy_from_slice(g);
        Some(out)
    }

    /// The assembly's simple name (Assembly table row 1, II.22.2); `None` for a module without
    /// an assembly manifest.
    pub fn assembly_name(&self) -> Option<&'a str> {
        self.string(self.cell(table::ASSEMBLY, 1, 7)?)
    }

    /// The module's MVID (Module row 1), as the runtime prints it in perfinfo (`{...}`).
    pub fn mvid(&self) -> Option<[u8; 16]> {
        self.guid(self.cell(table::MODULE, 1, 2)?)
    }

    /// AssemblyRef row `rid`'s name (II.22.5).
    pub fn assembly_ref_name(&self, rid: u32) -> Option<&'a str> {
        self.string(self.cell(table::ASSEMBLY_REF, rid, 6)?)
    }

    /// TypeDef row `rid`: `(flags, name, namespace)`.
    pub fn type_def(&self, rid: u32) -> Option<(u32, &'a str, &'a str)> {
        Some((
            self.cell(table::TYPE_DEF, rid, 0)?,
            self.string(self.cell(table::TYPE_DEF, rid, 1)?)?,
            self.string(self.cell(table::TYPE_DEF, rid, 2)?)?,
        ))
    }

    /// TypeDef row `rid`'s first MethodDef row (`MethodList`).
    pub fn type_def_method_list(&self, rid: u32) -> Option<u32> {
        self.cell(table::TYPE_DEF, rid, 5)
    }

    /// TypeRef row `rid`: `(resolution scope (table, rid), name, namespace)` (II.22.38).
    pub fn type_ref(&self, rid: u32) -> Option<((u8, u32), &'a str, &'a str)> {
        Some((
            self.coded_cell(table::TYPE_REF, rid, 0, Coded::ResolutionScope)?,
            self.string(self.cell(table::TYPE_REF, rid, 1)?)?,
            self.string(self.cell(table::TYPE_REF, rid, 2)?)?,
        ))
    }

    /// TypeSpec row `rid`'s signature blob (II.22.39).
    pub fn type_spec(&self, rid: u32) -> Option<&'a [u8]> {
        self.blob(self.cell(table::TYPE_SPEC, rid, 0)?)
    }

    /// ModuleRef row `rid`'s name.
    pub fn module_ref_name(&self, rid: u32) -> Option<&'a str> {
        self.string(self.cell(table::MODULE_REF, rid, 0)?)
    }

    /// MethodDef row `rid`: `(rva, impl_flags, flags, name, signature blob, param_list)`
    /// (II.22.26).
    pub fn method_def(&self, rid: u32) -> Option<MethodDefRow<'a>> {
        let t = table::METHOD_DEF;
        Some(MethodDefRow {
            rva: self.cell(t, rid, 0)?,
            impl_flags: self.cell(t, rid, 1)? as u16,
            flags: self.cell(t, rid, 2)? as u16,
            name: self.string(self.cell(t, rid, 3)?)?,
            signature: self.blob(self.cell(t, rid, 4)?)?,
            param_list: self.cell(t, rid, 5)?,
        })
    }

    /// The name of MethodDef row `rid` alone (column 3 of [`Metadata::method_def`]); `None`
    /// where `method_def` would give none for its name.
    pub fn method_def_name(&self, rid: u32) -> Option<&'a str> {
        self.string(self.cell(table::METHOD_DEF, rid, 3)?)
    }

    /// MemberRef row `rid`: `(class (table, rid), name, signature blob)` (II.22.25).
    pub fn member_ref(&self, rid: u32) -> Option<((u8, u32), &'a str, &'a [u8])> {
        let t = table::MEMBER_REF;
        Some((
            self.coded_cell(t, rid, 0, Coded::MemberRefParent)?,
            self.string(self.cell(t, rid, 1)?)?,
            self.blob(self.cell(t, rid, 2)?)?,
        ))
    }

    /// Param row `rid`: `(sequence, name)` (II.22.33; sequence 0 is the return value).
    pub fn param(&self, rid: u32) -> Option<(u16, &'a str)> {
        let t = table::PARAM;
        Some((
            self.cell(t, rid, 1)? as u16,
            self.string(self.cell(t, rid, 2)?)?,
        ))
    }

    /// NestedClass row `rid`: `(nested typedef, enclosing typedef)` (II.22.32).
    pub fn nested_class(&self, rid: u32) -> Option<(u32, u32)> {
        let t = table::NESTED_CLASS;
        Some((self.cell(t, rid, 0)?, self.cell(t, rid, 1)?))
    }

    /// Decodes the method signature blob `sig` (II.23.2.1).
    pub fn method_sig(&self, sig: &[u8]) -> Result<MethodSig, String> {
        let mut r = SigReader::new(sig);
        r.method_sig(0)
    }
}

/// One MethodDef row (ECMA-335 II.22.26).
#[derive(Clone, Copy, Debug)]
pub struct MethodDefRow<'a> {
    /// RVA of the IL body (0 for abstract/extern methods).
    pub rva: u32,
    pub impl_flags: u16,
    /// `MethodAttributes`; 0x0010 = static.
    pub flags: u16,
    pub name: &'a str,
    pub signature: &'a [u8],
    pub param_list: u32,
}

/// ECMA-335 II.23.2 compressed unsigned integer (big-endian, 1, 2 or 4 bytes).
pub(crate) fn decode_compressed(data: &[u8], pos: &mut usize) -> Option<u32> {
    let b0 = u32::from(*data.get(*pos)?);
    let (v, n) = if b0 & 0x80 == 0 {
        (b0, 1)
    } else if b0 & 0xc0 == 0x80 {
        ((b0 & 0x3f) << 8 | u32::from(*data.get(*pos + 1)?), 2)
    } else if b0 & 0xe0 == 0xc0 {
        let b = slice(data, *pos + 1, 3)?;
        (
            (b0 & 0x1f) << 24 | u32::from(b[0]) << 16 | u32::from(b[1]) << 8 | u32::from(b[2]),
            4,
        )
    } else {
        return None;
    };
    *pos += n;
    Some(v)
}

/// ECMA-335 II.23.2 compressed signed integer: the unsigned encoding with the sign bit rotated
/// into bit 0, over 7, 14 or 29 bits.
pub(crate) fn decode_compressed_signed(data: &[u8], pos: &mut usize) -> Option<i32> {
    let start = *pos;
    let b0 = *data.get(start)?;
    let raw = decode_compressed(data, pos)?;
    let bits = if b0 & 0x80 == 0 {
        7
    } else if b0 & 0xc0 == 0x80 {
        14
    } else {
        29
    };
    let magnitude = (raw >> 1) as i32;
    Some(if raw & 1 == 0 {
        magnitude
    } else {
        magnitude - (1 << (bits - 1))
    })
}

/// Maximum nesting of types inside one signature; deeper input is rejected (a crafted signature
/// must not overflow the stack).
const MAX_DEPTH: u32 = 64;

/// Reads ECMA-335 signatures (II.23.2), with ReadyToRun's extra element types.
pub struct SigReader<'s> {
    data: &'s [u8],
    pub(crate) pos: usize,
    /// Module override in effect for the type being read (ELEMENT_TYPE_MODULE_ZAPSIG).
    module: u32,
}

impl<'s> SigReader<'s> {
    pub fn new(data: &'s [u8]) -> SigReader<'s> {
        SigReader {
            data,
            pos: 0,
            module: 0,
        }
    }

    /// The bytes not read yet.
    pub fn rest(&self) -> &'s [u8] {
        self.data.get(self.pos..).unwrap_or(&[])
    }

    /// The next byte, consumed.
    pub fn next_byte(&mut self) -> Result<u8, String> {
        self.byte()
    }

    /// The next byte, not consumed; `None` at the end.
    pub fn peek_byte(&self) -> Option<u8> {
        self.data.get(self.pos).copied()
    }

    /// Sets the module override for the tokens read next; returns the previous one.
    pub fn set_module(&mut self, module: u32) -> u32 {
        std::mem::replace(&mut self.module, module)
    }

    fn byte(&mut self) -> Result<u8, String> {
        let b = *self.data.get(self.pos).ok_or("signature cut short")?;
        self.pos += 1;
        Ok(b)
    }

    fn peek(&self) -> Result<u8, String> {
        self.data
            .get(self.pos)
            .copied()
            .ok_or_else(|| "signature cut short".to_string())
    }

    /// A compressed unsigned integer.
    pub fn uint(&mut self) -> Result<u32, String> {
        decode_compressed(self.data, &mut self.pos).ok_or_else(|| "bad compressed integer".into())
    }

    /// A compressed signed integer (array lower bounds).
    pub fn sint(&mut self) -> Result<i32, String> {
        decode_compressed_signed(self.data, &mut self.pos)
            .ok_or_else(|| "bad compressed signed integer".into())
    }

    /// `TypeDefOrRefOrSpecEncoded` (II.23.2.8).
    pub fn type_token(&mut self) -> Result<TypeToken, String> {
        let v = self.uint()?;
        let table = match v & 3 {
            0 => table::TYPE_DEF,
            1 => table::TYPE_REF,
            2 => table::TYPE_SPEC,
            _ => return Err("bad TypeDefOrRefOrSpecEncoded tag".into()),
        };
        Ok(TypeToken {
            module: self.module,
            table,
            rid: v >> 2,
        })
    }

    /// A method signature (MethodDefSig / MethodRefSig / StandAloneMethodSig, II.23.2.1-3).
    pub fn method_sig(&mut self, depth: u32) -> Result<MethodSig, String> {
        let cc = self.byte()?;
        if cc & 0x0f > 9 {
            return Err(format!(
                "calling convention {cc:#x} is not a method signature"
            ));
        }
        let generic_params = if cc & 0x10 != 0 { self.uint()? } else { 0 };
        let count = self.uint()?;
        let ret = self.type_sig(depth + 1)?;
        // Each parameter takes at least one byte: a count beyond the remaining bytes is corrupt
        // (and must not reserve memory).
        if us(count) > self.rest().len() {
            return Err("parameter count exceeds signature".into());
        }
        let mut params = Vec::with_capacity(us(count));
        let mut sentinel = None;
        for _ in 0..count {
            if self.peek()? == 0x41 {
                self.pos += 1;
                sentinel = Some(params.len());
            }
            params.push(self.type_sig(depth + 1)?);
        }
        Ok(MethodSig {
            has_this: cc & 0x20 != 0,
            explicit_this: cc & 0x40 != 0,
            calling_convention: cc & 0x0f,
            generic_params,
            ret,
            params,
            sentinel,
        })
    }

    /// Skips one type without building it (same grammar and limits as [`SigReader::type_sig`]).
    pub fn skip_type(&mut self, depth: u32) -> Result<(), String> {
        if depth > MAX_DEPTH {
            return Err("signature nested too deeply".into());
        }
        let d = depth + 1;
        match self.byte()? {
            0x01..=0x0e | 0x16 | 0x18 | 0x19 | 0x1c | 0x3e => Ok(()),
            0x0f | 0x10 | 0x1d | 0x45 | 0x3d => self.skip_type(d),
            0x11 | 0x12 => self.type_token().map(|_| ()),
            0x13 | 0x1e => self.uint().map(|_| ()),
            0x14 => {
                self.skip_type(d)?;
                let rank = self.uint()?;
                let n_sizes = self.uint()?;
                if n_sizes > rank {
                    return Err("array sizes exceed rank".into());
                }
                for _ in 0..n_sizes {
                    self.uint()?;
                }
                let n_lo = self.uint()?;
                if n_lo > rank {
                    return Err("array lower bounds exceed rank".into());
                }
                for _ in 0..n_lo {
                    self.sint()?;
                }
                Ok(())
            }
            0x15 => {
                let kind = self.byte()?;
                if kind != 0x11 && kind != 0x12 {
                    return Err(format!("GENERICINST of element type {kind:#x}"));
                }
                self.type_token()?;
                let n = self.uint()?;
                if us(n) > self.rest().len() {
                    return Err("generic argument count exceeds signature".into());
                }
                for _ in 0..n {
                    self.skip_type(d)?;
                }
                Ok(())
            }
            0x1b => {
                let cc = self.byte()?;
                if cc & 0x10 != 0 {
                    self.uint()?;
                }
                let n = self.uint()?;
                if us(n) > self.rest().len() {
                    return Err("parameter count exceeds signature".into());
                }
                for _ in 0..=n {
                    if self.peek_byte() == Some(0x41) {
                        self.pos += 1;
                    }
                    self.skip_type(d)?;
                }
                Ok(())
            }
            0x1f | 0x20 => {
                self.type_token()?;
                self.skip_type(d)
            }
            0x3f => {
                self.uint()?;
                self.skip_type(d)
            }
            other => Err(format!("unknown element type {other:#x}")),
        }
    }

    /// One type (II.23.2.12), including custom modifiers, `BYREF` and `TYPEDBYREF`.
    pub fn type_sig(&mut self, depth: u32) -> Result<TypeSig, String> {
        if depth > MAX_DEPTH {
            return Err("signature nested too deeply".into());
        }
        let d = depth + 1;
        let et = self.byte()?;
        Ok(match et {
            0x01 => TypeSig::Void,
            0x02 => TypeSig::Boolean,
            0x03 => TypeSig::Char,
            0x04 => TypeSig::I1,
            0x05 => TypeSig::U1,
            0x06 => TypeSig::I2,
            0x07 => TypeSig::U2,
            0x08 => TypeSig::I4,
            0x09 => TypeSig::U4,
            0x0a => TypeSig::I8,
            0x0b => TypeSig::U8,
            0x0c => TypeSig::R4,
            0x0d => TypeSig::R8,
            0x0e => TypeSig::String,
            0x0f => TypeSig::Ptr {
                to: Box::new(self.type_sig(d)?),
            },
            0x10 => TypeSig::ByRef {
                to: Box::new(self.type_sig(d)?),
            },
            0x11 => TypeSig::ValueType {
                ty: self.type_token()?,
            },
            0x12 => TypeSig::Class {
                ty: self.type_token()?,
            },
            0x13 => TypeSig::Var {
                index: self.uint()?,
            },
            0x14 => {
                let of = Box::new(self.type_sig(d)?);
                let rank = self.uint()?;
                let n_sizes = self.uint()?;
                if n_sizes > rank || us(n_sizes) > self.rest().len() {
                    return Err("array sizes exceed rank".into());
                }
                let mut sizes = Vec::with_capacity(us(n_sizes));
                for _ in 0..n_sizes {
                    sizes.push(self.uint()?);
                }
                let n_lo = self.uint()?;
                if n_lo > rank || us(n_lo) > self.rest().len() {
                    return Err("array lower bounds exceed rank".into());
                }
                let mut lower_bounds = Vec::with_capacity(us(n_lo));
                for _ in 0..n_lo {
                    lower_bounds.push(self.sint()?);
                }
                TypeSig::Array {
                    of,
                    rank,
                    sizes,
                    lower_bounds,
                }
            }
            0x15 => {
                let kind = self.byte()?;
                let value_type = match kind {
                    0x11 => true,
                    0x12 => false,
                    _ => return Err(format!("GENERICINST of element type {kind:#x}")),
                };
                let generic = self.type_token()?;
                let n = self.uint()?;
                if us(n) > self.rest().len() {
                    return Err("generic argument count exceeds signature".into());
                }
                let mut args = Vec::with_capacity(us(n));
                for _ in 0..n {
                    args.push(self.type_sig(d)?);
                }
                TypeSig::GenericInst {
                    value_type,
                    generic,
                    args,
                }
            }
            0x16 => TypeSig::TypedByRef,
            0x18 => TypeSig::I,
            0x19 => TypeSig::U,
            0x1b => TypeSig::FnPtr {
                sig: Box::new(self.method_sig(d)?),
            },
            0x1c => TypeSig::Object,
            0x1d => TypeSig::SzArray {
                of: Box::new(self.type_sig(d)?),
            },
            0x1e => TypeSig::MVar {
                index: self.uint()?,
            },
            0x1f | 0x20 => {
                let modifier = self.type_token()?;
                TypeSig::Modified {
                    required: et == 0x1f,
                    modifier,
                    inner: Box::new(self.type_sig(d)?),
                }
            }
            0x45 => TypeSig::Pinned {
                inner: Box::new(self.type_sig(d)?),
            },
            // ReadyToRun extensions (corcompile.h): __Canon, and a module override that makes
            // the tokens of the following type refer to another module of the version bubble.
            0x3e => TypeSig::Canon,
            0x3f => {
                let module = self.uint()?;
                let saved = self.module;
                self.module = module;
                let t = self.type_sig(d);
                self.module = saved;
                t?
            }
            // ELEMENT_TYPE_NATIVE_VALUETYPE_ZAPSIG: a native value type wrapper; the type follows.
            0x3d => self.type_sig(d)?,
            other => return Err(format!("unknown element type {other:#x}")),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    /// ECMA-335 II.23.2 compressed unsigned encoding (test-side encoder).
    fn enc_u(v: u32, out: &mut Vec<u8>) {
        if v < 0x80 {
            out.push(v as u8);
        } else if v < 0x4000 {
            out.extend_from_slice(&((v as u16) | 0x8000).to_be_bytes());
        } else {
            out.extend_from_slice(&(v | 0xc000_0000).to_be_bytes());
        }
    }

    fn enc_s(v: i32, out: &mut Vec<u8>) {
        // Rotate the sign bit into bit 0 over the smallest width that holds v.
        let (bits, mask) = if (-64..64).contains(&v) {
            (7, 0x7f)
        } else if (-8192..8192).contains(&v) {
            (14, 0x3fff)
        } else {
            (29, 0x1fff_ffff)
        };
        let _ = bits;
        let u = ((v as u32) << 1 & mask) | u32::from(v < 0);
        enc_u(u, out);
    }

    fn enc_tok(t: &TypeToken, out: &mut Vec<u8>) {
        let tag = match t.table {
            table::TYPE_DEF => 0,
            table::TYPE_REF => 1,
            _ => 2,
        };
        enc_u(t.rid << 2 | tag, out);
    }

    fn enc_type(t: &TypeSig, out: &mut Vec<u8>) {
        let simple = |b: u8, out: &mut Vec<u8>| out.push(b);
        match t {
            TypeSig::Void => simple(0x01, out),
            TypeSig::Boolean => simple(0x02, out),
            TypeSig::Char => simple(0x03, out),
            TypeSig::I1 => simple(0x04, out),
            TypeSig::U1 => simple(0x05, out),
            TypeSig::I2 => simple(0x06, out),
            TypeSig::U2 => simple(0x07, out),
            TypeSig::I4 => simple(0x08, out),
            TypeSig::U4 => simple(0x09, out),
            TypeSig::I8 => simple(0x0a, out),
            TypeSig::U8 => simple(0x0b, out),
            TypeSig::R4 => simple(0x0c, out),
            TypeSig::R8 => simple(0x0d, out),
            TypeSig::String => simple(0x0e, out),
            TypeSig::Ptr { to } => {
                out.push(0x0f);
                enc_type(to, out)
            }
            TypeSig::ByRef { to } => {
                out.push(0x10);
                enc_type(to, out)
            }
            TypeSig::ValueType { ty } => {
                out.push(0x11);
                enc_tok(ty, out)
            }
            TypeSig::Class { ty } => {
                out.push(0x12);
                enc_tok(ty, out)
            }
            TypeSig::Var { index } => {
                out.push(0x13);
                enc_u(*index, out)
            }
            TypeSig::Array {
                of,
                rank,
                sizes,
                lower_bounds,
            } => {
                out.push(0x14);
                enc_type(of, out);
                enc_u(*rank, out);
                enc_u(sizes.len() as u32, out);
                for s in sizes {
                    enc_u(*s, out);
                }
                enc_u(lower_bounds.len() as u32, out);
                for l in lower_bounds {
                    enc_s(*l, out);
                }
            }
            TypeSig::GenericInst {
                value_type,
                generic,
                args,
            } => {
                out.push(0x15);
                out.push(if *value_type { 0x11 } else { 0x12 });
                enc_tok(generic, out);
                enc_u(args.len() as u32, out);
                for a in args {
                    enc_type(a, out);
                }
            }
            TypeSig::TypedByRef => simple(0x16, out),
            TypeSig::I => simple(0x18, out),
            TypeSig::U => simple(0x19, out),
            TypeSig::FnPtr { sig } => {
                out.push(0x1b);
                enc_method(sig, out)
            }
            TypeSig::Object => simple(0x1c, out),
            TypeSig::SzArray { of } => {
                out.push(0x1d);
                enc_type(of, out)
            }
            TypeSig::MVar { index } => {
                out.push(0x1e);
                enc_u(*index, out)
            }
            TypeSig::Modified {
                required,
                modifier,
                inner,
            } => {
                out.push(if *required { 0x1f } else { 0x20 });
                enc_tok(modifier, out);
                enc_type(inner, out)
            }
            TypeSig::Pinned { inner } => {
                out.push(0x45);
                enc_type(inner, out)
            }
            TypeSig::Canon => simple(0x3e, out),
        }
    }

    fn enc_method(m: &MethodSig, out: &mut Vec<u8>) {
        let mut cc = m.calling_convention;
        if m.has_this {
            cc |= 0x20;
        }
        if m.explicit_this {
            cc |= 0x40;
        }
        if m.generic_params > 0 {
            cc |= 0x10;
        }
        out.push(cc);
        if m.generic_params > 0 {
            enc_u(m.generic_params, out);
        }
        enc_u(m.params.len() as u32, out);
        enc_type(&m.ret, out);
        for p in &m.params {
            enc_type(p, out);
        }
    }

    fn token() -> impl Strategy<Value = TypeToken> {
        (
            prop_oneof![
                Just(table::TYPE_DEF),
                Just(table::TYPE_REF),
                Just(table::TYPE_SPEC)
            ],
            1u32..0x00ff_ffff,
        )
            .prop_map(|(table, rid)| TypeToken {
                module: 0,
                table,
                rid,
            })
    }

    fn type_sig() -> impl Strategy<Value = TypeSig> {
        let leaf = prop_oneof![
            Just(TypeSig::Boolean),
            Just(TypeSig::Char),
            Just(TypeSig::I1),
            Just(TypeSig::U1),
            Just(TypeSig::I2),
            Just(TypeSig::U2),
            Just(TypeSig::I4),
            Just(TypeSig::U4),
            Just(TypeSig::I8),
            Just(TypeSig::U8),
            Just(TypeSig::R4),
            Just(TypeSig::R8),
            Just(TypeSig::String),
            Just(TypeSig::Object),
            Just(TypeSig::I),
            Just(TypeSig::U),
            Just(TypeSig::TypedByRef),
            Just(TypeSig::Canon),
            token().prop_map(|ty| TypeSig::Class { ty }),
            token().prop_map(|ty| TypeSig::ValueType { ty }),
            (0u32..0x1fff_ffff).prop_map(|index| TypeSig::Var { index }),
            (0u32..1000).prop_map(|index| TypeSig::MVar { index }),
        ];
        leaf.prop_recursive(4, 32, 4, |inner| {
            prop_oneof![
                inner.clone().prop_map(|t| TypeSig::Ptr { to: Box::new(t) }),
                inner
                    .clone()
                    .prop_map(|t| TypeSig::ByRef { to: Box::new(t) }),
                inner
                    .clone()
                    .prop_map(|t| TypeSig::SzArray { of: Box::new(t) }),
                (
                    inner.clone(),
                    1u32..5,
                    proptest::collection::vec(0u32..100_000, 0..2),
                    proptest::collection::vec(-300_000i32..300_000, 0..2)
                )
                    .prop_map(|(t, rank, sizes, lower_bounds)| {
                        let rank = rank.max(sizes.len() as u32).max(lower_bounds.len() as u32);
                        TypeSig::Array {
                            of: Box::new(t),
                            rank,
                            sizes,
                            lower_bounds,
                        }
                    }),
                (
                    any::<bool>(),
                    token(),
                    proptest::collection::vec(inner.clone(), 1..4)
                )
                    .prop_map(|(value_type, generic, args)| TypeSig::GenericInst {
                        value_type,
                        generic,
                        args
                    }),
                (any::<bool>(), token(), inner.clone()).prop_map(|(required, modifier, t)| {
                    TypeSig::Modified {
                        required,
                        modifier,
                        inner: Box::new(t),
                    }
                }),
                (
                    any::<bool>(),
                    inner.clone(),
                    proptest::collection::vec(inner, 0..3)
                )
                    .prop_map(|(has_this, ret, params)| {
                        TypeSig::FnPtr {
                            sig: Box::new(MethodSig {
                                has_this,
                                explicit_this: false,
                                calling_convention: 0,
                                generic_params: 0,
                                ret,
                                params,
                                sentinel: None,
                            }),
                        }
                    }),
            ]
        })
    }

    proptest! {
        /// Encoding any signature and decoding it gives the same signature back.
        #[test]
        fn method_sig_roundtrip(has_this in any::<bool>(), generic_params in 0u32..3, ret in type_sig(), params in proptest::collection::vec(type_sig(), 0..5)) {
            let m = MethodSig { has_this, explicit_this: false, calling_convention: 0, generic_params, ret, params, sentinel: None };
            let mut bytes = Vec::new();
            enc_method(&m, &mut bytes);
            let mut r = SigReader::new(&bytes);
            prop_assert_eq!(r.method_sig(0).unwrap(), m);
            prop_assert!(r.rest().is_empty());
        }

        /// Arbitrary bytes never panic the signature decoder.
        #[test]
        fn sig_decoder_never_panics(bytes in proptest::collection::vec(any::<u8>(), 0..64)) {
            let _ = SigReader::new(&bytes).method_sig(0);
            let _ = SigReader::new(&bytes).type_sig(0);
        }

        /// Arbitrary bytes never panic the metadata root parser.
        #[test]
        fn metadata_parser_never_panics(mut bytes in proptest::collection::vec(any::<u8>(), 0..512), bsjb in any::<bool>()) {
            if bsjb && bytes.len() >= 4 {
                bytes[..4].copy_from_slice(&0x424a_5342u32.to_le_bytes());
            }
            if let Ok(layout) = MetadataLayout::parse(&bytes) {
                let md = Metadata::new(&layout, &bytes);
                for t in 0..0x2d {
                    for rid in 0..3 {
                        for c in 0..9 { let _ = md.cell(t, rid, c); }
                    }
                }
                let _ = md.assembly_name();
                let _ = md.method_def(1);
            }
        }

        #[test]
        fn compressed_signed_roundtrip(v in -(1i32 << 28)..(1i32 << 28)) {
            let mut b = Vec::new();
            enc_s(v, &mut b);
            let mut p = 0;
            prop_assert_eq!(decode_compressed_signed(&b, &mut p), Some(v));
        }
    }

    #[test]
    fn ecma_compressed_examples() {
        // ECMA-335 II.23.2 examples.
        for (v, bytes) in [
            (0x03u32, &[0x03u8][..]),
            (0x7f, &[0x7f]),
            (0x80, &[0x80, 0x80]),
            (0x2e57, &[0xae, 0x57]),
            (0x3fff, &[0xbf, 0xff]),
            (0x4000, &[0xc0, 0x00, 0x40, 0x00]),
            (0x1fff_ffff, &[0xdf, 0xff, 0xff, 0xff]),
        ] {
            let mut p = 0;
            assert_eq!(decode_compressed(bytes, &mut p), Some(v));
            assert_eq!(p, bytes.len());
        }
        for (v, bytes) in [
            (3i32, &[0x06u8][..]),
            (-3, &[0x7b]),
            (64, &[0x80, 0x80]),
            (-64, &[0x01]),
            (8192, &[0xc0, 0x00, 0x40, 0x00]),
            (-8192, &[0x80, 0x01]),
            (268435455, &[0xdf, 0xff, 0xff, 0xfe]),
            (-268435456, &[0xc0, 0x00, 0x00, 0x01]),
        ] {
            let mut p = 0;
            assert_eq!(decode_compressed_signed(bytes, &mut p), Some(v), "{v}");
        }
    }

    #[test]
    fn deep_nesting_is_rejected_not_a_stack_overflow() {
        let mut bytes = vec![0x00, 0x00];
        bytes.extend(std::iter::repeat_n(0x0f, 100_000));
        bytes.push(0x08);
        assert!(SigReader::new(&bytes).method_sig(0).is_err());
    }
}
