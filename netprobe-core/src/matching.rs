//! Matching the names users type against symbol names.
//!
//! A user types what perf, bpftrace and bcc taught them:
//! - an exact name: `main`, `np_lib_hello@@NPVER_2`, or the full crossgen-style .NET name;
//! - a glob (bpftrace `uprobe:BIN:*Echo*`, bcc funccount): `*` any run, `?` one character,
//!   `[abc]`/`[a-z]`/`[!x]` classes, `\` escapes the next character;
//! - the short forms of managed and Go names: `Namespace.Type::Method`, `Type::Method` (without
//!   the signature and the return type), `(*Calc).Add` (a Go method without its package path).
//!
//! A pattern that names a symbol exactly, literally, selects only the exact matches even if it
//! contains glob characters: Go's `net/http.(*conn).serve` and .NET's `string[]` contain `*` and
//! `[]`, and typing a full name must not select its look-alikes.

use crate::error::{Error, Result};
use crate::symbol::{Symbol, SymbolKind};
use std::borrow::Cow;

/// A parsed name pattern.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Pattern {
    text: String,
    glob: Option<Vec<Token>>,
}

#[derive(Clone, Debug, PartialEq, Eq)]
enum Token {
    Literal(char),
    AnyOne,
    AnyRun,
    Class {
        negated: bool,
        items: Vec<(char, char)>,
    },
}

impl Pattern {
    /// Parses `text`. Errors ([`Error::BadPattern`]): empty pattern, unclosed `[`, trailing `\`.
    pub fn parse(text: &str) -> Result<Pattern> {
        if text.is_empty() {
            return Err(bad(
                text,
                "empty pattern; give a function name or a glob such as 'main*'",
            ));
        }
        let has_meta = text.chars().any(|c| matches!(c, '*' | '?' | '[' | '\\'));
        let glob = if has_meta { Some(compile(text)?) } else { None };
        Ok(Pattern {
            text: text.to_string(),
            glob,
        })
    }

    /// The text as typed.
    pub fn as_str(&self) -> &str {
        &self.text
    }

    /// Whether the pattern has glob characters.
    pub fn is_glob(&self) -> bool {
        self.glob.is_some()
    }

    /// Whether any of `sym`'s names ([`match_keys`]) equals the pattern literally.
    pub fn matches_exactly(&self, sym: &Symbol) -> bool {
        match_keys(&sym.name, sym.kind)
            .iter()
            .any(|k| k.as_ref() == self.text)
    }

    /// Whether any of `sym`'s names matches: exactly, or by the glob.
    pub fn matches(&self, sym: &Symbol) -> bool {
        self.matches_name(&sym.name, sym.kind)
    }

    /// [`Pattern::matches`] for a symbol of kind `kind` named `name`, before any [`Symbol`] is
    /// built (to filter a table by name first).
    pub fn matches_name(&self, name: &str, kind: SymbolKind) -> bool {
        if self.glob.is_none() && !could_equal_a_key(&self.text, name, kind) {
            return false;
        }
        let keys = match_keys(name, kind);
        match &self.glob {
            None => keys.iter().any(|k| k.as_ref() == self.text),
            Some(tokens) => keys
                .iter()
                .any(|k| k.as_ref() == self.text || glob_match(tokens, k)),
        }
    }

