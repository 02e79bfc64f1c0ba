//! ECMA-335 metadata: enough to name every method the way crossgen and the runtime do.
//!
//! The metadata of an assembly, ECMA-335 Partition II
//! (<https://ecma-international.org/publications-and-standards/standards/ecma-335/>), one concept
//! per file:
//! - `tables.rs`: the metadata root, its streams and the `#~` tables' row layout (II.24.2);
//! - `heaps.rs`: the `#Strings`, `#Blob` and `#GUID` heaps (II.24.2.3-5);
//! - `rows.rs`: the typed rows netprobe reads (II.22);
//! - `compressed.rs`: compressed integers (II.23.2);
//! - `signature/`: signatures (II.23.2), one walk of their grammar, decoded or skipped;
//! - `names.rs`: the names of TypeDefs, TypeRefs and TypeSpecs;
//! - `display.rs`: type and method names as the runtime prints them;
//! - `types.rs`: the decoded values (tokens, [`TypeSig`], [`MethodSig`]).

mod compressed;
mod display;
mod heaps;
mod names;
mod rows;
mod signature;
mod tables;
mod types;

pub use heaps::StrRef;
pub use names::{enclosing_map, ModuleResolver, Names, TypeNames};
pub use rows::MethodDefRow;
pub use signature::SigReader;
pub use tables::{Metadata, MetadataLayout};
pub use types::{table, ArgKind, MethodSig, TypeSig, TypeToken};
