//! The filter's tokens: names, `$tid`/`$comm`, numbers (decimal or `0x` hex, at most 64
//! bits), quoted strings with `\"`, `\'` and `\\` escapes, operators and parentheses, each with
//! the byte offset it starts at, so an error can name its column.

use super::expr::CmpOp;

#[derive(Clone, Debug, PartialEq)]
pub(super) enum Token {
    Name(String),
    Tid,
    Comm,
    Int(i128),
    Str(String),
    Op(CmpOp),
    And,
    Or,
    Not,
    Open,
    Close,
}

impl Token {
    pub(super) fn describe(&self) -> String {
        match self {
            Token::Name(n) => format!("name {n}"),
            Token::Tid => "$tid".into(),
            Token::Comm => "$comm".into(),
            Token::Int(v) => format!("number {v}"),
            Token::Str(_) => "string".into(),
            Token::Op(o) => format!("'{}'", o.as_str()),
            Token::And => "'&&'".into(),
            Token::Or => "'||'".into(),
            Token::Not => "'!'".into(),
            Token::Open => "'('".into(),
            Token::Close => "')'".into(),
        }
    }
}

pub(super) type Located = (usize, Token);
pub(super) type ParseError = (usize, String);

pub(super) fn lex(text: &str) -> std::result::Result<Vec<Located>, ParseError> {
    let b = text.as_bytes();
    let mut out = Vec::new();
    let mut i = 0;
    while i < b.len() {
        let c = b[i];
        let start = i;
        let two = b.get(i..i + 2);
        let tok = match c {
            b' ' | b'\t' | b'\n' | b'\r' => {
                i += 1;
                continue;
            }
            b'(' => {
                i += 1;
                Token::Open
            }
            b')' => {
                i += 1;
                Token::Close
            }
            b'~' => {
                i += 1;
                Token::Op(CmpOp::Glob)
            }
            b'&' if two == Some(b"&&") => {
                i += 2;
                Token::And
            }
            b'|' if two == Some(b"||") => {
                i += 2;
                Token::Or
            }
            b'=' if two == Some(b"==") => {
                i += 2;
                Token::Op(CmpOp::Eq)
            }
            b'!' if two == Some(b"!=") => {
                i += 2;
                Token::Op(CmpOp::Ne)
            }
            b'!' => {
                i += 1;
                Token::Not
            }
            b'<' | b'>' => {
                let eq = b.get(i + 1) == Some(&b'=');
                i += 1 + eq as usize;
                Token::Op(match (c, eq) {
                    (b'<', false) => CmpOp::Lt,
                    (b'<', true) => CmpOp::Le,
                    (_, false) => CmpOp::Gt,
                    (_, true) => CmpOp::Ge,
                })
            }
            b'"' | b'\'' => {
                let quote = c;
                i += 1;
                let mut s = Vec::new();
                loop {
                    match b.get(i) {
                        None => return Err((start, "unterminated string".into())),
                        Some(&q) if q == quote => {
                            i += 1;
                            break;
                        }
                        Some(b'\\') => match b.get(i + 1) {
                            Some(&e @ (b'"' | b'\'' | b'\\')) => {
                                s.push(e);
                                i += 2;
                            }
                            _ => {
                                return Err((
                                    i,
                                    "unknown escape (only \\\", \\' and \\\\ exist)".into(),
                                ))
                            }
                        },
                        Some(&ch) => {
                            s.push(ch);
                            i += 1;
                        }
                    }
                }
                // Both ends are ASCII quotes, so the bytes between are valid UTF-8 (escapes
                // only drop ASCII backslashes).
                Token::Str(String::from_utf8_lossy(&s).into_owned())
            }
            b'$' => {
                i += 1;
                while i < b.len() && (b[i].is_ascii_alphanumeric() || b[i] == b'_') {
                    i += 1;
                }
                match &text[start..i] {
                    "$tid" => Token::Tid,
                    "$comm" => Token::Comm,
                    other => {
                        return Err((
                            start,
                            format!("unknown variable {other} (there are $tid and $comm)"),
                        ))
                    }
                }
            }
            b'-' | b'0'..=b'9' => {
                let neg = c == b'-';
                let digits = start + neg as usize;
                i = digits;
                while i < b.len() && (b[i].is_ascii_alphanumeric() || b[i] == b'_') {
                    i += 1;
                }
                let word = &text[digits..i];
                let magnitude = if let Some(hex) =
                    word.strip_prefix("0x").or_else(|| word.strip_prefix("0X"))
                {
                    u64::from_str_radix(hex, 16).ok()
                } else if word.bytes().all(|d| d.is_ascii_digit()) && !word.is_empty() {
                    word.parse::<u64>().ok()
                } else {
                    None
                };
                let Some(m) = magnitude else {
                    return Err((
                        start,
                        format!(
                            "'{}' is not a number (decimal or 0x hex, at most 64 bits)",
                            &text[start..i]
                        ),
                    ));
                };
                let v = if neg { -(m as i128) } else { m as i128 };
                if v < i64::MIN as i128 {
                    return Err((start, format!("{v} does not fit in 64 bits")));
                }
                Token::Int(v)
            }
            c if c.is_ascii_alphabetic() || c == b'_' => {
                while i < b.len() && (b[i].is_ascii_alphanumeric() || b[i] == b'_') {
                    i += 1;
                }
                Token::Name(text[start..i].to_string())
            }
            _ => {
                let ch = text[start..].chars().next().unwrap_or('?');
                return Err((start, format!("unexpected {ch:?}")));
            }
        };
        out.push((start, tok));
    }
    Ok(out)
}
