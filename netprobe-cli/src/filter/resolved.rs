//! A filter resolved against one probe ([`ProbeFilter`]): every name bound to the field the
//! probe fetches it into, with its kind, and every comparison in the order field, operator,
//! constant. It is what a backend evaluates (tracefs: `backend/tracefs/filter.rs`); the binding
//! itself is done on the plan's side ([`crate::plan::apply_filter`]).

use super::expr::{print_tree, CmpOp, Tree};
use netprobe_core::abi::IntType;

/// A value a probe reads, as a filter sees it.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub enum Subject {
    /// The thread that hit the probe.
    Tid,
    /// The name of the task that hit the probe.
    Comm,
    /// A value the probe fetches into field `field` (the argument `arg` of the function).
    Field {
        arg: String,
        field: String,
        kind: FieldKind,
    },
}

/// What kind of value a filtered field holds.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum FieldKind {
    Int(IntType),
    /// A NUL-terminated byte string.
    CString,
    /// A .NET string's UTF-16 characters.
    Utf16,
    /// A Go string's bytes (pointer and length, no terminator).
    GoString,
    /// A user's backend-specific fetch (the backend knows its type).
    Raw,
}

/// A constant a field is compared with.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub enum Constant {
    Int(i128),
    Str(String),
}

/// One comparison of a resolved filter: always field, operator, constant.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct Test {
    pub subject: Subject,
    pub op: CmpOp,
    pub value: Constant,
}

/// A filter resolved against one probe: what a backend evaluates.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub enum ProbeFilter {
    Or(Box<ProbeFilter>, Box<ProbeFilter>),
    And(Box<ProbeFilter>, Box<ProbeFilter>),
    Not(Box<ProbeFilter>),
    Test(Test),
}

impl ProbeFilter {
    /// Renders the filter with `leaf` writing each comparison (parentheses as the grammar's
    /// printer sets them: `||` below `&&` below `!`).
    pub fn render(
        &self,
        leaf: &mut dyn FnMut(&Test) -> std::result::Result<String, String>,
    ) -> std::result::Result<String, String> {
        fn tree(p: &ProbeFilter) -> Tree<'_, Test> {
            match p {
                ProbeFilter::Or(a, b) => Tree::Or(Box::new(tree(a)), Box::new(tree(b))),
                ProbeFilter::And(a, b) => Tree::And(Box::new(tree(a)), Box::new(tree(b))),
                ProbeFilter::Not(a) => Tree::Not(Box::new(tree(a))),
                ProbeFilter::Test(t) => Tree::Leaf(t),
            }
        }
        let mut first_err = None;
        let mut out = String::new();
        let _ = print_tree(&tree(self), &mut out, &mut |t, w| match leaf(t) {
            Ok(s) => w.write_str(&s),
            Err(e) => {
                first_err.get_or_insert(e);
                Ok(())
            }
        });
        match first_err {
            Some(e) => Err(e),
            None => Ok(out),
        }
    }
}

/// The values an integer type holds (hex types are unsigned).
pub fn int_range(t: IntType) -> (i128, i128) {
    let bits = t.bits();
    if t.is_signed() {
        (-(1i128 << (bits - 1)), (1i128 << (bits - 1)) - 1)
    } else {
        (0, (1i128 << bits) - 1)
    }
}
