//! Method and type names exactly as the runtime and crossgen print them.
//!
//! crossgen's `/CreatePerfMap` map files (`fixtures/recorded/mapfiles/`) and the runtime's perf map / jitdump
//! (`/tmp/jit-PID.dump`) name a method `[instance ]RET [Assembly] Namespace.Type::Method(ARGS)`:
//! the owner type in reflection style (nested types joined by `+`, generic arguments in `[...]`),
//! the return and parameter types in ILDASM style (`int32`, `class [Asm]Ns.T`, `valuetype Ns.S`,
//! nested types joined by `/`, `!0`, `!!0`, `T&`, `T*`, `T[]`, `G`1<int32>`).
//! Verified against the .NET 8 runtime's `[PreJIT]` jitdump records (tests/dotnet_live_runtime.rs).
//!
//! Each style is one [`SigVisitor`] of the signature walk (ECMA-335 II.23.2,
//! `signature/walk.rs`): it prints straight from a signature's bytes (tens of thousands of
//! names, no [`TypeSig`] built) and prints a decoded [`TypeSig`] by replaying it.

use super::names::Names;
use super::signature::{
    replay_method, replay_type, walk_method, walk_type, ArrayShape, MethodHeader, SigVisitor,
    Wrapper,
};
use super::types::{MethodSig, TypeSig, TypeToken};
use super::SigReader;
use crate::name_budget::{too_long, MAX_NAME};
use std::fmt::Write;

/// Appends the decimal digits of `v`, as `write!(out, "{v}")` does without the formatting
/// machinery (generic parameter numbers: 20,000 in CoreLib's signatures, cost 4M instructions
/// through `write!`).
fn push_decimal(out: &mut String, v: u32) {
    let mut buf = [0u8; 20];
    for &d in crate::bytes::decimal(v.into(), &mut buf) {
        out.push(char::from(d));
    }
}

/// `!index` or `!!index`, in both styles.
fn push_generic_param(out: &mut String, of_method: bool, index: u32) {
    out.push_str(if of_method { "!!" } else { "!" });
    push_decimal(out, index);
}

/// Prints in ILDASM style (ILDASM `PrettyPrintSig`), as the runtime prints parameter and return
/// types: `[instance ]RET NAME(ARGS)` for a method, with `name` (and `[assembly] `) in the
/// middle; `*` there for a function pointer.
struct Ildasm<'n, 'o> {
    names: &'o Names<'n>,
    out: &'o mut String,
    name: &'o str,
    assembly: Option<&'o str>,
}

impl<'n, 'o> Ildasm<'n, 'o> {
    fn new(names: &'o Names<'n>, out: &'o mut String) -> Self {
        Ildasm {
            names,
            out,
            name: "",
            assembly: None,
        }
    }
}

impl SigVisitor for Ildasm<'_, '_> {
    type Type = ();
    type Method = ();

    fn before_type(&mut self) -> Result<(), String> {
        if too_long(self.out) {
            return Err(name_too_long());
        }
        Ok(())
    }

    fn primitive(&mut self, p: TypeSig) {
        // `__Canon` is the one primitive without an ILDASM keyword.
        self.out
            .push_str(p.primitive_name().unwrap_or("System.__Canon"));
    }

    fn named(&mut self, value_type: bool, ty: TypeToken) {
        self.out
            .push_str(if value_type { "valuetype " } else { "class " });
        self.names.token_name(ty, self.out);
    }

    fn generic_param(&mut self, of_method: bool, index: u32) {
        push_generic_param(self.out, of_method, index);
    }

    fn wrapped(&mut self, wrapper: Wrapper, _: ()) {
        match wrapper {
            Wrapper::Ptr => self.out.push('*'),
            Wrapper::ByRef => self.out.push('&'),
            Wrapper::SzArray => self.out.push_str("[]"),
            Wrapper::Pinned => self.out.push_str(" pinned"),
            Wrapper::Modified { required, modifier } => {
                self.out
                    .push_str(if required { " modreq(" } else { " modopt(" });
                self.names.token_name(modifier, self.out);
                self.out.push(')');
            }
        }
    }

    fn array(&mut self, _: (), shape: ArrayShape) {
        ildasm_array_shape(shape.rank, &shape.sizes, &shape.lower_bounds, self.out);
    }

    fn enter_generic_inst(&mut self, value_type: bool, generic: TypeToken) {
        self.named(value_type, generic);
        self.out.push('<');
    }

    fn before_generic_arg(&mut self, i: u32) {
        if i > 0 {
            self.out.push(',');
        }
    }

    fn generic_inst(&mut self, _: bool, _: TypeToken, _: Vec<()>) {
        self.out.push('>');
    }

    fn enter_fn_ptr(&mut self) {
        self.out.push_str("method ");
    }

