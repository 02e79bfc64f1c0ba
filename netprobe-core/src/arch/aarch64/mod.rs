//! aarch64's rules.

pub mod calling_convention;
