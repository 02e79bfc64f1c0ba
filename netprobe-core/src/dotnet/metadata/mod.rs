//! ECMA-335 metadata: enough to name every method the way crossgen and the runtime do.

pub mod display;
pub mod parser;
pub mod types;

pub use display::{enclosing_map, ModuleResolver, Names, TypeNames};
pub use parser::{Metadata, MetadataLayout, MethodDefRow, SigReader};
pub use types::{table, ArgKind, MethodSig, TypeSig, TypeToken};