    fn fn_ptr(&mut self, _: ()) {}

    fn enter_method(&mut self, header: &MethodHeader, _fn_ptr: bool) {
        if header.has_this {
            self.out.push_str("instance ");
        }
        if header.explicit_this {
            self.out.push_str("explicit ");
        }
        self.out.push_str(match header.calling_convention {
            1 => "unmanaged cdecl ",
            2 => "unmanaged stdcall ",
            3 => "unmanaged thiscall ",
            4 => "unmanaged fastcall ",
            5 => "vararg ",
            9 => "unmanaged ",
            _ => "",
        });
    }

    fn after_return(&mut self, fn_ptr: bool) {
        self.out.push(' ');
        if fn_ptr {
            self.out.push('*');
        } else {
            if let Some(asm) = self.assembly {
                self.out.push('[');
                self.out.push_str(asm);
                self.out.push_str("] ");
            }
            self.out.push_str(self.name);
        }
        self.out.push('(');
    }

    fn before_param(&mut self, i: u32, sentinel: bool) {
        if i > 0 {
            self.out.push(',');
        }
        if sentinel {
            self.out.push_str("...,");
        }
    }

    fn method(
        &mut self,
        _: MethodHeader,
        _: (),
        _: Vec<()>,
        _: Option<usize>,
        _: bool,
    ) -> Result<(), String> {
        self.out.push(')');
        if too_long(self.out) {
            return Err(name_too_long());
        }
        Ok(())
    }
}

/// Prints in reflection (TypeString) style, as the runtime prints the type arguments of a
/// method's owner: `System.Int32`, `Ns.Outer+Inner`, ``G`1[System.String]``, `T[]`, `T&`; a
/// function pointer is `(fnptr)`, nothing of it printed.
struct Reflection<'n, 'o> {
    names: &'o Names<'n>,
    out: &'o mut String,
    /// How many function pointers deep the walk is (nothing is printed there).
    in_fn_ptr: u32,
}

impl<'n, 'o> Reflection<'n, 'o> {
    fn new(names: &'o Names<'n>, out: &'o mut String) -> Self {
        Reflection {
            names,
            out,
            in_fn_ptr: 0,
        }
    }

    /// Where to print; `None` inside a function pointer.
    fn out(&mut self) -> Option<&mut String> {
        (self.in_fn_ptr == 0).then_some(&mut *self.out)
    }
}

impl SigVisitor for Reflection<'_, '_> {
    type Type = ();
    type Method = ();

    fn before_type(&mut self) -> Result<(), String> {
        match self.out() {
            Some(out) if too_long(out) => Err(name_too_long()),
            _ => Ok(()),
        }
    }

    fn primitive(&mut self, p: TypeSig) {
        if let Some(out) = self.out() {
            out.push_str(p.reflection_primitive_name().unwrap_or("?"));
        }
    }

    fn named(&mut self, _: bool, ty: TypeToken) {
        let names = self.names;
        if let Some(out) = self.out() {
            names.reflection_token(ty, out);
        }
    }

    fn generic_param(&mut self, of_method: bool, index: u32) {
        if let Some(out) = self.out() {
            push_generic_param(out, of_method, index);
        }
    }

    fn wrapped(&mut self, wrapper: Wrapper, _: ()) {
        if let Some(out) = self.out() {
            match wrapper {
                Wrapper::Ptr => out.push('*'),
                Wrapper::ByRef => out.push('&'),
                Wrapper::SzArray => out.push_str("[]"),
                Wrapper::Pinned | Wrapper::Modified { .. } => {}
            }
        }
    }

    fn array(&mut self, _: (), shape: ArrayShape) {
        if let Some(out) = self.out() {
            out.push('[');
            for _ in 1..shape.rank.min(64) {
                out.push(',');
            }
            out.push(']');
        }
    }

    fn enter_generic_inst(&mut self, _: bool, generic: TypeToken) {
        let names = self.names;
        if let Some(out) = self.out() {
            names.reflection_token(generic, out);
            out.push('[');
        }
    }

    fn before_generic_arg(&mut self, i: u32) {
        if let Some(out) = self.out() {
            if i > 0 {
                out.push(',');
            }
        }
    }

    fn generic_inst(&mut self, _: bool, _: TypeToken, _: Vec<()>) {
        if let Some(out) = self.out() {
            out.push(']');
        }
    }

    fn enter_fn_ptr(&mut self) {
        self.in_fn_ptr += 1;
    }

    fn fn_ptr(&mut self, _: ()) {
        self.in_fn_ptr -= 1;
        if let Some(out) = self.out() {
            out.push_str("(fnptr)");
        }
    }

