//! The one walk of the signature grammar, ECMA-335 II.23.2: `MethodDefSig`, `MethodRefSig` and
//! `StandAloneMethodSig` (II.23.2.1-3, the first byte's calling convention, II.15.3), `Type`
//! (II.23.2.12, element types II.23.1.16), `ArrayShape` (II.23.2.13), `CustomMod` (II.23.2.7),
//! `TypeDefOrRefOrSpecEncoded` (II.23.2.8), plus ReadyToRun's element types
//! (dotnet/runtime `src/coreclr/inc/corcompile.h`: `ELEMENT_TYPE_CANON_ZAPSIG` 0x3e,
//! `ELEMENT_TYPE_MODULE_ZAPSIG` 0x3f, `ELEMENT_TYPE_NATIVE_VALUETYPE_ZAPSIG` 0x3d).
//!
//! Every reader of signature bytes walks them here: decoding to [`TypeSig`], skipping a type,
//! and naming types and methods straight from the bytes. The walk owns the grammar, the bounds
//! checks, the nesting limit and the error texts, so that all of them agree on what a
//! malformed signature is; a [`SigVisitor`] says what each element becomes. A decoded
//! [`TypeSig`] replays the same events ([`replay_type`]), so a name printed from a decoded
//! signature and one printed from its bytes come from the same visitor.

use super::SigReader;
use crate::bytes::us;
use crate::dotnet::metadata::types::{MethodSig, TypeSig, TypeToken};

/// Maximum nesting of types inside one signature; deeper input is rejected (a crafted signature
/// must not overflow the stack).
const MAX_DEPTH: u32 = 64;

/// A type made of one other type.
#[derive(Clone, Copy, Debug)]
pub(crate) enum Wrapper {
    /// `T*` (`ELEMENT_TYPE_PTR`).
    Ptr,
    /// `T&` (`ELEMENT_TYPE_BYREF`).
    ByRef,
    /// `T[]` (`ELEMENT_TYPE_SZARRAY`).
    SzArray,
    /// `T pinned` (`ELEMENT_TYPE_PINNED`).
    Pinned,
    /// `T modreq(M)` / `T modopt(M)` (`CustomMod`, II.23.2.7).
    Modified { required: bool, modifier: TypeToken },
}

/// A general array's shape (II.23.2.13).
pub(crate) struct ArrayShape {
    pub rank: u32,
    pub sizes: Vec<u32>,
    pub lower_bounds: Vec<i32>,
}

/// A method signature's first byte and generic parameter count (II.23.2.1).
#[derive(Clone, Copy)]
pub(crate) struct MethodHeader {
    /// `HASTHIS` (0x20).
    pub has_this: bool,
    /// `EXPLICITTHIS` (0x40).
    pub explicit_this: bool,
    /// The low 4 bits: default, vararg or an unmanaged convention.
    pub calling_convention: u8,
    /// `GENERIC` (0x10)'s parameter count; 0 otherwise.
    pub generic_params: u32,
}

/// What a signature's elements become. The walk calls the `enter_*`/`before_*` hooks in byte
/// order before an element's parts (for printers, which write prefixes), and the others with
/// the element's parts once they are read.
pub(crate) trait SigVisitor {
    /// What one type becomes.
    type Type;
    /// What one method signature becomes.
    type Method;

    /// Before each type is read; an `Err` stops the walk with it.
    fn before_type(&mut self) -> Result<(), String> {
        Ok(())
    }
    /// A primitive ([`TypeSig::primitive_name`]'s types, and [`TypeSig::Canon`]).
    fn primitive(&mut self, p: TypeSig) -> Self::Type;
    /// `class T` (`value_type` false) or `valuetype T`.
    fn named(&mut self, value_type: bool, ty: TypeToken) -> Self::Type;
    /// `!index` (`of_method` false) or `!!index`.
    fn generic_param(&mut self, of_method: bool, index: u32) -> Self::Type;
    fn wrapped(&mut self, wrapper: Wrapper, inner: Self::Type) -> Self::Type;
    fn array(&mut self, of: Self::Type, shape: ArrayShape) -> Self::Type;
    /// Before the arguments of a generic instantiation.
    fn enter_generic_inst(&mut self, _value_type: bool, _generic: TypeToken) {}
    /// Before generic argument `i`.
    fn before_generic_arg(&mut self, _i: u32) {}
    fn generic_inst(
        &mut self,
        value_type: bool,
        generic: TypeToken,
        args: Vec<Self::Type>,
    ) -> Self::Type;
    /// Before a function pointer's method signature.
    fn enter_fn_ptr(&mut self) {}
    fn fn_ptr(&mut self, sig: Self::Method) -> Self::Type;
    /// After a method signature's header, before its return type; `fn_ptr` when it is a
    /// function pointer's.
    fn enter_method(&mut self, _header: &MethodHeader, _fn_ptr: bool) {}
    /// After the return type.
    fn after_return(&mut self, _fn_ptr: bool) {}
    /// Before parameter `i`; `sentinel` when the vararg `SENTINEL` (0x41) stood before it.
    fn before_param(&mut self, _i: u32, _sentinel: bool) {}
    fn method(
        &mut self,
        header: MethodHeader,
        ret: Self::Type,
        params: Vec<Self::Type>,
        sentinel: Option<usize>,
        fn_ptr: bool,
    ) -> Result<Self::Method, String>;
}

