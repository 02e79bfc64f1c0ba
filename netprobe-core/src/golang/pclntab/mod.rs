//! Go's function table (`pclntab`): the source of Go function names and addresses that survives
//! stripping (the runtime itself needs it for stack traces, so `-ldflags=-s -w` keeps it).

pub mod inline;
pub mod parser;
pub mod resolver;
pub mod types;

pub use inline::InlineRange;
pub use parser::{magic_candidates, magic_candidates_iter, Pclntab, PclntabError};
pub use resolver::PclntabResolver;
pub use types::{GoFunction, PclntabHeader, PclntabVersion};
