//! ELF: symbol tables (`.symtab`, `.dynsym`) and the loadable segments that place code in the file.

pub mod segments;

pub use segments::{LoadSegment, LoadSegments};
