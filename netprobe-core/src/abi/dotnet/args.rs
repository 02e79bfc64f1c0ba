//! Where a managed method's arguments and return value are at a probe, from its signature.
//!
//! Sources: dotnet/runtime `docs/design/coreclr/botr/clr-abi.md` ("Special/extra parameters":
//! `this` always comes first; then the optional return buffer, then the generic context, then the
//! declared arguments; "Return buffers": on ARM64 the buffer is passed in x8 instead, so it
//! takes no argument register) and the platform's C convention, the image's architecture's
//! ([`ArchConventions`]): System V AMD64 (integer class in rdi, rsi, rdx, rcx, r8, r9;
//! float/double in xmm0..7, which take no integer register; structs by their size and fields;
//! results in rax (rdx), floats in xmm0) or AAPCS64 (x0..x7; floats in v0..v7; results in x0,
//! floats in v0). Verified on this kernel: a fetch-arg naming `%xmm0` is refused ("Invalid
//! register name"), so float arguments cannot be shown; arm64's register table
//! (`arch/arm64/kernel/ptrace.c`) has no v registers either.

use super::{Hidden, MethodShape};
use crate::abi::{ArchConventions, IntType, ValueType};
use crate::dotnet::metadata::{ArgKind, TypeSig};
#[cfg(test)]
use crate::dotnet::MethodDetails;

/// One argument of a layout: its field name and type, in calling-convention order.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct NamedArg {
    pub name: String,
    pub ty: ValueType,
}

/// The arguments to fetch at entry, and why some are not shown.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Layout {
    pub args: Vec<NamedArg>,
    pub notes: Vec<String>,
}

/// How a value of `kind` is fetched from one integer register; `None` for kinds that are not one
/// integer register (floats, structs, unresolved generic parameters).
fn register_type(kind: ArgKind) -> Option<ValueType> {
    Some(match kind {
        ArgKind::Bool => ValueType::Int(IntType::U8),
        ArgKind::Char => ValueType::Int(IntType::U16),
        ArgKind::Int { bits, signed } => ValueType::Int(match (bits, signed) {
            (8, true) => IntType::S8,
            (8, false) => IntType::U8,
            (16, true) => IntType::S16,
            (16, false) => IntType::U16,
            (32, true) => IntType::S32,
            (32, false) => IntType::U32,
            (_, true) => IntType::S64,
            (_, false) => IntType::U64,
        }),
        ArgKind::String => ValueType::DotnetString,
        ArgKind::ObjectRef | ArgKind::Pointer => ValueType::Int(IntType::X64),
        ArgKind::Float { .. } | ArgKind::ValueType | ArgKind::GenericParam | ArgKind::Void => {
            return None
        }
    })
}

/// The kind of a reflection-style type name as instantiations print them (`System.Int32`,
/// `System.__Canon`); `None` for anything else (a struct, or a type netprobe cannot size).
fn kind_of_type_arg(name: &str) -> Option<ArgKind> {
    let kind = match name {
        "System.__Canon" | "System.String" | "System.Object" => {
            if name == "System.String" {
                ArgKind::String
            } else {
                ArgKind::ObjectRef
            }
        }
        "System.Boolean" => ArgKind::Bool,
        "System.Char" => ArgKind::Char,
        "System.SByte" => ArgKind::Int {
            bits: 8,
            signed: true,
        },
        "System.Byte" => ArgKind::Int {
            bits: 8,
            signed: false,
        },
        "System.Int16" => ArgKind::Int {
            bits: 16,
            signed: true,
        },
        "System.UInt16" => ArgKind::Int {
            bits: 16,
            signed: false,
        },
        "System.Int32" => ArgKind::Int {
            bits: 32,
            signed: true,
        },
        "System.UInt32" => ArgKind::Int {
            bits: 32,
            signed: false,
        },
        "System.Int64" | "System.IntPtr" => ArgKind::Int {
            bits: 64,
            signed: true,
        },
        "System.UInt64" | "System.UIntPtr" => ArgKind::Int {
            bits: 64,
            signed: false,
        },
        "System.Single" => ArgKind::Float { bits: 32 },
        "System.Double" => ArgKind::Float { bits: 64 },
        n if n.ends_with("[]") => ArgKind::ObjectRef,
        _ => return None,
    };
    Some(kind)
}

