//! One module per subcommand.

pub mod offsets;
pub mod symbols;