    fn method(
        &mut self,
        _: MethodHeader,
        _: (),
        _: Vec<()>,
        _: Option<usize>,
        _: bool,
    ) -> Result<(), String> {
        Ok(())
    }
}

impl Names<'_> {
    /// `sig` in ILDASM style, as the runtime prints parameter and return types.
    pub fn ildasm(&self, sig: &TypeSig, out: &mut String) {
        replay_type(sig, &mut Ildasm::new(self, out));
    }

    /// `sig` in reflection (TypeString) style, as the runtime prints the type arguments of a
    /// method's owner: `System.Int32`, `Ns.Outer+Inner`, ``G`1[System.String]``, `T[]`, `T&`.
    pub fn reflection(&self, sig: &TypeSig, out: &mut String) {
        replay_type(sig, &mut Reflection::new(self, out));
    }

    /// `[instance ]RET NAME(ARGS)` for a method signature, with `name` in the middle
    /// (ILDASM `PrettyPrintSig`).
    pub fn method_sig_text(&self, sig: &MethodSig, name: &str, out: &mut String) {
        let mut v = Ildasm::new(self, out);
        v.name = name;
        replay_method(sig, &mut v, false);
    }

    /// `(ARGS)`: parameter types in ILDASM style, comma-separated without spaces; `...` marks
    /// the vararg sentinel.
    pub fn params_text(&self, sig: &MethodSig, out: &mut String) {
        out.push('(');
        let mut v = Ildasm::new(self, out);
        for (i, p) in (0u32..).zip(&sig.params) {
            v.before_param(i, sig.sentinel == Some(i as usize));
            replay_type(p, &mut v);
        }
        out.push(')');
    }

    /// Formats one type straight from signature bytes, exactly like [`Names::ildasm`] of the
    /// decoded [`TypeSig`] (no intermediate allocation: used to name tens of thousands of methods).
    /// `Err(what)` on a malformed signature.
    pub fn ildasm_from_sig(
        &self,
        r: &mut SigReader<'_>,
        out: &mut String,
        depth: u32,
    ) -> Result<(), String> {
        walk_type(r, &mut Ildasm::new(self, out), depth)
    }

    /// Formats one type straight from signature bytes like [`Names::reflection`] of the decoded
    /// [`TypeSig`]. `Err(what)` on a malformed signature.
    pub fn reflection_from_sig(
        &self,
        r: &mut SigReader<'_>,
        out: &mut String,
        depth: u32,
    ) -> Result<(), String> {
        walk_type(r, &mut Reflection::new(self, out), depth)
    }

    /// Formats a method signature straight from its bytes like [`Names::method_sig_text`]
    /// (`[instance ]RET NAME(ARGS)`), where NAME is `name`, optionally preceded by
    /// `[assembly] `. `Err(what)` on a malformed signature.
    pub fn method_from_sig(
        &self,
        r: &mut SigReader<'_>,
        name: &str,
        assembly: Option<&str>,
        out: &mut String,
        depth: u32,
    ) -> Result<(), String> {
        let mut v = Ildasm {
            names: self,
            out,
            name,
            assembly,
        };
        walk_method(r, &mut v, depth, false)
    }
}

/// The refusal of a composed name longer than [`MAX_NAME`].
pub(crate) fn name_too_long() -> String {
    format!(
        "a method's name would be longer than {MAX_NAME} bytes (its signature names long types many times)"
    )
}

