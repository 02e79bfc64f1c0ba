//! x86-64's rules.

pub mod calling_convention;
