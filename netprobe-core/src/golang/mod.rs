//! Go: the `.gopclntab` function table, `.go.buildinfo`, the calling conventions, and the
//! stack-check prologue.
//!
//! [`GoBinary`] is the entry point: it finds the function table in an ELF file (by section name,
//! or by its magic where external linking folded it into `.data.rel.ro`), reads the Go version
//! and module from `.go.buildinfo`, and yields [`crate::symbol::Symbol`]s and probe points.

mod binary;
pub mod buildinfo;
pub mod gofunc;
pub mod moduledata;
pub mod pclntab;
pub mod prologue;

pub use crate::abi::go::{abi_for, GoAbi};
pub use binary::{GoBinary, PclntabLocation, ProbePoint, ProbePoints, TextStartSource};
pub use buildinfo::{BuildInfo, GoVersion};
pub use pclntab::{GoFunction, Pclntab, PclntabVersion};
pub use prologue::{GSource, StackCheck};