/// The kind of `t` in this method, generic parameters replaced by their instantiation when it is
/// known (`!0` of ``List`1[System.__Canon]`` is an object reference).
fn resolved_kind(shape: &MethodShape<'_>, t: &TypeSig) -> ArgKind {
    match t.unmodified() {
        TypeSig::Var { index } => shape
            .owner_type_args
            .get(*index as usize)
            .and_then(|a| kind_of_type_arg(a))
            .unwrap_or(ArgKind::GenericParam),
        TypeSig::MVar { index } => shape
            .details
            .method_instantiation
            .get(*index as usize)
            .map(|m| resolved_kind(shape, m))
            .unwrap_or(ArgKind::GenericParam),
        other => other.arg_kind(),
    }
}

/// A fetch-arg name from a parameter name: ASCII letters, digits and `_`, not starting with a
/// digit, not clashing with the kernel's common fields or netprobe's own (`np_*`), at most 24
/// characters (the kernel allows 32, and strings add `_len`); `fallback` when nothing is left.
pub fn field_name(param: &str, fallback: &str) -> String {
    let mut s: String = param
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || c == '_' {
                c
            } else {
                '_'
            }
        })
        .take(24)
        .collect();
    if s.trim_matches('_').is_empty() {
        s = fallback.to_string();
    }
    if s.starts_with(|c: char| c.is_ascii_digit())
        || s.starts_with("common_")
        || s.starts_with("np_")
        || s == "ret"
    {
        s = format!("a_{s}");
        s.truncate(24);
    }
    s
}

/// Names unique among the fields they produce (a string `s` also makes `s_len`).
struct Names(Vec<String>);

impl Names {
    fn take(&mut self, wanted: String, ty: ValueType) -> String {
        let fields = |n: &str| -> Vec<String> {
            match ty {
                ValueType::DotnetString | ValueType::GoString => {
                    vec![n.to_string(), format!("{n}_len")]
                }
                _ => vec![n.to_string()],
            }
        };
        let mut name = wanted.clone();
        let mut k = 2;
        while fields(&name).iter().any(|f| self.0.contains(f)) {
            name = format!("{wanted}_{k}");
            k += 1;
        }
        self.0.extend(fields(&name));
        name
    }
}

