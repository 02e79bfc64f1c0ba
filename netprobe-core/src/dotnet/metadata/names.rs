//! The names of types of one module, and of the other modules of a ReadyToRun version bubble:
//! TypeDefs (II.22.37) with their enclosing types (NestedClass, II.22.32), TypeRefs (II.22.38)
//! with their resolution scope, TypeSpecs (II.22.39) through their signatures, in the two
//! styles the runtime prints (ILDASM's `/` between nested types, reflection's `+`).
//! `display.rs` composes these into type and method names.

use super::tables::Metadata;
use super::types::{table, TypeToken};
use super::SigReader;
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
            // refuses that ([`name_too_long`](super::display::name_too_long)). Measured from
            // where this name starts: [`TypeNames`] writes every type's name into one text.
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
                let mut r = SigReader::new(b);
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
                let mut r = SigReader::new(b);
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
}

#[cfg(test)]
mod tests {
    use super::*;

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
}
