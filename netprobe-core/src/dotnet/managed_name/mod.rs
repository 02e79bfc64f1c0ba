//! .NET method names as a C# developer reads them.
//!
//! The runtime names a method one way everywhere netprobe reads it (crossgen map files and
//! `netprobe symbols` for ReadyToRun code, `/tmp/perf-PID.map` and jitdump for JIT code):
//! `[instance ]RET [Assembly] Namespace.Type::Method(ARGS)`, and perf maps add the code's tier,
//! `[OptimizedTier1]`. [`ManagedName::parse`] takes that apart; its `Display` writes
//! `Namespace.Type.Method(int, string)`: the owner with its namespace, nested types and generic
//! arguments in C# syntax (`Dictionary<int, bool>`, `Outer.Inner`), parameters short with C#
//! keywords (`ReadOnlySpan<int>`, `ref byte`), no return type, no assembly, no tier. The same
//! method reads the same from ReadyToRun metadata and from a perf map, whatever its tier, so a
//! profile counts it once across a tier-up; the tier is kept apart ([`CodeTier`]).
//!
//! ```
//! use netprobe_core::dotnet::managed_name::{CodeTier, ManagedName};
//! let n = ManagedName::parse("int64 [busy] B::Inner(int64)[OptimizedTier1]").unwrap();
//! assert_eq!(n.to_string(), "B.Inner(long)");
//! assert_eq!(n.tier, Some(CodeTier::Tier1));
//! ```

mod csharp;
mod tier;

pub use tier::CodeTier;

use csharp::{closing, method_name, split_top, type_name, without_comments, Position};
use std::fmt;

/// A method named by the runtime, taken apart.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ManagedName {
    /// The owning type as C# writes it, with its namespace (`System.String`,
    /// `System.Collections.Generic.Dictionary<int, bool>`).
    pub owner: String,
    /// The method's own name (`Replace`, `.ctor`, `get_Item`, `Sort<int>`).
    pub method: String,
    /// Parameter types as C# writes them, short (`string`, `ReadOnlySpan<int>`, `ref byte`).
    pub params: Vec<String>,
    /// The assembly (`System.Private.CoreLib`), when the name gave one.
    pub assembly: Option<String>,
    /// The code's tier, when the name carried one (perf maps do).
    pub tier: Option<CodeTier>,
}

impl ManagedName {
    /// Takes the runtime's name `s` apart; `None` for anything that is not such a name (a
    /// native symbol, a perf map's stub entry like `stub<1> AllocateTemporaryEntryPoints`, a
    /// name cut short) and for names longer than [`MAX_LEN`] or nested deeper than
    /// [`MAX_DEPTH`] (a perf map is a file the target writes: its names are not trusted to be
    /// short). Never panics.
    pub fn parse(s: &str) -> Option<ManagedName> {
        // A perf map is the target's to write: a name longer or deeper than any real one (the
        // longest seen is 626 bytes, 7 brackets deep) stays as written, so that reading it
        // cannot take unbounded time or stack.
        if s.len() > MAX_LEN || bracket_depth(s) > MAX_DEPTH {
            return None;
        }
        let s = without_comments(s);
        let s = s.trim();
        // The tier: `[...]` right after the closing parenthesis.
        let (body, tier) = match s.rfind(")[") {
            Some(p)
                if s.ends_with(']')
                    && s[p + 2..s.len() - 1]
                        .bytes()
                        .all(|b| b.is_ascii_alphanumeric() || b == b'_') =>
            {
                (
                    &s[..=p],
                    Some(CodeTier::from_runtime(&s[p + 2..s.len() - 1])),
                )
            }
            _ => (s, None),
        };
        if !body.ends_with(')') {
            return None;
        }
        let sep = top_level_find(body, "::")?;
        let (prefix, rest) = (&body[..sep], &body[sep + 2..]);
        let open = top_level_byte(rest, b'(')?;
        if closing(rest, open)? != rest.len() - 1 {
            return None;
        }
        let method = &rest[..open];
        let args = &rest[open + 1..rest.len() - 1];
        let tokens: Vec<&str> = split_top(prefix, b' ')
            .into_iter()
            .filter(|t| !t.is_empty())
            .collect();
        let (&owner, before) = tokens.split_last()?;
        // Real names hold `::` once, between the owner and the method: never in the method's
        // name or its parameters (`rest`), nor in the owner.
        if owner.is_empty() || method.is_empty() || rest.contains("::") || owner.contains("::") {
            return None;
        }
        let assembly = before
            .last()
            .and_then(|a| a.strip_prefix('[')?.strip_suffix(']'))
            .map(str::to_string);
        let params = if args.trim().is_empty() {
            Vec::new()
        } else {
            split_top(args, b',')
                .into_iter()
                .map(|a| type_name(a, Position::Argument))
                .collect()
        };
        let name = ManagedName {
            owner: type_name(owner, Position::Owner),
            method: method_name(method),
            params,
            assembly,
            tier,
        };
        // What the C# writer drops (generic arity, `class `) may bring two `:` of a hostile
        // name together: such a name is not the runtime's, and stays as written. `Display`
        // joins the parts with `.`, `(`, `, ` and `)`, so only a part can hold `::`.
        let parts = [&name.owner, &name.method];
        if parts
            .into_iter()
            .chain(&name.params)
            .any(|p| p.contains("::"))
        {
            return None;
        }
        Some(name)
    }
}