/// The primitive an element type byte stands for, alone (II.23.1.16, and `CANON_ZAPSIG`).
fn primitive(et: u8) -> Option<TypeSig> {
    Some(match et {
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
        0x16 => TypeSig::TypedByRef,
        0x18 => TypeSig::I,
        0x19 => TypeSig::U,
        0x1c => TypeSig::Object,
        0x3e => TypeSig::Canon,
        _ => return None,
    })
}

/// Walks one type (II.23.2.12), including custom modifiers, `BYREF` and `TYPEDBYREF`, `depth`
/// types deep.
pub(crate) fn walk_type<V: SigVisitor>(
    r: &mut SigReader<'_>,
    v: &mut V,
    depth: u32,
) -> Result<V::Type, String> {
    if depth > MAX_DEPTH {
        return Err("signature nested too deeply".into());
    }
    v.before_type()?;
    let d = depth + 1;
    let et = r.next_byte()?;
    if let Some(p) = primitive(et) {
        return Ok(v.primitive(p));
    }
    Ok(match et {
        0x0f | 0x10 | 0x1d | 0x45 => {
            let inner = walk_type(r, v, d)?;
            let wrapper = match et {
                0x0f => Wrapper::Ptr,
                0x10 => Wrapper::ByRef,
                0x1d => Wrapper::SzArray,
                _ => Wrapper::Pinned,
            };
            v.wrapped(wrapper, inner)
        }
        0x11 | 0x12 => {
            let ty = r.type_token()?;
            v.named(et == 0x11, ty)
        }
        0x13 | 0x1e => {
            let index = r.uint()?;
            v.generic_param(et == 0x1e, index)
        }
        0x14 => {
            let of = walk_type(r, v, d)?;
            let shape = array_shape(r)?;
            v.array(of, shape)
        }
        0x15 => {
            let kind = r.next_byte()?;
            let value_type = match kind {
                0x11 => true,
                0x12 => false,
                _ => return Err(format!("GENERICINST of element type {kind:#x}")),
            };
            let generic = r.type_token()?;
            let n = r.uint()?;
            // Each argument takes at least one byte: a count beyond the remaining bytes is
            // corrupt (and must not reserve memory).
            if us(n) > r.rest().len() {
                return Err("generic argument count exceeds signature".into());
            }
            v.enter_generic_inst(value_type, generic);
            let mut args = Vec::with_capacity(us(n));
            for i in 0..n {
                v.before_generic_arg(i);
                args.push(walk_type(r, v, d)?);
            }
            v.generic_inst(value_type, generic, args)
        }
        0x1b => {
            v.enter_fn_ptr();
            let sig = walk_method(r, v, d, true)?;
            v.fn_ptr(sig)
        }
        0x1f | 0x20 => {
            let modifier = r.type_token()?;
            let inner = walk_type(r, v, d)?;
            let required = et == 0x1f;
            v.wrapped(Wrapper::Modified { required, modifier }, inner)
        }
        // ReadyToRun: a module override that makes the tokens of the following type refer to
        // another module of the version bubble.
        0x3f => {
            let module = r.uint()?;
            let saved = r.set_module(module);
            let t = walk_type(r, v, d);
            r.set_module(saved);
            t?
        }
        // ELEMENT_TYPE_NATIVE_VALUETYPE_ZAPSIG: a native value type wrapper; the type follows.
        0x3d => walk_type(r, v, d)?,
        other => return Err(format!("unknown element type {other:#x}")),
    })
}

/// `ArrayShape` (II.23.2.13): rank, then sizes and lower bounds, at most one of each per
/// dimension.
fn array_shape(r: &mut SigReader<'_>) -> Result<ArrayShape, String> {
    let rank = r.uint()?;
    let n_sizes = r.uint()?;
    if n_sizes > rank || us(n_sizes) > r.rest().len() {
        return Err("array sizes exceed rank".into());
    }
    let mut sizes = Vec::with_capacity(us(n_sizes));
    for _ in 0..n_sizes {
        sizes.push(r.uint()?);
    }
    let n_lo = r.uint()?;
    if n_lo > rank || us(n_lo) > r.rest().len() {
        return Err("array lower bounds exceed rank".into());
    }
    let mut lower_bounds = Vec::with_capacity(us(n_lo));
    for _ in 0..n_lo {
        lower_bounds.push(r.sint()?);
    }
    Ok(ArrayShape {
        rank,
        sizes,
        lower_bounds,
    })
}