    /// A test of whether a Go function whose pclntab name is the bytes `raw` can match, told
    /// before the bytes are checked as UTF-8: it says `false` only when [`Pattern::matches_name`]
    /// of the name (invalid UTF-8 replaced by U+FFFD) with [`SymbolKind::GoFunction`] is `false`
    /// too. A glob (or a literal holding U+FFFD) may match anything. A literal must equal one of
    /// the name's keys ([`match_keys`]: the name, a suffix of it, the name with `·` written `.`),
    /// and each key ends with the name's last byte, but the `.` that replaces a final `·` (C2
    /// B7): the last bytes decide. What does not depend on `raw` is worked out once, here.
    ///
    /// Stronger where the pattern's last characters are literal: each key ends with the name's
    /// last characters, and the `.` that replaces a `·` changes none of those after the pattern's
    /// last `.`, so a name must end with the literal characters after the pattern's last `.`
    /// (for a glob: after its last wildcard, then after the last `.` of those), unless they are
    /// none or hold U+FFFD (a stand-in for invalid bytes).
    pub fn go_name_may_match(&self) -> impl Fn(&[u8]) -> bool + '_ {
        let literal_tail: String = match &self.glob {
            None => self.text.clone(),
            Some(tokens) => {
                let from = tokens
                    .iter()
                    .rposition(|t| !matches!(t, Token::Literal(_)))
                    .map_or(0, |i| i + 1);
                tokens[from..]
                    .iter()
                    .filter_map(|t| match t {
                        Token::Literal(c) => Some(*c),
                        _ => None,
                    })
                    .collect()
            }
        };
        // A glob also selects a key equal to its text as written (escapes and all): a name must
        // then end like the text does.
        let suffix_of = |tail: &str| -> Option<String> {
            let after_dot = tail.rsplit('.').next().unwrap_or("");
            (!after_dot.is_empty() && !after_dot.contains('\u{FFFD}'))
                .then(|| after_dot.to_string())
        };
        let suffixes = suffix_of(&literal_tail).zip(suffix_of(&self.text));
        let any = self.glob.is_some() || self.text.contains('\u{FFFD}');
        let last = self.text.as_bytes().last().copied();
        move |raw: &[u8]| match &suffixes {
            Some((by_glob, as_written)) => {
                raw.ends_with(by_glob.as_bytes()) || raw.ends_with(as_written.as_bytes())
            }
            None => {
                any || raw.last().copied() == last
                    || (raw.ends_with(&[0xc2, 0xb7]) && last == Some(b'.'))
            }
        }
    }

    /// A text every native function name (`.symtab`/`.dynsym`, [`SymbolKind::Function`] and
    /// [`SymbolKind::Ifunc`]) the pattern matches starts with: the pattern itself when it has no
    /// glob characters (a native function's names are its name and a prefix of it,
    /// [`match_keys`]); `None` for a glob.
    pub fn native_name_prefix(&self) -> Option<&str> {
        self.glob.is_none().then_some(self.text.as_str())
    }

    /// The own name a managed method must have (the `#Strings` name of its MethodDef, printed
    /// between `::` and `(`) for the pattern to select it, when the pattern says: it holds one
    /// `::`, followed by a name without glob characters that ends the pattern or is followed by
    /// `(`. Every name [`match_keys`] gives a managed method `Owner::Method(ARGS)` holds
    /// `::Method` followed by `(` or its end, so a literal `::NAME(` or a final `::NAME` of the
    /// pattern can only line up with a method named NAME. Holds only where no type or member name
    /// holds a `:` or `(` itself; callers check that of the image (`None` is always safe).
    pub fn managed_method_name(&self) -> Option<&str> {
        let (_, after) = self.text.split_once("::")?;
        if after.contains("::") {
            return None;
        }
        let method = after.split('(').next().unwrap_or(after);
        let plain = !method.is_empty()
            && !method
                .chars()
                .any(|c| matches!(c, '*' | '?' | '[' | ']' | '\\' | ':'));
        plain.then_some(method)
    }

    /// The symbols the pattern selects, in input order: the exact matches if there are any,
    /// otherwise the glob matches. Empty when nothing matches.
    pub fn select<'a>(&self, symbols: &'a [Symbol]) -> Vec<&'a Symbol> {
        let exact: Vec<&Symbol> = symbols.iter().filter(|s| self.matches_exactly(s)).collect();
        if !exact.is_empty() || self.glob.is_none() {
            return exact;
        }
        symbols.iter().filter(|s| self.matches(s)).collect()
    }

    /// Up to `n` names of `symbols` closest to the pattern, best first, for "did you mean"
    /// messages: case-insensitive matches first, then the smallest edit distance between the
    /// pattern's literal text and each symbol's shortest name. Empty when `symbols` is empty.
    pub fn nearest(&self, symbols: &[Symbol], n: usize) -> Vec<String> {
        let lower = self.text.to_lowercase();
        let literal: String = self
            .text
            .chars()
            .filter(|c| !matches!(c, '*' | '?' | '[' | ']' | '\\'))
            .collect::<String>()
            .to_lowercase();
        let folded = Pattern::parse(&lower).ok();
        // The n best unique names by (score, name), kept sorted; a symbol whose score cannot
        // beat the n-th is not scored in full (same result as scoring and sorting all, far
        // cheaper on the 100,000s of methods of a .NET framework).
        let mut best: Vec<(usize, &str)> = Vec::new();
        for s in symbols {
            let keys = match_keys(&s.name, s.kind);
            let case_insensitive = folded.as_ref().is_some_and(|p| {
                keys.iter().any(|k| {
                    let k = k.to_lowercase();
                    k == lower || p.glob.as_ref().is_some_and(|t| glob_match(t, &k))
                })
            });
            let threshold = if best.len() == n {
                best.last().map_or(usize::MAX, |b| b.0)
            } else {
                usize::MAX
            };
            let score = if case_insensitive {
                0
            } else {
                // score = 1 + distance must stay <= threshold to count.
                let limit = threshold.saturating_sub(1);
                match keys
                    .iter()
                    .filter_map(|k| edit_distance_within(&literal, &k.to_lowercase(), limit))
                    .min()
                {
                    Some(d) => 1 + d,
                    None if threshold == usize::MAX => usize::MAX - 1,
                    None => continue,
                }
            };
            let entry = (score, s.name.as_str());
            match best.iter().position(|b| b.1 == entry.1) {
                Some(i) if best[i].0 <= score => continue,
                Some(i) => {
                    best.remove(i);
                }
                None => {}
            }
            let at = best.partition_point(|b| *b < entry);
            best.insert(at, entry);
            best.truncate(n);
        }
        best.into_iter().map(|(_, name)| name.to_string()).collect()
    }
}

