//! One module per subcommand.

pub mod clean;
pub mod container_args;
pub mod docs;
pub mod generation;
pub mod jit_names;
pub mod live;
pub mod live_options;
pub mod offsets;
pub mod parse;
pub mod probe;
pub mod profile;
pub mod ps;
pub mod symbols;
pub mod vars;
