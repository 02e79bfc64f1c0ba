//! Method and type names exactly as the runtime and crossgen print them.
//!
//! crossgen's `/CreatePerfMap` map files (`fixtures/recorded/mapfiles/`) and the runtime's perf map / jitdump
//! (`/tmp/jit-PID.dump`) name a method `[instance ]RET [Assembly] Namespace.Type::Method(ARGS)`:
//! the owner type in reflection style (nested types joined by `+`, generic arguments in `[...]`),
//! the return and parameter types in ILDASM style (`int32`, `class [Asm]Ns.T`, `valuetype Ns.S`,
//! nested types joined by `/`, `!0`, `!!0`, `T&`, `T*`, `T[]`, `G`1<int32>`).
//! Verified against the .NET 8 runtime's `[PreJIT]` jitdump records (tests/dotnet_runtimes.rs).

use super::parser::{Metadata, SigReader};
use super::types::{table, MethodSig, TypeSig, TypeToken};
use crate::name_budget::{too_long, MAX_NAME};
use std::fmt::Write;

/// Resolves the metadata of another module of a ReadyToRun version bubble, for tokens that carry
/// a module override (`ELEMENT_TYPE_MODULE_ZAPSIG`). `Sync`: a large listing names its methods
/// on two threads.
pub trait ModuleResolver<'a>: Sync {
    /// The metadata of module `index` (readytorun-format.md "ManifestMetadata": 1..=ILAR are the
    /// image's AssemblyRefs) and its enclosing-type map ([`enclosing_map`]); `None` when unknown.
    fn module(&self, index: u32) -> Option<(Metadata<'a>, &'a [u32])>;
}

/// Everything needed to name types of one module: its metadata and, per TypeDef row, the
/// enclosing TypeDef row (0 = not nested), from the NestedClass table.
#[derive(Clone, Copy)]
pub struct Names<'a> {
    pub md: Metadata<'a>,
    pub enclosing: &'a [u32],
    pub foreign: Option<&'a dyn ModuleResolver<'a>>,
    /// Every TypeDef name of this module, written once ([`TypeNames`]), when a caller names
    /// many methods at once; `None`: each name is written from the metadata. Never another
    /// module's: [`Names::in_module`] leaves it out.
    pub type_names: Option<&'a TypeNames>,
}

/// Every TypeDef name of one module as [`Names::type_def_name`] writes it, with `/` and with
/// `+` between nested types, to be copied instead of written again: a listing names the same
/// types over and over (.NET 8 CoreLib's owners and signatures name a TypeDef 112,790 times),
/// each time reading its rows and strings and walking its nesting.
#[derive(Debug)]
pub struct TypeNames {
    text: String,
    /// `(start, end)` in `text` per TypeDef row (index = rid) and separator (`/` then `+`).
    spans: Vec<(u32, u32)>,
}

impl TypeNames {
    /// The names of every TypeDef row that `names` (without a `type_names` of its own) writes.
    /// Names beyond `cap` bytes of text (and beyond 4 GiB) are left out (then written from the
    /// metadata each time, where the listing's name budget counts them): a hostile file's types
    /// may all name one long string ([`crate::name_budget`]).
    pub fn of(names: &Names<'_>, cap: u64) -> TypeNames {
        let rows = names.md.rows(table::TYPE_DEF);
        let mut text = String::new();
        let mut spans = Vec::with_capacity(2 * (rows as usize + 1));
        spans.extend([(0, 0), (0, 0)]);
        for rid in 1..=rows {
            if text.len() as u64 > cap {
                break;
            }
            let start = text.len();
            names.write_type_def_name(rid, '/', &mut text);
            let slash = text.len();
            // A top-level type is written the same with either separator.
            let nested = names.enclosing.get(rid as usize).is_some_and(|&e| e != 0);
            if nested {
                names.write_type_def_name(rid, '+', &mut text);
            }
            let (Ok(start), Ok(slash), Ok(end)) = (
                u32::try_from(start),
                u32::try_from(slash),
                u32::try_from(text.len()),
            ) else {
                break;
            };
            spans.push((start, slash));
            spans.push(if nested { (slash, end) } else { (start, slash) });
        }
        TypeNames { text, spans }
    }