fn bad(pattern: &str, why: &str) -> Error {
    Error::BadPattern {
        pattern: pattern.to_string(),
        why: why.to_string(),
    }
}

fn compile(text: &str) -> Result<Vec<Token>> {
    let mut out = Vec::new();
    let mut chars = text.chars().peekable();
    while let Some(c) = chars.next() {
        match c {
            '*' => {
                if out.last() != Some(&Token::AnyRun) {
                    out.push(Token::AnyRun);
                }
            }
            '?' => out.push(Token::AnyOne),
            '\\' => match chars.next() {
                Some(e) => out.push(Token::Literal(e)),
                None => return Err(bad(text, "trailing '\\' escapes nothing")),
            },
            // `[]` and `[,]`, `[,,]`...: an array type in a full name (.NET's `char[]`,
            // `int32[,]`, Go's `[]byte`), never a character class (a class needs a member).
            '[' if {
                let mut ahead = chars.clone();
                let mut next = ahead.next();
                while next == Some(',') {
                    next = ahead.next();
                }
                next == Some(']')
            } =>
            {
                out.push(Token::Literal('['));
                for c in chars.by_ref() {
                    out.push(Token::Literal(c));
                    if c == ']' {
                        break;
                    }
                }
            }
            '[' => {
                let negated = matches!(chars.peek(), Some('!') | Some('^'));
                if negated {
                    chars.next();
                }
                let mut items = Vec::new();
                let mut first = true;
                loop {
                    let Some(c) = chars.next() else {
                        return Err(bad(
                            text,
                            "unclosed '[' (write '\\[' for a literal bracket)",
                        ));
                    };
                    if c == ']' && !first {
                        break;
                    }
                    first = false;
                    let lo = if c == '\\' {
                        chars
                            .next()
                            .ok_or_else(|| bad(text, "trailing '\\' escapes nothing"))?
                    } else {
                        c
                    };
                    let is_range = chars.peek() == Some(&'-')
                        && chars.clone().nth(1).is_some_and(|n| n != ']');
                    if is_range {
                        chars.next();
                        let hi = chars.next().unwrap_or(lo);
                        items.push((lo.min(hi), lo.max(hi)));
                    } else {
                        items.push((lo, lo));
                    }
                }
                out.push(Token::Class { negated, items });
            }
            c => out.push(Token::Literal(c)),
        }
    }
    Ok(out)
}

