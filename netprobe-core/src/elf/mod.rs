//! ELF: function symbols (`.symtab`, `.dynsym` with GNU versions, IFUNCs), the loadable segments
//! that place code in the file, and explanations of how an offset comes about.

pub mod gnu_hash;
pub mod ifunc;
pub mod nativeaot;
pub mod parser;
pub mod resolver;
pub mod segments;
pub mod types;

pub use resolver::ElfFile;
pub use segments::{LoadSegment, LoadSegments};
pub use types::{OffsetExplanation, SectionInfo};
