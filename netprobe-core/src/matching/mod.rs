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
//!
//! One concept per file: this file (a pattern, and what it selects), `glob.rs` (the glob
//! language), `keys.rs` (the names a symbol answers to), `edit_distance.rs` (the nearest names,
//! for suggestions).

mod edit_distance;
mod glob;
mod keys;

pub use edit_distance::{edit_distance, edit_distance_within};
pub use keys::match_keys;

use crate::error::Result;
use crate::symbol::{Symbol, SymbolKind};
use glob::{bad, compile, glob_match, Token};
use keys::could_equal_a_key;

/// A parsed name pattern.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Pattern {
    text: String,
    glob: Option<Vec<Token>>,
}

impl Pattern {
    /// Parses `text`. Errors ([`Error::BadPattern`](crate::error::Error::BadPattern)): empty pattern, unclosed `[`, trailing `\`.
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
    fn bad_patterns() {
        assert!(Pattern::parse("").is_err());
        assert!(Pattern::parse("foo[").is_err());
        assert!(Pattern::parse("foo\\").is_err());
    }
}
