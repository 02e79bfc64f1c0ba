//! The filter's syntax tree ([`Expr`]: comparisons joined by `||`, `&&` and `!`) and its
//! printer, which writes it back in the grammar with parentheses only where the structure needs
//! them; the same printer renders a resolved filter ([`super::ProbeFilter::render`]).

use std::fmt;

/// A parsed filter.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Expr {
    Or(Box<Expr>, Box<Expr>),
    And(Box<Expr>, Box<Expr>),
    Not(Box<Expr>),
    Cmp(Operand, CmpOp, Operand),
}

/// One side of a comparison.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Operand {
    /// An argument (or `ret`) by name.
    Name(String),
    /// The thread that hit the probe (`$tid`).
    Tid,
    /// The name of the task that hit the probe (`$comm`).
    Comm,
    Int(i128),
    Str(String),
}

/// A comparison operator.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum CmpOp {
    Eq,
    Ne,
    Lt,
    Le,
    Gt,
    Ge,
    /// Glob match (strings only).
    Glob,
}

impl CmpOp {
    pub fn as_str(self) -> &'static str {
        match self {
            CmpOp::Eq => "==",
            CmpOp::Ne => "!=",
            CmpOp::Lt => "<",
            CmpOp::Le => "<=",
            CmpOp::Gt => ">",
            CmpOp::Ge => ">=",
            CmpOp::Glob => "~",
        }
    }

    /// The operator with its sides swapped (`5 < a` is `a > 5`); `None` for `~`.
    pub fn flipped(self) -> Option<CmpOp> {
        Some(match self {
            CmpOp::Eq => CmpOp::Eq,
            CmpOp::Ne => CmpOp::Ne,
            CmpOp::Lt => CmpOp::Gt,
            CmpOp::Le => CmpOp::Ge,
            CmpOp::Gt => CmpOp::Lt,
            CmpOp::Ge => CmpOp::Le,
            CmpOp::Glob => return None,
        })
    }
}

impl Expr {
    /// Both sides joined by `&&` (either may be absent).
    pub fn and(a: Option<Expr>, b: Option<Expr>) -> Option<Expr> {
        match (a, b) {
            (Some(a), Some(b)) => Some(Expr::And(Box::new(a), Box::new(b))),
            (a, b) => a.or(b),
        }
    }

    /// `$tid == T` for each tid, joined by `||`.
    pub fn tids(tids: &[u32]) -> Option<Expr> {
        tids.iter()
            .map(|&t| Expr::Cmp(Operand::Tid, CmpOp::Eq, Operand::Int(t.into())))
            .reduce(|a, b| Expr::Or(Box::new(a), Box::new(b)))
    }

    /// `$comm == "NAME"`.
    pub fn comm(name: &str) -> Expr {
        Expr::Cmp(Operand::Comm, CmpOp::Eq, Operand::Str(name.to_string()))
    }

    /// The argument names the filter mentions, in order of first mention.
    pub fn names(&self) -> Vec<String> {
        let mut out = Vec::new();
        self.walk(&mut |o| {
            if let Operand::Name(n) = o {
                if !out.contains(n) {
                    out.push(n.clone());
                }
            }
        });
        out
    }

    fn walk(&self, f: &mut dyn FnMut(&Operand)) {
        match self {
            Expr::Or(a, b) | Expr::And(a, b) => {
                a.walk(f);
                b.walk(f);
            }
            Expr::Not(a) => a.walk(f),
            Expr::Cmp(l, _, r) => {
                f(l);
                f(r);
            }
        }
    }
}

/// Prints the filter in its own grammar (parentheses only where the structure needs them), so
/// `Expr::parse(&e.to_string()) == Ok(e)`.
impl fmt::Display for Expr {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let mut out = String::new();
        print_tree(&expr_tree(self), &mut out, &mut |leaf, w| match leaf {
            Expr::Cmp(l, op, r) => write!(w, "{l} {} {r}", op.as_str()),
            _ => Ok(()),
        })?;
        f.write_str(&out)
    }
}

/// Prints an expression tree with `leaf` printing each comparison's operands; shared by the
/// printer of the grammar and the backends' renderers.
pub(super) fn print_tree<T>(
    e: &Tree<T>,
    f: &mut dyn fmt::Write,
    leaf: &mut dyn FnMut(&T, &mut dyn fmt::Write) -> fmt::Result,
) -> fmt::Result {
    // Precedence: || 1, && 2, ! and comparisons 3. A left operand of the same operator needs no
    // parentheses (both are left-associative); a right one does.
    fn prec<T>(e: &Tree<T>) -> u8 {
        match e {
            Tree::Or(..) => 1,
            Tree::And(..) => 2,
            _ => 3,
        }
    }
    type Leaf<'l, T> = dyn FnMut(&T, &mut dyn fmt::Write) -> fmt::Result + 'l;
    fn side<T>(
        e: &Tree<T>,
        min: u8,
        f: &mut dyn fmt::Write,
        leaf: &mut Leaf<'_, T>,
    ) -> fmt::Result {
        if prec(e) < min {
            f.write_str("(")?;
            print_tree(e, f, leaf)?;
            f.write_str(")")
        } else {
            print_tree(e, f, leaf)
        }
    }
    match e {
        Tree::Or(a, b) => {
            side(a, 1, f, leaf)?;
            f.write_str(" || ")?;
            side(b, 2, f, leaf)
        }
        Tree::And(a, b) => {
            side(a, 2, f, leaf)?;
            f.write_str(" && ")?;
            side(b, 3, f, leaf)
        }
        Tree::Not(a) => {
            f.write_str("!(")?;
            print_tree(a, f, leaf)?;
            f.write_str(")")
        }
        Tree::Leaf(t) => leaf(t, f),
    }
}

/// A borrowed view of a boolean tree over leaves `T` (the grammar's and the resolved one).
pub(super) enum Tree<'a, T> {
    Or(Box<Tree<'a, T>>, Box<Tree<'a, T>>),
    And(Box<Tree<'a, T>>, Box<Tree<'a, T>>),
    Not(Box<Tree<'a, T>>),
    Leaf(&'a T),
}

fn expr_tree(e: &Expr) -> Tree<'_, Expr> {
    match e {
        Expr::Or(a, b) => Tree::Or(Box::new(expr_tree(a)), Box::new(expr_tree(b))),
        Expr::And(a, b) => Tree::And(Box::new(expr_tree(a)), Box::new(expr_tree(b))),
        Expr::Not(a) => Tree::Not(Box::new(expr_tree(a))),
        leaf => Tree::Leaf(leaf),
    }
}

impl fmt::Display for Operand {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Operand::Name(n) => f.write_str(n),
            Operand::Tid => f.write_str("$tid"),
            Operand::Comm => f.write_str("$comm"),
            Operand::Int(v) => write!(f, "{v}"),
            Operand::Str(s) => {
                f.write_str("\"")?;
                for c in s.chars() {
                    match c {
                        '"' => f.write_str("\\\"")?,
                        '\\' => f.write_str("\\\\")?,
                        c => write!(f, "{c}")?,
                    }
                }
                f.write_str("\"")
            }
        }
    }
}