fn token_matches(t: &Token, c: char) -> bool {
    match t {
        Token::Literal(l) => *l == c,
        Token::AnyOne => true,
        Token::AnyRun => true,
        Token::Class { negated, items } => {
            items.iter().any(|(lo, hi)| *lo <= c && c <= *hi) != *negated
        }
    }
}

/// Iterative glob matching with single-star backtracking: O(len(pattern) * len(text)) worst
/// case, no recursion.
fn glob_match(tokens: &[Token], text: &str) -> bool {
    // Positions are byte offsets of character starts in `text` (nothing is collected: this runs
    // once per name of 70,000-function binaries).
    let char_at = |s: usize| text[s..].chars().next();
    let (mut t, mut s) = (0usize, 0usize);
    let mut star: Option<(usize, usize)> = None;
    while let Some(c) = char_at(s) {
        if t < tokens.len() && tokens[t] == Token::AnyRun {
            star = Some((t, s));
            t += 1;
        } else if t < tokens.len() && token_matches(&tokens[t], c) {
            t += 1;
            s += c.len_utf8();
        } else if let Some((st, ss)) = star {
            // The star takes one more character.
            let next = ss + char_at(ss).map_or(1, char::len_utf8);
            t = st + 1;
            s = next;
            star = Some((st, next));
        } else {
            return false;
        }
    }
    tokens[t..].iter().all(|tok| *tok == Token::AnyRun)
}

/// Whether `text` can equal one of the names [`match_keys`] gives `name`, told without building
/// them: a native function's names are `name` and a prefix of it; a Go function's are `name`, a
/// suffix of it, and `name` with `·` written `.`. `true` for managed methods (their short names
/// are composed).
fn could_equal_a_key(text: &str, name: &str, kind: SymbolKind) -> bool {
    match kind {
        SymbolKind::Function | SymbolKind::Ifunc => name.starts_with(text),
        SymbolKind::GoFunction => name.ends_with(text) || name.contains('·'),
        SymbolKind::ManagedMethod => true,
    }
}

/// The names a symbol answers to, full name first.
///
/// - native functions: the name, and without its `@VERSION`/`@@VERSION` suffix;
/// - managed methods in crossgen's format `[instance] RET [Assembly] NS.Type::Method(ARGS)`:
///   `NS.Type::Method(ARGS)`, `NS.Type::Method`, `Type::Method(ARGS)`, `Type::Method`, and for a
///   nested type `NS.Outer+Inner` also `Inner::Method(ARGS)` and `Inner::Method`;
/// - Go functions: the name, and for methods the name without its package path
///   (`net/http.(*conn).serve` → `(*conn).serve`), the package ending at the first `.` after the
///   last `/` as in Go's `debug/gosym` (`Sym.PackageName`).
pub fn match_keys(name: &str, kind: SymbolKind) -> Vec<Cow<'_, str>> {
    let mut keys: Vec<Cow<'_, str>> = vec![Cow::Borrowed(name)];
    match kind {
        SymbolKind::Function | SymbolKind::Ifunc => {
            if let Some(at) = name.find('@') {
                if at > 0 {
                    keys.push(Cow::Borrowed(&name[..at]));
                }
            }
        }
        SymbolKind::ManagedMethod => managed_keys(name, &mut keys),
        SymbolKind::GoFunction => {
            // The pclntab writes `·` where the ELF tables and users write `.`
            // (`type..eq.net.dialResult·1`).
            if name.contains('·') {
                keys.push(Cow::Owned(name.replace('·', ".")));
            }
            let path_end = name.rfind('/').map_or(0, |i| i + 1);
            if let Some(dot) = name[path_end..].find('.') {
                let rest = &name[path_end + dot + 1..];
                // A method: Type.Method or (*Type).Method after the package.
                if rest.contains('.') {
                    keys.push(Cow::Borrowed(rest));
                }
            }
        }
    }
    keys
}

