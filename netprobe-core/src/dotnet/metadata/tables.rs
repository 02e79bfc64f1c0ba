//! The ECMA-335 metadata tables: the metadata root and its stream headers (II.24.2.1-2), the
//! `#~` tables stream header (II.24.2.6) and the row layout of every table II.22 defines, with
//! coded indexes (II.24.2.6).
//!
//! The layout computes each column's position once and keeps the metadata bytes borrowed; a
//! cell is read on demand. Every access is bounds-checked: a corrupt table gives `None`/`Err`,
//! never a panic. The heaps the cells point into are `heaps.rs`; the typed rows, `rows.rs`.

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
pub(super) enum Coded {
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

pub(super) const N_TABLES: usize = 0x2d;
pub(super) const MAX_COLS: usize = 9;

/// Where each table lives and how its rows are laid out. Owned, no borrow: pair it with the
/// metadata bytes through [`Metadata`].
#[derive(Clone, Debug)]
pub struct MetadataLayout {
    /// Runtime version string of the metadata root (e.g. `v4.0.30319`).
    pub version: String,
    pub(super) strings: (usize, usize),
    pub(super) blob: (usize, usize),
    pub(super) guid: (usize, usize),
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
    pub(super) strings_utf8: Option<&'a str>,
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

impl<'a> Metadata<'a> {
    /// The view of `bytes` (the metadata the layout was parsed from).
    pub fn new(layout: &'a MetadataLayout, bytes: &'a [u8]) -> Metadata<'a> {
        Metadata {
            layout,
            bytes,
            strings_utf8: None,
        }
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
    pub(super) fn coded_cell(&self, t: u8, rid: u32, col: usize, kind: Coded) -> Option<(u8, u32)> {
        let v = self.cell(t, rid, col)?;
        let (bits, tables) = kind.tables();
        let tag = (v & ((1 << bits) - 1)) as usize;
        let table = *tables.get(tag)?;
        if table == 0xff {
            return None;
        }
        Some((table, v >> bits))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    proptest! {
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
    }
}
