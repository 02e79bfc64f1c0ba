//! A parameter's type, resolved through typedefs and qualifiers to what a probe can decode.
//!
//! Go's linker writes a `string` as a struct `{str *uint8; len int}` and a slice `[]T` as
//! `{array *T; len int; cap int}` (Go `src/cmd/link/internal/ld/dwarf.go`, `synthesizestringtypes`
//! and `synthesizeslicetypes`); rustc writes `&str` as `{data_ptr: *const u8, length: usize}`.
//! These headers are recognised by their members, not by their names alone.

use super::die::name_of;
use crate::debuginfo::Reader;
use gimli::{AttributeValue, Unit, UnitOffset};
use std::cell::RefCell;
use std::rc::Rc;

/// How many type DIEs one resolution walks through (typedef chains, pointers, fields); a cycle
/// in a hostile file ends here.
pub const MAX_TYPE_DEPTH: usize = 16;
/// Most fields of a struct decoded field by field.
const MAX_FIELDS: usize = 8;

/// What a parameter's type is, as far as a probe is concerned. Every variant carries the type's
/// name as the source spells it (`unsigned long`, `const char *`, `[]int`).
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub enum ParamType {
    /// A signed or unsigned integer (enums too) of `bytes` bytes.
    Int {
        name: String,
        bytes: u8,
        signed: bool,
    },
    Bool {
        name: String,
        bytes: u8,
    },
    /// A one-byte character.
    Char {
        name: String,
        signed: bool,
    },
    Float {
        name: String,
        bytes: u8,
    },
    /// A pointer (or reference) to anything but a character.
    Pointer {
        name: String,
    },
    /// A pointer to `char`: a NUL-terminated string.
    CString {
        name: String,
    },
    /// A pointer and a byte length: a Go `string`, a Rust `&str`.
    PtrLen {
        name: String,
    },
    /// A Go slice header: pointer, length, capacity.
    Slice {
        name: String,
    },
    /// A struct of at most a few fields, each decoded on its own.
    Struct {
        name: String,
        bytes: u64,
        fields: Vec<Field>,
    },
    /// Anything else, and why it is not decoded.
    Other {
        name: String,
        why: String,
    },
}

/// A field of a [`ParamType::Struct`].
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct Field {
    pub name: String,
    /// Byte offset in the struct.
    pub offset: u64,
    pub ty: ParamType,
}

/// `$body` with `$name` bound to the name every [`ParamType`] variant carries.
macro_rules! with_name {
    ($ty:expr, $name:ident => $body:expr) => {
        match $ty {
            ParamType::Int { name: $name, .. }
            | ParamType::Bool { name: $name, .. }
            | ParamType::Char { name: $name, .. }
            | ParamType::Float { name: $name, .. }
            | ParamType::Pointer { name: $name }
            | ParamType::CString { name: $name }
            | ParamType::PtrLen { name: $name }
            | ParamType::Slice { name: $name }
            | ParamType::Struct { name: $name, .. }
            | ParamType::Other { name: $name, .. } => $body,
        }
    };
}

impl ParamType {
    /// The type's name as the source spells it.
    pub fn name(&self) -> &str {
        with_name!(self, name => name)
    }

    fn renamed(mut self, new: String) -> ParamType {
        with_name!(&mut self, name => *name = new);
        self
    }
}

fn other(name: impl Into<String>, why: impl Into<String>) -> ParamType {
    ParamType::Other {
        name: name.into(),
        why: why.into(),
    }
}

/// Units type references lead to. Go's linker refers to types in another unit
/// (`DW_FORM_ref_addr`): each such unit is parsed once per function.
pub(super) struct TypeUnits<'a> {
    dwarf: &'a gimli::Dwarf<Reader>,
    loaded: RefCell<Vec<Rc<Unit<Reader>>>>,
}

/// Most units a function's types may lead to.
const MAX_TYPE_UNITS: usize = 16;

