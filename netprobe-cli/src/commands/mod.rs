//! One module per subcommand.

pub mod live;
pub mod offsets;
pub mod symbols;
