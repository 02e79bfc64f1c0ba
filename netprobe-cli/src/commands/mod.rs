//! One module per subcommand.

pub mod live;
pub mod offsets;
pub mod profile;
pub mod symbols;
