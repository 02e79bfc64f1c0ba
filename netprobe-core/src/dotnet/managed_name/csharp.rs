//! Type names of the runtime's method names, written as C# writes them.
//!
//! The runtime's names (crossgen map files, `netprobe symbols`, perf maps; `TypeString` in
//! dotnet/runtime `src/coreclr/vm/typestring.cpp` and ILDASM's signature syntax) spell a type as
//! ``System.Collections.Generic.Dictionary`2[System.Int32,System.Boolean]`` (an instantiated
//! owner), ``class [System.Runtime]System.IO.TextWriter``, ``valuetype System.ReadOnlySpan`1<int32>``,
//! `uint8&`, `char*`, `string[]`, `Outer+Inner` or `Outer/Inner` (nested), `!0` and `!!0` (a
//! generic parameter of the type, of the method). C# writes `Dictionary<int, bool>`,
//! `TextWriter`, `ReadOnlySpan<int>`, `ref byte`, `char*`, `string[]`, `Outer.Inner`.
//!
//! A function pointer, ``method unmanaged void *(uint8*,int32)``, is C#'s
//! `delegate* unmanaged<byte*, int, void>`. The runtime's signature printer (`PrettyPrintType` in
//! dotnet/runtime `src/coreclr/inc/formattype.cpp`) writes a type it knows only by its method
//! table as ``System.Span`1 /* MT: 0x7f2aa3dae620 */<object>`` (seen in a perf map, a reflection
//! stub's `dynamicClass::InvokeStub_...`); [`without_comments`] takes such comments out first.
//!
//! Generic parameters stay `!0` and `!!0`: their names are in the metadata, not in the runtime's
//! name, and netprobe does not guess them.

/// Where a type is written: the method's owner keeps its namespace (it says which type of
/// which library ran); a parameter or type argument is written short, as Visual Studio's
/// profiler writes signatures.
#[derive(Clone, Copy, PartialEq, Eq)]
pub enum Position {
    Owner,
    Argument,
}

/// IL and CLR names of the types C# has keywords for.
fn keyword(t: &str) -> Option<&'static str> {
    Some(match t {
        "void" | "System.Void" => "void",
        "bool" | "System.Boolean" => "bool",
        "char" | "System.Char" => "char",
        "int8" | "System.SByte" => "sbyte",
        "uint8" | "System.Byte" => "byte",
        "int16" | "System.Int16" => "short",
        "uint16" | "System.UInt16" => "ushort",
        "int32" | "System.Int32" => "int",
        "uint32" | "System.UInt32" => "uint",
        "int64" | "System.Int64" => "long",
        "uint64" | "System.UInt64" => "ulong",
        "float32" | "System.Single" => "float",
        "float64" | "System.Double" => "double",
        "native int" | "System.IntPtr" => "nint",
        "native uint" | "System.UIntPtr" => "nuint",
        "string" | "System.String" => "string",
        "object" | "System.Object" => "object",
        "System.Decimal" => "decimal",
        "typedref" => "TypedReference",
        _ => return None,
    })
}

/// The byte index of the bracket closing the one opening at `open` (`<`/`>`, `[`/`]`, `(`/`)`
/// all counted), or `None` when unbalanced.
pub fn closing(s: &str, open: usize) -> Option<usize> {
    let mut depth = 0i32;
    for (i, b) in s.bytes().enumerate().skip(open) {
        match b {
            b'<' | b'[' | b'(' => depth += 1,
            b'>' | b']' | b')' => {
                depth -= 1;
                if depth == 0 {
                    return Some(i);
                }
                if depth < 0 {
                    return None;
                }
            }
            _ => {}
        }
    }
    None
}

/// `s` split at the bytes `sep` that no bracket encloses.
pub fn split_top(s: &str, sep: u8) -> Vec<&str> {
    let mut parts = Vec::new();
    let (mut depth, mut from) = (0i32, 0);
    for (i, b) in s.bytes().enumerate() {
        match b {
            b'<' | b'[' | b'(' => depth += 1,
            b'>' | b']' | b')' => depth -= 1,
            _ if b == sep && depth == 0 => {
                parts.push(&s[from..i]);
                from = i + 1;
            }
            _ => {}
        }
    }
    parts.push(&s[from..]);
    parts
}

