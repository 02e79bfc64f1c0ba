//! .NET managed methods as a probe planner needs them: where a ReadyToRun method's arguments
//! and result are, from its signature ([`args`]), how its body can be left ([`exits`]), and
//! whether a type is a value type ([`owner_is_value_type`]).
//!
//! Managed code on Linux uses the platform's C convention with `this` first (dotnet/runtime
//! `docs/design/coreclr/botr/clr-abi.md`): System V on x64, AAPCS64 on arm64, see
//! [`crate::abi::ArchConventions`]. The architecture is the image's (its PE machine).

pub mod args;

use crate::addr::VirtAddr;
use crate::arch::Arch;
use crate::dotnet::metadata::table;
use crate::dotnet::{Assembly, EntryKind, MethodDetails, R2rMethod};
use crate::Result;

/// The JIT inlines callees of at most this many IL bytes almost always (RyuJIT's
/// `DEFAULT_ALWAYS_INLINE_SIZE`, `src/coreclr/jit/inline.h`); calls that are inlined never run
/// the precompiled code. Verified: `Thread.Sleep(int32)` has 7 bytes of IL on 3.1 and a direct
/// call to it from app code never hits; on .NET 8 it has 19 and every call hits.
pub const ALWAYS_INLINE_IL_BYTES: u32 = 16;

/// A hidden argument between `this` (or the start) and the declared parameters.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Hidden {
    /// None: the declared parameters follow `this` directly.
    None,
    /// Shared generic code of a generic method or a static method of a generic type: the
    /// instantiation (MethodDesc or MethodTable pointer) comes first (clr-abi.md, "Generics").
    GenericContext,
    /// Whether a hidden argument is there cannot be told from the signature; the text says why.
    Unknown(String),
}

/// Everything the layout needs about one method.
#[derive(Clone, Debug)]
pub struct MethodShape<'a> {
    pub details: &'a MethodDetails,
    /// The architecture the method was compiled for (the assembly's PE machine).
    pub arch: Arch,
    /// The method's name for notes (`System.String::Replace(string,string)`).
    pub display: String,
    /// `this` is a `System.String` (instance methods of `System.String`).
    pub this_is_string: bool,
    pub hidden: Hidden,
    /// How each parameter's type prints (`int32`, `valuetype System.TimeSpan`).
    pub param_types: Vec<String>,
    pub ret_type: String,
    /// The owning type's type arguments as the instantiation names them (`System.__Canon`,
    /// `System.Int32`); empty for non-generic owners.
    pub owner_type_args: Vec<String>,
}

/// The owned parts of a [`MethodShape`].
pub struct ShapeStorage {
    details: MethodDetails,
    arch: Arch,
    display: String,
    this_is_string: bool,
    hidden: Hidden,
    param_types: Vec<String>,
    ret_type: String,
    owner_type_args: Vec<String>,
}

impl ShapeStorage {
    /// The borrowed view [`args::entry_layout`] and [`args::return_type`] take.
    pub fn shape(&self) -> MethodShape<'_> {
        MethodShape {
            details: &self.details,
            arch: self.arch,
            display: self.display.clone(),
            this_is_string: self.this_is_string,
            hidden: self.hidden.clone(),
            param_types: self.param_types.clone(),
            ret_type: self.ret_type.clone(),
            owner_type_args: self.owner_type_args.clone(),
        }
    }
}