/// The entry arguments of a method: `this` first, then a hidden generic context if any, then the
/// declared parameters by register. Stops (with a note) where the registers can no longer be
/// told: a struct passed by value, an unresolved generic parameter, a possible hidden return
/// buffer (x64; arm64 passes it in x8), or more float arguments than float registers (their
/// stack slots would shift the rest). Float parameters take no integer register; they are
/// skipped with a note.
pub fn entry_layout(shape: &MethodShape<'_>) -> Layout {
    let conv = ArchConventions::of(shape.arch);
    let d = shape.details;
    let sig = &d.signature;
    let mut out = Layout::default();
    let mut names = Names(Vec::new());
    let mut used = 0usize;
    let mut floats = 0usize;
    let push = |out: &mut Layout, names: &mut Names, used: &mut usize, name: String, ty| {
        let name = names.take(name, ty);
        out.args.push(NamedArg { name, ty });
        *used += 1;
    };
    if sig.has_this && !sig.explicit_this {
        let ty = if shape.this_is_string {
            ValueType::DotnetString
        } else {
            ValueType::Int(IntType::X64)
        };
        push(&mut out, &mut names, &mut used, "this".into(), ty);
    }
    // A struct result may come back through a hidden buffer argument (System V: structs over 16
    // bytes); its size is not in the signature. On arm64 the buffer has a register of its own.
    let ret_kind = resolved_kind(shape, &sig.ret);
    if matches!(ret_kind, ArgKind::ValueType | ArgKind::GenericParam)
        && conv.dotnet_return_buffer.is_none()
    {
        if !sig.params.is_empty() {
            out.notes.push(format!(
                "{}: arguments after `this` are not shown: the struct result ({}) may be returned through a hidden buffer argument that shifts the registers",
                shape.display, shape.ret_type
            ));
        }
        return out;
    }
    match &shape.hidden {
        Hidden::None => {}
        Hidden::GenericContext => push(
            &mut out,
            &mut names,
            &mut used,
            "generic_ctx".into(),
            ValueType::Int(IntType::X64),
        ),
        Hidden::Unknown(why) => {
            if !sig.params.is_empty() {
                out.notes.push(format!(
                    "{}: arguments after `this` are not shown: {why}",
                    shape.display
                ));
            }
            return out;
        }
    }
    for (i, p) in sig.params.iter().enumerate() {
        let pname = d.param_names.get(i).map(String::as_str).unwrap_or("");
        let type_text = shape
            .param_types
            .get(i)
            .cloned()
            .unwrap_or_else(|| "?".into());
        let label = if pname.is_empty() {
            format!("argument {i}")
        } else {
            pname.to_string()
        };
        let kind = resolved_kind(shape, p);
        if let ArgKind::Float { .. } = kind {
            floats += 1;
            out.notes.push(format!(
                "{}: {label} ({type_text}) is passed in {}, which uprobe fetch-args cannot read (the kernel accepts only general-purpose registers); not shown",
                shape.display, conv.float_registers
            ));
            continue;
        }
        let Some(ty) = register_type(kind) else {
            let why = match kind {
                ArgKind::ValueType => "a struct passed by value: its size and fields decide which registers it and the arguments after it take",
                _ => "a generic parameter whose instantiation is not known here",
            };
            out.notes.push(format!(
                "{}: arguments from {label} ({type_text}) on are not shown: {why}",
                shape.display
            ));
            return out;
        };
        // Past the last integer register the argument is in its caller's stack slot, in
        // order (System V AMD64 ABI 3.2.3, AAPCS64, which CoreCLR follows on Unix); the planner
        // reads it at `+8(%sp)`, `+16(%sp)`, ... (x64) or `+0(%sp)`, ... (arm64) at the method's
        // first byte. Floats past the last float register would take stack slots too and shift
        // the order: stop there.
        if used >= conv.c_arguments.len() && floats > conv.c_float_arguments {
            out.notes.push(format!(
                "{}: arguments from {label} on are passed on the stack after more than {} float arguments, whose slots netprobe does not place; not shown",
                shape.display, conv.c_float_arguments
            ));
            return out;
        }
        push(
            &mut out,
            &mut names,
            &mut used,
            field_name(pname, &format!("arg{i}")),
            ty,
        );
    }
    out
}

/// How the return value reads at a RET instruction: `Ok(Some(type))` from rax (x0 on arm64),
/// `Ok(None)` for `void`, `Err(note)` when it cannot be read (a float in xmm0 or v0, a struct).
pub fn return_type(shape: &MethodShape<'_>) -> Result<Option<ValueType>, String> {
    let kind = resolved_kind(shape, &shape.details.signature.ret);
    match kind {
        ArgKind::Void => Ok(None),
        ArgKind::Float { .. } => Err(format!(
            "{}: the return value ({}) is in {}, which uprobes cannot read; returns are shown without it",
            shape.display,
            shape.ret_type,
            ArchConventions::of(shape.arch).float_result
        )),
        ArgKind::ValueType | ArgKind::GenericParam => Err(format!(
            "{}: the return value ({}) is a struct whose layout decides the registers; returns are shown without it",
            shape.display, shape.ret_type
        )),
        k => Ok(register_type(k)),
    }
}

