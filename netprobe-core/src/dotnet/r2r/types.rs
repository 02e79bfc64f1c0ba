//! ReadyToRun structures (dotnet/runtime `docs/design/coreclr/botr/readytorun-format.md`,
//! `src/coreclr/inc/readytorun.h`).

use crate::addr::{FileOffset, Rva};
use crate::dotnet::metadata::{MethodSig, TypeSig};
use serde::Serialize;

/// `READYTORUN_SIGNATURE`: ASCII `RTR` (readytorun-format.md, "READYTORUN_HEADER::Signature").
pub const SIGNATURE: u32 = 0x0052_5452;

/// Section types (readytorun-format.md, "READYTORUN_SECTION").
pub mod section {
    pub const COMPILER_IDENTIFIER: u32 = 100;
    pub const IMPORT_SECTIONS: u32 = 101;
    pub const RUNTIME_FUNCTIONS: u32 = 102;
    pub const METHOD_DEF_ENTRY_POINTS: u32 = 103;
    pub const EXCEPTION_INFO: u32 = 104;
    pub const DEBUG_INFO: u32 = 105;
    pub const INSTANCE_METHOD_ENTRY_POINTS: u32 = 109;
    pub const MANIFEST_METADATA: u32 = 112;
    pub const COMPONENT_ASSEMBLIES: u32 = 115;
    pub const OWNER_COMPOSITE_EXECUTABLE: u32 = 116;
    pub const HOT_COLD_MAP: u32 = 120;
}

/// `READYTORUN_FLAG_*` (readytorun-format.md, "READYTORUN_CORE_HEADER::Flags";
/// `src/coreclr/inc/readytorun.h`). A composite image has no flag of its own: it is told by its
/// `RTR_HEADER` export.
pub mod flags {
    /// Set on most framework images (.NET 8 and 10 CoreLib: 0x4a, 0x4b); says nothing about
    /// composite images.
    pub const SKIP_TYPE_VALIDATION: u32 = 0x2;
    pub const COMPONENT: u32 = 0x20;
    pub const MULTIMODULE_VERSION_BUBBLE: u32 = 0x40;
}

/// `ReadyToRunMethodSigFlags` (readytorun-format.md, "Method Signatures").
pub mod method_sig_flags {
    pub const UNBOXING_STUB: u32 = 0x01;
    pub const INSTANTIATING_STUB: u32 = 0x02;
    pub const METHOD_INSTANTIATION: u32 = 0x04;
    pub const SLOT_INSTEAD_OF_TOKEN: u32 = 0x08;
    pub const MEMBER_REF_TOKEN: u32 = 0x10;
    pub const CONSTRAINED: u32 = 0x20;
    pub const OWNER_TYPE: u32 = 0x40;
    pub const UPDATE_CONTEXT: u32 = 0x80;
}

/// One `READYTORUN_SECTION` record.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
pub struct R2rSection {
    /// `ReadyToRunSectionType` (see [`section`]).
    pub kind: u32,
    pub rva: u32,
    pub size: u32,
}

/// `READYTORUN_HEADER`.
#[derive(Clone, Debug, Serialize)]
pub struct R2rHeader {
    /// RVA of the header itself.
    pub rva: u32,
    pub major_version: u16,
    pub minor_version: u16,
    /// `READYTORUN_FLAG_*` (see [`flags`]).
    pub flags: u32,
    pub sections: Vec<R2rSection>,
}

impl R2rHeader {
    /// The section of `kind`; `None` when the image has none.
    pub fn section(&self, kind: u32) -> Option<R2rSection> {
        self.sections.iter().copied().find(|s| s.kind == kind)
    }
}

/// One `RUNTIME_FUNCTION` (x64: begin, end, unwind data; other targets have no end field: arm64's
/// comes from the length in its unwind data, any other's is the next function's begin;
/// [`super::parser::runtime_functions`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
pub struct RuntimeFunction {
    pub begin: u32,
    pub end: u32,
    pub unwind: u32,
}

/// A contiguous piece of a method's native code.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
pub struct CodeRange {
    pub rva: Rva,
    pub size: u64,
    /// Where the first byte lies in the file; `None` when no section holds it in the file.
    pub file_offset: Option<FileOffset>,
}