    /// TypeDef `rid`'s name with `sep` between nested types; `None` for another separator or a
    /// row not kept.
    fn get(&self, rid: u32, sep: char) -> Option<&str> {
        let k = match sep {
            '/' => 0,
            '+' => 1,
            _ => return None,
        };
        let &(start, end) = self.spans.get(2 * rid as usize + k)?;
        self.text.get(start as usize..end as usize)
    }
}

/// The enclosing TypeDef of every TypeDef row (index = rid; 0 = top level), from NestedClass.
pub fn enclosing_map(md: &Metadata<'_>) -> Vec<u32> {
    let n = md.rows(table::TYPE_DEF) as usize;
    let mut enclosing = vec![0u32; n + 1];
    for rid in 1..=md.rows(table::NESTED_CLASS) {
        if let Some((nested, outer)) = md.nested_class(rid) {
            if let Some(slot) = enclosing.get_mut(nested as usize) {
                if outer != nested {
                    *slot = outer;
                }
            }
        }
    }
    enclosing
}

/// Appends the decimal digits of `v`, as `write!(out, "{v}")` does without the formatting
/// machinery (generic parameter numbers: 20,000 in CoreLib's signatures, cost 4M instructions
/// through `write!`).
fn push_decimal(out: &mut String, v: u32) {
    let mut buf = [0u8; 20];
    for &d in crate::bytes::decimal(v.into(), &mut buf) {
        out.push(char::from(d));
    }
}

/// Longest chain of enclosing types followed; a cycle in corrupt metadata stops here.
const MAX_NESTING: usize = 64;

/// How many TypeSpecs deep a name may expand: a TypeSpec's blob is a type signature that may name
/// another TypeSpec by token (ECMA-335 II.23.2.8, `TypeDefOrRefOrSpecEncoded`), so a hostile one
/// that names itself would expand until the stack overflows (each level adds only `class `, too
/// little for the name cap to stop it in time). Compilers encode generic arguments inline in one
/// blob, so real TypeSpecs name TypeSpecs rarely and never deeply.
const MAX_TYPE_SPEC_DEPTH: usize = 16;

thread_local! {
    /// TypeSpecs being expanded on this thread ([`in_type_spec`]).
    static TYPE_SPEC_DEPTH: std::cell::Cell<usize> = const { std::cell::Cell::new(0) };
}

/// Runs `expand` one TypeSpec deeper; `None` (nothing run) past [`MAX_TYPE_SPEC_DEPTH`].
fn in_type_spec<R>(expand: impl FnOnce() -> R) -> Option<R> {
    /// Gives the level back however `expand` ends.
    struct Level;
    impl Drop for Level {
        fn drop(&mut self) {
            TYPE_SPEC_DEPTH.with(|d| d.set(d.get().saturating_sub(1)));
        }
    }
    let entered = TYPE_SPEC_DEPTH.with(|d| {
        let deeper = d.get() < MAX_TYPE_SPEC_DEPTH;
        if deeper {
            d.set(d.get() + 1);
        }
        deeper
    });
    if !entered {
        return None;
    }
    let _level = Level;
    Some(expand())
}