/// The shape of precompiled method `m` of `asm`: its signature, display name, whether `this` is a
/// `System.String`, and the hidden generic-context argument of shared generic code.
pub fn shape_of(asm: &Assembly, m: &R2rMethod) -> Result<ShapeStorage> {
    let details = asm.details(m)?;
    let machine = asm.pe().machine;
    let arch = Arch::of_pe_machine(machine).ok_or_else(|| {
        crate::Error::Unsupported(format!(
            "{}: PE machine 0x{machine:04x}, which netprobe has no calling convention for",
            m.name
        ))
    })?;
    let sig = &details.signature;
    let last = details.type_path.last().cloned().unwrap_or_default();
    let owner_type_args = args::owner_type_args(&last);
    let this_is_string = sig.has_this
        && details.namespace == "System"
        && details.type_path == ["String"]
        && asm.name() == Some("System.Private.CoreLib");
    // clr-abi.md "Generics": shared code needs the instantiation as a hidden argument unless
    // `this` carries it (instance methods of reference types).
    let shared = m.entry == EntryKind::Instance && m.name.contains("System.__Canon");
    let hidden = if !shared {
        Hidden::None
    } else if sig.generic_params > 0 || !sig.has_this {
        Hidden::GenericContext
    } else {
        let base = last.split('[').next().unwrap_or(&last);
        match owner_is_value_type(asm, &details.namespace, &details.type_path, base) {
            Some(false) => Hidden::None,
            Some(true) => Hidden::GenericContext,
            None => Hidden::Unknown(format!(
                "shared generic code of {base}: whether a hidden generic-context argument comes first depends on whether it is a struct, which netprobe could not tell"
            )),
        }
    };
    let param_types = sig.params.iter().map(|p| asm.type_text(p)).collect();
    let ret_type = asm.type_text(&sig.ret);
    let short = m.short_name();
    let params = m.name.rfind('(').map(|i| &m.name[i..]).unwrap_or_default();
    Ok(ShapeStorage {
        display: format!("{short}{params}"),
        details,
        arch,
        this_is_string,
        hidden,
        param_types,
        ret_type,
        owner_type_args,
    })
}

/// Whether the type named `namespace`/`path` (last element `name`, without type arguments) is a
/// value type, from its TypeDef's `Extends` (ECMA-335 II.22.37: value types extend
/// `System.ValueType` or `System.Enum`). `None` when it is not defined in `asm`, or ambiguous.
pub fn owner_is_value_type(
    asm: &Assembly,
    namespace: &str,
    path: &[String],
    name: &str,
) -> Option<bool> {
    let md = asm.metadata();
    let ns = if path.len() > 1 { "" } else { namespace };
    let mut answer = None;
    for rid in 1..=md.rows(table::TYPE_DEF) {
        let Some((_, n, tns)) = md.type_def(rid) else {
            continue;
        };
        if n != name || tns != ns {
            continue;
        }
        // Extends: TypeDefOrRef coded index, 2 tag bits (II.24.2.6): 0 TypeDef, 1 TypeRef.
        let v = md.cell(table::TYPE_DEF, rid, 3)?;
        let (base_ns, base_name) = match v & 3 {
            0 => md.type_def(v >> 2).map(|(_, n, ns)| (ns, n))?,
            1 => md.type_ref(v >> 2).map(|(_, n, ns)| (ns, n))?,
            _ => return None,
        };
        let is_vt = base_ns == "System" && (base_name == "ValueType" || base_name == "Enum");
        match answer {
            None => answer = Some(is_vt),
            Some(a) if a != is_vt => return None,
            _ => {}
        }
    }
    answer
}

/// How a method body can be left.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Exits {
    /// RVAs of its RET instructions.
    pub rets: Vec<u64>,
    /// Jumps out of the body: direct jumps to another method, and indirect jumps through memory
    /// (a ReadyToRun tail call goes through an import cell, `jmp [rip+X]`).
    pub tail_calls: usize,
}

/// The exits of the main body `code` of a method at `rva` (core `x86::scan`, plus indirect
/// jumps through memory, which a ReadyToRun tail call uses).
pub fn exits(code: &[u8], rva: u64) -> Exits {
    let scan = crate::arch::x86_64::scan(code, VirtAddr(rva));
    let indirect = crate::arch::x86_64::instructions(code, VirtAddr(rva))
        .filter(|i| {
            i.mnemonic() == iced_x86::Mnemonic::Jmp
                && i.flow_control() == iced_x86::FlowControl::IndirectBranch
                && i.op0_kind() == iced_x86::OpKind::Memory
        })
        .count();
    Exits {
        rets: scan.rets.iter().map(|r| r.0).collect(),
        tail_calls: scan.tail_jumps.len() + indirect,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn exits_of_a_small_method() {
        // push rbp; mov rbp,rsp; pop rbp; ret; jmp [rip+0x10]; ret
        let code = [
            0x55, 0x48, 0x8b, 0xec, 0x5d, 0xc3, 0xff, 0x25, 0x10, 0, 0, 0, 0xc3,
        ];
        let e = exits(&code, 0x1000);
        assert_eq!(e.rets, vec![0x1005, 0x100c]);
        assert_eq!(e.tail_calls, 1);
    }
}