/// How a method's entry point is registered in the image.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum EntryKind {
    /// METHODDEF_ENTRYPOINTS: a non-generic method, looked up by its MethodDef row.
    MethodDef,
    /// INSTANCE_METHOD_ENTRYPOINTS: a generic method or a method of a generic type, compiled for
    /// one instantiation (often the shared `__Canon` one).
    Instance,
}

/// One precompiled method of a ReadyToRun image: what a listing and probe placement need.
/// [`crate::dotnet::Assembly::details`] adds the structured pieces (namespace, type path,
/// signature with parameter types, parameter names).
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct R2rMethod {
    /// The name as crossgen's map files and the runtime's perf map / jitdump print it:
    /// `[instance ]RET [Assembly] Namespace.Type::Method(ARGS)`; instantiations carry their
    /// owner's type arguments (``Dictionary`2[System.__Canon,System.__Canon]::TryInsert(...)``).
    pub name: String,
    /// MethodDef token (0x06xxxxxx) of the method in the module that defines it, or the
    /// MemberRef token (0x0axxxxxx) an instantiation refers to.
    pub token: u32,
    pub entry: EntryKind,
    /// Whether fixups must be resolved before the code runs (the runtime may then refuse the
    /// code when a fixup fails; probes there never fire).
    pub has_fixups: bool,
    /// Index of the main body in RUNTIME_FUNCTIONS.
    pub runtime_function: u32,
    /// Entry point: RVA of the main body's first instruction.
    pub rva: Rva,
    /// Size of the main body in bytes (its RUNTIME_FUNCTION; funclets not included).
    pub size: u64,
    /// File offset of the entry point (via `formulas::pe_section`); `None` when not file-backed.
    pub file_offset: Option<FileOffset>,
    /// Funclets (exception handlers, filters, finally blocks) and cold parts that belong to the
    /// method, in RUNTIME_FUNCTIONS order.
    pub funclets: Vec<CodeRange>,
    /// Main body plus every funclet and cold part, in bytes.
    pub total_size: u64,
    /// For [`EntryKind::Instance`]: file position of the entry's signature (used by `details`).
    #[serde(skip)]
    pub instance_entry: Option<usize>,
}

impl R2rMethod {
    /// The method name alone (`Sleep`, `.ctor`), sliced from [`R2rMethod::name`].
    pub fn method_name(&self) -> &str {
        let head = self.name_head();
        head.rsplit_once("::").map_or(head, |(_, m)| m)
    }

    /// The owning type as printed (`System.Threading.Thread`, `Interop+Sys`,
    /// ``Dictionary`2[System.__Canon,System.__Canon]``), sliced from [`R2rMethod::name`].
    pub fn type_name(&self) -> &str {
        let head = self.name_head();
        let owner = head.rsplit_once("::").map_or("", |(o, _)| o);
        // After `[Assembly] `: the bracket followed by a space.
        owner.find("] ").map_or(owner, |i| &owner[i + 2..])
    }

    /// `Type::Method` without return type, assembly or parameters (what users type).
    pub fn short_name(&self) -> String {
        format!("{}::{}", self.type_name(), self.method_name())
    }

    /// The name up to the parameter list.
    fn name_head(&self) -> &str {
        let after = self.name.find("::").unwrap_or(0);
        match self.name[after..].find('(') {
            Some(i) => &self.name[..after + i],
            None => &self.name,
        }
    }
}

/// The structured description of one method, for argument decoding and display.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct MethodDetails {
    /// Namespace of the outermost owning type (`System.Threading`); empty for the global one.
    pub namespace: String,
    /// Owning type path without namespace, outermost first (`["Interop", "Sys"]`); for an
    /// instantiation the last element carries its type arguments.
    pub type_path: Vec<String>,
    /// Method name (`Sleep`, `.ctor`, `get_Length`).
    pub method_name: String,
    /// The declared signature: `has_this` (then `this` comes first), return and parameter types
    /// (use [`crate::dotnet::metadata::TypeSig::arg_kind`] to read them).
    pub signature: MethodSig,
    /// Parameter names from the Param table, in order; empty strings where unnamed.
    pub param_names: Vec<String>,
    /// For generic method instantiations: the method's own type arguments.
    pub method_instantiation: Vec<TypeSig>,
}