fn managed_keys<'a>(name: &'a str, keys: &mut Vec<Cow<'a, str>>) {
    let Some(sep) = name.find("::") else {
        return;
    };
    let type_start = name[..sep].rfind(' ').map_or(0, |i| i + 1);
    let qualified_with_sig = &name[type_start..];
    let paren = name[sep..].find('(').map(|p| sep + p);
    let qualified = match paren {
        Some(p) => &name[type_start..p],
        None => qualified_with_sig,
    };
    let sig = paren.map_or("", |p| &name[p..]);
    let type_path = &name[type_start..sep];
    let method = &qualified[sep - type_start + 2..];
    if qualified_with_sig != name {
        keys.push(Cow::Borrowed(qualified_with_sig));
    }
    if qualified != qualified_with_sig {
        keys.push(Cow::Borrowed(qualified));
    }
    // Short type: after the namespace (last '.' before any generic arguments).
    let plain_end = type_path.find('<').unwrap_or(type_path.len());
    let short_start = type_path[..plain_end].rfind('.').map_or(0, |i| i + 1);
    let short_type = &type_path[short_start..];
    let mut push_short = |ty: &str| {
        if ty != type_path {
            keys.push(Cow::Owned(format!("{ty}::{method}{sig}")));
            if !sig.is_empty() {
                keys.push(Cow::Owned(format!("{ty}::{method}")));
            }
        }
    };
    push_short(short_type);
    if let Some(plus) = short_type[..short_type.find('<').unwrap_or(short_type.len())].rfind('+') {
        push_short(&short_type[plus + 1..]);
    }
}

/// [`edit_distance`] when it is at most `limit`; `None` as soon as it is certain to exceed it
/// (the lengths differ by more, or a whole row of the table does).
pub fn edit_distance_within(a: &str, b: &str, limit: usize) -> Option<usize> {
    let a: Vec<char> = a.chars().collect();
    let b: Vec<char> = b.chars().collect();
    if a.len().abs_diff(b.len()) > limit {
        return None;
    }
    let mut prev: Vec<usize> = (0..=b.len()).collect();
    let mut cur = vec![0; b.len() + 1];
    for (i, ca) in a.iter().enumerate() {
        cur[0] = i + 1;
        for (j, cb) in b.iter().enumerate() {
            let cost = usize::from(ca != cb);
            cur[j + 1] = (prev[j] + cost).min(prev[j + 1] + 1).min(cur[j] + 1);
        }
        if cur.iter().min().is_some_and(|&m| m > limit) {
            return None;
        }
        std::mem::swap(&mut prev, &mut cur);
    }
    Some(prev[b.len()]).filter(|&d| d <= limit)
}