/// The type `t` as C# writes it at `pos`.
pub fn type_name(t: &str, pos: Position) -> String {
    // What follows the element type (`&`, `*`, `[]`, `[,]`), outermost first, taken off one by
    // one rather than by recursion: `int32****...` nests no bracket, so the depth limit of
    // [`super::MAX_DEPTH`] does not bound it.
    let mut suffixes: Vec<&str> = Vec::new();
    let mut t = t;
    let base = loop {
        t = t.trim();
        t = t
            .strip_prefix("class ")
            .or_else(|| t.strip_prefix("valuetype "))
            .unwrap_or(t)
            .trim();
        // An assembly reference before the name: `[System.Runtime]System.IO.TextWriter`.
        t = match t.strip_prefix('[').and_then(|r| Some((r, r.find(']')?))) {
            Some((r, end)) if !r[..end].contains([',', '[', '<']) && end + 1 < r.len() => {
                &r[end + 1..]
            }
            _ => t,
        };
        if let Some(p) = t.strip_prefix("method ").and_then(function_pointer) {
            break p;
        }
        if let Some(inner) = t.strip_suffix('&') {
            suffixes.push("&");
            t = inner;
            continue;
        }
        if let Some(inner) = t.strip_suffix('*') {
            suffixes.push("*");
            t = inner;
            continue;
        }
        // An array: `[]`, `[,]` (an instantiation's brackets hold names).
        if let Some(open) = t.ends_with(']').then(|| t.rfind('[')).flatten() {
            if t[open + 1..t.len() - 1].bytes().all(|b| b == b',') && open > 0 {
                suffixes.push(&t[open..]);
                t = &t[..open];
                continue;
            }
        }
        // The owner keeps its CLR name (`System.String.Replace`, as the runtime's type is named).
        break match keyword(t).filter(|_| pos == Position::Argument) {
            Some(k) => k.to_string(),
            None => generic_type(t, pos),
        };
    };
    // Innermost first: `uint8*&` is a reference to a pointer, `ref byte*`.
    suffixes.iter().rev().fold(base, |inner, s| match *s {
        "&" => format!("ref {inner}"),
        s => format!("{inner}{s}"),
    })
}

/// A function pointer's signature after `method ` (`unmanaged void *(uint8*,int32)`) as C#
/// writes it (`delegate* unmanaged<byte*, int, void>`); `None` when it is not one.
fn function_pointer(sig: &str) -> Option<String> {
    let mut sig = sig.trim();
    let mut unmanaged = None;
    if let Some(rest) = sig.strip_prefix("unmanaged ") {
        sig = rest;
        unmanaged = Some("");
        for (il, cs) in [
            ("cdecl ", "[Cdecl]"),
            ("stdcall ", "[Stdcall]"),
            ("thiscall ", "[Thiscall]"),
            ("fastcall ", "[Fastcall]"),
        ] {
            if let Some(rest) = sig.strip_prefix(il) {
                (sig, unmanaged) = (rest, Some(cs));
            }
        }
    }
    for word in ["explicit ", "instance ", "vararg "] {
        sig = sig.strip_prefix(word).unwrap_or(sig);
    }
    let open = sig
        .char_indices()
        .filter(|&(_, c)| c == '(')
        .map(|(i, _)| i)
        .find(|&i| closing(sig, i) == Some(sig.len() - 1))?;
    let ret = sig[..open].trim_end().strip_suffix('*')?.trim();
    let args = &sig[open + 1..sig.len() - 1];
    let mut types: Vec<String> = split_top(args, b',')
        .into_iter()
        .filter(|a| !a.trim().is_empty())
        .map(|a| type_name(a, Position::Argument))
        .collect();
    types.push(type_name(ret, Position::Argument));
    let kind = unmanaged.map_or(String::new(), |cc| format!(" unmanaged{cc}"));
    Some(format!("delegate*{kind}<{}>", types.join(", ")))
}