/// The longest name [`ManagedName::parse`] takes apart, in bytes. The runtime's longest names
/// are far shorter: 626 bytes over every ReadyToRun method of CoreLib 3.1, 8, 9 and 10.
pub const MAX_LEN: usize = 4096;

/// The deepest nesting of brackets (`<>`, `[]`, `()`) [`ManagedName::parse`] takes apart: the
/// C# writer recurses once per level. CoreLib's names nest at most 7 deep.
pub const MAX_DEPTH: usize = 32;

/// How deep `<>`, `[]` and `()` nest in `s`.
fn bracket_depth(s: &str) -> usize {
    let (mut depth, mut most) = (0usize, 0usize);
    for b in s.bytes() {
        match b {
            b'<' | b'[' | b'(' => {
                depth += 1;
                most = most.max(depth);
            }
            b'>' | b']' | b')' => depth = depth.saturating_sub(1),
            _ => {}
        }
    }
    most
}

/// The byte index of the first `pat` outside brackets.
fn top_level_find(s: &str, pat: &str) -> Option<usize> {
    let mut depth = 0i32;
    let bytes = s.as_bytes();
    for i in 0..bytes.len() {
        match bytes[i] {
            b'<' | b'[' | b'(' => depth += 1,
            b'>' | b']' | b')' => depth -= 1,
            _ if depth == 0 && bytes[i..].starts_with(pat.as_bytes()) => return Some(i),
            _ => {}
        }
    }
    None
}

/// The byte index of the first `b` outside `<>` and `[]`.
fn top_level_byte(s: &str, b: u8) -> Option<usize> {
    let mut depth = 0i32;
    for (i, c) in s.bytes().enumerate() {
        match c {
            _ if c == b && depth == 0 => return Some(i),
            b'<' | b'[' => depth += 1,
            b'>' | b']' => depth -= 1,
            _ => {}
        }
    }
    None
}

impl fmt::Display for ManagedName {
    /// `Namespace.Type.Method(int, string)`.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "{}.{}({})",
            self.owner,
            self.method,
            self.params.join(", ")
        )
    }
}

/// The C# name and tier of the runtime's name `s`; `s` itself (and no tier) when it is not
/// such a name.
pub fn readable(s: &str) -> (String, Option<CodeTier>) {
    match ManagedName::parse(s) {
        Some(n) => (n.to_string(), n.tier),
        None => (s.to_string(), None),
    }
}

#[cfg(test)]
mod tests;