impl<'a> Names<'a> {
    /// Names in another module, when `module` is not 0 and a resolver knows it.
    pub fn in_module(&self, module: u32) -> Option<Names<'a>> {
        if module == 0 {
            return Some(*self);
        }
        let (md, enclosing) = self.foreign?.module(module)?;
        Some(Names {
            md,
            enclosing,
            foreign: self.foreign,
            type_names: None,
        })
    }

    /// TypeDef `rid` as `Namespace.Outer<sep>Inner`; `?` pieces for unreadable rows.
    pub fn type_def_name(&self, rid: u32, sep: char, out: &mut String) {
        match self.type_names.and_then(|t| t.get(rid, sep)) {
            Some(name) => out.push_str(name),
            None => self.write_type_def_name(rid, sep, out),
        }
    }

    /// [`Names::type_def_name`], written from the metadata.
    fn write_type_def_name(&self, rid: u32, sep: char, out: &mut String) {
        let start = out.len();
        let mut chain = [0u32; MAX_NESTING];
        let mut n = 0;
        let mut cur = rid;
        while cur != 0 && n < MAX_NESTING {
            chain[n] = cur;
            n += 1;
            cur = self.enclosing.get(cur as usize).copied().unwrap_or(0);
        }
        for (i, &t) in chain[..n].iter().rev().enumerate() {
            // Past the longest name, nothing more is written: whoever composes a name with it
            // refuses that ([`name_too_long`]). Measured from where this name starts:
            // [`TypeNames`] writes every type's name into one text.
            if out.len() - start > MAX_NAME {
                return;
            }
            let (_, name, ns) = self.md.type_def(t).unwrap_or((0, "?", ""));
            if i == 0 {
                if !ns.is_empty() {
                    out.push_str(ns);
                    out.push('.');
                }
            } else {
                out.push(sep);
            }
            out.push_str(name);
        }
    }

    /// TypeRef `rid` in ILDASM style: `[Assembly]Namespace.Outer/Inner`.
    fn type_ref_name(&self, rid: u32, out: &mut String, depth: usize) {
        if too_long(out) {
            return;
        }
        let Some(((scope_t, scope_rid), name, ns)) = self.md.type_ref(rid) else {
            out.push('?');
            return;
        };
        match scope_t {
            table::TYPE_REF if depth < MAX_NESTING => {
                self.type_ref_name(scope_rid, out, depth + 1);
                out.push('/');
            }
            table::ASSEMBLY_REF => {
                out.push('[');
                out.push_str(self.md.assembly_ref_name(scope_rid).unwrap_or("?"));
                out.push(']');
            }
            table::MODULE_REF => {
                out.push_str("[.module ");
                out.push_str(self.md.module_ref_name(scope_rid).unwrap_or("?"));
                out.push(']');
            }
            _ => {}
        }
        if !ns.is_empty() && scope_t != table::TYPE_REF {
            out.push_str(ns);
            out.push('.');
        }
        out.push_str(name);
    }

    /// A type token in ILDASM style (no `class`/`valuetype` prefix).
    pub fn token_name(&self, ty: TypeToken, out: &mut String) {
        let Some(names) = self.in_module(ty.module) else {
            let _ = write!(out, "[module#{}]<{:#010x}>", ty.module, ty.token());
            return;
        };
        if ty.module != 0 {
            // A type of another module, named from inside this one: qualify it with its
            // assembly like a TypeRef would be.
            if let Some(asm) = names.md.assembly_name() {
                if ty.table == table::TYPE_DEF {
                    let _ = write!(out, "[{asm}]");
                }
            }
        }
        match ty.table {
            table::TYPE_DEF => names.type_def_name(ty.rid, '/', out),
            table::TYPE_REF => names.type_ref_name(ty.rid, out, 0),
            table::TYPE_SPEC => match names.md.type_spec(ty.rid).map(|b| {
                let mut r = super::parser::SigReader::new(b);
                r.type_sig(0)
            }) {
                Some(Ok(sig)) => {
                    if in_type_spec(|| names.ildasm(&sig, out)).is_none() {
                        out.push('?');
                    }
                }
                _ => out.push('?'),
            },
            _ => out.push('?'),
        }
    }

    /// `sig` in ILDASM style, as the runtime prints parameter and return types.
    pub fn ildasm(&self, sig: &TypeSig, out: &mut String) {
        if too_long(out) {
            return;
        }
        if let Some(p) = sig.primitive_name() {
            out.push_str(p);
            return;
        }
        match sig {
            TypeSig::Class { ty } => {
                out.push_str("class ");
                self.token_name(*ty, out);
            }
            TypeSig::ValueType { ty } => {
                out.push_str("valuetype ");
                self.token_name(*ty, out);
            }
            TypeSig::GenericInst {
                value_type,
                generic,
                args,
            } => {
                out.push_str(if *value_type { "valuetype " } else { "class " });
                self.token_name(*generic, out);
                out.push('<');
                for (i, a) in args.iter().enumerate() {
                    if i > 0 {
                        out.push(',');
                    }
                    self.ildasm(a, out);
                }
                out.push('>');
            }
            TypeSig::Var { index } => {
                out.push('!');
                push_decimal(out, *index);
            }
            TypeSig::MVar { index } => {
                out.push_str("!!");
                push_decimal(out, *index);
            }
            TypeSig::Ptr { to } => {
                self.ildasm(to, out);
                out.push('*');
            }
            TypeSig::ByRef { to } => {
                self.ildasm(to, out);
                out.push('&');
            }
            TypeSig::SzArray { of } => {
                self.ildasm(of, out);
                out.push_str("[]");
            }
            TypeSig::Array {
                of,
                rank,
                sizes,
                lower_bounds,
            } => {
                self.ildasm(of, out);
                ildasm_array_shape(*rank, sizes, lower_bounds, out);
            }
            TypeSig::FnPtr { sig } => {
                out.push_str("method ");
                self.method_sig_text(sig, "*", out);
            }
            TypeSig::Modified {
                required,
                modifier,
                inner,
            } => {
                self.ildasm(inner, out);
                out.push_str(if *required { " modreq(" } else { " modopt(" });
                self.token_name(*modifier, out);
                out.push(')');
            }
            TypeSig::Pinned { inner } => {
                self.ildasm(inner, out);
                out.push_str(" pinned");
            }
            TypeSig::Canon => out.push_str("System.__Canon"),
            _ => out.push('?'),
        }
    }

    /// `sig` in reflection (TypeString) style, as the runtime prints the type arguments of a
    /// method's owner: `System.Int32`, `Ns.Outer+Inner`, ``G`1[System.String]``, `T[]`, `T&`.
    pub fn reflection(&self, sig: &TypeSig, out: &mut String) {
        if too_long(out) {
            return;
        }
        if let Some(p) = sig.reflection_primitive_name() {
            out.push_str(p);
            return;
        }
        match sig {
            TypeSig::Class { ty } | TypeSig::ValueType { ty } => self.reflection_token(*ty, out),
            TypeSig::GenericInst { generic, args, .. } => {
                self.reflection_token(*generic, out);
                out.push('[');
                for (i, a) in args.iter().enumerate() {
                    if i > 0 {
                        out.push(',');
                    }
                    self.reflection(a, out);
                }
                out.push(']');
            }
            TypeSig::Ptr { to } => {
                self.reflection(to, out);
                out.push('*');
            }
            TypeSig::ByRef { to } => {
                self.reflection(to, out);
                out.push('&');
            }
            TypeSig::SzArray { of } => {
                self.reflection(of, out);
                out.push_str("[]");
            }
            TypeSig::Array { of, rank, .. } => {
                self.reflection(of, out);
                out.push('[');
                for _ in 1..*rank {
                    out.push(',');
                }
                out.push(']');
            }
            TypeSig::Modified { inner, .. } | TypeSig::Pinned { inner } => {
                self.reflection(inner, out)
            }
            TypeSig::Var { index } => {
                out.push('!');
                push_decimal(out, *index);
            }
            TypeSig::MVar { index } => {
                out.push_str("!!");
                push_decimal(out, *index);
            }
            TypeSig::FnPtr { .. } => out.push_str("(fnptr)"),
            _ => out.push('?'),
        }
    }

    /// A type token in reflection style (`+` between nested types, no assembly).
    pub fn reflection_token(&self, ty: TypeToken, out: &mut String) {
        let Some(names) = self.in_module(ty.module) else {
            let _ = write!(out, "[module#{}]<{:#010x}>", ty.module, ty.token());
            return;
        };
        match ty.table {
            table::TYPE_DEF => names.type_def_name(ty.rid, '+', out),
            table::TYPE_REF => {
                let mut s = String::new();
                names.type_ref_name(ty.rid, &mut s, 0);
                // Drop the `[Assembly]` scope and use `+` for nesting.
                let body = match s.find(']') {
                    Some(i) if s.starts_with('[') => &s[i + 1..],
                    _ => &s[..],
                };
                out.push_str(&body.replace('/', "+"));
            }
            table::TYPE_SPEC => match names.md.type_spec(ty.rid).map(|b| {
                let mut r = super::parser::SigReader::new(b);
                r.type_sig(0)
            }) {
                Some(Ok(sig)) => {
                    if in_type_spec(|| names.reflection(&sig, out)).is_none() {
                        out.push('?');
                    }
                }
                _ => out.push('?'),
            },
            _ => out.push('?'),
        }
    }

    /// `[instance ]RET NAME(ARGS)` for a method signature, with `name` in the middle
    /// (ILDASM `PrettyPrintSig`).
    pub fn method_sig_text(&self, sig: &MethodSig, name: &str, out: &mut String) {
        if sig.has_this {
            out.push_str("instance ");
        }
        if sig.explicit_this {
            out.push_str("explicit ");
        }
        match sig.calling_convention {
            1 => out.push_str("unmanaged cdecl "),
            2 => out.push_str("unmanaged stdcall "),
            3 => out.push_str("unmanaged thiscall "),
            4 => out.push_str("unmanaged fastcall "),
            5 => out.push_str("vararg "),
            9 => out.push_str("unmanaged "),
            _ => {}
        }
        self.ildasm(&sig.ret, out);
        out.push(' ');
        out.push_str(name);
        self.params_text(sig, out);
    }

    /// `(ARGS)`: parameter types in ILDASM style, comma-separated without spaces; `...` marks
    /// the vararg sentinel.
    pub fn params_text(&self, sig: &MethodSig, out: &mut String) {
        out.push('(');
        for (i, p) in sig.params.iter().enumerate() {
            if i > 0 {
                out.push(',');
            }
            if sig.sentinel == Some(i) {
                out.push_str("...,");
            }
            self.ildasm(p, out);
        }
        out.push(')');
    }
}

