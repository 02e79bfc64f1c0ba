//! Decoded ECMA-335 metadata values: tokens, type signatures and method signatures.
//!
//! Signatures keep metadata tokens (not names) so decoding stays cheap; [`super::Metadata`]
//! turns a token into a name. The element type values are ECMA-335 II.23.1.16; the `*_ZAPSIG`
//! extensions are ReadyToRun's (dotnet/runtime `src/coreclr/inc/corcompile.h`,
//! readytorun-format.md "Signatures").

use serde::Serialize;

/// A metadata table (ECMA-335 II.22), by its table number.
pub mod table {
    pub const MODULE: u8 = 0x00;
    pub const TYPE_REF: u8 = 0x01;
    pub const TYPE_DEF: u8 = 0x02;
    pub const FIELD: u8 = 0x04;
    pub const METHOD_DEF: u8 = 0x06;
    pub const PARAM: u8 = 0x08;
    pub const MEMBER_REF: u8 = 0x0a;
    pub const MODULE_REF: u8 = 0x1a;
    pub const TYPE_SPEC: u8 = 0x1b;
    pub const ASSEMBLY: u8 = 0x20;
    pub const ASSEMBLY_REF: u8 = 0x23;
    pub const NESTED_CLASS: u8 = 0x29;
    pub const GENERIC_PARAM: u8 = 0x2a;
    pub const METHOD_SPEC: u8 = 0x2b;
}

/// A token naming a type: a TypeDef, TypeRef or TypeSpec row (ECMA-335 II.23.2.8
/// `TypeDefOrRefOrSpecEncoded`), possibly in another module of a ReadyToRun version bubble.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize)]
pub struct TypeToken {
    /// ReadyToRun module override index (readytorun-format.md, "ManifestMetadata"): 0 = the
    /// assembly that holds the signature; otherwise the module the row belongs to.
    pub module: u32,
    /// [`table::TYPE_DEF`], [`table::TYPE_REF`] or [`table::TYPE_SPEC`].
    pub table: u8,
    /// 1-based row number.
    pub rid: u32,
}

impl TypeToken {
    /// The 32-bit metadata token (`table << 24 | rid`).
    pub fn token(&self) -> u32 {
        (u32::from(self.table) << 24) | (self.rid & 0x00ff_ffff)
    }
}

/// A type in a signature (ECMA-335 II.23.2.12 `Type`, plus ReadyToRun's extensions).
#[derive(Clone, Debug, PartialEq, Eq, Hash, Serialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum TypeSig {
    /// `void` (return types only).
    Void,
    /// `bool` (1 byte, 0 or 1).
    Boolean,
    /// `char` (UTF-16 code unit, 2 bytes).
    Char,
    /// `int8`.
    I1,
    /// `uint8`.
    U1,
    /// `int16`.
    I2,
    /// `uint16`.
    U2,
    /// `int32`.
    I4,
    /// `uint32`.
    U4,
    /// `int64`.
    I8,
    /// `uint64`.
    U8,
    /// `float32`.
    R4,
    /// `float64`.
    R8,
    /// `string` (a reference to a System.String object).
    String,
    /// `object`.
    Object,
    /// `native int` (IntPtr / nint).
    I,
    /// `native uint` (UIntPtr / nuint).
    U,
    /// `typedref`.
    TypedByRef,
    /// `class T`: a reference type.
    Class { ty: TypeToken },
    /// `valuetype T`: a value type (struct or enum).
    ValueType { ty: TypeToken },
    /// `G<args>`: an instantiated generic type.
    GenericInst {
        value_type: bool,
        generic: TypeToken,
        args: Vec<TypeSig>,
    },
    /// `!n`: generic parameter `n` of the owning type.
    Var { index: u32 },
    /// `!!n`: generic parameter `n` of the method.
    MVar { index: u32 },
    /// `T*`: unmanaged pointer.
    Ptr { to: Box<TypeSig> },
    /// `T&`: managed reference (`ref`, `out`, `in`).
    ByRef { to: Box<TypeSig> },
    /// `T[]`: single-dimensional zero-based array.
    SzArray { of: Box<TypeSig> },
    /// `T[...]`: general array with rank, sizes and lower bounds (ECMA-335 II.23.2.13).
    Array {
        of: Box<TypeSig>,
        rank: u32,
        sizes: Vec<u32>,
        lower_bounds: Vec<i32>,
    },
    /// `method RET *(ARGS)`: function pointer.
    FnPtr { sig: Box<MethodSig> },
    /// `T modreq(M)` / `T modopt(M)`: a custom modifier on `inner`.
    Modified {
        required: bool,
        modifier: TypeToken,
        inner: Box<TypeSig>,
    },
    /// `T pinned` (locals only).
    Pinned { inner: Box<TypeSig> },
    /// ReadyToRun `ELEMENT_TYPE_CANON_ZAPSIG`: `System.__Canon`, the shared instantiation over
    /// reference types.
    Canon,
}

