//! The glob language of patterns, as bpftrace's `uprobe:BIN:*Echo*` and bcc's funccount read
//! it: `*` any run, `?` one character, `[abc]`/`[a-z]`/`[!x]` classes, `\` escapes the next
//! character.

use crate::error::{Error, Result};

#[derive(Clone, Debug, PartialEq, Eq)]
pub(super) enum Token {
    Literal(char),
    AnyOne,
    AnyRun,
    Class {
        negated: bool,
        items: Vec<(char, char)>,
    },
}

pub(super) fn bad(pattern: &str, why: &str) -> Error {
    Error::BadPattern {
        pattern: pattern.to_string(),
        why: why.to_string(),
    }
}

pub(super) fn compile(text: &str) -> Result<Vec<Token>> {
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
pub(super) fn glob_match(tokens: &[Token], text: &str) -> bool {
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

#[cfg(test)]
mod tests {
    use super::*;

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
}