impl<'a> Names<'a> {
    /// Formats one type straight from signature bytes, exactly like [`Names::ildasm`] of the
    /// decoded [`TypeSig`] (no intermediate allocation: used to name tens of thousands of methods).
    /// `Err(what)` on a malformed signature.
    pub fn ildasm_from_sig(
        &self,
        r: &mut SigReader<'_>,
        out: &mut String,
        depth: u32,
    ) -> Result<(), String> {
        if depth > 64 {
            return Err("signature nested too deeply".into());
        }
        if too_long(out) {
            return Err(name_too_long());
        }
        let d = depth + 1;
        let et = r.next_byte()?;
        let prim = match et {
            0x01 => "void",
            0x02 => "bool",
            0x03 => "char",
            0x04 => "int8",
            0x05 => "uint8",
            0x06 => "int16",
            0x07 => "uint16",
            0x08 => "int32",
            0x09 => "uint32",
            0x0a => "int64",
            0x0b => "uint64",
            0x0c => "float32",
            0x0d => "float64",
            0x0e => "string",
            0x16 => "typedref",
            0x18 => "native int",
            0x19 => "native uint",
            0x1c => "object",
            0x3e => "System.__Canon",
            _ => "",
        };
        if !prim.is_empty() {
            out.push_str(prim);
            return Ok(());
        }
        match et {
            0x0f | 0x10 | 0x1d => {
                self.ildasm_from_sig(r, out, d)?;
                out.push_str(match et {
                    0x0f => "*",
                    0x10 => "&",
                    _ => "[]",
                });
            }
            0x11 | 0x12 => {
                out.push_str(if et == 0x11 { "valuetype " } else { "class " });
                let ty = r.type_token()?;
                self.token_name(ty, out);
            }
            0x13 | 0x1e => {
                let index = r.uint()?;
                out.push_str(if et == 0x13 { "!" } else { "!!" });
                push_decimal(out, index);
            }
            0x14 => {
                self.ildasm_from_sig(r, out, d)?;
                // Same shape rules as the decoded form: decode just the shape.
                let rank = r.uint()?;
                let n_sizes = r.uint()?;
                if n_sizes > rank || n_sizes as usize > r.rest().len() {
                    return Err("array sizes exceed rank".into());
                }
                let sizes = (0..n_sizes)
                    .map(|_| r.uint())
                    .collect::<Result<Vec<_>, _>>()?;
                let n_lo = r.uint()?;
                if n_lo > rank || n_lo as usize > r.rest().len() {
                    return Err("array lower bounds exceed rank".into());
                }
                let lo = (0..n_lo).map(|_| r.sint()).collect::<Result<Vec<_>, _>>()?;
                ildasm_array_shape(rank, &sizes, &lo, out);
            }
            0x15 => {
                let kind = r.next_byte()?;
                out.push_str(match kind {
                    0x11 => "valuetype ",
                    0x12 => "class ",
                    _ => return Err(format!("GENERICINST of element type {kind:#x}")),
                });
                let generic = r.type_token()?;
                self.token_name(generic, out);
                let n = r.uint()?;
                if n as usize > r.rest().len() {
                    return Err("generic argument count exceeds signature".into());
                }
                out.push('<');
                for i in 0..n {
                    if i > 0 {
                        out.push(',');
                    }
                    self.ildasm_from_sig(r, out, d)?;
                }
                out.push('>');
            }
            0x1b => {
                out.push_str("method ");
                self.method_from_sig(r, "*", None, out, d)?;
            }
            0x1f | 0x20 => {
                let modifier = r.type_token()?;
                self.ildasm_from_sig(r, out, d)?;
                out.push_str(if et == 0x1f { " modreq(" } else { " modopt(" });
                self.token_name(modifier, out);
                out.push(')');
            }
            0x45 => {
                self.ildasm_from_sig(r, out, d)?;
                out.push_str(" pinned");
            }
            0x3f => {
                let module = r.uint()?;
                let saved = r.set_module(module);
                let res = self.ildasm_from_sig(r, out, d);
                r.set_module(saved);
                res?;
            }
            0x3d => self.ildasm_from_sig(r, out, d)?,
            other => return Err(format!("unknown element type {other:#x}")),
        }
        Ok(())
    }

