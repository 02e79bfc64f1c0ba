//! The filter's recursive-descent parser, one function per rule of the grammar (`super`'s
//! docs), bounded in input length and nesting depth so no input can exhaust the stack.

use super::expr::{Expr, Operand};
use super::lexer::{lex, Located, ParseError, Token};
use crate::error::{Error, Result};

/// Longest filter text accepted.
pub const MAX_FILTER_LEN: usize = 4096;
/// Deepest nesting of `(` and `!` accepted.
pub const MAX_DEPTH: usize = 64;

impl Expr {
    /// Parses a filter; the error says what is wrong and where (byte column, from 1).
    pub fn parse(text: &str) -> Result<Expr> {
        let err = |at: usize, what: String| {
            Error::usage(format!(
                "--filter '{}': {what} at column {}; write comparisons joined by && and ||, e.g. 'arg0 > 5 && name == \"x\"'",
                text.replace('\n', " "),
                at + 1
            ))
        };
        if text.len() > MAX_FILTER_LEN {
            return Err(Error::usage(format!(
                "--filter is {} bytes long; at most {MAX_FILTER_LEN} are accepted",
                text.len()
            )));
        }
        let tokens = lex(text).map_err(|(at, what)| err(at, what))?;
        let mut p = Parser {
            tokens: &tokens,
            pos: 0,
            end: text.len(),
        };
        let e = p.or(0).map_err(|(at, what)| err(at, what))?;
        if let Some((at, t)) = p.tokens.get(p.pos) {
            return Err(err(*at, format!("unexpected {}", t.describe())));
        }
        Ok(e)
    }
}

struct Parser<'a> {
    tokens: &'a [Located],
    pos: usize,
    end: usize,
}

impl Parser<'_> {
    fn peek(&self) -> Option<&Token> {
        self.tokens.get(self.pos).map(|(_, t)| t)
    }

    fn at(&self) -> usize {
        self.tokens.get(self.pos).map_or(self.end, |(a, _)| *a)
    }

    fn next(&mut self) -> Option<Token> {
        let t = self.tokens.get(self.pos).map(|(_, t)| t.clone());
        self.pos += 1;
        t
    }

    fn or(&mut self, depth: usize) -> std::result::Result<Expr, ParseError> {
        let mut e = self.and(depth)?;
        while self.peek() == Some(&Token::Or) {
            self.pos += 1;
            e = Expr::Or(Box::new(e), Box::new(self.and(depth)?));
        }
        Ok(e)
    }

    fn and(&mut self, depth: usize) -> std::result::Result<Expr, ParseError> {
        let mut e = self.unary(depth)?;
        while self.peek() == Some(&Token::And) {
            self.pos += 1;
            e = Expr::And(Box::new(e), Box::new(self.unary(depth)?));
        }
        Ok(e)
    }

    fn unary(&mut self, depth: usize) -> std::result::Result<Expr, ParseError> {
        if depth >= MAX_DEPTH {
            return Err((
                self.at(),
                format!("more than {MAX_DEPTH} nested parentheses or '!'"),
            ));
        }
        match self.peek() {
            Some(Token::Not) => {
                self.pos += 1;
                // `!(` is one level, not two: the printer writes every `!` that way, so what it
                // prints stays within the limit the input kept.
                if self.peek() == Some(&Token::Open) {
                    self.pos += 1;
                    let e = self.or(depth + 1)?;
                    return match self.next() {
                        Some(Token::Close) => Ok(Expr::Not(Box::new(e))),
                        _ => Err((self.at().min(self.end), "missing ')'".into())),
                    };
                }
                Ok(Expr::Not(Box::new(self.unary(depth + 1)?)))
            }
            Some(Token::Open) => {
                self.pos += 1;
                let e = self.or(depth + 1)?;
                match self.next() {
                    Some(Token::Close) => Ok(e),
                    _ => Err((self.at().min(self.end), "missing ')'".into())),
                }
            }
            _ => self.cmp(),
        }
    }

    fn operand(&mut self) -> std::result::Result<Operand, ParseError> {
        let at = self.at();
        match self.next() {
            Some(Token::Name(n)) => Ok(Operand::Name(n)),
            Some(Token::Tid) => Ok(Operand::Tid),
            Some(Token::Comm) => Ok(Operand::Comm),
            Some(Token::Int(v)) => Ok(Operand::Int(v)),
            Some(Token::Str(s)) => Ok(Operand::Str(s)),
            Some(t) => Err((
                at,
                format!("expected a name, number or string, found {}", t.describe()),
            )),
            None => Err((
                at,
                "expected a name, number or string, found the end".into(),
            )),
        }
    }

    fn cmp(&mut self) -> std::result::Result<Expr, ParseError> {
        let left = self.operand()?;
        let at = self.at();
        let op = match self.next() {
            Some(Token::Op(op)) => op,
            Some(t) => {
                return Err((
                    at,
                    format!(
                        "expected a comparison (== != < <= > >= ~), found {}",
                        t.describe()
                    ),
                ))
            }
            None => {
                return Err((
                    at,
                    "expected a comparison (== != < <= > >= ~), found the end".into(),
                ))
            }
        };
        let right = self.operand()?;
        Ok(Expr::Cmp(left, op, right))
    }
}