impl TypeSig {
    /// The type with custom modifiers and `pinned` removed.
    pub fn unmodified(&self) -> &TypeSig {
        match self {
            TypeSig::Modified { inner, .. } | TypeSig::Pinned { inner } => inner.unmodified(),
            other => other,
        }
    }

    /// The ILDASM name of a primitive (`int32`, `string`, ...); `None` for constructed types.
    pub fn primitive_name(&self) -> Option<&'static str> {
        Some(match self {
            TypeSig::Void => "void",
            TypeSig::Boolean => "bool",
            TypeSig::Char => "char",
            TypeSig::I1 => "int8",
            TypeSig::U1 => "uint8",
            TypeSig::I2 => "int16",
            TypeSig::U2 => "uint16",
            TypeSig::I4 => "int32",
            TypeSig::U4 => "uint32",
            TypeSig::I8 => "int64",
            TypeSig::U8 => "uint64",
            TypeSig::R4 => "float32",
            TypeSig::R8 => "float64",
            TypeSig::String => "string",
            TypeSig::Object => "object",
            TypeSig::I => "native int",
            TypeSig::U => "native uint",
            TypeSig::TypedByRef => "typedref",
            _ => return None,
        })
    }

    /// The reflection name of a primitive as TypeString prints type arguments
    /// (`System.Int32`, ...); `None` for constructed types.
    pub fn reflection_primitive_name(&self) -> Option<&'static str> {
        Some(match self {
            TypeSig::Void => "System.Void",
            TypeSig::Boolean => "System.Boolean",
            TypeSig::Char => "System.Char",
            TypeSig::I1 => "System.SByte",
            TypeSig::U1 => "System.Byte",
            TypeSig::I2 => "System.Int16",
            TypeSig::U2 => "System.UInt16",
            TypeSig::I4 => "System.Int32",
            TypeSig::U4 => "System.UInt32",
            TypeSig::I8 => "System.Int64",
            TypeSig::U8 => "System.UInt64",
            TypeSig::R4 => "System.Single",
            TypeSig::R8 => "System.Double",
            TypeSig::String => "System.String",
            TypeSig::Object => "System.Object",
            TypeSig::I => "System.IntPtr",
            TypeSig::U => "System.UIntPtr",
            TypeSig::TypedByRef => "System.TypedReference",
            TypeSig::Canon => "System.__Canon",
            _ => return None,
        })
    }

    /// How a tracer can read a value of this type at a method's entry, on x86-64 System V
    /// (dotnet/runtime `docs/design/coreclr/botr/clr-abi.md`: managed code uses the platform ABI).
    pub fn arg_kind(&self) -> ArgKind {
        match self.unmodified() {
            TypeSig::Boolean => ArgKind::Bool,
            TypeSig::Char => ArgKind::Char,
            TypeSig::I1 => ArgKind::Int {
                bits: 8,
                signed: true,
            },
            TypeSig::U1 => ArgKind::Int {
                bits: 8,
                signed: false,
            },
            TypeSig::I2 => ArgKind::Int {
                bits: 16,
                signed: true,
            },
            TypeSig::U2 => ArgKind::Int {
                bits: 16,
                signed: false,
            },
            TypeSig::I4 => ArgKind::Int {
                bits: 32,
                signed: true,
            },
            TypeSig::U4 => ArgKind::Int {
                bits: 32,
                signed: false,
            },
            TypeSig::I8 | TypeSig::I => ArgKind::Int {
                bits: 64,
                signed: true,
            },
            TypeSig::U8 | TypeSig::U => ArgKind::Int {
                bits: 64,
                signed: false,
            },
            TypeSig::R4 => ArgKind::Float { bits: 32 },
            TypeSig::R8 => ArgKind::Float { bits: 64 },
            TypeSig::String => ArgKind::String,
            TypeSig::Object
            | TypeSig::Class { .. }
            | TypeSig::SzArray { .. }
            | TypeSig::Array { .. }
            | TypeSig::Canon => ArgKind::ObjectRef,
            TypeSig::GenericInst {
                value_type: false, ..
            } => ArgKind::ObjectRef,
            TypeSig::Ptr { .. } | TypeSig::ByRef { .. } | TypeSig::FnPtr { .. } => ArgKind::Pointer,
            TypeSig::ValueType { .. }
            | TypeSig::GenericInst {
                value_type: true, ..
            } => ArgKind::ValueType,
            TypeSig::Var { .. } | TypeSig::MVar { .. } => ArgKind::GenericParam,
            TypeSig::Void => ArgKind::Void,
            TypeSig::TypedByRef | TypeSig::Modified { .. } | TypeSig::Pinned { .. } => {
                ArgKind::ValueType
            }
        }
    }
}