/// ILDASM's array shape: `[...]` for rank 1 without bounds, else per dimension `lo...hi`,
/// `lo...`, `size` or nothing, comma-separated (ILDASM formattype.cpp behaviour, as C#'s
/// `int[,]` prints `int32[0...,0...]`).
fn ildasm_array_shape(rank: u32, sizes: &[u32], lower_bounds: &[i32], out: &mut String) {
    out.push('[');
    if rank == 1 && sizes.is_empty() && lower_bounds.is_empty() {
        out.push_str("...");
    } else {
        for i in 0..rank.min(64) as usize {
            let lo = lower_bounds.get(i).copied();
            let size = sizes.get(i).copied();
            match (lo, size) {
                // No lower bound (or 0) and a size: the size alone.
                (None | Some(0), Some(sz)) => {
                    let _ = write!(out, "{sz}");
                }
                // A lower bound: `lo...`, then the upper bound when the size is known.
                (Some(lo), sz) => {
                    let _ = write!(out, "{lo}...");
                    if let Some(sz) = sz {
                        let _ = write!(out, "{}", i64::from(lo) + i64::from(sz) - 1);
                    }
                }
                (None, None) => {}
            }
            if i + 1 < rank as usize {
                out.push(',');
            }
        }
    }
    out.push(']');
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::dotnet::metadata::signature::decode::tests::{enc_method, enc_type, type_sig};
    use proptest::prelude::*;

    proptest! {
        /// `push_decimal` appends what `write!` would.
        #[test]
        fn decimal_as_write_writes_it(v in prop_oneof![0u32..100, any::<u32>()], prefix in "[a-z!]{0,3}") {
            let mut got = prefix.clone();
            push_decimal(&mut got, v);
            prop_assert_eq!(got, format!("{prefix}{v}"));
        }
    }

    fn shape(rank: u32, sizes: &[u32], lo: &[i32]) -> String {
        let mut s = String::new();
        ildasm_array_shape(rank, sizes, lo, &mut s);
        s
    }

    /// ILDASM's array shapes: C# `int[,]` is rank 2 with two zero lower bounds.
    #[test]
    fn array_shapes() {
        assert_eq!(shape(2, &[], &[0, 0]), "[0...,0...]");
        assert_eq!(shape(1, &[], &[]), "[...]");
        assert_eq!(shape(2, &[], &[]), "[,]");
        assert_eq!(shape(2, &[3, 4], &[]), "[3,4]");
        assert_eq!(shape(1, &[3], &[1]), "[1...3]");
        assert_eq!(shape(3, &[], &[0, 0, 0]), "[0...,0...,0...]");
    }

    /// Metadata with no rows: every token prints as its unreadable form, the same on both paths.
    fn empty_metadata() -> (crate::dotnet::metadata::MetadataLayout, Vec<u8>) {
        let mut md = Vec::new();
        md.extend(0x424a_5342u32.to_le_bytes()); // BSJB
        md.extend([1, 0, 1, 0, 0, 0, 0, 0]); // version 1.1, reserved
        md.extend(4u32.to_le_bytes());
        md.extend(*b"v4\0\0");
        md.extend([0, 0, 1, 0]); // flags, one stream
        md.extend(36u32.to_le_bytes()); // #~ at 36
        md.extend(24u32.to_le_bytes()); // 24 bytes
        md.extend(*b"#~\0\0");
        md.extend([0u8; 24]); // no heaps wide, no tables
        let layout = crate::dotnet::metadata::MetadataLayout::parse(&md).unwrap();
        (layout, md)
    }

    proptest! {
        /// A name printed straight from a signature's bytes is the name printed from its
        /// decoded form: both are one walk into one printer.
        #[test]
        fn bytes_and_decoded_signatures_print_alike(
            has_this in any::<bool>(),
            ret in type_sig(),
            params in proptest::collection::vec(type_sig(), 0..4),
        ) {
            let (layout, bytes) = empty_metadata();
            let names = Names {
                md: crate::dotnet::metadata::Metadata::new(&layout, &bytes),
                enclosing: &[],
                foreign: None,
                type_names: None,
            };
            for t in params.iter().chain([&ret]) {
                let mut enc = Vec::new();
                enc_type(t, &mut enc);
                let (mut from_bytes, mut decoded) = (String::new(), String::new());
                let mut r = SigReader::new(&enc);
                names.ildasm_from_sig(&mut r, &mut from_bytes, 0).unwrap();
                names.ildasm(t, &mut decoded);
                prop_assert_eq!(&from_bytes, &decoded);
                let (mut from_bytes, mut decoded) = (String::new(), String::new());
                let mut r = SigReader::new(&enc);
                names.reflection_from_sig(&mut r, &mut from_bytes, 0).unwrap();
                names.reflection(t, &mut decoded);
                prop_assert_eq!(&from_bytes, &decoded);
            }
            let m = MethodSig {
                has_this,
                explicit_this: false,
                calling_convention: 0,
                generic_params: 0,
                ret,
                params,
                sentinel: None,
            };
            let mut enc = Vec::new();
            enc_method(&m, &mut enc);
            let (mut from_bytes, mut decoded) = (String::new(), String::new());
            let mut r = SigReader::new(&enc);
            names.method_from_sig(&mut r, "T::M", None, &mut from_bytes, 0).unwrap();
            names.method_sig_text(&m, "T::M", &mut decoded);
            prop_assert_eq!(from_bytes, decoded);
        }
    }

    #[test]
    fn primitives_and_constructed_types_print_like_ildasm() {
        let layout = super::super::MetadataLayout::parse(&[]).err();
        assert!(layout.is_some(), "empty metadata is rejected");
        // Primitive names need no metadata.
        assert_eq!(TypeSig::U.primitive_name(), Some("native uint"));
        assert_eq!(TypeSig::R8.primitive_name(), Some("float64"));
        assert_eq!(TypeSig::U1.primitive_name(), Some("uint8"));
        assert_eq!(
            TypeSig::Char.reflection_primitive_name(),
            Some("System.Char")
        );
        assert_eq!(
            TypeSig::Canon.reflection_primitive_name(),
            Some("System.__Canon")
        );
    }
}