/// Walks a method signature (`MethodDefSig` / `MethodRefSig` / `StandAloneMethodSig`,
/// II.23.2.1-3), its types `depth + 1` deep; `fn_ptr` when it is a function pointer's.
pub(crate) fn walk_method<V: SigVisitor>(
    r: &mut SigReader<'_>,
    v: &mut V,
    depth: u32,
    fn_ptr: bool,
) -> Result<V::Method, String> {
    let cc = r.next_byte()?;
    if cc & 0x0f > 9 {
        return Err(format!(
            "calling convention {cc:#x} is not a method signature"
        ));
    }
    let generic_params = if cc & 0x10 != 0 { r.uint()? } else { 0 };
    let count = r.uint()?;
    let header = MethodHeader {
        has_this: cc & 0x20 != 0,
        explicit_this: cc & 0x40 != 0,
        calling_convention: cc & 0x0f,
        generic_params,
    };
    v.enter_method(&header, fn_ptr);
    let ret = walk_type(r, v, depth + 1)?;
    v.after_return(fn_ptr);
    // Each parameter takes at least one byte: a count beyond the remaining bytes is corrupt
    // (and must not reserve memory).
    if us(count) > r.rest().len() {
        return Err("parameter count exceeds signature".into());
    }
    let mut params = Vec::with_capacity(us(count));
    let mut sentinel = None;
    for i in 0..count {
        let at_sentinel = r.peek()? == 0x41;
        if at_sentinel {
            r.pos += 1;
            sentinel = Some(params.len());
        }
        v.before_param(i, at_sentinel);
        params.push(walk_type(r, v, depth + 1)?);
    }
    v.method(header, ret, params, sentinel, fn_ptr)
}

/// Replays the events of walking `sig`'s bytes into `v`, for a signature decoded earlier. A
/// type whose [`SigVisitor::before_type`] fails is left out and the replay goes on (a printer
/// stops writing into a name that is too long, and the text around it stays whole).
pub(crate) fn replay_type<V: SigVisitor<Type = (), Method = ()>>(sig: &TypeSig, v: &mut V) {
    if v.before_type().is_err() {
        return;
    }
    match sig {
        TypeSig::Void
        | TypeSig::Boolean
        | TypeSig::Char
        | TypeSig::I1
        | TypeSig::U1
        | TypeSig::I2
        | TypeSig::U2
        | TypeSig::I4
        | TypeSig::U4
        | TypeSig::I8
        | TypeSig::U8
        | TypeSig::R4
        | TypeSig::R8
        | TypeSig::String
        | TypeSig::Object
        | TypeSig::I
        | TypeSig::U
        | TypeSig::TypedByRef
        | TypeSig::Canon => v.primitive(sig.clone()),
        TypeSig::Class { ty } => v.named(false, *ty),
        TypeSig::ValueType { ty } => v.named(true, *ty),
        TypeSig::Var { index } => v.generic_param(false, *index),
        TypeSig::MVar { index } => v.generic_param(true, *index),
        TypeSig::Ptr { to } => {
            replay_type(to, v);
            v.wrapped(Wrapper::Ptr, ());
        }
        TypeSig::ByRef { to } => {
            replay_type(to, v);
            v.wrapped(Wrapper::ByRef, ());
        }
        TypeSig::SzArray { of } => {
            replay_type(of, v);
            v.wrapped(Wrapper::SzArray, ());
        }
        TypeSig::Pinned { inner } => {
            replay_type(inner, v);
            v.wrapped(Wrapper::Pinned, ());
        }
        TypeSig::Modified {
            required,
            modifier,
            inner,
        } => {
            replay_type(inner, v);
            let (required, modifier) = (*required, *modifier);
            v.wrapped(Wrapper::Modified { required, modifier }, ());
        }
        TypeSig::Array {
            of,
            rank,
            sizes,
            lower_bounds,
        } => {
            replay_type(of, v);
            let shape = ArrayShape {
                rank: *rank,
                sizes: sizes.clone(),
                lower_bounds: lower_bounds.clone(),
            };
            v.array((), shape);
        }
        TypeSig::GenericInst {
            value_type,
            generic,
            args,
        } => {
            v.enter_generic_inst(*value_type, *generic);
            for (i, a) in (0u32..).zip(args) {
                v.before_generic_arg(i);
                replay_type(a, v);
            }
            v.generic_inst(*value_type, *generic, vec![(); args.len()]);
        }
        TypeSig::FnPtr { sig } => {
            v.enter_fn_ptr();
            replay_method(sig, v, true);
            v.fn_ptr(());
        }
    }
}

/// [`replay_type`] for a method signature; `fn_ptr` when it is a function pointer's.
pub(crate) fn replay_method<V: SigVisitor<Type = (), Method = ()>>(
    sig: &MethodSig,
    v: &mut V,
    fn_ptr: bool,
) {
    let header = MethodHeader {
        has_this: sig.has_this,
        explicit_this: sig.explicit_this,
        calling_convention: sig.calling_convention,
        generic_params: sig.generic_params,
    };
    v.enter_method(&header, fn_ptr);
    replay_type(&sig.ret, v);
    v.after_return(fn_ptr);
    for (i, p) in (0u32..).zip(&sig.params) {
        v.before_param(i, sig.sentinel == Some(i as usize));
        replay_type(p, v);
    }
    let params = vec![(); sig.params.len()];
    let _ = v.method(header, (), params, sig.sentinel, fn_ptr);
}