/// What a tracer needs to know to read one argument at a method's entry.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum ArgKind {
    /// No value (a `void` return).
    Void,
    /// `bool`: one byte in the low bits of an integer register.
    Bool,
    /// `char`: a UTF-16 code unit in the low 16 bits of an integer register.
    Char,
    /// An integer of `bits` bits in an integer register (`native int` is 64 bits).
    Int { bits: u8, signed: bool },
    /// A float in an SSE register (xmm0..7), not in the integer sequence.
    Float { bits: u8 },
    /// A System.String reference in an integer register: int32 length at +8, UTF-16 chars
    /// from +12 (dotnet/runtime `src/coreclr/vm/object.h`, `StringObject`); null when 0.
    String,
    /// Any other object reference (class, array, boxed): one integer register.
    ObjectRef,
    /// Unmanaged pointer, managed reference (`ref`/`out`/`in`) or function pointer: one integer
    /// register holding an address.
    Pointer,
    /// A struct passed by value: its size and layout decide the registers (not decoded).
    ValueType,
    /// A generic parameter: its register use depends on the instantiation (shared code over
    /// reference types gets an object reference).
    GenericParam,
}

/// A method signature (ECMA-335 II.23.2.1 `MethodDefSig`, II.23.2.2 `MethodRefSig`,
/// II.23.2.15 `MethodSpec` not included).
#[derive(Clone, Debug, PartialEq, Eq, Hash, Serialize)]
pub struct MethodSig {
    /// `HASTHIS` (0x20): an instance method; `this` is passed before the parameters.
    pub has_this: bool,
    /// `EXPLICITTHIS` (0x40): `this` is the first declared parameter.
    pub explicit_this: bool,
    /// Low 4 bits of the calling convention byte: 0 default, 5 vararg, 1..4 unmanaged
    /// cdecl/stdcall/thiscall/fastcall, 9 unmanaged (function pointers).
    pub calling_convention: u8,
    /// Number of generic parameters of a generic method (`GENERIC`, 0x10); 0 otherwise.
    pub generic_params: u32,
    pub ret: TypeSig,
    pub params: Vec<TypeSig>,
    /// For vararg call sites: index in `params` where the `SENTINEL` stood.
    pub sentinel: Option<usize>,
}