/// The type arguments of an instantiated owner as printed in a type path element
/// (``Dictionary`2[System.__Canon,System.Int32]`` → `["System.__Canon", "System.Int32"]`), split
/// at top-level commas; empty when the element has none.
pub fn owner_type_args(last_type: &str) -> Vec<String> {
    let Some(open) = last_type.find('[') else {
        return Vec::new();
    };
    let Some(inner) = last_type.get(open + 1..).and_then(|s| s.strip_suffix(']')) else {
        return Vec::new();
    };
    let mut out = Vec::new();
    let mut depth = 0i32;
    let mut cur = String::new();
    for c in inner.chars() {
        match c {
            '[' => depth += 1,
            ']' => depth -= 1,
            ',' if depth == 0 => {
                out.push(std::mem::take(&mut cur));
                continue;
            }
            _ => {}
        }
        cur.push(c);
    }
    if !cur.is_empty() {
        out.push(cur);
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::dotnet::metadata::MethodSig;

    fn details(
        has_this: bool,
        ret: TypeSig,
        params: Vec<TypeSig>,
        names: &[&str],
    ) -> MethodDetails {
        MethodDetails {
            namespace: "System".into(),
            type_path: vec!["T".into()],
            method_name: "M".into(),
            signature: MethodSig {
                has_this,
                explicit_this: false,
                calling_convention: 0,
                generic_params: 0,
                ret,
                params,
                sentinel: None,
            },
            param_names: names.iter().map(|s| s.to_string()).collect(),
            method_instantiation: vec![],
        }
    }

    fn shape(d: &MethodDetails) -> MethodShape<'_> {
        MethodShape {
            details: d,
            arch: crate::arch::Arch::X86_64,
            display: "T::M".into(),
            this_is_string: false,
            hidden: Hidden::None,
            param_types: d.signature.params.iter().map(|_| "t".into()).collect(),
            ret_type: "r".into(),
            owner_type_args: vec![],
        }
    }

    fn names_types(l: &Layout) -> Vec<(String, ValueType)> {
        l.args.iter().map(|a| (a.name.clone(), a.ty)).collect()
    }

    #[test]
    fn string_replace_decodes_this_and_both_strings() {
        let d = details(
            true,
            TypeSig::String,
            vec![TypeSig::String, TypeSig::String],
            &["oldValue", "newValue"],
        );
        let mut s = shape(&d);
        s.this_is_string = true;
        let l = entry_layout(&s);
        assert_eq!(
            names_types(&l),
            [
                ("this".into(), ValueType::DotnetString),
                ("oldValue".into(), ValueType::DotnetString),
                ("newValue".into(), ValueType::DotnetString)
            ]
        );
        assert!(l.notes.is_empty());
        assert_eq!(return_type(&s), Ok(Some(ValueType::DotnetString)));
    }

    #[test]
    fn floats_take_no_integer_register() {
        let d = details(
            false,
            TypeSig::Void,
            vec![TypeSig::R8, TypeSig::I4, TypeSig::Boolean],
            &["x", "n", "flag"],
        );
        let l = entry_layout(&shape(&d));
        assert_eq!(
            names_types(&l),
            [
                ("n".into(), ValueType::Int(IntType::S32)),
                ("flag".into(), ValueType::Int(IntType::U8))
            ]
        );
        assert!(l.notes[0].contains("XMM"), "{:?}", l.notes);
        assert_eq!(return_type(&shape(&d)), Ok(None));
    }

    #[test]
    fn a_struct_stops_the_layout() {
        let tok = crate::dotnet::metadata::TypeToken {
            module: 0,
            table: 1,
            rid: 1,
        };
        let d = details(
            false,
            TypeSig::Void,
            vec![TypeSig::I8, TypeSig::ValueType { ty: tok }, TypeSig::I4],
            &["a", "span", "b"],
        );
        let l = entry_layout(&shape(&d));
        assert_eq!(names_types(&l).len(), 1);
        assert!(l.notes[0].contains("from span"), "{:?}", l.notes);
        // A struct result may add a hidden buffer argument: only `this` is shown.
        let d = details(
            true,
            TypeSig::ValueType { ty: tok },
            vec![TypeSig::I4],
            &["a"],
        );
        let l = entry_layout(&shape(&d));
        assert_eq!(
            names_types(&l),
            [("this".into(), ValueType::Int(IntType::X64))]
        );
        assert!(return_type(&shape(&d)).is_err());
    }

    #[test]
    fn arguments_past_the_sixth_register_are_kept_for_the_stack() {
        let d = details(true, TypeSig::Void, vec![TypeSig::I4; 7], &[]);
        let l = entry_layout(&shape(&d));
        // this + 7: the planner reads the 7th and 8th words from the stack.
        assert_eq!(l.args.len(), 8);
        assert!(l.notes.is_empty(), "{:?}", l.notes);
        let mut params = vec![TypeSig::R8; 9];
        params.extend(vec![TypeSig::I4; 7]);
        let l = entry_layout(&shape(&details(true, TypeSig::Void, params, &[])));
        assert_eq!(l.args.len(), 6);
        assert!(
            l.notes.iter().any(|n| n.contains("float arguments")),
            "{:?}",
            l.notes
        );
    }

    /// linux-arm64 (clr-abi.md "Return buffers": the buffer is in x8): a struct result shifts
    /// no argument, and floats are in v registers, which a fetch-arg cannot read.
    #[test]
    fn arm64_keeps_arguments_after_a_struct_result_and_names_v_registers() {
        let tok = crate::dotnet::metadata::TypeToken {
            module: 0,
            table: 1,
            rid: 1,
        };
        let d = details(
            true,
            TypeSig::ValueType { ty: tok },
            vec![TypeSig::I4, TypeSig::R8, TypeSig::String],
            &["a", "x", "s"],
        );
        let mut s = shape(&d);
        s.arch = crate::arch::Arch::Aarch64;
        let l = entry_layout(&s);
        assert_eq!(
            names_types(&l),
            [
                ("this".into(), ValueType::Int(IntType::X64)),
                ("a".into(), ValueType::Int(IntType::S32)),
                ("s".into(), ValueType::DotnetString)
            ]
        );
        assert_eq!(l.notes.len(), 1, "{:?}", l.notes);
        assert!(
            l.notes[0].contains("SIMD&FP register (v0-v7)"),
            "{:?}",
            l.notes
        );
        assert!(return_type(&s).is_err());
        let f = details(false, TypeSig::R8, vec![], &[]);
        let mut s = shape(&f);
        s.arch = crate::arch::Arch::Aarch64;
        assert!(return_type(&s).unwrap_err().contains("is in v0"));
    }

    #[test]
    fn generic_parameters_follow_the_instantiation() {
        let d = details(
            true,
            TypeSig::Void,
            vec![TypeSig::Var { index: 1 }],
            &["value"],
        );
        let mut s = shape(&d);
        s.owner_type_args = owner_type_args("Dictionary`2[System.__Canon,System.Int32]");
        assert_eq!(s.owner_type_args, ["System.__Canon", "System.Int32"]);
        let l = entry_layout(&s);
        assert_eq!(
            names_types(&l)[1],
            ("value".into(), ValueType::Int(IntType::S32))
        );
        s.hidden = Hidden::GenericContext;
        let l = entry_layout(&s);
        assert_eq!(names_types(&l)[1].0, "generic_ctx");
    }

    #[test]
    fn names_are_safe_and_unique() {
        assert_eq!(field_name("wörld", "a0"), "w_rld");
        assert_eq!(field_name("", "arg3"), "arg3");
        assert_eq!(field_name("common_pid", "x"), "a_common_pid");
        let d = details(
            false,
            TypeSig::Void,
            vec![TypeSig::String, TypeSig::I4, TypeSig::I4],
            &["s", "s_len", "s"],
        );
        let n: Vec<String> = names_types(&entry_layout(&shape(&d)))
            .into_iter()
            .map(|(n, _)| n)
            .collect();
        assert_eq!(n, ["s", "s_len_2", "s_2"]);
    }
}