/// `s` without the runtime's `/* ... */` comments (` /* MT: 0x7f2aa3dae620 */`) and the
/// blank before each; an unclosed comment stays.
pub fn without_comments(s: &str) -> std::borrow::Cow<'_, str> {
    if !s.contains("/*") {
        return s.into();
    }
    let mut out = String::with_capacity(s.len());
    let mut rest = s;
    while let Some(start) = rest.find("/*") {
        let Some(len) = rest[start..].find("*/") else {
            break;
        };
        out.push_str(rest[..start].trim_end_matches(' '));
        rest = &rest[start + len + 2..];
    }
    out.push_str(rest);
    out.into()
}

/// The most generic parameters a type's arity mark (`` `2 ``) is taken to give; CoreLib's most
/// is 8 (`ValueTuple`8`), metadata allows 65535 (ECMA-335 II.22.20).
const MAX_ARITY: usize = 255;

/// A (possibly nested, possibly generic) type name: `NS.Outer`1+Inner`1[A,B]` is
/// `NS.Outer<A>.Inner<B>`; an open generic (no arguments) is `Outer<>`, `Pair<,>`.
fn generic_type(t: &str, pos: Position) -> String {
    // The instantiation's arguments, at the end: `[...]` or `<...>`.
    let (name, mut args): (&str, Vec<String>) = match t.bytes().last() {
        Some(b']') | Some(b'>') => {
            let open = t
                .char_indices()
                .filter(|(_, c)| *c == '[' || *c == '<')
                .map(|(i, _)| i)
                .find(|&i| closing(t, i) == Some(t.len() - 1));
            match open {
                Some(open) if open > 0 => (
                    &t[..open],
                    split_top(&t[open + 1..t.len() - 1], b',')
                        .into_iter()
                        .map(|a| type_name(a, Position::Argument))
                        .collect(),
                ),
                _ => (t, Vec::new()),
            }
        }
        _ => (t, Vec::new()),
    };
    args.reverse();
    let segments: Vec<&str> = name.split(['+', '/']).collect();
    let mut out = String::new();
    for (i, seg) in segments.iter().enumerate() {
        // An arity past any the runtime writes stays part of the name (`A`100000000` would
        // otherwise be written as that many commas).
        let (base, arity) = match seg.rsplit_once('`') {
            Some((b, n)) => match n.parse::<usize>() {
                Ok(n) if n <= MAX_ARITY => (b, n),
                _ => (*seg, 0),
            },
            None => (*seg, 0),
        };
        let base = if i == 0 && pos == Position::Argument {
            // The namespace goes; a CLR name C# has a keyword for is that keyword.
            if let Some(k) = keyword(base) {
                k
            } else {
                base.rsplit_once('.').map_or(base, |(_, n)| n)
            }
        } else {
            base
        };
        if i > 0 {
            out.push('.');
        }
        out.push_str(base);
        if arity > 0 {
            let taken: Vec<String> = (0..arity).filter_map(|_| args.pop()).collect();
            if taken.is_empty() {
                out.push('<');
                out.push_str(&",".repeat(arity - 1));
                out.push('>');
            } else {
                out.push('<');
                out.push_str(&taken.join(", "));
                out.push('>');
            }
        }
    }
    // Arguments left over (a name without arity marks): written after the name.
    if !args.is_empty() {
        args.reverse();
        out.push('<');
        out.push_str(&args.join(", "));
        out.push('>');
    }
    out
}

/// A method's own name with the type arguments in it written as C# writes them:
/// `Method<int32>` is `Method<int>`, an explicit implementation
/// `System.Numerics.INumberBase<System.UInt16>.TryConvertFrom` is
/// `System.Numerics.INumberBase<ushort>.TryConvertFrom`.
pub fn method_name(m: &str) -> String {
    let mut out = String::new();
    let mut i = 0;
    while i < m.len() {
        let rest = &m[i..];
        let c = rest.chars().next().unwrap_or(' ');
        if c == '<' {
            if let Some(end) = closing(m, i) {
                let args: Vec<String> = split_top(&m[i + 1..end], b',')
                    .into_iter()
                    .map(|a| type_name(a, Position::Argument))
                    .collect();
                out.push('<');
                out.push_str(&args.join(", "));
                out.push('>');
                i = end + 1;
                continue;
            }
        }
        out.push(c);
        i += c.len_utf8();
    }
    out
}