impl<'a> TypeUnits<'a> {
    pub(super) fn new(dwarf: &'a gimli::Dwarf<Reader>) -> TypeUnits<'a> {
        TypeUnits {
            dwarf,
            loaded: RefCell::new(Vec::new()),
        }
    }

    /// The DIE a reference attribute `v` of a DIE in `unit` names.
    pub(super) fn target(
        &self,
        unit: &Rc<Unit<Reader>>,
        v: AttributeValue<Reader>,
    ) -> Option<(Rc<Unit<Reader>>, UnitOffset)> {
        match v {
            AttributeValue::UnitRef(o) => Some((unit.clone(), o)),
            AttributeValue::DebugInfoRef(o) => {
                if let Some(u) = o.to_unit_offset(&unit.header) {
                    return Some((unit.clone(), u));
                }
                let other = self.unit_holding(o)?;
                let u = o.to_unit_offset(&other.header)?;
                Some((other, u))
            }
            _ => None,
        }
    }

    fn unit_holding(&self, o: gimli::DebugInfoOffset) -> Option<Rc<Unit<Reader>>> {
        if let Some(u) = self
            .loaded
            .borrow()
            .iter()
            .find(|u| o.to_unit_offset(&u.header).is_some())
        {
            return Some(u.clone());
        }
        if self.loaded.borrow().len() >= MAX_TYPE_UNITS {
            return None;
        }
        let mut headers = self.dwarf.units();
        while let Ok(Some(h)) = headers.next() {
            let start = h.offset().as_debug_info_offset()?.0;
            let end = start.checked_add(h.length_including_self())?;
            if (start..end).contains(&o.0) {
                let u = Rc::new(self.dwarf.unit(h).ok()?);
                self.loaded.borrow_mut().push(u.clone());
                return Some(u);
            }
        }
        None
    }
}

/// The type at `offset` in `unit`.
pub(super) fn resolve_type(
    units: &TypeUnits<'_>,
    unit: &Rc<Unit<Reader>>,
    offset: UnitOffset,
) -> ParamType {
    resolve(units, unit, offset, 0, true)
}

fn udata(v: Option<AttributeValue<Reader>>) -> Option<u64> {
    v?.udata_value()
}

fn resolve(
    units: &TypeUnits<'_>,
    unit: &Rc<Unit<Reader>>,
    offset: UnitOffset,
    depth: usize,
    members: bool,
) -> ParamType {
    let dwarf = units.dwarf;
    if depth >= MAX_TYPE_DEPTH {
        return other("?", "its type is nested too deep (or refers to itself)");
    }
    let Ok(e) = unit.entry(offset) else {
        return other("?", "its type DIE cannot be read");
    };
    let name = name_of(dwarf, unit, &e, gimli::DW_AT_name);
    let size = udata(e.attr_value(gimli::DW_AT_byte_size).ok().flatten());
    let inner = || {
        e.attr_value(gimli::DW_AT_type)
            .ok()
            .flatten()
            .and_then(|v| units.target(unit, v))
    };
    match e.tag() {
        gimli::DW_TAG_typedef
        | gimli::DW_TAG_volatile_type
        | gimli::DW_TAG_restrict_type
        | gimli::DW_TAG_atomic_type
        | gimli::DW_TAG_const_type => {
            let Some((u, t)) = inner() else {
                return other("void", "void");
            };
            let resolved = resolve(units, &u, t, depth + 1, members);
            match (e.tag(), name) {
                (gimli::DW_TAG_typedef, Some(n)) => resolved.renamed(n),
                (gimli::DW_TAG_const_type, _) => {
                    let n = format!("const {}", resolved.name());
                    resolved.renamed(n)
                }
                _ => resolved,
            }
        }
        gimli::DW_TAG_base_type => {
            let name = name.unwrap_or_else(|| "?".into());
            let enc = match e.attr_value(gimli::DW_AT_encoding) {
                Ok(Some(AttributeValue::Encoding(enc))) => enc,
                _ => return other(name, "a base type without an encoding"),
            };
            let bytes = match size {
                Some(n @ (1 | 2 | 4 | 8)) => n as u8,
                _ => return other(name, "a base type of a size probes do not fetch"),
            };
            match enc {
                gimli::DW_ATE_signed => ParamType::Int {
                    name,
                    bytes,
                    signed: true,
                },
                gimli::DW_ATE_unsigned | gimli::DW_ATE_UTF => ParamType::Int {
                    name,
                    bytes,
                    signed: false,
                },
                gimli::DW_ATE_signed_char | gimli::DW_ATE_unsigned_char if bytes == 1 => {
                    ParamType::Char {
                        name,
                        signed: enc == gimli::DW_ATE_signed_char,
                    }
                }
                gimli::DW_ATE_boolean => ParamType::Bool { name, bytes },
                gimli::DW_ATE_float => ParamType::Float { name, bytes },
                _ => other(name, "a base type encoding netprobe does not decode"),
            }
        }
        gimli::DW_TAG_enumeration_type => {
            let name = name.unwrap_or_else(|| "enum".into());
            match size {
                Some(n @ (1 | 2 | 4 | 8)) => ParamType::Int {
                    name,
                    bytes: n as u8,
                    signed: inner()
                        .map(|(u, t)| {
                            matches!(
                                resolve(units, &u, t, depth + 1, false),
                                ParamType::Int { signed: true, .. }
                            )
                        })
                        .unwrap_or(false),
                },
                _ => other(name, "an enum of a size probes do not fetch"),
            }
        }
        gimli::DW_TAG_pointer_type
        | gimli::DW_TAG_reference_type
        | gimli::DW_TAG_rvalue_reference_type => {
            let target = inner().map(|(u, t)| resolve(units, &u, t, depth + 1, false));
            let sigil = if e.tag() == gimli::DW_TAG_pointer_type {
                "*"
            } else {
                "&"
            };
            match target {
                Some(ParamType::Char { name: n, .. }) => ParamType::CString {
                    name: format!("{n} {sigil}"),
                },
                Some(t) => ParamType::Pointer {
                    name: name.unwrap_or_else(|| format!("{} {sigil}", t.name())),
                },
                None => ParamType::Pointer {
                    name: name.unwrap_or_else(|| format!("void {sigil}")),
                },
            }
        }
        gimli::DW_TAG_structure_type | gimli::DW_TAG_class_type => {
            if !members {
                // Behind a pointer or inside a struct only the name matters: members are read
                // for a parameter's own type alone, so a struct of pointers to itself costs one
                // level, not a tree.
                return other(
                    name.unwrap_or_else(|| "struct".into()),
                    "a struct inside a struct",
                );
            }
            structure(units, unit, offset, name, size, depth)
        }
        gimli::DW_TAG_union_type => other(
            name.unwrap_or_else(|| "union".into()),
            "a union (which member holds the value is not known)",
        ),
        gimli::DW_TAG_array_type => other(name.unwrap_or_else(|| "array".into()), "an array"),
        _ => other(
            name.unwrap_or_else(|| "?".into()),
            format!("a {} netprobe does not decode", e.tag()),
        ),
    }
}

/// A struct: a Go string or slice header, a Rust `&str`, or a small struct by field.
fn structure(
    units: &TypeUnits<'_>,
    unit: &Rc<Unit<Reader>>,
    offset: UnitOffset,
    name: Option<String>,
    size: Option<u64>,
    depth: usize,
) -> ParamType {
    let name = name.unwrap_or_else(|| "struct".into());
    let Some(bytes) = size else {
        return other(
            name,
            "a struct without a size (declared, not defined, here)",
        );
    };
    let mut members = Vec::new();
    let Ok(mut tree) = unit.entries_tree(Some(offset)) else {
        return other(name, "its members cannot be read");
    };
    let Ok(root) = tree.root() else {
        return other(name, "its members cannot be read");
    };
    let mut children = root.children();
    while let Ok(Some(child)) = children.next() {
        let m = child.entry();
        if m.tag() != gimli::DW_TAG_member {
            continue;
        }
        if members.len() == MAX_FIELDS {
            return other(name, format!("a struct of more than {MAX_FIELDS} fields"));
        }
        let field_name = name_of(units.dwarf, unit, m, gimli::DW_AT_name).unwrap_or_default();
        let Some(field_offset) = udata(
            m.attr_value(gimli::DW_AT_data_member_location)
                .ok()
                .flatten(),
        ) else {
            return other(name, "a field at a computed offset");
        };
        if matches!(m.attr(gimli::DW_AT_bit_size), Ok(Some(_)))
            || matches!(m.attr(gimli::DW_AT_data_bit_offset), Ok(Some(_)))
        {
            return other(name, "a struct with bit fields");
        }
        let ty = m
            .attr_value(gimli::DW_AT_type)
            .ok()
            .flatten()
            .and_then(|v| units.target(unit, v))
            .map(|(u, t)| resolve(units, &u, t, depth + 1, false))
            .unwrap_or_else(|| other("?", "no type"));
        members.push(Field {
            name: field_name,
            offset: field_offset,
            ty,
        });
    }
    let names: Vec<&str> = members.iter().map(|f| f.name.as_str()).collect();
    match names.as_slice() {
        ["str", "len"] if name == "string" => return ParamType::PtrLen { name },
        ["data_ptr", "length"] if name.starts_with('&') => return ParamType::PtrLen { name },
        ["array", "len", "cap"] if name.starts_with("[]") => return ParamType::Slice { name },
        _ => {}
    }
    if bytes > 64 {
        return other(name, format!("a struct of {bytes} bytes"));
    }
    ParamType::Struct {
        name,
        bytes,
        fields: members,
    }
}