/// Levenshtein distance, O(len(a) * len(b)) time, O(len(b)) space.
pub fn edit_distance(a: &str, b: &str) -> usize {
    let b: Vec<char> = b.chars().collect();
    let mut prev: Vec<usize> = (0..=b.len()).collect();
    let mut cur = vec![0; b.len() + 1];
    for (i, ca) in a.chars().enumerate() {
        cur[0] = i + 1;
        for (j, cb) in b.iter().enumerate() {
            let cost = usize::from(ca != *cb);
            cur[j + 1] = (prev[j] + cost).min(prev[j + 1] + 1).min(cur[j] + 1);
        }
        std::mem::swap(&mut prev, &mut cur);
    }
    prev[b.len()]
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::strategy::Strategy;

    proptest::proptest! {
        /// The byte-level pre-check of Go names never refuses a name that matches: for names
        /// of the pattern alphabet with invalid UTF-8 mixed in (`\xff`, a cut `·`), and patterns
        /// that may hold U+FFFD.
        #[test]
        fn go_name_may_match_keeps_every_match(
            parts in proptest::collection::vec(
                proptest::prop_oneof![
                    "[ab.:/()·*\\\\\\[\\]]{1,4}".prop_map(String::into_bytes),
                    proptest::strategy::Just(vec![0xff]),
                    proptest::strategy::Just(vec![0xc2]),
                ],
                0..5,
            ),
            pattern in "[ab.:/()·*?\\\\\\[\\]\u{FFFD}]{1,8}",
        ) {
            let raw: Vec<u8> = parts.concat();
            let Ok(p) = Pattern::parse(&pattern) else { return Ok(()) };
            // A name made of the parts, and names that end with the pattern as written (a glob
            // selects those equal to its text too, escapes and all).
            for raw in [raw.clone(), [&raw[..], pattern.as_bytes()].concat()] {
                let name = String::from_utf8_lossy(&raw);
                if p.matches_name(&name, SymbolKind::GoFunction) {
                    proptest::prop_assert!(p.go_name_may_match()(&raw), "{:?} {:?}", raw, pattern);
                }
            }
        }
    }

    proptest::proptest! {
        /// Matching a bare name (with its cheap pre-check) agrees with comparing the pattern
        /// against every name `match_keys` gives, for every kind of symbol; and a pattern's
        /// managed method name is that of every managed method it selects.
        #[test]
        fn matches_name_equals_comparing_every_key(
            name in "[ab.:/()@·*]{0,10}",
            pattern in "[ab.:/()@·*]{1,8}",
        ) {
            let Ok(p) = Pattern::parse(&pattern) else { return Ok(()) };
            for kind in [
                SymbolKind::Function,
                SymbolKind::Ifunc,
                SymbolKind::GoFunction,
                SymbolKind::ManagedMethod,
            ] {
                let keys = match_keys(&name, kind);
                let reference = keys.iter().any(|k| {
                    k.as_ref() == p.text || p.glob.as_ref().is_some_and(|t| glob_match(t, k))
                });
                proptest::prop_assert_eq!(p.matches_name(&name, kind), reference, "{:?}", kind);
            }
            // A managed name `Owner::Method(args)` whose own name has no ':' or '('.
            let managed = format!("void [A] {name}");
            if let (Some(want), Some(sep)) = (p.managed_method_name(), managed.find("::")) {
                let own = managed[sep + 2..].split('(').next().unwrap_or("");
                let plain = !managed.contains(":::")
                    && managed.matches("::").count() == 1
                    && !own.contains(':');
                if plain && p.matches_name(&managed, SymbolKind::ManagedMethod) {
                    proptest::prop_assert_eq!(own, want);
                }
            }
        }
    }

    proptest::proptest! {
        /// The pruned `nearest` returns what scoring every symbol and sorting would, and the
        /// bounded distance agrees with the full one.
        #[test]
        fn nearest_equals_the_exhaustive_ranking(
            names in proptest::collection::vec("[a-cA-C:._*]{0,8}", 0..40),
            pattern in "[a-cA-C:._]{1,6}",
            n in 0usize..6,
            limit in 0usize..10,
        ) {
            let symbols: Vec<Symbol> = names
                .iter()
                .map(|name| Symbol {
                    name: name.clone(),
                    kind: SymbolKind::Function,
                    origin: crate::symbol::SymbolOrigin::ElfSymtab,
                    address: crate::symbol::Address::Virt(crate::addr::VirtAddr(0)),
                    size: None,
                    file_offset: None,
                })
                .collect();
            let Ok(p) = Pattern::parse(&pattern) else { return Ok(()) };
            let lower = pattern.to_lowercase();
            let literal = lower.clone();
            let folded = Pattern::parse(&lower).ok();
            let mut scored: Vec<(usize, &str)> = symbols
                .iter()
                .map(|s| {
                    let keys = match_keys(&s.name, s.kind);
                    let ci = folded.as_ref().is_some_and(|f| {
                        keys.iter().any(|k| {
                            let k = k.to_lowercase();
                            k == lower || f.glob.as_ref().is_some_and(|t| glob_match(t, &k))
                        })
                    });
                    let score = if ci {
                        0
                    } else {
                        1 + keys.iter().map(|k| edit_distance(&literal, &k.to_lowercase())).min().unwrap_or(usize::MAX - 1)
                    };
                    (score, s.name.as_str())
                })
                .collect();
            scored.sort();
            let mut want: Vec<String> = Vec::new();
            for (_, name) in scored {
                if want.len() == n { break; }
                if !want.iter().any(|o| o == name) { want.push(name.to_string()); }
            }
            proptest::prop_assert_eq!(p.nearest(&symbols, n), want);
            for name in &names {
                let d = edit_distance(&pattern, name);
                proptest::prop_assert_eq!(
                    edit_distance_within(&pattern, name, limit),
                    (d <= limit).then_some(d)
                );
            }
        }
    }

    #[test]
    fn array_brackets_are_literal() {
        let m = |p: &str, t: &str| glob_match(&compile(p).unwrap(), t);
        assert!(m(
            "System.String::.ctor(char[])",
            "System.String::.ctor(char[])"
        ));
        assert!(!m(
            "System.String::.ctor(char[])",
            "System.String::.ctor(char)"
        ));
        assert!(m("*(int32[,])", "M(int32[,])"));
        assert!(m("main.f([]byte)", "main.f([]byte)"));
        assert!(m("*[ab]", "xa"));
        assert!(!m("*[ab]", "x[ab]"));
    }

    #[test]
    fn glob_basics() {
        let m = |p: &str, t: &str| glob_match(&compile(p).unwrap(), t);
        assert!(m("*", ""));
        assert!(m("main*", "main_loop"));
        assert!(!m("main*", "xmain"));
        assert!(m(
            "*Echo*::Calc*",
            "sample.EchoProvider::CalculateEchoValue(string)"
        ));
        assert!(m("f?o", "foo"));
        assert!(m("[a-c]x", "bx"));
        assert!(!m("[!a-c]x", "bx"));
        assert!(m("\\*x", "*x"));
        assert!(!m("\\*x", "ax"));
        assert!(m("a*b*c", "aXXbYYc"));
        assert!(!m("a*b*c", "aXXbYY"));
    }

    #[test]
    fn bad_patterns() {
        assert!(Pattern::parse("").is_err());
        assert!(Pattern::parse("foo[").is_err());
        assert!(Pattern::parse("foo\\").is_err());
    }

    #[test]
    fn managed_keys_of_seed_names() {
        let k = match_keys(
            "instance string [sample-netcore-app] sample_netcore_app.Providers.EchoProvider::calculateEchoValue(string)",
            SymbolKind::ManagedMethod,
        );
        let k: Vec<&str> = k.iter().map(|c| c.as_ref()).collect();
        assert!(
            k.contains(&"sample_netcore_app.Providers.EchoProvider::calculateEchoValue(string)")
        );
        assert!(k.contains(&"sample_netcore_app.Providers.EchoProvider::calculateEchoValue"));
        assert!(k.contains(&"EchoProvider::calculateEchoValue(string)"));
        assert!(k.contains(&"EchoProvider::calculateEchoValue"));

        let k = match_keys(
            "instance class [Microsoft.AspNetCore.Mvc.Core]Microsoft.AspNetCore.Mvc.ActionResult`1<string> [sample-netcore-app] sample_netcore_app.Controllers.EchoController::Get(string)",
            SymbolKind::ManagedMethod,
        );
        assert!(k.iter().any(|c| c == "EchoController::Get"));

        let k = match_keys("void [A] NS.Outer+Inner::Run()", SymbolKind::ManagedMethod);
        assert!(k.iter().any(|c| c == "Outer+Inner::Run"));
        assert!(k.iter().any(|c| c == "Inner::Run"));
    }

    #[test]
    fn go_keys() {
        let k = match_keys("net/http.(*conn).serve", SymbolKind::GoFunction);
        assert!(k.iter().any(|c| c == "(*conn).serve"));
        let k = match_keys("main.fib", SymbolKind::GoFunction);
        assert_eq!(k.len(), 1);
        let k = match_keys("type..eq.net.dialResult·1", SymbolKind::GoFunction);
        assert!(k.iter().any(|c| c == "type..eq.net.dialResult.1"));
        let k = match_keys("main.(*Calc).Add", SymbolKind::GoFunction);
        assert!(k.iter().any(|c| c == "(*Calc).Add"));
    }

    #[test]
    fn distance() {
        assert_eq!(edit_distance("kitten", "sitting"), 3);
        assert_eq!(edit_distance("", "abc"), 3);
    }
}