    /// Formats one type straight from signature bytes like [`Names::reflection`] of the decoded
    /// [`TypeSig`]. `Err(what)` on a malformed signature.
    pub fn reflection_from_sig(
        &self,
        r: &mut SigReader<'_>,
        out: &mut String,
        depth: u32,
    ) -> Result<(), String> {
        if depth > 64 {
            return Err("signature nested too deeply".into());
        }
        if too_long(out) {
            return Err(name_too_long());
        }
        let d = depth + 1;
        let et = r.next_byte()?;
        let prim = match et {
            0x01 => "System.Void",
            0x02 => "System.Boolean",
            0x03 => "System.Char",
            0x04 => "System.SByte",
            0x05 => "System.Byte",
            0x06 => "System.Int16",
            0x07 => "System.UInt16",
            0x08 => "System.Int32",
            0x09 => "System.UInt32",
            0x0a => "System.Int64",
            0x0b => "System.UInt64",
            0x0c => "System.Single",
            0x0d => "System.Double",
            0x0e => "System.String",
            0x16 => "System.TypedReference",
            0x18 => "System.IntPtr",
            0x19 => "System.UIntPtr",
            0x1c => "System.Object",
            0x3e => "System.__Canon",
            _ => "",
        };
        if !prim.is_empty() {
            out.push_str(prim);
            return Ok(());
        }
        match et {
            0x0f | 0x10 | 0x1d => {
                self.reflection_from_sig(r, out, d)?;
                out.push_str(match et {
                    0x0f => "*",
                    0x10 => "&",
                    _ => "[]",
                });
            }
            0x11 | 0x12 => {
                let ty = r.type_token()?;
                self.reflection_token(ty, out);
            }
            0x13 | 0x1e => {
                let index = r.uint()?;
                out.push_str(if et == 0x13 { "!" } else { "!!" });
                push_decimal(out, index);
            }
            0x14 => {
                self.reflection_from_sig(r, out, d)?;
                let rank = r.uint()?;
                let n_sizes = r.uint()?;
                if n_sizes > rank {
                    return Err("array sizes exceed rank".into());
                }
                for _ in 0..n_sizes {
                    r.uint()?;
                }
                let n_lo = r.uint()?;
                if n_lo > rank {
                    return Err("array lower bounds exceed rank".into());
                }
                for _ in 0..n_lo {
                    r.sint()?;
                }
                out.push('[');
                for _ in 1..rank.min(64) {
                    out.push(',');
                }
                out.push(']');
            }
            0x15 => {
                let kind = r.next_byte()?;
                if kind != 0x11 && kind != 0x12 {
                    return Err(format!("GENERICINST of element type {kind:#x}"));
                }
                let generic = r.type_token()?;
                self.reflection_token(generic, out);
                let n = r.uint()?;
                if n as usize > r.rest().len() {
                    return Err("generic argument count exceeds signature".into());
                }
                out.push('[');
                for i in 0..n {
                    if i > 0 {
                        out.push(',');
                    }
                    self.reflection_from_sig(r, out, d)?;
                }
                out.push(']');
            }
            0x1b => {
                r.pos -= 1;
                r.skip_type(d)?;
                out.push_str("(fnptr)");
            }
            0x1f | 0x20 => {
                r.type_token()?;
                self.reflection_from_sig(r, out, d)?;
            }
            0x45 | 0x3d => self.reflection_from_sig(r, out, d)?,
            0x3f => {
                let module = r.uint()?;
                let saved = r.set_module(module);
                let res = self.reflection_from_sig(r, out, d);
                r.set_module(saved);
                res?;
            }
            other => return Err(format!("unknown element type {other:#x}")),
        }
        Ok(())
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
        let cc = r.next_byte()?;
        if cc & 0x0f > 9 {
            return Err(format!(
                "calling convention {cc:#x} is not a method signature"
            ));
        }
        if cc & 0x10 != 0 {
            r.uint()?;
        }
        let count = r.uint()?;
        if count as usize > r.rest().len() {
            return Err("parameter count exceeds signature".into());
        }
        if cc & 0x20 != 0 {
            out.push_str("instance ");
        }
        if cc & 0x40 != 0 {
            out.push_str("explicit ");
        }
        out.push_str(match cc & 0x0f {
            1 => "unmanaged cdecl ",
            2 => "unmanaged stdcall ",
            3 => "unmanaged thiscall ",
            4 => "unmanaged fastcall ",
            5 => "vararg ",
            9 => "unmanaged ",
            _ => "",
        });
        self.ildasm_from_sig(r, out, depth + 1)?;
        out.push(' ');
        if let Some(asm) = assembly {
            out.push('[');
            out.push_str(asm);
            out.push_str("] ");
        }
        out.push_str(name);
        out.push('(');
        for i in 0..count {
            if i > 0 {
                out.push(',');
            }
            if r.peek_byte() == Some(0x41) {
                r.next_byte()?;
                out.push_str("...,");
            }
            self.ildasm_from_sig(r, out, depth + 1)?;
        }
        out.push(')');
        if too_long(out) {
            return Err(name_too_long());
        }
        Ok(())
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

    /// A TypeSpec that names itself expands [`MAX_TYPE_SPEC_DEPTH`] levels and then stops (it
    /// would recurse until the stack overflowed), and every level is given back.
    #[test]
    fn type_spec_expansion_stops_at_its_depth_and_gives_levels_back() {
        fn expand(levels: &mut usize) {
            *levels += 1;
            let _ = in_type_spec(|| expand(levels));
        }
        let mut levels = 0;
        assert!(in_type_spec(|| expand(&mut levels)).is_some());
        assert_eq!(levels, MAX_TYPE_SPEC_DEPTH);
        assert_eq!(TYPE_SPEC_DEPTH.with(|d| d.get()), 0);
        // Given back on unwinding too.
        let _ = std::panic::catch_unwind(|| in_type_spec(|| panic!("a parse failed")));
        assert_eq!(TYPE_SPEC_DEPTH.with(|d| d.get()), 0);
    }

    #[test]
    fn primitives_and_constructed_types_print_like_ildasm() {
        let layout = super::super::parser::MetadataLayout::parse(&[]).err();
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
